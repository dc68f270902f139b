"""Pure converters over ``kubectl get ... -o json`` output (or the same JSON from the API), so analyses never care
where the JSON came from (``docs/architecture.md``): :func:`nodes_frame` (schema ``NODE_COLUMNS``), :func:`pods_frame`
(``POD_COLUMNS``), :func:`daemonsets_frame` and :func:`cluster_policy_status`. They read the labels of
:mod:`gpulib.kube.labels`, work with only pandas installed, and raise :class:`MalformedKubernetesObject` naming the
object and field when the JSON is not what Kubernetes writes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from gpulib.core import validate
from gpulib.core.errors import InvalidParameter, MalformedKubernetesObject
from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS, empty
from gpulib.kube.device_health import container_device_health
from gpulib.kube.labels import (
    GPU_RESOURCE,
    GPU_SHARED_RESOURCE,
    LABEL_COUNT,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_BETA,
    LABEL_MACHINE,
    LABEL_MEMORY,
    LABEL_MIG_CONFIG,
    LABEL_MIG_CONFIG_STATE,
    LABEL_MIG_STRATEGY,
    LABEL_POD_TEMPLATE_HASH,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    MIG_PARTED_CONFIG_KEY,
    MIG_PARTED_DEFAULT_CONFIGMAP,
    MIG_RESOURCE_PREFIX,
    is_spot,
)

#: a CronJob names its Jobs ``<cronjob>-<scheduled time in minutes since the epoch>``
#: (kubernetes pkg/controller/cronjob/utils.go getJobName); 8+ digits for any date after 1979.
_CRONJOB_JOB_NAME = re.compile(r"^(?P<cronjob>.+)-(?P<minutes>\d{8,})$")

#: columns the frames carry after the schema's (a frame built from the schema alone lacks them; readers check):
#: a node's full GPUs in ResourceSlices (0 from the Node object; gpulib.kube.dra.attach_nodes), a pod's ResourceClaim
#: names (status.resourceClaimStatuses / spec.resourceClaims), its gpu.nvidia.com devices once the claims are read
#: (gpulib.kube.dra.attach_pods) and kubelet's per-device health (allocatedResourcesStatus, gpulib.kube.device_health)
NODE_EXTRA = ["dra_gpus"]
POD_EXTRA = ["dra_claims", "dra_devices", "device_health"]

DAEMONSET_COLUMNS = [
    "namespace",
    "daemonset",
    "desired",
    "current",
    "ready",
    "available",
    "updated",
    "unavailable",
    "misscheduled",
    "node_selector",
    "images",
    "labels",
]


# --------------------------------------------------------------------------------------------
# small readers
# --------------------------------------------------------------------------------------------
def _items(list_json: Any, expected: str) -> list[dict]:
    """The ``items`` of a kubectl/API list; a single object of ``expected`` kind is accepted too."""
    if isinstance(list_json, list):  # `kubectl ... -o json | jq .items`
        list_json = {"items": list_json}
    if not isinstance(list_json, dict):
        raise MalformedKubernetesObject(f"expected a {expected}List JSON object, got {type(list_json).__name__}")
    if list_json.get("kind") == expected:
        return [list_json]
    if list_json.get("kind") == "Status":
        raise MalformedKubernetesObject(
            f"expected a {expected} list but the file holds an API error Status: {list_json.get('message', '')!r}"
        )
    items = list_json.get("items")
    if items is None:
        raise MalformedKubernetesObject(
            f"{expected} list has no 'items' (kind={list_json.get('kind')!r}, keys={sorted(list_json)[:6]})"
        )
    if not isinstance(items, list):
        raise MalformedKubernetesObject(f"{expected} list 'items' is a {type(items).__name__}, not a list")
    bad = [i for i, it in enumerate(items) if not isinstance(it, dict)]
    if bad:
        raise MalformedKubernetesObject(f"{expected} list items {bad[:5]} are not objects")
    return items


def _count(value: Any, where: str) -> int:
    """An extended-resource quantity (``"8"``, ``8``, ``"1k"``) as int; extended resources are whole."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise MalformedKubernetesObject(f"{where}: boolean {value!r} is not a quantity")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    try:
        from kubernetes.utils import parse_quantity  # lazy: only for suffixed quantities

        q = parse_quantity(text)
    except Exception as exc:
        raise MalformedKubernetesObject(f"{where}: {value!r} is not a Kubernetes quantity") from exc
    if q != int(q):
        raise MalformedKubernetesObject(f"{where}: {value!r} is fractional; extended resources are whole numbers")
    return int(q)


