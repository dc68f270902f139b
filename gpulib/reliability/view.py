"""Tables and charts of the reliability domain: the node timeline (every signal of one node on one time axis,
exporter gaps drawn as grey "no data" bands, never as zero) and the report's charts. No decision is taken here."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import plotly.graph_objects as go

from gpulib.core.knowledge import settings, threshold
from gpulib.xid import thermal_chart

HOVER_RATE = "%{x}: %{y:.1f} (%{customdata[0]} in %{customdata[1]} GPU-days)<extra></extra>"
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
                x=grp["time"],
                y=grp["lane"],
                mode="markers",
                name=sig.replace("_", " "),
                marker={"size": 10, "symbol": "diamond" if sig == "xid" else "circle"},
                text=[f"{t} GPU {g} {d}".replace("GPU  ", "") for t, g, d in zip(label, grp["gpu"], grp["detail"])],
                hovertemplate="%{x|%Y-%m-%d %H:%M} %{text}<extra></extra>",
            )
        )
    for _, r in tl[tl["end"].notna() & (tl["signal"] != "no_data")].iterrows():
        fig.add_shape(
            type="rect",
            x0=r["time"],
            x1=min(r["end"], end),
            y0=r["lane"],
            y1=r["lane"],
            xref="x",
            yref="y",
            line={"color": INTERVAL_COLOUR.get(r["signal"], "#888"), "width": 14},
        )
    for _, r in tl[tl["signal"] == "no_data"].iterrows():
        a, b = max(r["time"], start), min(r["end"] if pd.notna(r["end"]) else end, end)
        fig.add_vrect(x0=a, x1=b, fillcolor=GAP_COLOUR, line_width=0, layer="below")
        fig.add_annotation(
            text="no data",
            x=a + (b - a) / 2,
            xref="x",
            y=1,
            yref="y domain",
            yanchor="bottom",
            showarrow=False,
            font={"color": "#555"},
        )
    if not lanes:
        fig.add_annotation(
            text=f"no event on {node} in the last {window}",
            x=0.5,
            y=0.5,
            xref="x domain",
            yref="y domain",
            showarrow=False,
        )
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


def rates_chart(rates: pd.DataFrame, window: str):
    """Incidents per 1,000 GPU-days per pool and driver, one bar per incident class; a pool/driver without
    observed GPU-days has no bar and is named as no data."""
    fig = go.Figure()
    df = rates.assign(group=rates["pool"] + " / " + rates["driver"])
    for cls, grp in df.groupby("class"):
        fig.add_trace(
            go.Bar(
                x=grp["group"],
                y=grp["per 1,000 GPU-days"],
                name=cls,
                customdata=grp[["incidents", "GPU-days"]],
                hovertemplate=HOVER_RATE,
            )
        )
    nodata = sorted(set(df.loc[df["GPU-days"] <= 0, "group"]))
    if nodata:
        fig.add_annotation(
            text="no data: " + ", ".join(nodata),
            x=0,
            y=1,
            xref="x domain",
            yref="y domain",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
        )
    fig.update_layout(title=f"Incidents per 1,000 GPU-days, last {window}", barmode="group", height=500)
    fig.update_xaxes(title_text="pool / driver (instance type)")
    fig.update_yaxes(title_text="incidents (per 1,000 GPU-days)")
    return fig


def changes_chart(table: pd.DataFrame):
    """Rate ratio after/before each change, per incident class, with its confidence interval (log axis); an
    interval open at the top (no incident before) is drawn to the axis edge with an arrow."""
    if table.empty:
        return "No driver or GPU Operator change in the window."
    df = table.assign(
        label=table["change"].str.replace(" change", "") + " · " + table["scope"] + " · " + table["class"]
    )
    finite = df[["CI low", "CI high", "rate ratio"]].replace([float("inf")], float("nan")).stack()
    top = max(float(finite.max()) * 2 if len(finite) else 10.0, 10.0)
    ratio = df["rate ratio"].where(df["rate ratio"] != float("inf"), top)
    high = df["CI high"].where(df["CI high"] != float("inf"), top)
    low = df["CI low"].clip(lower=1e-3)
    colours = ["#b00020" if r == "yes" else "#1f5fa8" for r in df["regression"]]
    fig = go.Figure(
        go.Scatter(
            x=ratio,
            y=df["label"],
            mode="markers",
            marker={"color": colours, "size": 10},
            error_x={"type": "data", "symmetric": False, "array": high - ratio, "arrayminus": ratio - low},
            name="rate ratio",
            text=[f"p = {p:.2g}" for p in df["p (one-sided)"]],
            hovertemplate="%{y}: %{x:.2f} (%{text})<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot", line_color="#555")
    fig.update_layout(
        title="Before/after each change: rate ratio and 95% CI",
        height=max(450, 160 + 40 * len(df)),
        showlegend=False,
        margin={"l": 380},
    )
    fig.update_xaxes(type="log", title_text="rate ratio after/before (x)", range=[-3, math.log10(top) + 0.1])
    fig.update_yaxes(title_text="change (scope · class)", type="category")
    return fig


def out_of_service_chart(oos: pd.DataFrame, pools: list[str], window: str):
    """GPU-hours cordoned per pool over the window (every pool drawn, 0 where nothing was cordoned)."""
    per = oos.groupby("pool")["GPU-hours"].sum().reindex(pools, fill_value=0.0)
    fig = go.Figure(go.Bar(x=per.index, y=per.values, name="cordoned"))
    fig.update_layout(title=f"Time out of service (cordon to uncordon), last {window}", height=450)
    fig.update_xaxes(title_text="pool (instance type)")
    fig.update_yaxes(title_text="out of service (GPU-hours)")
    return fig


def score_html(score, window: str) -> str:
    return (
        f"<div style='font-size:1.4em'><b>Fleet health score {score.score:.0f}/100</b> over the last {window}</div>"
        f"<div>hardware incidents {score.hw_rate:.2f} per 1,000 GPU-days · in service {score.availability:.1%} of "
        f"GPU-hours · GPUs that are not repeat offenders {score.offender_term:.1%}</div>"
    )


def method_html(cfg) -> str:
    """The Method section: exposure, incidents, the test, the score's formula and the published figure it uses."""
    return f"""
<ul>
<li><b>Exposure</b>: observed GPU-days, a node's GPUs times the time its exporter sent data; exporter gaps are taken
out, so a gap is no data, never zero incidents.</li>
<li><b>Incident</b>: an XID (class: from NVIDIA's immediate action for the code in its Xid catalog,
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, as this project maps the actions in
gpulib/data/xid/xid_action_classes.csv), an uncorrectable ECC error or a row-remap failure of one GPU; events of
one GPU within {cfg.text("incident_merge")} are one incident. Hardware incidents are all but the XIDs whose immediate
action is IGNORE, RESTART_APP or CHECK_UVM (and the sympathetic XID 45).</li>
<li><b>Before/after a change</b>: on each node the before side is as long as the after side and both stop at the
node's other changes. Test: exact conditional Poisson rate-ratio test (Przyborowski &amp; Wilenski 1940; statsmodels
test_poisson_2indep method exact-cond, https://www.statsmodels.org/stable/generated/statsmodels.stats.rates.test_poisson_2indep.html),
one-sided; interval: the one-sided Clopper-Pearson bound on the conditional binomial at 1 minus the test's
(corrected) alpha, as R's poisson.test gives it, so a regression's interval always lies above 1. A regression is a
one-sided p below {cfg["rate_alpha"]} divided by the number of classes tested for that change (Bonferroni) with at
least {cfg["min_after_incidents"]} incidents after.</li>
<li><b>Fleet health score</b> = 100 x ({cfg["score_weight_incidents"]} x R / (R + r)
+ {cfg["score_weight_availability"]} x A + {cfg["score_weight_offenders"]} x (1 - O / G)), with r the hardware
incidents per 1,000 GPU-days, A the share of GPU-hours not cordoned, O the repeat-offender GPUs of G GPUs, and
R = {cfg["score_reference_rate"]} per 1,000 GPU-days:
the Llama 3 paper's 419 unexpected interruptions in 54 days on 16,384 H100 GPUs (Table 5,
https://arxiv.org/abs/2407.21783), so a fleet at that published rate scores half of the incident term. Their figure
counts job interruptions of every cause (GPU 30.1%, HBM3 17.2%, software, network, host); ours counts GPU-level
incidents, so it is a reference, not a like-for-like comparison.</li>
</ul>"""


