"""The tables and charts of ``runbooks/nccl_check.ipynb``: the verdict per collective, busbw against message size
with the expected band, the ``nvidia-smi topo -m`` heatmap, a node's NVLink traffic from DCGM and busbw over time
from the results history. No decision is made here: the verdicts are :mod:`gpulib.nccl.bands`, the findings
:func:`gpulib.nccl.steps.findings`.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpulib.core.errors import InvalidParameter
from gpulib.nccl.bands import Verdict
from gpulib.nccl.findings import _fmt_bytes
from gpulib.nccl.history import group_label
from gpulib.nccl.results import NcclTestResult
from gpulib.nccl.steps import NVLINK_FIELD
from gpulib.nvidia.topology import Topology


def verdict_table(vs: list[Verdict]) -> pd.DataFrame:
    rows = [
        {
            "collective": v.collective,
            "status": v.status,
            "best busbw (GB/s)": v.measured_busbw,
            "at size": _fmt_bytes(v.size_bytes) if v.size_bytes else "",
            "expected (GB/s)": f"{v.band.low:g}-{v.band.high:g}" if v.band else "no band",
            "link peak (GB/s)": v.band.link_peak if v.band else None,
            "basis": v.band.basis if v.band else "",
        }
        for v in vs
    ]
    return pd.DataFrame(rows)


def _size_ticks(sizes: pd.Series) -> tuple[list[float], list[str]]:
    lo, hi = int(math.log2(max(sizes.min(), 1))), int(math.ceil(math.log2(max(sizes.max(), 1))))
    vals = [2.0**k for k in range(lo, hi + 1, 2)]
    return vals, [_fmt_bytes(int(v)) for v in vals]


def busbw_chart(result: NcclTestResult, verdict: Verdict | None = None):
    """busbw (GB/s) vs message size on a log2 axis, out-of-place and in-place, with the expected band."""
    t = result.table
    fig = go.Figure()
    for side, name, dash in (("oop", "out-of-place", "solid"), ("ip", "in-place", "dot")):
        fig.add_trace(
            go.Scatter(x=t["size_bytes"], y=t[f"{side}_busbw"], mode="lines+markers", name=name, line={"dash": dash})
        )
    band = verdict.band if verdict else None
    if band is not None:
        fig.add_hrect(
            y0=band.low,
            y1=max(band.high, band.low + 0.5),
            fillcolor="#1b7f3b",
            opacity=0.18,
            line_width=0,
            annotation_text=f"expected {band.low:g}-{band.high:g} GB/s",
            annotation_position="top left",
        )
        if band.link_peak:
            fig.add_hline(
                y=band.link_peak,
                line_dash="dash",
                line_color="#555",
                annotation_text=f"link peak {band.link_peak:g} GB/s",
            )
    vals, text = _size_ticks(t["size_bytes"]) if len(t) else ([], [])
    status = f" - {verdict.status}" if verdict else ""
    fig.update_xaxes(type="log", tickvals=vals, ticktext=text, title_text="message size (bytes, log2 scale)")
    fig.update_yaxes(title_text="bus bandwidth (GB/s)", rangemode="tozero")
    fig.update_layout(
        title=f"{result.collective or 'collective'}: busbw vs message size ({result.nranks or '?'} ranks){status}",
        height=420,
    )
    return fig


def topology_chart(topo: Topology):
    """Device x device heatmap of ``nvidia-smi topo -m`` link codes (NV# = number of bonded NVLinks)."""
    order = {"X": np.nan, "SYS": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
    links = topo.links
    z = [
        [(float(c[2:]) + 4 if re.fullmatch(r"NV\d+", str(c)) else order.get(str(c), np.nan)) for c in row]
        for row in links.to_numpy()
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(links.columns),
            y=list(links.index),
            text=links.to_numpy(),
            texttemplate="%{text}",
            colorscale="Blues",
            showscale=False,
        )
    )
    fig.update_layout(
        title=f"nvidia-smi topo -m ({topo.interconnect}; min NVLinks per GPU pair {topo.min_nvlinks})",
        xaxis_title="device",
        yaxis_title="device",
        height=max(300, 140 + 45 * len(links)),
        yaxis={"autorange": "reversed"},
    )
    return fig


def nvlink_chart(rates: pd.DataFrame, node: str, window: str):
    """NVLink bandwidth per GPU (GB/s) over the window; a sentence (str) when no GPU moved any traffic (a flat
    line at 0 says less than the sentence); None without samples."""
    if rates is None or rates.empty:
        return None
    if (rates["gbs"] == 0).all():
        return (
            f"No NVLink traffic on {node} over the last {window}: {NVLINK_FIELD} was 0 on every GPU "
            f"({', '.join(sorted(rates['gpu'].unique(), key=lambda g: (len(g), g)))})."
        )
    df = rates.assign(gpu="GPU " + rates["gpu"])
    fig = px.line(
        df,
        x="timestamp",
        y="gbs",
        color="gpu",
        title=f"NVLink bandwidth per GPU on {node} (last {window})",
        labels={"timestamp": "time (UTC)", "gbs": "NVLink bandwidth (GB/s)", "gpu": "GPU"},
    )
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(height=380)
    return fig


def history_chart(df: pd.DataFrame, collectives: Iterable[str] | None = None):
    """busbw over time, one panel per collective, one line per node group; runs that were not healthy are
    marked with a red x; the latest band of each panel is shaded."""
    if df is None or df.empty:
        raise InvalidParameter("the history is empty: nothing to chart")
    colls = list(collectives) if collectives is not None else list(dict.fromkeys(df["collective"]))
    d = df[df["collective"].isin(colls)].assign(group=group_label(df)).sort_values("timestamp")
    fig = make_subplots(rows=len(colls), cols=1, shared_xaxes=True, subplot_titles=colls, vertical_spacing=0.08)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]
    groups = list(dict.fromkeys(d["group"]))
    for i, coll in enumerate(colls, start=1):
        dc = d[d["collective"] == coll]
        for j, g in enumerate(groups):
            dg = dc[dc["group"] == g]
            if dg.empty:
                continue
            fig.add_trace(
                go.Scatter(
                    x=dg["timestamp"],
                    y=dg["busbw_gbs"],
                    mode="lines+markers",
                    name=g,
                    legendgroup=g,
                    showlegend=i == 1,
                    line={"color": palette[j % len(palette)]},
                    customdata=dg[["status", "origin"]].to_numpy(),
                    hovertemplate="%{x}<br>%{y:.1f} GB/s<br>%{customdata[0]}<br>%{customdata[1]}"
                    "<extra>" + g + "</extra>",
                ),
                row=i,
                col=1,
            )
        bad = dc[dc["status"] != "healthy"]
        if len(bad):
            fig.add_trace(
                go.Scatter(
                    x=bad["timestamp"],
                    y=bad["busbw_gbs"],
                    mode="markers",
                    name="not healthy",
                    legendgroup="bad",
                    showlegend=i == 1,
                    marker={"symbol": "x", "size": 11, "color": "#c0392b"},
                    customdata=bad[["status"]].to_numpy(),
                    hovertemplate="%{x}<br>%{y:.1f} GB/s<br>%{customdata[0]}<extra></extra>",
                ),
                row=i,
                col=1,
            )
        banded = dc.dropna(subset=["band_low_gbs"])
        if len(banded):
            last = banded.iloc[-1]
            fig.add_hrect(
                y0=last["band_low_gbs"],
                y1=max(last["band_high_gbs"], last["band_low_gbs"] + 0.5),
                fillcolor="#1b7f3b",
                opacity=0.15,
                line_width=0,
                row=i,
                col=1,
            )
        fig.update_yaxes(title_text="busbw (GB/s)", rangemode="tozero", row=i, col=1)
    fig.update_xaxes(title_text="run time (UTC)", row=len(colls), col=1)
    fig.update_layout(
        title="NCCL bus bandwidth over time<br><sup>best busbw at >= 1 GiB per run; shaded: the expected band</sup>",
        height=230 * len(colls) + 120,
    )
    return fig


