"""GPU Operator pre-flight, before installing: GPU nodes found by NFD (PCI vendor ``10de``), kernel and OS from
NFD labels, container runtime, taints the operands must tolerate, PodSecurity level of the namespace.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.gpu_operator.findings import mixed_runtimes, nfd_labels_missing, pod_security, sop, untolerated_taints
from gpulib.gpu_operator.knowledge import setting
from gpulib.gpu_operator.plan import InstallPlan


# --------------------------------------------------------------------------------------------
# pre-flight
# --------------------------------------------------------------------------------------------
def _nfd_gpu(labels: dict) -> bool:
    return any(str(labels.get(k, "")).lower() == "true" for k in setting("nfd_gpu_labels").split(";"))


def _auto_tolerated(key: str) -> bool:
    # the DaemonSet controller adds tolerations for the node.kubernetes.io/* condition taints
    return key.startswith("node.kubernetes.io/")


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    """Kubernetes toleration matching (key/operator/value/effect)."""
    for t in tolerations:
        op = t.get("operator", "Equal") or "Equal"
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if op == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if op == "Equal" and t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


#: the chart's default operand toleration (ClusterPolicy spec.daemonsets.tolerations)
DEFAULT_OPERAND_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def node_table(nodes: pd.DataFrame, runtimes: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per node: NFD GPU label, kernel and OS (NFD labels, else nodeInfo), runtime, taints."""
    rows = []
    for r in nodes.itertuples(index=False):
        lab = r.labels or {}
        rows.append(
            {
                "node": r.node,
                "nfd_gpu": _nfd_gpu(lab),
                "gfd_product": r.gpu_product,
                "kernel_nfd": lab.get(setting("nfd_kernel_label"), ""),
                "os_nfd": " ".join(
                    x
                    for x in (lab.get(setting("nfd_os_id_label"), ""), lab.get(setting("nfd_os_version_label"), ""))
                    if x
                ),
                "kernel": r.kernel,
                "os_image": r.os_image,
                "runtime": (runtimes or {}).get(r.node, ""),
                "taints": ", ".join(
                    f"{t['key']}{'=' + t['value'] if t['value'] else ''}:{t['effect']}" for t in r.taints or []
                ),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["node", "nfd_gpu", "gfd_product", "kernel_nfd", "os_nfd", "kernel", "os_image", "runtime", "taints"],
    )


def preflight(
    nodes: pd.DataFrame,
    *,
    namespace_labels: dict | None = None,
    runtimes: dict[str, str] | None = None,
    plan: InstallPlan | None = None,
    operand_tolerations: list[dict] | None = None,
    namespace: str | None = None,
) -> list[Finding]:
    """Checks before ``helm install``. ``namespace_labels``: labels of the operator namespace (None: it does
    not exist yet or could not be read); ``runtimes``: node -> containerRuntimeVersion."""
    ns = namespace or (plan.namespace if plan else setting("namespace"))
    table = node_table(nodes, runtimes)
    gpu = table[table["nfd_gpu"]]
    out: list[Finding] = []
    if gpu.empty:
        out.append(
            sop(
                "no_gpu_nodes",
                ns=ns,
                evidence=[f"{len(table)} node(s), none labelled pci-10de by NFD"]
                + [f"{r.node}: GFD product {r.gfd_product}" for r in table.itertuples() if r.gfd_product][:5],
            )
        )
        return out
    out.append(
        Finding(
            Severity.OK,
            f"{len(gpu)} GPU node(s) found by NFD (PCI vendor 10de)",
            category="gpu-operator",
            evidence=[
                f"{r.node}: {r.os_nfd or r.os_image}, kernel {r.kernel_nfd or r.kernel}"
                + (f", {r.runtime}" if r.runtime else "")
                for r in gpu.itertuples()
            ][:12],
        )
    )
    driver_on = plan is None or "driver" in plan.components
    no_os = gpu[(gpu["kernel_nfd"] == "") | (gpu["os_nfd"] == "")]
    if len(no_os) and driver_on:
        out.append(nfd_labels_missing(no_os))
    kernels = sorted(set(gpu["kernel_nfd"].where(gpu["kernel_nfd"] != "", gpu["kernel"])) - {""})
    if len(kernels) > 1 and driver_on:
        out.append(
            Finding(
                Severity.INFO,
                f"GPU nodes run {len(kernels)} different kernels",
                category="gpu-operator",
                summary="The driver container builds (or needs a precompiled image) per kernel; "
                "expect one driver DaemonSet rollout per kernel.",
                evidence=kernels[:8],
            )
        )
    runtimes_seen = sorted({r.split("://")[0] for r in gpu["runtime"] if r})
    if len(runtimes_seen) > 1:
        out.append(mixed_runtimes(gpu, runtimes_seen))
    tolerations = operand_tolerations if operand_tolerations is not None else DEFAULT_OPERAND_TOLERATIONS
    untolerated = []
    for r in nodes[nodes["node"].isin(gpu["node"])].itertuples(index=False):
        for t in r.taints or []:
            if (
                t["effect"] in ("NoSchedule", "NoExecute")
                and not _auto_tolerated(t["key"])
                and not _tolerated(t, tolerations)
            ):
                untolerated.append((r.node, t))
    if untolerated:
        out.append(untolerated_taints(untolerated, ns))
    out += pod_security(namespace_labels, ns)
    return out