# ------------------------------------------- what each step of node_health shows (gpulib.reliability.steps)
def show_history(c, ui) -> None:
    ui.display(c.signals)


def show_timeline(c, ui) -> None:
    ui.show(timeline_chart(c.events, c.node, c.inp.start, c.inp.end, c.window))


def thermal_note(thermal: dict) -> tuple[str, str]:
    """The note under the node's thermal chart: the GPUs whose temperature reached the warn line
    (thresholds.csv ``gpu_temp_warn_c``) or the critical one (``gpu_temp_crit_c``, HW slowdown), hottest first;
    ``(level, html)``."""
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    temp = thermal.get("DCGM_FI_DEV_GPU_TEMP")
    if temp is None or not len(temp):
        return "info", "No GPU temperature series for this node in the window: nothing to compare with the thresholds."
    peak = temp.groupby("gpu")["value"].max().sort_values(ascending=False)
    hot = peak[peak >= warn]
    if not len(hot):
        return "ok", f"Every GPU stayed below the warn temperature ({warn:.0f} °C)."
    text = ", ".join(f"GPU {g} reached {v:.0f} °C" for g, v in hot.items())
    return (
        "error" if hot.iloc[0] >= crit else "warning",
        f"{text} (warn {warn:.0f} °C, HW slowdown {crit:.0f} °C): fleet_overview reports it as a thermal finding; "
        "<code>gpuops run xid_ecc_triage</code> on the GPU reads its clocks and power beside it.",
    )


