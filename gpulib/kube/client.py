"""Kubernetes side of the sources: node and pod frames, and a thin client over the official API.

Two layers, so analyses never care where the JSON came from (design.md §2):

* **Pure converters** over ``kubectl get ... -o json`` output (or the same JSON from the API):
  :func:`nodes_frame` (schema ``NODE_COLUMNS``), :func:`pods_frame` (``POD_COLUMNS``),
  :func:`daemonsets_frame` and :func:`cluster_policy_status`. They read the labels that NVIDIA's
  gpu-feature-discovery (GFD) and device plugin put on nodes (facts.md §2.5, §6.3).
* :class:`KubeCluster`: the official ``kubernetes`` client (kubeconfig context or in-cluster) with
  paging (``limit``/``continue``), bounded retries with backoff on 5xx/429/connection errors, and
  errors that name the URL, resource and verb. It returns the very same frames.

The ``kubernetes`` package is imported lazily, so the converters work on a GPU node or in a
notebook with only pandas installed.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from gpulib.core.errors import GpulibError, KubeconfigMissing, KubernetesError, SourceError
from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS, empty

# --- names published by NVIDIA's device plugin / GFD / GPU Operator (facts.md §2.5, §6.1-6.3) ---
GPU_RESOURCE = "nvidia.com/gpu"
#: what the device plugin advertises instead under time-slicing/MPS with ``renameByDefault: true`` (facts.md §6.4)
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
#: GFD appends this to ``nvidia.com/gpu.product`` when GPUs are replicated and NOT renamed (facts.md §6.3)
SHARED_PRODUCT_SUFFIX = "-SHARED"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
LABEL_MACHINE = "nvidia.com/gpu.machine"
# Kubernetes well-known labels (kubernetes.io/docs/reference/labels-annotations-taints/)
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_POD_TEMPLATE_HASH = "pod-template-hash"
ANNOTATION_MIRROR_POD = "kubernetes.io/config.mirror"
# ClusterPolicy CRD of the GPU Operator (facts.md §6.1)
CLUSTERPOLICY_GROUP, CLUSTERPOLICY_VERSION, CLUSTERPOLICY_PLURAL = "nvidia.com", "v1", "clusterpolicies"
#: a CronJob names its Jobs ``<cronjob>-<scheduled time in minutes since the epoch>``
#: (kubernetes pkg/controller/cronjob/utils.go getJobName); 8+ digits for any date after 1979.
_CRONJOB_JOB_NAME = re.compile(r"^(?P<cronjob>.+)-(?P<minutes>\d{8,})$")

DAEMONSET_COLUMNS = ["namespace", "daemonset", "desired", "current", "ready", "available", "updated",
                     "unavailable", "misscheduled", "node_selector", "images", "labels"]


class MalformedKubernetesObject(SourceError, ValueError):
    """A kubectl/API JSON document does not have the shape of the list it should be.

    (Local subclass; the lead may move it to :mod:`gpulib.core.errors`.)
    """

    hint = ("pass the output of `kubectl get nodes -o json` / `kubectl get pods -A -o json` "
            "(a List with an `items` array), not YAML or `-o wide` text")


# --------------------------------------------------------------------------------------------
# small readers
# --------------------------------------------------------------------------------------------
def _items(list_json: Any, expected: str) -> list[dict]:
    """The ``items`` of a kubectl/API list; a single object of ``expected`` kind is accepted too."""
    if isinstance(list_json, list):  # `kubectl ... -o json | jq .items`
        list_json = {"items": list_json}
    if not isinstance(list_json, dict):
        raise MalformedKubernetesObject(
            f"expected a {expected}List JSON object, got {type(list_json).__name__}")
    if list_json.get("kind") == expected:
        return [list_json]
    if list_json.get("kind") == "Status":
        raise MalformedKubernetesObject(
            f"expected a {expected} list but the file holds an API error Status: {list_json.get('message', '')!r}")
    items = list_json.get("items")
    if items is None:
        raise MalformedKubernetesObject(
            f"{expected} list has no 'items' (kind={list_json.get('kind')!r}, keys={sorted(list_json)[:6]})")
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
    except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
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


@lru_cache(maxsize=1)
def _spot_rules() -> tuple[tuple[str, str], ...]:
    from gpulib.core.knowledge import load_table

    t = load_table("spot_labels")
    return tuple((str(r.label), str(r.value).lower()) for r in t.itertuples())


def is_spot(labels: dict) -> bool:
    """True when a node label marks spot/preemptible capacity (rules in ``data/spot_labels.csv``)."""
    return any(str(labels.get(k, "")).lower() == v for k, v in _spot_rules())


# --------------------------------------------------------------------------------------------
# nodes
# --------------------------------------------------------------------------------------------
def _node_ready(status: dict) -> bool:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _taints(spec: dict) -> list[dict]:
    return [{"key": t.get("key", ""), "value": t.get("value", "") or "", "effect": t.get("effect", "")}
            for t in spec.get("taints") or [] if isinstance(t, dict)]


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


def gpu_resource_name(row: Any) -> str:
    """The resource a node's device plugin advertises for whole or shared GPUs: ``nvidia.com/gpu.shared``
    when GPUs are replicated (``gpu_replicas`` > 1) and GFD's product has no ``-SHARED`` suffix (the plugin
    renamed them, ``renameByDefault: true``), else ``nvidia.com/gpu``. ``row``: a NODE_COLUMNS row."""
    reps = getattr(row, "gpu_replicas", pd.NA)
    product = str(getattr(row, "gpu_product", "") or "")
    if not pd.isna(reps) and int(reps) > 1 and product and not product.endswith(SHARED_PRODUCT_SUFFIX):
        return GPU_SHARED_RESOURCE
    return GPU_RESOURCE


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
        "instance_type": (labels.get(LABEL_INSTANCE_TYPE) or labels.get(LABEL_INSTANCE_TYPE_BETA)
                          or labels.get(LABEL_MACHINE) or ""),
        "kernel": info.get("kernelVersion", ""),
        "os_image": info.get("osImage", ""),
        "labels": labels,
    }


def nodes_frame(node_list_json: dict) -> pd.DataFrame:
    """``kubectl get nodes -o json`` (or the API's NodeList) -> DataFrame with ``NODE_COLUMNS``.

    GPU product/count/memory come from GFD labels (under the MIG *single* strategy they describe the
    MIG devices, facts.md §2.5); capacity/allocatable for ``nvidia.com/gpu`` and every
    ``nvidia.com/mig-*``; ``ready`` is the Ready condition; ``spot`` follows ``data/spot_labels.csv``.
    Missing labels give ``""`` / ``<NA>``, never a KeyError.
    """
    rows = [node_row(n) for n in _items(node_list_json, "Node")]
    if not rows:
        return empty(NODE_COLUMNS)
    df = pd.DataFrame(rows, columns=NODE_COLUMNS)
    for col in ("gpu_count", "gpu_memory_mib", "gpu_replicas"):
        df[col] = df[col].astype("Int64")
    for col in ("gpu_capacity", "gpu_allocatable"):
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
    return {"name": c.get("name", ""), "image": c.get("image", ""), "gpu_request": gpu_req,
            "gpu_limit": gpu_lim, "mig_requests": mig_req, "mig_limits": mig_lim}


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


def pod_row(pod: dict) -> dict:
    """One ``POD_COLUMNS`` row from a Pod object (GPU/MIG sums over app containers, not init)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    containers = [_container_resources(c, f"pod {ns}/{name} container {c.get('name', i)}")
                  for i, c in enumerate(spec.get("containers") or []) if isinstance(c, dict)]
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
    df = pd.DataFrame(rows, columns=POD_COLUMNS)
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
        pod_spec = ((spec.get("template") or {}).get("spec") or {})
        where = f"daemonset {meta.get('namespace', '')}/{meta.get('name', '')} status"
        rows.append({
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
        })
    return pd.DataFrame(rows, columns=DAEMONSET_COLUMNS) if rows else empty(DAEMONSET_COLUMNS)


def cluster_policy_status(policy: dict | None) -> dict:
    """``{name, state, namespace, ready, conditions}`` of a ClusterPolicy object (facts.md §6.1).

    ``state`` is ``ready`` | ``notReady`` | ``ignored`` or ``""`` before the operator reconciled;
    ``conditions`` is a list of ``{type, status, reason, message}``. ``None`` (no ClusterPolicy)
    gives state ``"absent"``.
    """
    if policy is None:
        return {"name": "", "state": "absent", "namespace": "", "ready": False, "conditions": []}
    if not isinstance(policy, dict):
        raise MalformedKubernetesObject(f"ClusterPolicy must be an object, got {type(policy).__name__}")
    st = policy.get("status") or {}
    conds = [{"type": c.get("type", ""), "status": c.get("status", ""), "reason": c.get("reason", ""),
              "message": c.get("message", "")} for c in st.get("conditions") or [] if isinstance(c, dict)]
    return {"name": (policy.get("metadata") or {}).get("name", ""), "state": st.get("state", "") or "",
            "namespace": st.get("namespace", "") or "", "ready": st.get("state") == "ready", "conditions": conds}


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
            hint="re-run `kubectl get <kind> -o json > file` and check it was written completely") from exc


