"""Tables, text and charts of the operator_install runbook (no decisions here: the plan, the pre-flight and the
verification are :mod:`gpulib.gpu_operator.plan`, :mod:`gpulib.gpu_operator.pre_install` and
:mod:`gpulib.gpu_operator.post_install`, the findings of a run :func:`gpulib.gpu_operator.steps.findings`). Axes carry
their units."""

from __future__ import annotations

import html
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go
import yaml

from gpulib.core.findings import Finding, FindingList, Severity, sort_findings
from gpulib.core.redact import redact
from gpulib.gpu_operator.post_install import cuda_test_pod

__all__ = [
    "plan_text",
    "manifest_text",
    "daemonset_table",
    "daemonset_chart",
    "findings_block",
    "show_plan",
    "show_preflight",
    "show_scheduling",
    "show_daemonsets",
    "show_cuda_test_pod",
]

_DS_COLUMNS = ["daemonset", "desired", "current", "ready", "unavailable"]


def manifest_text(obj: dict[str, Any] | list[dict[str, Any]]) -> str:
    """One Kubernetes object (or several, as a multi-document stream) as YAML in the order its keys were built."""
    objs = obj if isinstance(obj, list) else [obj]
    return yaml.safe_dump_all(objs, sort_keys=False)


def plan_text(plan) -> str:
    """An :class:`~gpulib.gpu_operator.plan.InstallPlan` as the text an operator copies: the commands, the
    ``values.yaml`` and each extra object (e.g. the device-plugin sharing ConfigMap)."""
    parts = ["\n\n".join(plan.commands()), "\n# values.yaml\n" + plan.values_yaml()]
    parts += ["---\n" + manifest_text(obj) for obj in plan.objects]
    return "\n".join(parts)


def daemonset_table(ds: pd.DataFrame) -> pd.DataFrame:
    """The operand DaemonSets: desired, current, ready and unavailable pods."""
    return ds[[c for c in _DS_COLUMNS if c in ds.columns]]


def daemonset_chart(ds: pd.DataFrame):
    """Grouped bars of desired vs ready pods per operand DaemonSet; None when there is no DaemonSet."""
    if ds is None or not len(ds):
        return None
    fig = go.Figure(
        [
            go.Bar(name="desired", x=ds["daemonset"], y=ds["desired"]),
            go.Bar(name="ready", x=ds["daemonset"], y=ds["ready"]),
        ]
    )
    fig.update_layout(
        title="Operand DaemonSets: desired vs ready pods",
        barmode="group",
        xaxis_title="DaemonSet",
        yaxis_title="pods (count)",
    )
    return fig


def findings_block(findings: Iterable[Finding], *, empty: str):
    """A section's findings, most severe first, or (none) the note saying what was checked and found fine, in the
    look of :meth:`gpulib.runbook.Runbook.report`; the findings count once, in the run's closing step."""
    fs = list(findings)
    if fs:
        return FindingList(sort_findings(fs))
    from IPython.display import HTML

    return HTML(
        f"<div style='border-left:4px solid {Severity.OK.colour};padding:4px 10px'>{redact(html.escape(empty))}</div>"
    )


# ---------------------------------------------------- what each step of the runbook shows (gpulib.gpu_operator.steps)
def show_plan(c, ui) -> None:
    ui.print(plan_text(c.plan))
    for n in c.plan.notes:
        ui.note(n)


def show_preflight(c, ui) -> None:
    ui.display(c.preflight_table)


def show_scheduling(c, ui) -> None:
    ui.display(
        findings_block(
            c.scheduling_fs,
            empty="No scheduling problem: every GPU node is tainted, every GPU pod tolerates the taint, "
            "no pod without a GPU request runs on a GPU node, GPU requests equal limits.",
        )
    )


def show_daemonsets(c, ui) -> None:
    """The operand DaemonSets ahead of the Verification step (nothing without operator objects: that step says
    why)."""
    if not c.state:
        return
    ui.display(daemonset_table(c.state["daemonsets"]))
    ui.show(daemonset_chart(c.state["daemonsets"]))


def show_cuda_test_pod(c, ui) -> None:
    ui.print(manifest_text(cuda_test_pod()))
