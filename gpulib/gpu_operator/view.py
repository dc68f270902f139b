"""Tables, text and charts of the operator_install runbook (no decisions here: the plan, the pre-flight and the
verification are :mod:`gpulib.gpu_operator.plan`, :mod:`gpulib.gpu_operator.pre_install` and :mod:`gpulib.gpu_operator.post_install`). Axes carry their units."""
from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["plan_text", "manifest_text", "daemonset_table", "daemonset_chart"]

_DS_COLUMNS = ["daemonset", "desired", "current", "ready", "unavailable"]


def manifest_text(obj: dict[str, Any] | list[dict[str, Any]]) -> str:
    """One Kubernetes object (or several, as a multi-document stream) as YAML in the order its keys were built."""
    import yaml

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
    import plotly.graph_objects as go

    fig = go.Figure([go.Bar(name="desired", x=ds["daemonset"], y=ds["desired"]),
                     go.Bar(name="ready", x=ds["daemonset"], y=ds["ready"])])
    fig.update_layout(title="Operand DaemonSets: desired vs ready pods", barmode="group",
                      xaxis_title="DaemonSet", yaxis_title="pods (count)")
    return fig