def _label_int(labels: dict, key: str) -> Any:
    """An integer label, or ``pd.NA`` when absent or not an integer (GFD labels are strings)."""
    raw = labels.get(key)
    if raw is None or not str(raw).strip().lstrip("-").isdigit():
        return pd.NA
    return int(str(raw).strip())


def _timestamp(value: Any) -> pd.Timestamp:
    if not value:
        return pd.NaT
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        return pd.NaT
    return ts.tz_convert("UTC") if ts.tzinfo else ts.tz_localize("UTC")


def _nvidia_resources(resources: dict | None, where: str) -> tuple[int, dict[str, int]]:
    """(GPU count, {nvidia.com/mig-*: count}) from a capacity/requests/limits map. The GPU count is
    ``nvidia.com/gpu`` plus ``nvidia.com/gpu.shared`` (a renamed time-sliced/MPS replica is a GPU unit too)."""
    resources = resources or {}
    gpu = sum(_count(resources.get(k), f"{where}[{k}]") for k in (GPU_RESOURCE, GPU_SHARED_RESOURCE))
    mig = {k: _count(v, f"{where}[{k}]") for k, v in sorted(resources.items()) if k.startswith(MIG_RESOURCE_PREFIX)}
    return gpu, mig


# --------------------------------------------------------------------------------------------
# nodes
# --------------------------------------------------------------------------------------------
def _node_ready(status: dict) -> bool:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _taints(spec: dict) -> list[dict]:
    return [
        {"key": t.get("key", ""), "value": t.get("value", "") or "", "effect": t.get("effect", "")}
        for t in spec.get("taints") or []
        if isinstance(t, dict)
    ]


def _sharing(labels: dict, capacity: dict, where: str) -> tuple[Any, str]:
    """(replicas, sharing strategy): GFD's labels; when they are absent but the node advertises
    ``nvidia.com/gpu.shared``, replicas = shared units / ``gpu.count`` and the strategy is taken to be
    time-slicing (MPS renames the same way but is experimental: GFD's label, when present, says which)."""
    replicas, strategy = _label_int(labels, LABEL_REPLICAS), labels.get(LABEL_SHARING, "")
    shared = _count((capacity or {}).get(GPU_SHARED_RESOURCE), f"{where}[{GPU_SHARED_RESOURCE}]")
    if shared > 0:
        count = _label_int(labels, LABEL_COUNT)
        if pd.isna(replicas) and not pd.isna(count) and count > 0 and shared % count == 0:
            replicas = shared // count
        strategy = strategy or "time-slicing"
    return replicas, strategy


