"""Tables and charts of the reliability domain: the node timeline (every signal of one node on one time axis,
exporter gaps drawn as grey "no data" bands, never as zero) and the report's charts. No decision is taken here."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

GAP_COLOUR = "rgba(120,120,120,0.25)"
INTERVAL_COLOUR = {"cordon": "rgba(179,107,0,0.45)", "condition": "rgba(176,0,32,0.45)"}


def timeline_chart(tl: pd.DataFrame, node: str, start: pd.Timestamp, end: pd.Timestamp, window: str):
    """One row (lane) per signal group; point events as markers, cordons and conditions as bars from start to end,
    exporter gaps as grey bands over the whole height labelled "no data"."""
    fig = go.Figure()
    lanes = tl.drop_duplicates("lane").sort_values("lane_order")["lane"].tolist()
    lanes = [ln for ln in lanes if ln != "No data"]
    points = tl[tl["end"].isna() & (tl["signal"] != "no_data")]
    for sig, grp in points.groupby("signal", sort=False):
        label = [f"{s} {c}".strip() for s, c in zip(grp["signal"], grp["code"])]
        fig.add_trace(
            go.Scatter(
                x=grp["time"], y=grp["lane"], mode="markers", name=sig.replace("_", " "),
                marker={"size": 10, "symbol": "diamond" if sig == "xid" else "circle"},
                text=[f"{t} GPU {g} {d}".replace("GPU  ", "") for t, g, d in zip(label, grp["gpu"], grp["detail"])],
                hovertemplate="%{x|%Y-%m-%d %H:%M} %{text}<extra></extra>",
            )
        )  # fmt: skip
    for _, r in tl[tl["end"].notna() & (tl["signal"] != "no_data")].iterrows():
        fig.add_shape(type="rect", x0=r["time"], x1=min(r["end"], end), y0=r["lane"], y1=r["lane"], xref="x",
                      yref="y", line={"color": INTERVAL_COLOUR.get(r["signal"], "#888"), "width": 14})  # fmt: skip
    for _, r in tl[tl["signal"] == "no_data"].iterrows():
        a, b = max(r["time"], start), min(r["end"] if pd.notna(r["end"]) else end, end)
        fig.add_vrect(x0=a, x1=b, fillcolor=GAP_COLOUR, line_width=0, layer="below")
        fig.add_annotation(text="no data", x=a + (b - a) / 2, xref="x", y=1, yref="y domain", yanchor="bottom",
                           showarrow=False, font={"color": "#555"})  # fmt: skip
    if not lanes:
        fig.add_annotation(text=f"no event on {node} in the last {window}", x=0.5, y=0.5, xref="x domain",
                           yref="y domain", showarrow=False)  # fmt: skip
        fig.update_yaxes(showticklabels=False)
    fig.update_layout(
        title=f"{node}: every signal, last {window}",
        height=max(450, 200 + 40 * len(lanes)),
    )
    fig.update_xaxes(type="date", range=[start, end], title_text="time (UTC)")
    fig.update_yaxes(title_text="signal (lane)", categoryorder="array", categoryarray=lanes[::-1], type="category")
    return fig


def verdict_table(v) -> pd.DataFrame:
    """The rules that matched a node (a :class:`gpulib.reliability.verdict.NodeVerdict`), one row each."""
    rows = [{"rule": h.rule, "verdict": h.verdict, "GPU": h.gpu, "evidence": "; ".join(h.evidence[:3])} for h in v.hits]
    return pd.DataFrame(rows or [{"rule": "healthy", "verdict": "healthy", "GPU": "", "evidence": "no rule matched"}])
