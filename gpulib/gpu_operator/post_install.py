"""GPU Operator post-install verification: operand DaemonSets desired = ready (with the failing pod's reason),
validator init containers (which ready-file is missing), ClusterPolicy state and conditions, allocatable
``nvidia.com/gpu`` / ``nvidia.com/mig-*`` against GFD's counts, GFD labels, ``mig.config.state``, and DCGM series for
every GPU (:func:`check_dcgm`). Each failed check is a Finding whose SOP comes from
``gpulib/data/gpu_operator/operator_sop.yaml``.

Pure functions over frames / Kubernetes JSON, so they run the same on the demo fleet, a snapshot folder or a live
cluster.
"""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from gpulib.core.errors import EmptyResult, SourceError
from gpulib.core.findings import Finding, Severity
from gpulib.gpu_operator.findings import sop, verified
from gpulib.gpu_operator.knowledge import _components, setting
from gpulib.gpu_operator.pasted import cause_findings, pods_from_objects, unreadable_findings
from gpulib.gpu_operator.pre_install import _nfd_gpu
from gpulib.gpu_operator.stack import check_gpucluster, check_operand_nodes, gpucluster_expected
from gpulib.kube.dra import dra_served
from gpulib.kube.frames import cluster_policy_status, daemonsets_frame, iter_gpu_nodes
from gpulib.kube.labels import gpu_resource_name

#: what to do for each ClusterPolicy condition reason
#: (``NVIDIA/gpu-operator: internal/conditions/consts.go`` @ a22dbf67)
_REASON_ADVICE = {
    "OperandNotReady": (
        "Each state named in the message maps to one operand DaemonSet "
        "(gpulib/data/gpu_operator/operator_components.csv): fix its pods."
    ),
    "DriverNotReady": "The driver DaemonSet is not ready on some node: see the driver pod findings.",
    "NFDLabelsMissing": "No node carries NFD labels: enable NFD (nfd.enabled=true) or install node-feature-discovery.",
    "NoGPUNodes": "No node has the NFD pci-10de label: check lspci on the GPU nodes and the NFD worker pods.",
    "NodeStatusExporterNotReady": "The node-status-exporter DaemonSet is not ready: read its pod log.",
    "PrerequisiteNotMet": (
        "A prerequisite of the ClusterPolicy is not met: read the condition message and the operator log."
    ),
    "ReconcileFailed": "The operator failed to reconcile: read the operator Deployment log.",
}


# --------------------------------------------------------------------------------------------
# post-install verification
# --------------------------------------------------------------------------------------------
def _owner_ds(pod: dict) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet":
            return ref.get("name", "")
    return ""


def _waiting_reason(pod: dict) -> tuple[str, str]:
    """(reason, container) of the first waiting/failed container (init containers first), else ("", "")."""
    st = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            state = cs.get("state") or {}
            if "waiting" in state and (state["waiting"] or {}).get("reason") not in (None, "", "PodInitializing"):
                reason = state["waiting"]["reason"]
                return (f"Init:{reason}" if key == "initContainerStatuses" else reason), cs.get("name", "")
            if "terminated" in state and (state["terminated"] or {}).get("exitCode", 0) != 0:
                return f"Error (exit {state['terminated'].get('exitCode')})", cs.get("name", "")
    return "", ""


def _pod_ready(pod: dict) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") == "Succeeded":
        return True
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    if "Ready" in conds:
        return conds["Ready"] == "True"
    cs = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and bool(cs) and all(c.get("ready") for c in cs)


def _expected_daemonsets(policy: dict | None, gpu_nodes: int) -> dict[str, str]:
    """DaemonSet -> component for the components the ClusterPolicy enables (chart defaults without one)."""
    spec = (policy or {}).get("spec") or {}
    out = {}
    for comp, r in _components().iterrows():
        if not r["daemonset"]:
            continue
        section = spec.get(r["helm_key"])
        enabled = (
            section.get("enabled")
            if isinstance(section, dict) and "enabled" in section
            else r["default_enabled"] == "yes"
        )
        if enabled and gpu_nodes:
            out[r["daemonset"]] = comp
    return out


