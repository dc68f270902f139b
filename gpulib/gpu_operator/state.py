"""GPU Operator state (DaemonSets, ClusterPolicy, operand pods, namespace labels, node runtimes) from raw objects
(a snapshot folder, the demo) or from a live cluster through :class:`gpulib.kube.client.KubeCluster`.
"""
from __future__ import annotations

from gpulib.core.errors import KubernetesError
from gpulib.gpu_operator.knowledge import setting
from gpulib.kube.frames import daemonsets_frame


# --------------------------------------------------------------------------------------------
# state: live cluster, files, demo
# --------------------------------------------------------------------------------------------
def state_from_objects(objects: dict, namespace: str | None = None) -> dict:
    """Operator state from raw objects (``daemonsets``/``cluster_policies``/``pods`` item lists, optional
    ``namespaces`` {name: labels} and ``nodes`` items for runtimes)."""
    ns = namespace or setting("namespace")
    pols = objects.get("cluster_policies") or []
    policy = next((p for p in pols if (p.get("metadata") or {}).get("name") == setting("clusterpolicy_name")),
                  pols[0] if pols else None)
    ds_items = [d for d in objects.get("daemonsets") or [] if (d.get("metadata") or {}).get("namespace", ns) == ns]
    pods = [p for p in objects.get("pods") or [] if (p.get("metadata") or {}).get("namespace") == ns]
    runtimes = {(n.get("metadata") or {}).get("name", ""): ((n.get("status") or {}).get("nodeInfo") or {}).get(
        "containerRuntimeVersion", "") for n in objects.get("nodes") or []}
    return {"namespace": ns, "daemonsets": daemonsets_frame({"items": ds_items}), "cluster_policy": policy,
            "pods": pods, "namespace_labels": (objects.get("namespaces") or {}).get(ns), "runtimes": runtimes}


def collect_state(kube, namespace: str | None = None) -> dict:
    """Operator state from a live cluster (:class:`gpulib.kube.client.KubeCluster`): DaemonSets, ClusterPolicy
    (None when absent or the CRD is not installed), the namespace's pods, its labels, node runtimes."""
    ns = namespace or setting("namespace")
    try:
        policies = kube.list_cluster_policies()["items"]
    except KubernetesError as exc:
        if exc.status != 404:
            raise
        policies = []
    labels = None
    try:
        from gpulib.kube.client import _Call
        obj = kube._request(kube.core.read_namespace, _Call("get", "namespaces", f"/api/v1/namespaces/{ns}"), name=ns)
        obj = obj.to_dict() if hasattr(obj, "to_dict") else obj
        labels = dict(((obj or {}).get("metadata") or {}).get("labels") or {})
    except KubernetesError:
        labels = None
    return state_from_objects({"daemonsets": kube.list_daemonsets(ns)["items"], "cluster_policies": policies,
                               "pods": kube.list_pods(ns)["items"], "namespaces": {ns: labels} if labels is not None else {},
                               "nodes": kube.list_nodes()["items"]}, ns)