def node_row(node: dict) -> dict:
    """One ``NODE_COLUMNS`` row from a Node object."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    name = meta.get("name") or ""
    labels = dict(meta.get("labels") or {})
    gpu_cap, mig_cap = _nvidia_resources(status.get("capacity"), f"node {name} capacity")
    gpu_alloc, mig_alloc = _nvidia_resources(status.get("allocatable"), f"node {name} allocatable")
    replicas, strategy = _sharing(labels, status.get("capacity"), f"node {name} capacity")
    info = status.get("nodeInfo") or {}
    return {
        "node": name,
        "gpu_product": labels.get(LABEL_PRODUCT, ""),
        "gpu_count": _label_int(labels, LABEL_COUNT),
        "gpu_memory_mib": _label_int(labels, LABEL_MEMORY),
        "gpu_capacity": gpu_cap,
        "gpu_allocatable": gpu_alloc,
        "mig_capacity": mig_cap,
        "mig_allocatable": mig_alloc,
        "mig_strategy": labels.get(LABEL_MIG_STRATEGY, ""),
        "mig_config": labels.get(LABEL_MIG_CONFIG, ""),
        "mig_config_state": labels.get(LABEL_MIG_CONFIG_STATE, ""),
        "gpu_replicas": replicas,
        "sharing_strategy": strategy,
        "taints": _taints(spec),
        "schedulable": not bool(spec.get("unschedulable", False)),
        "ready": _node_ready(status),
        "spot": is_spot(labels),
        "instance_type": (
            labels.get(LABEL_INSTANCE_TYPE) or labels.get(LABEL_INSTANCE_TYPE_BETA) or labels.get(LABEL_MACHINE) or ""
        ),
        "kernel": info.get("kernelVersion", ""),
        "os_image": info.get("osImage", ""),
        "labels": labels,
        "dra_gpus": 0,
    }


def nodes_frame(node_list_json: dict) -> pd.DataFrame:
    """``kubectl get nodes -o json`` (or the API's NodeList) -> DataFrame with ``NODE_COLUMNS``.

    GPU product/count/memory come from GFD labels (under the MIG *single* strategy they describe the
    MIG devices, ``NVIDIA/k8s-device-plugin: docs/gpu-feature-discovery/README.md`` @ 1b826acc);
    capacity/allocatable for ``nvidia.com/gpu`` and every ``nvidia.com/mig-*``; ``ready`` is the Ready condition;
    ``spot`` follows ``data/kube/spot_labels.csv``.
    Missing labels give ``""`` / ``<NA>``, never a KeyError.
    """
    rows = [node_row(n) for n in _items(node_list_json, "Node")]
    if not rows:
        return empty(NODE_COLUMNS)
    df = pd.DataFrame(rows, columns=NODE_COLUMNS + NODE_EXTRA)
    for col in ("gpu_count", "gpu_memory_mib", "gpu_replicas"):
        df[col] = df[col].astype("Int64")
    for col in ("gpu_capacity", "gpu_allocatable", "dra_gpus"):
        df[col] = df[col].astype("int64")
    for col in ("schedulable", "ready", "spot"):
        df[col] = df[col].astype(bool)
    return df


# --------------------------------------------------------------------------------------------
# pods
# --------------------------------------------------------------------------------------------
def _container_resources(c: dict, where: str) -> dict:
    """GPU/MIG requests and limits of one container, with Kubernetes' defaulting applied.

    For extended resources the API server copies a limit into an absent request
    (kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/); a request without a limit is rejected
    by the API server, so it only appears in hand-made or simulated data and is kept as is.
    """
    res = c.get("resources") or {}
    limits = res.get("limits") or {}
    requests = dict(res.get("requests") or {})
    for k, v in limits.items():
        if (k in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or k.startswith(MIG_RESOURCE_PREFIX)) and k not in requests:
            requests[k] = v
    gpu_req, mig_req = _nvidia_resources(requests, f"{where} requests")
    gpu_lim, mig_lim = _nvidia_resources(limits, f"{where} limits")
    return {
        "name": c.get("name", ""),
        "image": c.get("image", ""),
        "gpu_request": gpu_req,
        "gpu_limit": gpu_lim,
        "mig_requests": mig_req,
        "mig_limits": mig_lim,
    }


def _add(total: dict[str, int], part: dict[str, int]) -> dict[str, int]:
    for k, v in part.items():
        total[k] = total.get(k, 0) + v
    return total


def resolve_owner(meta: dict) -> tuple[str, str]:
    """(kind, name) of the workload that owns a pod.

    A ReplicaSet named ``<deployment>-<pod-template-hash>`` resolves to its Deployment, and a Job named
    ``<cronjob>-<minutes>`` to its CronJob (the names the controllers give them). Other owners
    (StatefulSet, DaemonSet, custom resources such as PyTorchJob) are returned as they are.
    """
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    if not refs:
        return "", ""
    ref = next((r for r in refs if r.get("controller")), refs[0])
    kind, name = ref.get("kind", ""), ref.get("name", "")
    if kind == "ReplicaSet":
        h = (meta.get("labels") or {}).get(LABEL_POD_TEMPLATE_HASH, "")
        if h and name.endswith("-" + h) and len(name) > len(h) + 1:
            return "Deployment", name[: -len(h) - 1]
    if kind == "Job":
        m = _CRONJOB_JOB_NAME.match(name)
        if m:
            return "CronJob", m.group("cronjob")
    return kind, name


def _claim_names(spec: dict, status: dict) -> list[str]:
    """The ResourceClaim objects a pod uses: ``spec.resourceClaims[].resourceClaimName`` and the names generated from
    a template, ``status.resourceClaimStatuses[].resourceClaimName``
    (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodSpec)."""
    names = [c.get("resourceClaimName") for c in spec.get("resourceClaims") or [] if isinstance(c, dict)]
    names += [c.get("resourceClaimName") for c in status.get("resourceClaimStatuses") or [] if isinstance(c, dict)]
    return list(dict.fromkeys(str(n) for n in names if n))


def pod_row(pod: dict) -> dict:
    """One ``POD_COLUMNS`` row from a Pod object (GPU/MIG sums over app containers, not init)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    containers = [
        _container_resources(c, f"pod {ns}/{name} container {c.get('name', i)}")
        for i, c in enumerate(spec.get("containers") or [])
        if isinstance(c, dict)
    ]
    owner_kind, owner_name = resolve_owner(meta)
    mig_req: dict[str, int] = {}
    mig_lim: dict[str, int] = {}
    for c in containers:
        _add(mig_req, c["mig_requests"])
        _add(mig_lim, c["mig_limits"])
    return {
        "namespace": ns,
        "pod": name,
        "node": spec.get("nodeName", "") or "",
        "phase": status.get("phase", "") or "",
        "gpu_request": sum(c["gpu_request"] for c in containers),
        "gpu_limit": sum(c["gpu_limit"] for c in containers),
        "mig_requests": mig_req,
        "mig_limits": mig_lim,
        "owner_kind": owner_kind,
        "owner_name": owner_name,
        "workload": owner_name or name,
        "start_time": _timestamp(status.get("startTime")),
        "tolerations": [dict(t) for t in spec.get("tolerations") or [] if isinstance(t, dict)],
        "node_selector": dict(spec.get("nodeSelector") or {}),
        "labels": dict(meta.get("labels") or {}),
        "containers": containers,
        "dra_claims": _claim_names(spec, status),
        "dra_devices": [],
        "device_health": container_device_health(pod),
    }


def pods_frame(pod_list_json: dict) -> pd.DataFrame:
    """``kubectl get pods -A -o json`` (or the API's PodList) -> DataFrame with ``POD_COLUMNS``.

    ``gpu_request``/``gpu_limit`` sum ``nvidia.com/gpu`` over the app containers; ``mig_requests``/
    ``mig_limits`` sum each ``nvidia.com/mig-*``. ``containers`` holds per-container dicts
    (name, image, gpu_request, gpu_limit, mig_requests, mig_limits). ``start_time`` is UTC.
    """
    rows = [pod_row(p) for p in _items(pod_list_json, "Pod")]
    if not rows:
        return empty(POD_COLUMNS)
    df = pd.DataFrame(rows, columns=POD_COLUMNS + POD_EXTRA)
    df["gpu_request"] = df["gpu_request"].astype("int64")
    df["gpu_limit"] = df["gpu_limit"].astype("int64")
    df["start_time"] = pd.to_datetime(df["start_time"], utc=True)
    return df


# --------------------------------------------------------------------------------------------
# GPU Operator objects
# --------------------------------------------------------------------------------------------
def daemonsets_frame(ds_list_json: dict) -> pd.DataFrame:
    """``kubectl get daemonsets -n gpu-operator -o json`` -> one row per DaemonSet with its rollout counts."""
    rows = []
    for ds in _items(ds_list_json, "DaemonSet"):
        meta, spec, st = ds.get("metadata") or {}, ds.get("spec") or {}, ds.get("status") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        where = f"daemonset {meta.get('namespace', '')}/{meta.get('name', '')} status"
        rows.append(
            {
                "namespace": meta.get("namespace", ""),
                "daemonset": meta.get("name", ""),
                "desired": _count(st.get("desiredNumberScheduled"), f"{where}.desiredNumberScheduled"),
                "current": _count(st.get("currentNumberScheduled"), f"{where}.currentNumberScheduled"),
                "ready": _count(st.get("numberReady"), f"{where}.numberReady"),
                "available": _count(st.get("numberAvailable"), f"{where}.numberAvailable"),
                "updated": _count(st.get("updatedNumberScheduled"), f"{where}.updatedNumberScheduled"),
                "unavailable": _count(st.get("numberUnavailable"), f"{where}.numberUnavailable"),
                "misscheduled": _count(st.get("numberMisscheduled"), f"{where}.numberMisscheduled"),
                "node_selector": dict(pod_spec.get("nodeSelector") or {}),
                "images": [c.get("image", "") for c in pod_spec.get("containers") or [] if isinstance(c, dict)],
                "labels": dict(meta.get("labels") or {}),
            }
        )
    return pd.DataFrame(rows, columns=DAEMONSET_COLUMNS) if rows else empty(DAEMONSET_COLUMNS)


def cluster_policy_status(policy: dict | None) -> dict:
    """``{name, state, namespace, ready, conditions}`` of a ClusterPolicy object
    (``NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go`` @ a22dbf67).

    ``state`` is ``ready`` | ``notReady`` | ``ignored`` or ``""`` before the operator reconciled;
    ``conditions`` is a list of ``{type, status, reason, message}``. ``None`` (no ClusterPolicy)
    gives state ``"absent"``.
    """
    if policy is None:
        return {"name": "", "state": "absent", "namespace": "", "ready": False, "conditions": []}
    if not isinstance(policy, dict):
        raise MalformedKubernetesObject(f"ClusterPolicy must be an object, got {type(policy).__name__}")
    st = policy.get("status") or {}
    conds = [
        {
            "type": c.get("type", ""),
            "status": c.get("status", ""),
            "reason": c.get("reason", ""),
            "message": c.get("message", ""),
        }
        for c in st.get("conditions") or []
        if isinstance(c, dict)
    ]
    return {
        "name": (policy.get("metadata") or {}).get("name", ""),
        "state": st.get("state", "") or "",
        "namespace": st.get("namespace", "") or "",
        "ready": st.get("state") == "ready",
        "conditions": conds,
    }


def read_list(path: str | os.PathLike) -> dict:
    """Read a ``kubectl get ... -o json`` file, naming the file and position when it is not valid JSON."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise MalformedKubernetesObject(f"{p}: file not found") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedKubernetesObject(
            f"{p}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); the file may be truncated",
            hint="re-run `kubectl get <kind> -o json > file` and check it was written completely",
        ) from exc


def iter_gpu_nodes(nodes: pd.DataFrame) -> Iterable[str]:
    """Names of nodes that advertise GPUs (``nvidia.com/gpu`` or any MIG resource) or carry a GFD product."""
    for row in nodes.itertuples(index=False):
        if row.gpu_capacity > 0 or any(v > 0 for v in (row.mig_capacity or {}).values()) or row.gpu_product:
            yield row.node


def mig_parted_configmap(cluster_policies: list[dict]) -> tuple[str, bool]:
    """The MIG Manager ConfigMap the GPU Operator mounts and whether it is a custom one: ClusterPolicy
    ``spec.migManager.config.name`` when set and not the default name, else ``default-mig-parted-config``
    (NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go ``GetConfigMapName`` @ a22dbf67). The policy named
    ``cluster-policy`` is read first, like :meth:`gpulib.kube.client.KubeCluster.cluster_policy`."""

    def sub(obj: Any, key: str) -> dict:
        v = obj.get(key) if isinstance(obj, dict) else None
        return v if isinstance(v, dict) else {}

    items = [p for p in cluster_policies or [] if isinstance(p, dict)]
    items.sort(key=lambda p: sub(p, "metadata").get("name") != "cluster-policy")
    cfg = sub(sub(sub(items[0] if items else {}, "spec"), "migManager"), "config")
    name = str(cfg.get("name") or "")
    if not name or name == MIG_PARTED_DEFAULT_CONFIGMAP:
        return MIG_PARTED_DEFAULT_CONFIGMAP, False
    try:
        return validate.object_name(name, param="spec.migManager.config.name", kind="ConfigMap"), True
    except InvalidParameter as exc:
        raise MalformedKubernetesObject(
            f"ClusterPolicy {sub(items[0], 'metadata').get('name')!r}: {exc.args[0]}",
            hint="spec.migManager.config.name must name a ConfigMap in the operator namespace",
        ) from None


def mig_configmap_where(namespace: str, name: str, custom: bool) -> str:
    """The sentence a runbook prints for the MIG Manager ConfigMap ``namespace/name`` it read. Without a custom
    ConfigMap, GPU Operator v26.3 and later let MIG Manager generate each node's configs from its GPUs (published
    as ConfigMap ``<node>-mig-config``) and keep ``default-mig-parted-config`` as the fallback (NVIDIA/gpu-operator
    controllers/object_controls.go @a22dbf67; NVIDIA/mig-parted cmd/nvidia-mig-manager/main.go ``setupMigConfig``
    @bd7160f4)."""
    if custom:
        return f"the cluster's MIG Manager ConfigMap {namespace}/{name} (ClusterPolicy spec.migManager.config.name)"
    return (
        f"the GPU Operator's default MIG Manager ConfigMap {namespace}/{name} (ClusterPolicy names no custom one; "
        "from GPU Operator v26.3 MIG Manager generates each node's configs from its GPUs, ConfigMap "
        "<node>-mig-config, and uses this set only when that fails)"
    )


def configmap_config_yaml(configmap: dict) -> str | None:
    """The ``config.yaml`` key of a MIG Manager ConfigMap object, or None when it has none."""
    text = ((configmap or {}).get("data") or {}).get(MIG_PARTED_CONFIG_KEY)
    return text if isinstance(text, str) and text.strip() else None
