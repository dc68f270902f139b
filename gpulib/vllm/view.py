"""Charts of the vllm_deploy runbook (no decisions here: the plan and the live verdict are in
:mod:`gpulib.vllm.deploy`). Axes carry their units."""
from __future__ import annotations

import pandas as pd

__all__ = ["memory_chart", "waiting_chart"]


def memory_chart(p, device: str):
    """Stacked bar of one GPU's memory under plan ``p`` (:func:`gpulib.vllm.deploy.plan`): weights, activations,
    non-torch memory, KV cache and what ``--gpu-memory-utilization`` leaves unrequested (GiB)."""
    import plotly.graph_objects as go

    b = p.budget
    parts = {"weights": b.weights_gib, "activations": b.activation_gib, "non-torch": b.non_torch_gib,
             "KV cache": max(b.kv_gib, 0), "not requested": b.total_gib - b.requested_gib}
    fig = go.Figure([go.Bar(name=k, x=[f"TP={b.tp} x {device}"], y=[v]) for k, v in parts.items()])
    fig.update_layout(title=f"{p.model.name}: memory per GPU", barmode="stack", xaxis_title="configuration",
                      yaxis_title="memory per GPU (GiB)")
    return fig


def waiting_chart(series: pd.DataFrame, workload: str):
    """Waiting requests per pod over time (:func:`gpulib.vllm.deploy.waiting_requests`)."""
    import plotly.express as px

    fig = px.line(series, x="timestamp", y="value", color="pod", title=f"{workload}: waiting requests")
    fig.update_layout(xaxis_title="time (UTC)", yaxis_title="waiting requests (count)")
    return fig