# ------------------------------------------------------------------------------------ the runbook's sections
def show_topology(c, ui) -> None:
    topo = c.topo
    ui.print(f"from {c.where}: {len(topo.gpus)} GPU(s), {len(topo.nics)} NIC(s), interconnect {topo.interconnect}")
    if topo.gpus:
        ui.show(topology_chart(topo))
        ui.display(topo.affinity)


def show_results(c, ui) -> None:
    """The runs read and their verdicts (none when judging them failed: the step's box above says why)."""
    if c.tests_text is None:
        return
    ui.print(f"from {c.where}: " + ("; ".join(r.summary() for r in c.results) or "no nccl-tests table found"))
    if not c.nccl_tests_file:
        ui.note(
            "Default input: the project's own 2×H200 capture (host <code>vm</code>), not a demo-fleet node.", "info"
        )
    if c.verdicts:
        ui.display(verdict_table(c.verdicts))
    for r, v in zip(c.results, c.verdicts):
        if len(r.table):
            ui.show(busbw_chart(r, v))


def show_history(c, ui) -> None:
    if c.history is None:
        ui.note(c.where, "info")
    else:
        ui.print(f"{len(c.history)} rows from {c.where}")
        ui.show(history_chart(c.history))


def show_log(c, ui) -> None:
    if c.log_text is None or "NCCL " not in c.log_text:
        ui.note(
            "No NCCL_DEBUG=INFO lines: rerun with <code>NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV</code>.",
            "info",
        )
    else:
        ui.print(f"log from {c.where}")
    fe = getattr(c, "first_errors", None)
    if fe is not None and len(fe):
        ui.print("First error of each host / process / local GPU (a rank's own failure before its symptoms):")
        ui.display(fe.drop(columns=["file"]).head(50))


def show_environment(c, ui) -> None:
    ui.print(f"NCCL_* set by environment: {c.log_env or 'none reported'}")
    if not c.env_findings:
        ui.note("No NCCL variable problem found.", "ok")


def show_nvlink(c, ui) -> None:
    ui.show(nvlink_chart(c.rates, c.node, c.window))


def show_probe(c, ui) -> None:
    ui.print(c.image_note)
    ui.print("\n".join(c.checked))
    if not c.pod_findings:
        ui.note("The probe pods pass the NCCL pod checks (/dev/shm, RDMA, IPC_LOCK).", "ok")
    ui.print(c.manifest_yaml)
    ui.print("# dry run: to run it, save the YAML above as nccl-probe.yaml, then")
    ui.print("\n".join(c.apply_commands))