def check_daemonsets(
    daemonsets: pd.DataFrame,
    pods: list[dict],
    nodes: pd.DataFrame,
    *,
    policy: dict | None = None,
    namespace: str | None = None,
    expected: dict[str, str] | None = None,
    explained: frozenset[str] = frozenset(),
) -> list[Finding]:
    """Operand DaemonSets: present when enabled, desired = ready; the failing pod's reason picks the SOP.
    ``expected`` (DaemonSet -> component) replaces the ClusterPolicy's operands (a GPUCluster's); a pod in
    ``explained`` already has a cause finding (:mod:`gpulib.gpu_operator.pasted`) and gets no second one."""
    ns = namespace or setting("namespace")
    kernels = dict(zip(nodes["node"], nodes["kernel"])) if len(nodes) else {}
    gpu_nodes = len(list(iter_gpu_nodes(nodes))) if len(nodes) else 0
    out: list[Finding] = []
    present = set(daemonsets["daemonset"]) if len(daemonsets) else set()
    comps = _components()
    wanted = expected if expected is not None else _expected_daemonsets(policy, gpu_nodes)
    for ds, comp in wanted.items():
        if ds not in present:
            known = comp in comps.index
            f = sop(
                "daemonset_missing",
                ds=ds,
                ns=ns,
                state=(comps.loc[comp, "state"] if known else "") or comp,
                evidence=[
                    f"enabled in the ClusterPolicy (spec.{comps.loc[comp, 'helm_key']})"
                    if known
                    else f"an operand of the GPUCluster ({comp})",
                    f"DaemonSets in {ns}: {', '.join(sorted(present)) or 'none'}",
                ],
            )
            if comp == "gfd":
                f.title = "GPU feature discovery (gpu-feature-discovery DaemonSet) is missing"
            out.append(f)
    by_ds: dict[str, list[dict]] = {}
    for p in pods:
        by_ds.setdefault(_owner_ds(p), []).append(p)
    for r in daemonsets.itertuples(index=False):
        if r.desired == r.ready and not r.unavailable:
            continue
        bad = [p for p in by_ds.get(r.daemonset, []) if not _pod_ready(p)]
        specific = []
        for p in bad:
            if p["metadata"]["name"] in explained:
                specific.append(None)
                continue
            reason, container = _waiting_reason(p)
            node = (p.get("spec") or {}).get("nodeName", "")
            name = p["metadata"]["name"]
            ev = [
                f"DaemonSet {r.daemonset}: desired {r.desired}, ready {r.ready}",
                f"pod {name} on {node or '(unscheduled)'}: {reason or (p.get('status') or {}).get('phase', '?')}"
                + (f" in container {container}" if container else ""),
            ]
            restarts = sum(cs.get("restartCount", 0) for cs in (p.get("status") or {}).get("containerStatuses") or [])
            if restarts:
                ev.append(f"{restarts} restarts")
            if r.daemonset == "nvidia-driver-daemonset" and "CrashLoopBackOff" in reason:
                specific.append(
                    sop(
                        "driver_crashloop",
                        pod=name,
                        node=node,
                        ns=ns,
                        reason=reason,
                        kernel=kernels.get(node, "?"),
                        evidence=ev + [f"node kernel {kernels.get(node, '?')}"],
                    )
                )
            elif r.daemonset == "nvidia-operator-validator":
                continue  # check_validator names the missing ready-file
            elif reason:
                specific.append(sop("operand_crashloop", pod=name, node=node, ns=ns, reason=reason, evidence=ev))
        if specific:
            out += [f for f in specific if f is not None]
        elif r.daemonset != "nvidia-operator-validator" or not bad:
            out.append(
                sop(
                    "daemonset_not_ready",
                    ds=r.daemonset,
                    ns=ns,
                    ready=r.ready,
                    desired=r.desired,
                    evidence=[
                        f"desired {r.desired}, current {r.current}, ready {r.ready}, unavailable {r.unavailable}"
                    ],
                )
            )
    return out


