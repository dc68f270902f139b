"""Which GPU Operator stack serves the cluster and whether its operands reach every GPU node: the device-plugin
stack (``ClusterPolicy``) or the DRA stack (``GPUCluster``, GPU Operator v26.7.0, NVIDIA/gpu-operator PR #2571:
the DRA driver, its validator, dcgm-exporter and optionally DCGM; no device plugin, GFD, MIG manager or operator
validator), and per GPU node the ``nvidia.com/gpu.deploy.*`` labels and taints that keep operands off it.
"""

from __future__ import annotations

import re

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.gpu_operator.findings import sop
from gpulib.gpu_operator.knowledge import _components, gpucluster_components, setting
from gpulib.gpu_operator.pre_install import DEFAULT_OPERAND_TOLERATIONS, _auto_tolerated, _nfd_gpu, _tolerated
from gpulib.kube.dra import dra_served
from gpulib.kube.frames import cluster_policy_status

__all__ = ["gpucluster_expected", "check_gpucluster", "check_operand_nodes"]

#: the ClusterPolicy operands whose deploy label, when false or "", keeps the stack from serving GPUs on a node
#: (mig-manager is labelled only on MIG-capable nodes; driver=false is the documented host-driver setting)
_CORE = ("device_plugin", "toolkit", "gfd", "dcgm_exporter", "validator")
_DEPLOY_KEY = re.compile(r"^nvidia\.com/gpu\.deploy\.[a-z0-9-]{1,63}$")


def gpucluster_expected(gc: dict | None, gpu_nodes: int) -> dict[str, str]:
    """DaemonSet -> component of the GPUCluster's operands (``spec.<key>.enabled``, else the table's default)."""
    spec = (gc or {}).get("spec") or {}
    out = {}
    for r in gpucluster_components().itertuples():
        section = spec.get(r.spec_key) if r.spec_key else None
        enabled = (
            section.get("enabled") if isinstance(section, dict) and "enabled" in section else r.default_enabled == "yes"
        )
        if enabled and gpu_nodes:
            out[r.daemonset] = r.component
    return out


def check_gpucluster(gc: dict, daemonsets: pd.DataFrame, *, namespace: str) -> list[Finding]:
    """The GPUCluster's state and its operand DaemonSets: INFO (which stack serves the cluster, every operand's ready
    count) when it is ready, else
    CRITICAL with the condition's message (the DaemonSet checks name the failing operand)."""
    st = cluster_policy_status(gc)
    name = st["name"] or setting("gpucluster_name")
    ds = {r.daemonset: r for r in daemonsets.itertuples(index=False)} if len(daemonsets) else {}
    operands = [
        f"{d} ({c}): " + (f"{ds[d].ready}/{ds[d].desired} ready" if d in ds else "no DaemonSet")
        for d, c in gpucluster_expected(gc, 1).items()
    ]
    ev = [f"status.state={st['state'] or '(empty)'}"] + [f"operand {o}" for o in operands]
    ev.append("no device plugin, GFD, MIG manager or operator validator: GPUCluster does not deploy them")
    if st["state"] == "ready":
        return [
            Finding(
                Severity.INFO,
                f"GPUCluster {name} (DRA stack) is ready: {len(operands)} operand DaemonSet(s)",
                category="gpu-operator",
                evidence=ev,
                data={"check": "gpucluster_ready", "operands": "; ".join(operands)},
            )
        ]
    cond = next((c for c in st["conditions"] if c["type"] == "Error" and c["status"] == "True"), None) or next(
        (c for c in st["conditions"] if c["type"] == "Ready"), {"message": "no conditions yet"}
    )
    return [
        sop(
            "gpucluster_not_ready",
            name=name,
            state=st["state"] or "not reconciled",
            message=cond.get("message") or cond.get("reason") or "no message",
            ns=namespace,
            evidence=ev,
        )
    ]


def _deploy_labels(stack: str) -> list[str]:
    if stack == "gpucluster":
        return list(gpucluster_components()["deploy_label"])
    comps = _components()
    return [comps.loc[c, "deploy_label"] for c in _CORE if comps.loc[c, "deploy_label"]]


def check_operand_nodes(
    nodes: pd.DataFrame,
    pods_by_node: dict[str, list[str]] | None,
    *,
    namespace: str,
    stack: str = "clusterpolicy",
    tolerations: list[dict] | None = None,
) -> list[Finding]:
    """Per GPU node: operand deploy labels set to false or "" (CRITICAL: those operands never schedule there, and no
    DaemonSet counts the node as missing); with a pod listing, a GPU node without any operand pod, explained by its
    labels and taints."""
    out: list[Finding] = []
    keys = _deploy_labels(stack)
    tol = tolerations if tolerations is not None else DEFAULT_OPERAND_TOLERATIONS
    for r in nodes.itertuples(index=False):
        labels = r.labels or {}
        if not _nfd_gpu(labels):
            continue
        off = [k for k in keys if k in labels and str(labels[k]).lower() in ("false", "")]
        if dra_served(r):  # no device plugin on a DRA node is the design, not disabled operands
            off = [k for k in off if not k.endswith(".device-plugin")]
        running = (pods_by_node or {}).get(r.node, [])
        if off:
            first = next((k for k in off if _DEPLOY_KEY.match(k)), "nvidia.com/gpu.deploy.device-plugin")
            ev = [f"{k}={labels[k]!r}" for k in off]
            ev.append(f"operand pods on {r.node}: {', '.join(sorted(running)) or 'none'}" if pods_by_node else "")
            out.append(
                sop(
                    "deploy_label_disabled",
                    node=r.node,
                    ns=namespace,
                    labels=", ".join(k.rsplit(".", 1)[-1] for k in off),
                    first=first,
                    evidence=[e for e in ev if e],
                )
            )
            continue
        if pods_by_node is None or running:
            continue
        blocking = [
            t
            for t in r.taints or []
            if t.get("effect") in ("NoSchedule", "NoExecute")
            and not _auto_tolerated(t.get("key", ""))
            and not _tolerated(t, tol)
        ]
        if blocking:
            why = (
                "Its taints are not tolerated by the operand DaemonSets: remove them or add them to "
                "daemonsets.tolerations."
            )
        else:
            why = (
                "No deploy label is false and no taint blocks them: check the operand DaemonSets' nodeSelector "
                "against the node's labels (NFD pci-10de) and the operator log."
            )
        ev = [f"taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in blocking]
        ev += [f"{k}={labels[k]!r}" for k in keys if k in labels] or ["no nvidia.com/gpu.deploy.* labels"]
        out.append(sop("node_without_operands", node=r.node, ns=namespace, why=why, evidence=ev))
    return out
