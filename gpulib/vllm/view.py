"""Charts and text of the vllm_deploy runbook (no decisions here: the plan is :mod:`gpulib.vllm.sizing`, the manifests
:mod:`gpulib.vllm.manifest`, the live verdict :mod:`gpulib.vllm.live`). Axes carry their units."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import yaml

__all__ = ["memory_chart", "waiting_chart", "manifests_text", "show_sizing", "show_manifests", "show_live"]


def manifests_text(validated: list[str], objs: list[dict[str, Any]], adapter_rules: str, tgi_args: list[str]) -> str:
    """What the Manifests step prints: one validation line per object, the objects as a YAML stream (in the order
    their keys were built), the Prometheus Adapter rules and the TGI command line."""
    return "\n".join(
        validated
        + [
            yaml.safe_dump_all(objs, sort_keys=False),
            "# Prometheus Adapter rules for the HPA metric\n" + adapter_rules,
            "# TGI equivalent:\ntext-generation-launcher " + " ".join(tgi_args),
        ]
    )


def memory_chart(p, device: str):
    """Stacked bar of one GPU's memory under plan ``p`` (:func:`gpulib.vllm.sizing.plan`): weights, activations,
    non-torch memory, KV cache and what ``--gpu-memory-utilization`` leaves unrequested (GiB)."""
    b = p.budget
    parts = {
        "weights": b.weights_gib,
        "activations": b.activation_gib,
        "non-torch": b.non_torch_gib,
        "KV cache": max(b.kv_gib, 0),
        "not requested": b.total_gib - b.requested_gib,
    }
    fig = go.Figure([go.Bar(name=k, x=[f"TP={b.tp} x {device}"], y=[v]) for k, v in parts.items()])
    fig.update_layout(
        title=f"{p.model.name}: memory per GPU",
        barmode="stack",
        xaxis_title="configuration",
        yaxis_title="memory per GPU (GiB)",
    )
    return fig


def waiting_chart(series: pd.DataFrame, workload: str):
    """Waiting requests per pod over time (:func:`gpulib.vllm.live.waiting_requests`)."""
    fig = px.line(series, x="timestamp", y="value", color="pod", title=f"{workload}: waiting requests")
    fig.update_layout(xaxis_title="time (UTC)", yaxis_title="waiting requests (count)")
    return fig


# ------------------------------------------------------------------------------------ the runbook's sections
def show_sizing(c, ui) -> None:
    ui.display(c.p.arithmetic())
    ui.show(memory_chart(c.p, c.device))


def show_manifests(c, ui) -> None:
    ui.print(manifests_text(c.validated, c.manifest_objs, c.adapter_rules, c.tgi_args))


def show_live(c, ui) -> None:
    ui.display(c.live.metrics)
    ui.show(waiting_chart(c.waiting, c.deployment))
