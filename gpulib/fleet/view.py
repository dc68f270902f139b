"""The charts of ``runbooks/fleet_overview.ipynb``: GPU allocation per node, activity per node over time, and
temperature against power per GPU. No decision is made here (the rules are :mod:`gpulib.fleet.health`)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from gpulib.core.knowledge import threshold
from gpulib.fleet.health import GPU_KEYS, HealthFrames


def allocation_chart(inv: pd.DataFrame):
    fig = go.Figure(
        [
            go.Bar(name="requested", x=inv["node"], y=inv["requested"], marker_color="#1f5fa8"),
            go.Bar(name="free", x=inv["node"], y=inv["free"], marker_color="#b8c7dc"),
        ]
    )
    fig.update_layout(
        barmode="stack",
        title="GPU allocation per node (GPUs or MIG instances)",
        xaxis_title="node",
        yaxis_title="devices (count)",
        height=360,
    )
    return fig


def heatmap(matrix: pd.DataFrame, metric: str):
    fig = go.Figure(
        go.Heatmap(
            z=matrix.to_numpy(),
            x=list(matrix.columns),
            y=list(matrix.index),
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": "activity (%)"},
        )
    )
    fig.update_layout(
        title=f"GPU activity per node ({metric.replace('DCGM_FI_', '')}, mean per 15 min)",
        xaxis_title="time (UTC)",
        yaxis_title="node",
        height=60 + 32 * max(len(matrix), 4),
    )
    return fig


def temp_power_chart(hf: HealthFrames):
    t, p = hf.get("DCGM_FI_DEV_GPU_TEMP"), hf.get("DCGM_FI_DEV_POWER_USAGE")
    if t is None or p is None:
        return None
    df = (
        t[GPU_KEYS + ["value"]]
        .rename(columns={"value": "temp_max"})
        .merge(p[GPU_KEYS + ["value"]].rename(columns={"value": "power_avg"}), on=GPU_KEYS)
    )
    fig = px.scatter(
        df,
        x="power_avg",
        y="temp_max",
        color="node",
        hover_data=["gpu"],
        title=f"Temperature vs power per GPU (last {hf.window})",
        labels={"power_avg": "mean power draw (W)", "temp_max": "max temperature (°C)"},
    )
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    # labels on opposite sides (critical above its line at the left, warn below its line at the right): two
    # thresholds a degree apart both read
    fig.add_hline(
        y=crit,
        line_dash="dash",
        line_color="#b00020",
        annotation_text=f"critical {crit:.0f} °C",
        annotation_position="top left",
    )
    fig.add_hline(
        y=warn,
        line_dash="dot",
        line_color="#b36b00",
        annotation_text=f"warn {warn:.0f} °C",
        annotation_position="bottom right",
    )
    fig.update_layout(height=380)
    return fig


# ---------------------------------------------------------- what each step of the runbook shows (gpulib.fleet.steps)
def show_preflight(c, ui) -> None:
    caps = c.caps
    ui.display(c.caps_table)
    ui.print(
        f"activity metric: {caps.activity_metric} · host label: {caps.host_label} · pod label: {caps.pod_label} "
        f"({caps.pod_coverage:.0%} of series) · MIG: {caps.mig_present}"
    )
    if caps.allocation:  # device plugin / DRA / both / none per GPU node (gpulib.kube.dra.allocation_models)
        by: dict[str, list[str]] = {}
        for node, model in sorted(caps.allocation.items()):
            by.setdefault(model, []).append(node)
        ui.print("GPU allocation: " + " · ".join(f"{m}: {', '.join(ns)}" for m, ns in sorted(by.items())))


def show_inventory(c, ui) -> None:
    ui.display(c.inv)
    ui.show(allocation_chart(c.inv))


def show_activity(c, ui) -> None:
    ui.show(heatmap(c.matrix, c.metric))


def show_health(c, ui) -> None:
    hf = c.hf
    if hf.missing:
        ui.note("Not exported, so not checked: " + ", ".join(hf.missing), "warning")
    ui.show(temp_power_chart(hf))
