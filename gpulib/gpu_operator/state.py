"""GPU Operator state (DaemonSets, ClusterPolicy, operand pods, namespace labels, node runtimes) from raw objects
(a snapshot folder, the demo) or from a live cluster through :class:`gpulib.kube.client.KubeCluster`.
"""

from __future__ import annotations

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
    return {
        "namespace": ns,
        "daemonsets": daemonsets_frame({"items": ds_items}),
        "cluster_policy": policy,
        "pods": pods,
        "namespace_labels": (objects.get("namespaces") or {}).get(ns),
        "runtimes": runtimes,
    }


def collect_state(kube, namespace: str | None = None) -> dict:
    """Operator state from a live cluster (:class:`gpulib.kube.client.KubeCluster`): DaemonSets, ClusterPolicy
    (None when absent or the CRD is not installed), the namespace's pods, its labels, node runtimes."""
    ns = namespace or setting("namespace")
    return state_from_objects(kube.operator_objects(ns), ns)


def operator_state(src, namespace: str | None = None) -> dict:
    """Operator state from a source's raw objects (:meth:`gpulib.sources.base.Source.operator_objects`):
    ``{"daemonsets":
    DataFrame, "cluster_policy": dict | None, "pods": [pod objects in the namespace], "namespace_labels": dict | None,
    "runtimes": {node: runtime}}``. Raises SourceError (with a hint) where the source has no operator objects."""
    ns = namespace or setting("namespace")
    return state_from_objects(src.operator_objects(ns), ns)