# --------------------------------------------------------------------------------------------
# the live client
# --------------------------------------------------------------------------------------------
def _policy(key: str) -> float:
    """A number of ``gpulib/data/remediation_policy.csv`` (:func:`gpulib.core.knowledge.settings`)."""
    from gpulib.core.knowledge import settings

    return settings("remediation_policy").number(key)


@dataclass(frozen=True)
class _Call:
    """What a request is, for error messages: ``verb`` ``resource`` at ``path`` (+ RBAC rule)."""

    verb: str
    resource: str
    path: str
    api_group: str = ""
    namespace: str | None = None

    def rbac_rule(self) -> str:
        group = self.api_group or '""'
        return f"apiGroups: [{group}], resources: [{self.resource}], verbs: [{self.verb}]"


class KubeCluster:
    """Live Kubernetes through the official client; returns the same frames as the converters.

    ``kubeconfig``: path (or ``os.pathsep``-joined paths); default ``$KUBECONFIG`` then
    ``~/.kube/config``. ``context``: a kubeconfig context (default: current-context).
    ``in_cluster=True`` uses the pod's service account. Lists are read in pages of ``page_size``
    with ``continue`` tokens; 5xx, 429 and connection errors are retried ``retries`` times in all
    with exponential backoff from ``backoff_s``; ``timeout`` (s) bounds each request.
    """

    def __init__(self, kubeconfig: str | os.PathLike | None = None, context: str | None = None,
                 in_cluster: bool = False, page_size: int | None = None, timeout: float | None = None,
                 retries: int | None = None, backoff_s: float | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        from kubernetes import client

        self.page_size = int(page_size if page_size is not None else _policy("page_size"))
        if self.page_size < 1:
            raise GpulibError(f"page_size must be >= 1, got {page_size}")
        self.timeout = float(timeout if timeout is not None else _policy("request_timeout_s"))
        self.retries = int(retries if retries is not None else _policy("retry_attempts"))
        self.backoff_s = float(backoff_s if backoff_s is not None else _policy("retry_backoff_s"))
        self._sleep = sleep
        self.in_cluster = in_cluster
        cfg = client.Configuration()
        if in_cluster:
            self.context, self.user = self._load_in_cluster(cfg), "serviceaccount"
            self.kubeconfig = None
        else:
            self.kubeconfig, self.context, self.user = self._load_kubeconfig(cfg, kubeconfig, context)
        cfg.retries = 0  # our own bounded retries below; urllib3 must not retry silently
        self.server = cfg.host
        self.api_client = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    # -- configuration ---------------------------------------------------------------------
    @staticmethod
    def _kubeconfig_paths(kubeconfig: str | os.PathLike | None) -> list[str]:
        if kubeconfig is not None:
            raw = str(kubeconfig)
        else:
            raw = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config"))
        return [os.path.expanduser(p) for p in raw.split(os.pathsep) if p]

    def _load_kubeconfig(self, cfg, kubeconfig, context) -> tuple[str, str, str]:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        paths = self._kubeconfig_paths(kubeconfig)
        present = [p for p in paths if os.path.isfile(p)]
        if not present:
            raise KubeconfigMissing(f"no kubeconfig file found (tried {', '.join(paths) or '<none>'})")
        joined = os.pathsep.join(present)
        try:
            contexts, current = config.list_kube_config_contexts(config_file=joined)
        except ConfigException as exc:
            raise KubeconfigMissing(f"kubeconfig {joined} has no usable contexts: {exc}") from exc
        names = [c.get("name", "") for c in contexts or []]
        chosen = context or (current or {}).get("name")
        if not chosen:
            raise KubeconfigMissing(f"kubeconfig {joined} sets no current-context and no context was given "
                                    f"(contexts: {', '.join(names) or 'none'})")
        if chosen not in names:
            raise KubeconfigMissing(f"context {chosen!r} is not in kubeconfig {joined} "
                                    f"(contexts: {', '.join(names) or 'none'})",
                                    hint="list them with `kubectl config get-contexts`")
        try:
            config.load_kube_config(config_file=joined, context=chosen, client_configuration=cfg)
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeconfigMissing(f"cannot load context {chosen!r} from kubeconfig {joined}: {exc}") from exc
        entry = next(c for c in contexts if c.get("name") == chosen)
        return joined, chosen, (entry.get("context") or {}).get("user", "")

    @staticmethod
    def _load_in_cluster(cfg) -> str:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            config.load_incluster_config(client_configuration=cfg)
        except ConfigException as exc:
            raise KubeconfigMissing(
                f"in-cluster configuration not available: {exc}",
                hint="in_cluster=True works inside a pod (KUBERNETES_SERVICE_HOST/PORT set and a service "
                     "account token at /var/run/secrets/kubernetes.io/serviceaccount/token); "
                     "outside a pod pass kubeconfig=/context=") from exc
        return "in-cluster"

    # -- requests --------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return f"{self.server.rstrip('/')}{path}"

    def _error(self, exc: Exception, call: _Call, attempts: int) -> KubernetesError:
        err = self._make_error(exc, call, attempts)
        err.api_message = _status_message(exc)  # the API's own words (e.g. the PodDisruptionBudget refusal)
        return err

    def _make_error(self, exc: Exception, call: _Call, attempts: int) -> KubernetesError:
        from kubernetes.client.exceptions import ApiException

        url = self._url(call.path)
        if isinstance(exc, ApiException):
            status = exc.status or None
            reason = _status_message(exc)
            if status == 403:
                return KubernetesError(
                    f"forbidden: {self.user or 'this identity'} (context {self.context}) cannot {call.verb} "
                    f"{call.resource} ({url}): {reason}", status=403,
                    hint=f"grant RBAC: a (Cluster)Role rule `{call.rbac_rule()}` bound to this user; check "
                         f"with `kubectl auth can-i {call.verb} {call.resource}"
                         f"{' -n ' + call.namespace if call.namespace else ''}`")
            if status == 401:
                return KubernetesError(f"unauthorized at {url}: {reason}", status=401,
                                       hint="credentials expired or invalid: refresh the kubeconfig token "
                                            "(cloud CLI login) and retry")
            if status == 404:
                return KubernetesError(f"not found: {call.verb} {call.resource} at {url}: {reason}", status=404)
            if status == 429:
                return KubernetesError(f"HTTP 429 for {call.verb} {call.resource} at {url}: {reason}", status=429,
                                       hint="a PodDisruptionBudget (for evictions) or API priority-and-fairness "
                                            "throttling refused the request; retry later")
            if status is not None and status >= 500:
                return KubernetesError(
                    f"Kubernetes API answered HTTP {status} for {call.verb} {call.resource} at {url} "
                    f"after {attempts} attempt(s): {reason}", status=status,
                    hint="the API server (or an aggregated API / webhook behind it) failed; check "
                         "`kubectl get --raw /readyz?verbose` and retry later")
            return KubernetesError(f"HTTP {status} for {call.verb} {call.resource} at {url}: {reason}",
                                   status=status)
        return KubernetesError(
            f"cannot reach the Kubernetes API server {self.server} ({call.verb} {call.resource}) after "
            f"{attempts} attempt(s): {_root_cause(exc)}",
            hint="check the server address in the kubeconfig context "
                 f"{self.context!r}, VPN/port-forward, and `kubectl cluster-info`")

    @staticmethod
    def _retryable(exc: Exception, retry_429: bool = True) -> bool:
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException):
            return bool(exc.status) and (exc.status >= 500 or (retry_429 and exc.status == 429))
        return True  # urllib3 connection/read errors

    def _request(self, fn: Callable[..., Any], call: _Call, *, retry_429: bool = True, **kwargs) -> Any:
        """Call ``fn`` with bounded retries; returns parsed JSON; raises KubernetesError.

        ``retry_429=False`` for evictions: a 429 there is a PodDisruptionBudget answer, not load.
        """
        import urllib3
        from kubernetes.client.exceptions import ApiException

        attempts = max(1, self.retries)
        delay = self.backoff_s
        for attempt in range(1, attempts + 1):
            try:
                resp = fn(_preload_content=False, _request_timeout=self.timeout, **kwargs)
                data = resp.data
                return json.loads(data) if data else {}
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt == attempts or not self._retryable(exc, retry_429):
                    raise self._error(exc, call, attempt) from exc
                self._sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _list(self, fn: Callable[..., Any], call: _Call, kind: str, **kwargs) -> dict:
        """All pages of a list (``limit`` + ``continue``), as one ``<kind>List`` dict."""
        items: list[dict] = []
        token: str | None = None
        restarted = False
        meta: dict = {}
        while True:
            page_kwargs = dict(kwargs, limit=self.page_size)
            if token:
                page_kwargs["_continue"] = token
            try:
                page = self._request(fn, call, **page_kwargs)
            except KubernetesError as exc:
                if exc.status == 410 and token and not restarted:  # continue token expired: start over once
                    items, token, restarted = [], None, True
                    continue
                raise
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        return {"apiVersion": page.get("apiVersion", "v1"), "kind": page.get("kind", f"{kind}List"),
                "metadata": {"resourceVersion": meta.get("resourceVersion", "")}, "items": items}

    # -- raw lists -------------------------------------------------------------------------
    def list_nodes(self, label_selector: str | None = None) -> dict:
        kw = {"label_selector": label_selector} if label_selector else {}
        return self._list(self.core.list_node, _Call("list", "nodes", "/api/v1/nodes"), "Node", **kw)

    def list_pods(self, namespace: str | None = None, field_selector: str | None = None) -> dict:
        kw = {"field_selector": field_selector} if field_selector else {}
        if namespace:
            call = _Call("list", "pods", f"/api/v1/namespaces/{namespace}/pods", namespace=namespace)
            return self._list(self.core.list_namespaced_pod, call, "Pod", namespace=namespace, **kw)
        return self._list(self.core.list_pod_for_all_namespaces, _Call("list", "pods", "/api/v1/pods"), "Pod", **kw)

    def list_daemonsets(self, namespace: str) -> dict:
        call = _Call("list", "daemonsets", f"/apis/apps/v1/namespaces/{namespace}/daemonsets", "apps", namespace)
        return self._list(self.apps.list_namespaced_daemon_set, call, "DaemonSet", namespace=namespace)

    def list_cluster_policies(self) -> dict:
        path = f"/apis/{CLUSTERPOLICY_GROUP}/{CLUSTERPOLICY_VERSION}/{CLUSTERPOLICY_PLURAL}"
        call = _Call("list", CLUSTERPOLICY_PLURAL, path, CLUSTERPOLICY_GROUP)
        try:
            return self._list(self.custom.list_cluster_custom_object, call, "ClusterPolicy",
                              group=CLUSTERPOLICY_GROUP, version=CLUSTERPOLICY_VERSION,
                              plural=CLUSTERPOLICY_PLURAL)
        except KubernetesError as exc:
            if exc.status == 404:
                raise KubernetesError(
                    f"the ClusterPolicy CRD (clusterpolicies.nvidia.com) is not served by {self.server}", status=404,
                    hint="the NVIDIA GPU Operator is not installed; see runbooks/operator_install") from exc
            raise

    def get_node(self, name: str) -> dict:
        return self._request(self.core.read_node, _Call("get", "nodes", f"/api/v1/nodes/{name}"), name=name)

    # -- writes (used by gpulib.kube.remediate) -----------------------------------------------------
    def patch_node(self, name: str, patch: dict, *, dry_run: bool = True) -> dict:
        """Strategic-merge PATCH of a Node; ``dry_run`` sends ``dryRun=All`` (validated, not persisted)."""
        call = _Call("patch", "nodes", f"/api/v1/nodes/{name}")
        kw = {"dry_run": "All"} if dry_run else {}
        return self._request(self.core.patch_node, call, name=name, body=patch, field_manager="gpuops", **kw)

    def evict_pod(self, namespace: str, name: str, *, dry_run: bool = True) -> dict:
        """POST an Eviction (policy/v1), which honours PodDisruptionBudgets (429 when one forbids it)."""
        call = _Call("create", "pods/eviction", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", "",
                     namespace)
        body = eviction_body(namespace, name, dry_run=dry_run)
        kw = {"dry_run": "All"} if dry_run else {}
        return self._request(self.core.create_namespaced_pod_eviction, call, retry_429=False, name=name,
                             namespace=namespace, body=body, **kw)

    # -- frames ----------------------------------------------------------------------------
    def nodes(self) -> pd.DataFrame:
        """All nodes as ``NODE_COLUMNS`` (see :func:`nodes_frame`)."""
        return nodes_frame(self.list_nodes())

    def pods(self, namespace: str | None = None) -> pd.DataFrame:
        """Pods of all namespaces (or one) as ``POD_COLUMNS`` (see :func:`pods_frame`)."""
        return pods_frame(self.list_pods(namespace))

    def daemonsets(self, namespace: str = "gpu-operator") -> pd.DataFrame:
        """DaemonSets of the GPU Operator's namespace with desired/ready counts (:func:`daemonsets_frame`)."""
        return daemonsets_frame(self.list_daemonsets(namespace))

    def cluster_policy(self) -> dict | None:
        """The GPU Operator's ClusterPolicy object (``cluster-policy`` preferred), or None when none exists.

        Raises KubernetesError(status=404) when the CRD itself is absent (operator not installed).
        Summarise it with :func:`cluster_policy_status`.
        """
        items = self.list_cluster_policies()["items"]
        if not items:
            return None
        return next((p for p in items if (p.get("metadata") or {}).get("name") == "cluster-policy"), items[0])

    def dump(self, directory: str | os.PathLike, *, operator_namespace: str = "gpu-operator") -> list[Path]:
        """Write a snapshot folder like kubectl would: ``nodes.json``, ``pods.json`` (+ operator objects).

        ``daemonsets.json`` and ``clusterpolicies.json`` are written when readable; a 403/404 on those
        is skipped (the snapshot stays usable). Returns the paths written.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = [_write_kubectl_json(out / "nodes.json", self.list_nodes()),
                   _write_kubectl_json(out / "pods.json", self.list_pods())]
        for name, fetch in (("daemonsets.json", lambda: self.list_daemonsets(operator_namespace)),
                            ("clusterpolicies.json", self.list_cluster_policies)):
            try:
                written.append(_write_kubectl_json(out / name, fetch()))
            except KubernetesError as exc:
                if exc.status not in (403, 404):
                    raise
        return written

    def __repr__(self) -> str:
        where = "in-cluster" if self.in_cluster else f"context={self.context!r}"
        return f"KubeCluster({where}, server={self.server!r})"


def eviction_body(namespace: str, name: str, *, dry_run: bool = False) -> dict:
    """The policy/v1 Eviction object for a pod (``deleteOptions.dryRun`` set for a server dry run)."""
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": name, "namespace": namespace}}
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    return body


def _write_kubectl_json(path: Path, list_json: dict) -> Path:
    """Write a list the way ``kubectl get -o json`` prints it (kind List, 4-space indent, sorted keys)."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": list_json.get("items", [])}
    path.write_text(json.dumps(doc, indent=4, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _status_message(exc: Any) -> str:
    """The ``message`` (+ ``details.causes`` messages) of a Kubernetes Status body, else the HTTP reason."""
    body = getattr(exc, "body", None)
    if body:
        try:
            status = json.loads(body)
            msg = str(status.get("message") or "")
            causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
            msg = " ".join([msg] + [c for c in causes if c]).strip()
            if msg:
                return msg
        except (ValueError, AttributeError, TypeError):
            pass
    return str(getattr(exc, "reason", "") or exc)


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a urllib3 error chain (e.g. ``Connection refused``)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        return _root_cause(reason)
    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] ([^')]+)", text)
    return m.group(1) if m else text


def iter_gpu_nodes(nodes: pd.DataFrame) -> Iterable[str]:
    """Names of nodes that advertise GPUs (``nvidia.com/gpu`` or any MIG resource) or carry a GFD product."""
    for row in nodes.itertuples(index=False):
        if row.gpu_capacity > 0 or any(v > 0 for v in (row.mig_capacity or {}).values()) or row.gpu_product:
            yield row.node