def check_validator(pods: list[dict], *, namespace: str | None = None) -> list[Finding]:
    """Validator pods whose init containers did not all complete: name the stuck one and its ready-file."""
    ns = namespace or setting("namespace")
    table = _components()
    init_map = {r["validator_init"]: (comp, r["ready_file"]) for comp, r in table.iterrows() if r["validator_init"]}
    out = []
    for p in pods:
        if _owner_ds(p) != "nvidia-operator-validator" and not p["metadata"]["name"].startswith(
            "nvidia-operator-validator-"
        ):
            continue
        statuses = (p.get("status") or {}).get("initContainerStatuses") or []
        stuck = next(
            (
                cs
                for cs in statuses
                if not (
                    ((cs.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
                    and "terminated" in (cs.get("state") or {})
                )
            ),
            None,
        )
        if stuck is None:
            continue
        name = stuck.get("name", "")
        comp, ready_file = init_map.get(name, (name, "?"))
        state = stuck.get("state") or {}
        how = next(iter(state), "unknown")
        detail = (state.get(how) or {}).get("reason", "") if isinstance(state.get(how), dict) else ""
        node = (p.get("spec") or {}).get("nodeName", "")
        driver_pod = f"nvidia-driver-daemonset pod on {node}"
        done = [cs.get("name") for cs in statuses[: statuses.index(stuck)]]
        out.append(
            sop(
                "validator_init",
                node=node,
                ns=ns,
                pod=p["metadata"]["name"],
                container=name,
                ready_file=ready_file,
                component=comp.replace("_", " "),
                driver_pod=driver_pod,
                evidence=[
                    f"init containers completed: {', '.join(done) or 'none'}",
                    f"{name}: {how}{' (' + detail + ')' if detail else ''}, restarts {stuck.get('restartCount', 0)}",
                    f"/run/nvidia/validations/{ready_file} not written",
                ],
            )
        )
    return out


def check_cluster_policy(policy: dict | None, *, namespace: str | None = None) -> list[Finding]:
    """ClusterPolicy ``status.state`` and its Ready/Error conditions
    (``NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go`` @ a22dbf67)."""
    ns = namespace or setting("namespace")
    st = cluster_policy_status(policy)
    if st["state"] == "absent":
        return [sop("policy_absent", ns=ns, evidence=["kubectl get clusterpolicies.nvidia.com: no items"])]
    ev = [f"status.state={st['state'] or '(empty)'}"] + [
        f"condition {c['type']}={c['status']} reason={c['reason']}: {c['message']}" for c in st["conditions"]
    ]
    if st["state"] == "ready":
        return [Finding(Severity.OK, f"ClusterPolicy {st['name']} is ready", category="gpu-operator", evidence=ev)]
    if st["state"] == "ignored":
        return [sop("policy_ignored", name=st["name"], ns=ns, evidence=ev)]
    cond = (
        next((c for c in st["conditions"] if c["type"] == "Ready" and c["status"] != "True"), None)
        or next((c for c in st["conditions"] if c["type"] == "Error" and c["status"] == "True"), None)
        or {"reason": "not reconciled yet", "message": "no conditions"}
    )
    return [
        sop(
            "policy_not_ready",
            name=st["name"] or setting("clusterpolicy_name"),
            state=st["state"] or "not reconciled",
            reason=cond["reason"],
            message=cond["message"],
            ns=ns,
            advice=_REASON_ADVICE.get(cond["reason"], "Read the operator log for the failing state."),
            evidence=ev,
        )
    ]


def expected_devices(row) -> dict[str, int]:
    """Resource -> count the node should advertise, from GFD labels: ``nvidia.com/gpu`` = gpu.count x replicas
    (``nvidia.com/gpu.shared`` when the device plugin renames shared GPUs,
    :func:`gpulib.kube.labels.gpu_resource_name`);
    under the MIG mixed strategy each ``nvidia.com/mig-<profile>`` = its ``.count`` label."""
    labels = row.labels or {}
    out: dict[str, int] = {}
    for k, v in labels.items():
        if k.startswith("nvidia.com/mig-") and k.endswith(".count") and str(v).isdigit():
            out[k[: -len(".count")]] = int(v)
    if row.mig_strategy == "mixed" and (out or row.mig_capacity):
        # GFD's per-profile counts when present, else what the node's capacity says
        return {k: out.get(k, v) for k, v in {**(row.mig_capacity or {}), **out}.items()}
    if pd.notna(row.gpu_count):
        reps = int(row.gpu_replicas) if pd.notna(row.gpu_replicas) and int(row.gpu_replicas) > 0 else 1
        return {gpu_resource_name(row): int(row.gpu_count) * reps}
    return {}


def check_nodes(nodes: pd.DataFrame, *, namespace: str | None = None) -> list[Finding]:
    """Per GPU node: GFD labels, ``mig.config.state``, allocatable against GFD's counts."""
    ns = namespace or setting("namespace")
    out = []
    for r in nodes.itertuples(index=False):
        labels = r.labels or {}
        if not (_nfd_gpu(labels) or r.gpu_product or r.gpu_capacity or r.mig_capacity):
            continue
        missing = [k for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.count") if k not in labels]
        if missing:
            out.append(
                sop(
                    "gfd_labels_missing",
                    node=r.node,
                    ns=ns,
                    missing=", ".join(missing),
                    evidence=[f"capacity nvidia.com/gpu {r.gpu_capacity}", f"NFD pci-10de: {_nfd_gpu(labels)}"],
                )
            )
        if r.mig_config_state == "failed":
            out.append(
                sop(
                    "mig_config_failed",
                    node=r.node,
                    ns=ns,
                    config=r.mig_config or "<config>",
                    evidence=[f"nvidia.com/mig.config={r.mig_config}", "nvidia.com/mig.config.state=failed"],
                )
            )
        if not r.ready:
            continue  # allocatable of a NotReady node says nothing about the operator
        no_plugin = labels.get("nvidia.com/gpu.deploy.device-plugin") == "false" or dra_served(r)
        if no_plugin and not r.gpu_capacity and not r.mig_capacity:
            # no device plugin deployed there (the operand's deploy label, NVIDIA/gpu-operator controllers/
            # state_manager.go @a22dbf67) or its GPUs are a DRA driver's ResourceSlice devices (gpulib.kube.dra):
            # no nvidia.com/gpu is expected
            continue
        alloc = {gpu_resource_name(r): int(r.gpu_allocatable), **(r.mig_allocatable or {})}
        for res, exp in expected_devices(r).items():
            have = alloc.get(res, 0)
            ev = [
                f"allocatable {res} = {have}",
                f"expected {exp} (GFD labels: gpu.count={r.gpu_count}, "
                f"replicas={r.gpu_replicas}, strategy={r.mig_strategy or 'none'})",
            ]
            if exp > 0 and have == 0:
                out.append(sop("allocatable_zero", node=r.node, ns=ns, resource=res, expected=exp, evidence=ev))
            elif have < exp:
                out.append(
                    sop("allocatable_short", node=r.node, ns=ns, resource=res, alloc=have, expected=exp, evidence=ev)
                )
    return out


EXPORTER_TARGET_COLUMNS = ["node", "instance", "job", "up"]


def exporter_targets(up: list[dict] | None, node_names: Iterable[str] = ()) -> pd.DataFrame:
    """dcgm-exporter scrape targets from Prometheus ``up`` samples, one row per target: ``node`` (from a
    node label, see ``dcgm_target_node_labels``, else the instance's host when it is a node name; "" when
    unknown), ``instance``, ``job``, ``up`` (float)."""
    keys = setting("dcgm_target_node_labels").split(";")
    names = set(node_names)
    rows = []
    for u in up or []:
        metric = u.get("metric") or {}
        inst = str(metric.get("instance", ""))
        node = next((str(metric[k]) for k in keys if metric.get(k)), "")
        host = inst.rsplit(":", 1)[0]
        if not node and host in names:
            node = host
        rows.append(
            {
                "node": node,
                "instance": inst or "?",
                "job": str(metric.get("job", "")),
                "up": float((u.get("value") or [0, "nan"])[1]),
            }
        )
    return pd.DataFrame(rows, columns=EXPORTER_TARGET_COLUMNS)


def check_dcgm(
    last: pd.DataFrame | None,
    nodes: pd.DataFrame,
    *,
    up: list[dict] | None = None,
    namespace: str | None = None,
    field: str | None = None,
) -> list[Finding]:
    """DCGM series present for every physical GPU of every GPU node; dcgm-exporter targets ``up``.

    ``last``: a SUMMARY frame (``src.summary(field, "5m", "last")``); ``up``: Prometheus ``up`` samples of the
    exporter job (``[{"metric": {...}, "value": [t, "1"]}]``) when the backend has them (``None`` otherwise).
    With ``up``: a target at 0 is reported once (its node's missing series follow from it); when the targets
    name their nodes, a GPU node without any target is reported; a GPU missing while its node's target is up
    is a GPU the exporter itself does not see.
    """
    ns = namespace or setting("namespace")
    field = field or setting("dcgm_presence_field")
    out = []
    targets = exporter_targets(up, nodes["node"].astype(str))
    for t in targets[targets["up"] == 0].itertuples(index=False):
        ev = [f"up{{instance={t.instance!r}}} = 0"]
        if t.node:
            ev.append(f"no DCGM series can arrive from {t.node} while its exporter is not scraped")
        out.append(sop("dcgm_target_down", node=t.node or None, instance=t.instance, ns=ns, evidence=ev))
    down = set(targets.loc[targets["up"] == 0, "node"]) - {""}
    target_up = {t.node: t.instance for t in targets[targets["up"] > 0].itertuples(index=False) if t.node}
    named = bool((targets["node"] != "").any())
    seen = last if last is not None else pd.DataFrame(columns=["node", "gpu"])
    for r in nodes.itertuples(index=False):
        if r.node not in set(iter_gpu_nodes(nodes.loc[nodes["node"] == r.node])) or not r.ready or r.node in down:
            continue
        if named and r.node not in target_up:
            out.append(
                sop(
                    "dcgm_target_absent",
                    node=r.node,
                    ns=ns,
                    evidence=[
                        f"{len(targets)} dcgm-exporter target(s) in Prometheus "
                        f"({', '.join(sorted(set(targets['job']) - {''})) or 'no job label'}), none for {r.node}"
                    ],
                )
            )
            continue
        have = set(seen.loc[seen["node"] == r.node, "gpu"].astype(str))
        single_mig = "-MIG-" in str(r.gpu_product)  # gpu.count counts MIG devices, not GPUs
        if single_mig or pd.isna(r.gpu_count):
            missing = [] if have else ["all"]
        else:
            missing = [str(i) for i in range(int(r.gpu_count)) if str(i) not in have]
        if missing:
            ev = [
                f"{field}: series for GPU(s) {', '.join(sorted(have, key=lambda x: (len(x), x))) or 'none'} "
                f"of {r.gpu_count if pd.notna(r.gpu_count) else '?'}"
            ]
            if r.node in target_up:
                ev.append(
                    f"dcgm-exporter target {target_up[r.node]} is up: the exporter is scraped but does not "
                    "report these GPUs (check nvidia-smi on the node for a GPU that fell off the bus)"
                )
            out.append(sop("dcgm_missing", node=r.node, ns=ns, gpus=", ".join(missing), evidence=ev))
    return out


def dcgm_presence(src, window: str | None = None) -> tuple[pd.DataFrame | None, list[dict] | None]:
    """(last sample per GPU in ``window``, Prometheus ``up`` of the exporter or None) from any source."""
    window = window or setting("dcgm_presence_window")
    try:
        last = src.summary(setting("dcgm_presence_field"), window, "last")
    except EmptyResult:
        last = None
    try:  # the exporter's scrape health, where the source can run PromQL (NotProvided is a SourceError)
        up = src.query('up{job=~".*dcgm.*"}') or None
    except SourceError:
        up = None
    return last, up


def verify(
    state: dict,
    nodes: pd.DataFrame,
    *,
    dcgm_last: pd.DataFrame | None = None,
    dcgm_up: list[dict] | None = None,
    check_metrics: bool = True,
    namespace: str | None = None,
) -> list[Finding]:
    """All post-install checks over an operator ``state`` (see :func:`collect_state`) and the NODE frame.

    Returns the failed checks (each with its SOP) or one OK Finding when everything passed.
    """
    ns = namespace or state.get("namespace") or setting("namespace")
    policy, gc = state.get("cluster_policy"), state.get("gpu_cluster")
    pods = state.get("pods") or []
    daemonsets = state.get("daemonsets", daemonsets_frame({"items": []}))
    known = _merge(pods_from_objects(pods), state.get("pasted_pods") or [])
    causes = cause_findings(known, namespace=ns) + unreadable_findings(state.get("pasted_problems") or [], namespace=ns)
    explained = frozenset(f.data.get("pod", "") for f in causes)
    gpu_nodes = len(list(iter_gpu_nodes(nodes))) if len(nodes) else 0
    # a GPU node without operand pods is judged only from a pasted listing with a NODE column (kubectl get pods
    # -n <ns> -o wide: the whole namespace); the source's pods then add theirs
    pasted = [p for p in state.get("pasted_pods") or [] if p.node]
    by_node: dict[str, list[str]] | None = None
    if pasted:
        by_node = {}
        for p in known:
            if p.node and p.component:
                by_node.setdefault(p.node, []).append(p.name)
    if gc is not None and policy is None:  # the DRA stack: its own operands, no device plugin / GFD / validator
        head = check_gpucluster(gc, daemonsets, namespace=ns)
        problems = causes + [f for f in head if f.data.get("check") != "gpucluster_ready"]
        problems += check_daemonsets(
            daemonsets, pods, nodes, namespace=ns, expected=gpucluster_expected(gc, gpu_nodes), explained=explained
        )
        problems += check_operand_nodes(nodes, by_node, namespace=ns, stack="gpucluster")
    else:
        head = check_cluster_policy(policy, namespace=ns) if state.get("policy_read", True) else []
        problems = causes + [f for f in head if f.severity != Severity.OK]
        if gc is not None:
            problems.append(sop("gpucluster_with_clusterpolicy", evidence=["ClusterPolicy and GPUCluster objects"]))
        problems += check_daemonsets(daemonsets, pods, nodes, policy=policy, namespace=ns, explained=explained)
        problems += _fold(
            causes, check_validator([p for p in pods if p["metadata"]["name"] not in explained], namespace=ns)
        )
        problems += check_nodes(nodes, namespace=ns)
        problems += check_operand_nodes(nodes, by_node, namespace=ns)
    if check_metrics:
        problems += check_dcgm(dcgm_last, nodes, up=dcgm_up, namespace=ns)
    # a GPUCluster's OK line names its operands even when other checks fail (the DRA stack's own report)
    dra_ok = [f for f in head if f.data.get("check") == "gpucluster_ready"] if gc is not None and policy is None else []
    if problems:
        return dra_ok + problems
    return dra_ok + [verified(gpu_nodes, len(daemonsets))]


def _fold(causes: list[Finding], validator: list[Finding]) -> list[Finding]:
    """The validator findings on a node whose cause is already named: folded into that cause's evidence (the
    validator waits on the driver and toolkit of its node), the others kept."""
    by_node = {f.node: f for f in causes if f.node}
    out = []
    for f in validator:
        cause = by_node.get(f.node)
        if cause is None:
            out.append(f)
        else:
            cause.evidence.append(f"also: {f.title}")
    return out


def _merge(objects: list, pasted: list) -> list:
    """Operand pods from the source and from the paste, one per name (a pasted log joins the object's)."""
    by = {p.name: p for p in objects}
    for p in pasted:
        if p.name in by:
            o = by[p.name]
            o.log = "\n".join(x for x in (o.log, p.log) if x)
            o.log_note = o.log_note or p.log_note
            o.node = o.node or p.node
        else:
            by[p.name] = p
    return list(by.values())


def cuda_test_pod(
    *,
    namespace: str = "default",
    name: str = "cuda-vectoradd",
    image: str | None = None,
    node: str | None = None,
    resource: str = "nvidia.com/gpu",
) -> dict:
    """A one-shot CUDA vectorAdd pod requesting one GPU (or MIG device ``resource``) with the GPU toleration."""
    spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "cuda-vectoradd",
                "image": image or setting("cuda_test_image"),
                "resources": {"limits": {resource: 1}},
            }
        ],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
