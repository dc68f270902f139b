"""GPU Operator state (DaemonSets, ClusterPolicy, operand pods, namespace labels, node runtimes) from raw objects
(a snapshot folder, the demo) or from a live cluster through :class:`gpulib.kube.client.KubeCluster`.
"""

from __future__ import annotations

from gpulib.core.errors import KubernetesError, NotProvided
from gpulib.gpu_operator.knowledge import setting
from gpulib.gpu_operator.pasted import load_pasted
from gpulib.kube.frames import daemonsets_frame


# --------------------------------------------------------------------------------------------
# state: live cluster, files, demo
# --------------------------------------------------------------------------------------------
def state_from_objects(objects: dict, namespace: str | None = None) -> dict:
    """Operator state from raw objects (``daemonsets``/``cluster_policies``/``pods`` item lists, optional
    ``namespaces`` {name: labels} and ``nodes`` items for runtimes)."""
    ns = namespace or setting("namespace")
    pols = objects.get("cluster_policies") or []
    policy = next(
        (p for p in pols if (p.get("metadata") or {}).get("name") == setting("clusterpolicy_name")),
        pols[0] if pols else None,
    )
    ds_items = [d for d in objects.get("daemonsets") or [] if (d.get("metadata") or {}).get("namespace", ns) == ns]
    pods = [p for p in objects.get("pods") or [] if (p.get("metadata") or {}).get("namespace") == ns]
    runtimes = {
        (n.get("metadata") or {}).get("name", ""): ((n.get("status") or {}).get("nodeInfo") or {}).get(
            "containerRuntimeVersion", ""
        )
        for n in objects.get("nodes") or []
    }
    gcs = objects.get("gpu_clusters") or []
    gc = next((g for g in gcs if (g.get("metadata") or {}).get("name") == setting("gpucluster_name")), None)
    return {
        "namespace": ns,
        "daemonsets": daemonsets_frame({"items": ds_items}),
        "cluster_policy": policy,
        "gpu_cluster": gc or (gcs[0] if gcs else None),
        "policy_read": objects.get("policy_read", True),
        "pods": pods,
        "namespace_labels": (objects.get("namespaces") or {}).get(ns),
        "runtimes": runtimes,
    }


def collect_state(kube, namespace: str | None = None) -> dict:
    """Operator state from a live cluster (:class:`gpulib.kube.client.KubeCluster`): DaemonSets, ClusterPolicy
    (None when absent or the CRD is not installed), the namespace's pods, its labels, node runtimes."""
    ns = namespace or setting("namespace")
    return state_from_objects(kube.operator_objects(ns), ns)


def operator_objects(src, namespace: str, *, pasted: bool = False) -> dict:
    """The GPU Operator's raw objects from a source's generic :meth:`~gpulib.sources.base.Source.objects`:
    ``{"daemonsets": [...], "cluster_policies": [...], "pods": [pods of the namespace], "nodes": [...],
    "namespaces": {name: labels}}``, the shape :func:`state_from_objects` reads (and
    :meth:`gpulib.kube.client.KubeCluster.operator_objects` returns). ClusterPolicies are none when the CRD is not
    served (404), the namespace's labels left out when they cannot be read; pods and nodes the source lacks are
    none; ``gpu_clusters`` the GPUClusters (none where the CRD is not served). NotProvided where the source holds
    neither DaemonSets nor ClusterPolicies and nothing was ``pasted``."""
    try:
        policies = src.objects("clusterpolicies", namespace)
    except NotProvided:
        policies = None
    except KubernetesError as exc:
        if exc.status != 404:
            raise
        policies = []
    try:
        namespaces = {
            (o.get("metadata") or {}).get("name", namespace): dict((o.get("metadata") or {}).get("labels") or {})
            for o in src.objects("namespaces", namespace)
        }
    except (NotProvided, KubernetesError):
        namespaces = {}
    try:
        daemonsets = src.objects("daemonsets", namespace)
    except NotProvided:
        daemonsets = None
    try:  # the DRA stack's singleton (GPU Operator v26.7.0); none when its CRD is not served
        gpu_clusters = src.objects("gpuclusters", namespace)
    except NotProvided:
        gpu_clusters = []
    except KubernetesError as exc:
        if exc.status not in (403, 404):  # CRD not served, or a role without it
            raise
        gpu_clusters = []
    if policies is None and daemonsets is None and not pasted:
        raise NotProvided(
            f"GPU Operator objects are not available from this source ({src.describe()})",
            hint="use source='live' (Kubernetes API) or a snapshot with daemonsets.json and clusterpolicies.json",
        )
    out = {"daemonsets": daemonsets or [], "cluster_policies": policies or [], "gpu_clusters": gpu_clusters}
    out["policy_read"] = policies is not None
    for kind in ("pods", "nodes"):
        try:
            out[kind] = src.objects(kind, namespace if kind == "pods" else None)
        except NotProvided:
            out[kind] = []
    out["namespaces"] = namespaces
    return out


def operator_state(src, namespace: str | None = None, *, snapshot_dir: str = "", operator_logs: str = "") -> dict:
    """Operator state from a source's raw objects (:func:`operator_objects`):
    ``{"daemonsets":
    DataFrame, "cluster_policy": dict | None, "pods": [pod objects in the namespace], "namespace_labels": dict | None,
    "runtimes": {node: runtime}}``. Raises SourceError (with a hint) where the source has no operator objects."""
    ns = namespace or setting("namespace")
    pods, problems = load_pasted(snapshot_dir, operator_logs)
    state = state_from_objects(operator_objects(src, ns, pasted=bool(pods or problems)), ns)
    state.update(pasted_pods=pods, pasted_problems=problems)
    return state
