"""GPU Operator results -> findings: one Finding per failed check with its SOP from
``gpulib/data/gpu_operator/operator_sop.yaml`` (:func:`sop`: severity, title, SOP step, commands and escalation per
check id), and the pre-flight and verification findings whose text is a row of
``gpulib/data/gpu_operator/gpu_operator_sop.csv`` (:func:`gpulib.core.sop.sop`, command values shell-quoted).

Two tables: ``operator_sop.yaml`` holds the checks whose severity and title are data too (every check id a failed
post-install check reports), ``gpu_operator_sop.csv`` the SOP rows of findings whose severity and title the code
decides (counts of nodes, the namespace's level), in the one shape every domain's ``<domain>_sop.csv`` has.
"""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

import gpulib.core.sop as core_sop
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.core.nodecmd import expand, strip_route
from gpulib.gpu_operator.knowledge import setting, sop_table

__all__ = ["sop", "nfd_labels_missing", "mixed_runtimes", "untolerated_taints", "pod_security", "verified"]

#: the SOP rows of findings the code titles (gpulib/data/gpu_operator/gpu_operator_sop.csv)
_TABLE = "gpu_operator_sop"


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def sop(
    check: str, *, evidence: Iterable[str] = (), node: str | None = None, confidence: float = 1.0, **fields: Any
) -> Finding:
    """The Finding for a failed check, its texts filled from ``fields`` (unknown placeholders stay ``<x>``)."""
    table = sop_table()
    if check not in table:
        raise InvalidParameter(f"no SOP for check {check!r}; known: {', '.join(table)}")
    e = table[check]
    f = _Blank({"node": node or "", **fields})
    return Finding(
        Severity(e["severity"]),
        e["title"].format_map(f),
        sop_step=e["sop_step"].format_map(f),
        commands=[
            expand(c.format_map(f), node) if node else strip_route(c.format_map(f)) for c in e.get("commands") or []
        ],
        evidence=list(evidence),
        escalation=(e.get("escalation") or "").format_map(f),
        category="gpu-operator",
        node=node,
        confidence=confidence,
        runbook="operator_install",
        data={"check": check, **_jsonable(fields)},
    )


def _jsonable(d: dict) -> dict:
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in d.items()}


# --------------------------------------------------------------------------------------------
# pre-flight
# --------------------------------------------------------------------------------------------
def nfd_labels_missing(no_os: pd.DataFrame) -> Finding:
    """WARNING: GPU nodes of :func:`gpulib.gpu_operator.pre_install.node_table` without NFD kernel/OS labels."""
    t = core_sop.sop(_TABLE, "nfd_labels_missing", node=no_os["node"].iloc[0])
    return Finding(
        Severity.WARNING,
        f"{len(no_os)} GPU node(s) lack NFD kernel/OS labels",
        category="gpu-operator",
        summary=t.summary,
        evidence=[
            f"{r.node}: kernel {r.kernel or '?'}, {r.os_image or '?'} (from nodeInfo)" for r in no_os.itertuples()
        ][:10],
        sop_step=t.sop_step,
        commands=t.commands,
    )


def mixed_runtimes(gpu: pd.DataFrame, runtimes: list[str]) -> Finding:
    """WARNING: the GPU nodes (node table rows) run more than one container runtime."""
    t = core_sop.sop(_TABLE, "mixed_runtimes")
    return Finding(
        Severity.WARNING,
        f"GPU nodes use different container runtimes: {', '.join(runtimes)}",
        category="gpu-operator",
        sop_step=t.sop_step,
        evidence=[f"{r.node}: {r.runtime}" for r in gpu.itertuples()][:10],
    )


def untolerated_taints(untolerated: list[tuple[str, dict]], ns: str) -> Finding:
    """WARNING: (node, taint) pairs the operand tolerations do not cover, with the Helm change that adds them."""
    keys = sorted({t["key"] for _, t in untolerated})
    tol = ", ".join(f"{{key: {k}, operator: Exists}}" for k in keys)
    t = core_sop.sop(
        _TABLE,
        "untolerated_taints",
        tolerations=tol,
        release=setting("release"),
        chart=setting("chart"),
        ns=ns,
        taint_key=keys[0],
    )
    return Finding(
        Severity.WARNING,
        f"{len({n for n, _ in untolerated})} GPU node(s) carry taints the operands do not tolerate",
        category="gpu-operator",
        summary=t.summary,
        evidence=[f"{n}: {t['key']}={t['value']}:{t['effect']}" for n, t in untolerated][:10],
        sop_step=t.sop_step,
        commands=t.commands,
    )


def pod_security(labels: dict | None, ns: str) -> list[Finding]:
    """The operator namespace's PodSecurity level: missing namespace (INFO), a level other than privileged
    (CRITICAL: operand pods are rejected), no enforce label (INFO), or nothing to say."""
    key, need = setting("pod_security_label"), setting("pod_security_required")
    if labels is None:
        t = core_sop.sop(_TABLE, "namespace_missing", ns=ns, label=key, level=need)
        return [
            Finding(
                Severity.INFO,
                f"Namespace {ns} not found (or not readable): create it privileged",
                category="gpu-operator",
                sop_step=t.sop_step,
                commands=t.commands,
            )
        ]
    level = labels.get(key, "")
    if level and level != need:
        t = core_sop.sop(_TABLE, "namespace_not_privileged", ns=ns, label=key, level=need)
        return [
            Finding(
                Severity.CRITICAL,
                f"Namespace {ns} enforces PodSecurity '{level}': operand pods will be rejected",
                category="gpu-operator",
                evidence=[f"{key}={level}"],
                sop_step=t.sop_step,
                commands=t.commands,
                data={"check": "pod_security"},
            )
        ]
    if not level:
        t = core_sop.sop(_TABLE, "namespace_unlabelled", ns=ns, label=key, level=need)
        return [
            Finding(
                Severity.INFO,
                f"Namespace {ns} has no PodSecurity enforce label",
                category="gpu-operator",
                sop_step=t.sop_step,
                commands=t.commands,
            )
        ]
    return []


# --------------------------------------------------------------------------------------------
# post-install
# --------------------------------------------------------------------------------------------
def verified(gpu_nodes: int, daemonsets: int) -> Finding:
    """OK: every post-install check passed on ``gpu_nodes`` GPU nodes with ``daemonsets`` operand DaemonSets ready."""
    t = core_sop.sop(_TABLE, "verified")
    return Finding(
        Severity.OK,
        "GPU Operator verified",
        category="gpu-operator",
        summary=t.summary,
        evidence=[f"{gpu_nodes} GPU node(s)", f"{daemonsets} operand DaemonSet(s) ready"],
        sop_step=t.sop_step,
        commands=t.commands,
    )