def show_thermal(c, ui) -> None:
    """The node's temperature and power as xid_ecc_triage draws them, then :func:`thermal_note`."""
    if c.thermal:
        ui.show(thermal_chart(SimpleNamespace(series=c.thermal, gpu=None, smi=None, node=c.node, window=c.window)))
    level, text = thermal_note(c.thermal)
    ui.note(text, level)


def show_verdict(c, ui) -> None:
    ui.display(verdict_table(c.verdict))


# ------------------------- what each step of gpu_reliability_report shows (gpulib.reliability.report_steps)
def _html(text: str):
    """``text`` as the notebook displays HTML (IPython is there in a kernel only)."""
    from IPython.display import HTML

    return HTML(text)


def show_score(c, ui) -> None:
    ui.display(_html(score_html(c.rep.score, c.window)))


def show_rates(c, ui) -> None:
    ui.show(rates_chart(c.rep.rates, c.window))
    ui.display(c.rep.rates)


def show_between(c, ui) -> None:
    ui.display(c.rep.between)


def show_out_of_service(c, ui) -> None:
    rep = c.rep
    ui.show(out_of_service_chart(rep.out_of_service, sorted(rep.fh.nodes["pool"].unique()), c.window))
    ui.display(rep.out_of_service)


def show_offenders(c, ui) -> None:
    ui.display(c.rep.offenders)


def show_alerts(c, ui) -> None:
    ui.display(c.rep.alerts)


def show_changes(c, ui) -> None:
    ui.show(changes_chart(c.table))
    ui.display(c.table)


def show_method(c, ui) -> None:
    ui.display(_html(method_html(settings("reliability_settings"))))
