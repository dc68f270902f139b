"""What the GPU utilization and cost report shows: KPI tiles, the savings plan and idle/zombie tables as plain HTML,
the node x time heatmap, the namespace bars and the savings waterfall as plotly figures, and the Method section.

No decisions here: the numbers come from :mod:`gpulib.cost.analysis` (the :class:`~gpulib.cost.model.CostReport`,
its summary and frames), :mod:`gpulib.cost.plan` (the actions) and :mod:`gpulib.cost.price_age` (which prices
are stale). Everything renders *plain HTML* (tiles, tables, inline styles only: they survive nbconvert and most
mail clients) or plotly figures with units, so the exported report reads without code.
"""

from __future__ import annotations

import functools
import html
import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from gpulib.core.money import money
from gpulib.core.timeutil import format_duration, parse_window
from gpulib.cost.model import ACTIONS, CostReport
from gpulib.cost.prices import report_policy
from gpulib.cost.recording import idle_definition
from gpulib.cost.totals import PATHS
from gpulib.cost.usage import FB_USED, GR_ENGINE_ACTIVE

__all__ = [
    "kpi_tiles_html",
    "actions_html",
    "top_actions_html",
    "headline_html",
    "idle_table_html",
    "heatmap_figure",
    "namespace_figure",
    "waterfall_figure",
    "method_html",
]


# ----------------------------------------------------------------------------------------------
# HTML pieces (inline styles only: they survive nbconvert and most mail clients)
# ----------------------------------------------------------------------------------------------
_TILE = (
    "display:inline-block;vertical-align:top;min-width:150px;margin:4px 8px 4px 0;padding:8px 12px;"
    "border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;font-family:sans-serif"
)


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f} %"


def _tile(
    label: str, value: str, sub: str = "", colour: str = "#24292f", *, kpi: str = "", number: float | None = None
) -> str:
    e = html.escape
    data = f" data-kpi='{e(kpi)}' data-value='{number!r}'" if kpi and number is not None else ""
    return (
        f"<div class='kpi-tile' style='{_TILE}'{data}><div style='font-size:12px;color:#57606a'>{e(label)}</div>"
        f"<div style='font-size:24px;font-weight:600;color:{colour}'>{e(value)}</div>"
        f"<div style='font-size:11px;color:#57606a'>{e(sub)}</div></div>"
    )


def kpi_tiles_html(summary: dict[str, Any]) -> str:
    """Executive-summary tiles from :func:`gpulib.cost.analysis.executive_summary`.

    The tiles reconcile, and each carries its number in ``data-value`` so a test adds them up:
    GPU-h = allocated + unallocated; allocated = active + idle; the saving = the sum of the listed actions.
    """
    cur = summary["currency"]
    hours = summary["window_hours"]
    alloc_h = summary["allocated_gpu_hours"]
    n_act = summary.get("actions", len(summary["top_actions"]))
    tiles = [
        _tile(
            "GPU-hours in the window",
            f"{summary['gpu_hours']:,.0f} GPU-h",
            f"{format_duration(hours * 3600)}; allocated + unallocated",
            kpi="gpu_hours",
            number=summary["gpu_hours"],
        ),
        _tile(
            "Allocated",
            f"{alloc_h:,.0f} GPU-h",
            f"{_pct(summary['allocated_pct'])} of GPU-hours; active + idle",
            kpi="allocated_gpu_hours",
            number=alloc_h,
        ),
        _tile(
            "Unallocated",
            f"{summary['unallocated_gpu_hours']:,.0f} GPU-h",
            f"{money(summary['unallocated_cost'], cur)} in the window",
            kpi="unallocated_gpu_hours",
            number=summary["unallocated_gpu_hours"],
        ),
        _tile(
            "Active (allocated)",
            f"{summary['active_gpu_hours']:,.0f} GPU-h",
            f"{_pct(summary['active_pct'])} of allocated; mean activity {_pct(summary.get('busy_pct'))} "
            f"({summary['activity_metric'].replace('DCGM_FI_', '')})",
            kpi="active_gpu_hours",
            number=summary["active_gpu_hours"],
        ),
        _tile(
            "Idle (allocated)",
            f"{summary['idle_gpu_hours']:,.0f} GPU-h",
            f"{money(summary['idle_cost'], cur)} in the window",
            "#b36b00",
            kpi="idle_gpu_hours",
            number=summary["idle_gpu_hours"],
        ),
        _tile(
            "GPU spend",
            money(summary["monthly_cost"], cur) + "/mo",
            f"{money(summary['window_cost'], cur)} in the window",
            kpi="monthly_cost",
            number=summary["monthly_cost"],
        ),
        _tile(
            "Potential monthly saving",
            money(summary["potential_monthly_saving"], cur),
            f"sum of the {n_act} actions listed (no overlap)",
            "#1b7f3b",
            kpi="potential_monthly_saving",
            number=summary["potential_monthly_saving"],
        ),
        _tile(
            "Zombie pods",
            str(summary["zombie_pods"]),
            "memory held, activity below threshold",
            "#b00020" if summary["zombie_pods"] else "#1b7f3b",
            kpi="zombie_pods",
            number=float(summary["zombie_pods"]),
        ),
    ]
    return "<div class='kpi-tiles'>" + "".join(tiles) + "</div>"


def actions_html(rep: CostReport, *, limit: int | None = None) -> str:
    """Every action of the savings plan: saving (per month), confidence and the signal it rests on, then the
    candidates left out with the reason (an alternative, vetoed by serving metrics, worth nothing)."""
    e = html.escape
    a = rep.actions if limit is None else rep.actions.head(limit)
    cur = rep.currency
    if a.empty:
        out = "<p><b style='color:#1b7f3b'>No savings action found.</b></p>"
    else:
        rows = []
        for i, r in enumerate(a.itertuples(), 1):
            target = f"{r.namespace}/{r.pod or r.workload}" if r.namespace else f"node {r.node}"
            so_far = (
                ""
                if r.window_cost != r.window_cost
                else f"<br><small>so far {e(money(float(r.window_cost), cur))} in the window</small>"
            )
            rows.append(
                [
                    str(i),
                    e(ACTIONS[r.action]),
                    f"<code>{e(target)}</code>",
                    e(money(float(r.monthly_saving), cur)) + so_far,
                    f"{float(r.confidence):.0%}",
                    e(str(r.signal)),
                    e(str(r.detail)),
                ]
            )
        total = float(a["monthly_saving"].sum())
        rows.append(["", "<b>total</b>", "", f"<b>{e(money(total, cur))}</b>", "", "", ""])
        out = _table(
            ["#", "action", "target", f"saving ({cur}/month)", "confidence", "signal", "why"],
            rows,
            "all-actions",
            {0, 3, 4},
        )
    sk = rep.skipped
    if sk is not None and len(sk):
        rows = [
            [
                e(str(r.action)),
                f"<code>{e(f'{r.namespace}/{r.pod or r.workload}' if r.namespace else f'node {r.node}')}</code>",
                e(money(float(r.saving_alone), cur)),
                e(str(r.reason)),
            ]
            for r in sk.itertuples()
        ]
        out += "<p><b>Not in the plan</b> (not added to the saving):</p>" + _table(
            ["action", "target", f"saving alone ({cur}/month)", "why not"], rows, "skipped-actions", {2}
        )
    return out


def _table(head: list[str], rows: list[list[str]], table_id: str, align_right: set[int] = frozenset()) -> str:
    th = "".join(
        f"<th style='text-align:{'right' if i in align_right else 'left'};padding:4px 8px;"
        "border-bottom:2px solid #d0d7de'>"
        f"{html.escape(h)}</th>"
        for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td style='text-align:{'right' if i in align_right else 'left'};padding:3px 8px;"
            f"border-bottom:1px solid #eaeef2'>{c}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return (
        f"<table id='{table_id}' style='border-collapse:collapse;font-family:sans-serif;font-size:13px'>"
        f"<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    )


def top_actions_html(summary: dict[str, Any]) -> str:
    """The top actions by monthly saving as an HTML table."""
    cur = summary["currency"]
    e = html.escape
    if not summary["top_actions"]:
        return "<p><b style='color:#1b7f3b'>No savings action found.</b></p>"
    rows = [
        [
            str(i),
            e(a["label"]),
            f"<code>{e(a['target'])}</code>",
            e(money(a["monthly_saving"], cur)),
            f"{a.get('confidence', float('nan')):.0%}",
            e(str(a.get("signal", ""))),
            e(a["detail"]),
        ]
        for i, a in enumerate(summary["top_actions"], 1)
    ]
    return _table(
        ["#", "action", "target", f"saving ({cur}/month)", "confidence", "signal", "why"],
        rows,
        "top-actions",
        {0, 3, 4},
    )


def headline_html(summary: dict[str, Any]) -> str:
    """The report's headline: the KPI tiles, then the top actions table under its heading."""
    return kpi_tiles_html(summary) + f"<h3>Top {len(summary['top_actions'])} actions</h3>" + top_actions_html(summary)


def idle_table_html(table: pd.DataFrame, currency: str) -> str:
    """The idle / zombie workloads table: state ``zombie``, ``idle`` (more than half of the allocated GPU-hours idle)
    or ``mostly active`` (listed for the idle GPU-hours it still has)."""
    if table.empty:
        return "<p><b style='color:#1b7f3b'>No idle allocated GPU time in the window.</b></p>"
    e = html.escape
    rows = []
    for r in table.itertuples():
        # "idle" only where most of the allocated time was idle; a busy workload is listed for its idle remainder
        mostly_idle = 2 * float(r.idle_allocated_gpu_hours) > float(r.allocated_gpu_hours)
        flag = (
            f"<b style='color:#b00020'>zombie</b> {r.zombie_hours:.1f} GPU-h"
            if r.zombie
            else "idle"
            if mostly_idle
            else "mostly active"
        )
        fb = "n/a" if pd.isna(r.fb_used_max_mib) else f"{r.fb_used_max_mib / 1024:.1f}"
        act = "n/a" if pd.isna(r.active_pct) else f"{r.active_pct:.1f}"
        rows.append(
            [
                e(str(r.namespace)),
                f"<code>{e(str(r.workload))}</code>",
                e(str(r.owner_kind or "pod")),
                flag,
                f"{r.allocated_gpu_hours:,.1f}",
                f"{r.idle_allocated_gpu_hours:,.1f}",
                act,
                fb,
                e(money(float(r.idle_cost), currency)),
            ]
        )
    return _table(
        [
            "namespace",
            "workload",
            "kind",
            "state",
            "allocated GPU-h",
            "idle GPU-h",
            "active %",
            "peak memory (GiB)",
            f"idle cost ({currency})",
        ],
        rows,
        "idle-zombie-table",
        {4, 5, 6, 7, 8},
    )


# ----------------------------------------------------------------------------------------------
# charts
# ----------------------------------------------------------------------------------------------
@functools.cache  # once a process: a figure built again would cost ~4 ms a report for nothing
def load_chart_classes() -> None:
    """Load what the report's charts need before the first is drawn: plotly imports a trace class, the validators of
    its properties and its dataframe interchange layer (narwhals) on first use (plotly/plotly.py:
    plotly/graph_objects/__init__.py, ``relative_import``; _plotly_utils/basevalidators.py), ~140 modules and
    0.1 s of CPU in a fresh kernel. :func:`gpulib.cost.steps.load_report_data` calls it while Prometheus evaluates
    the report's queries, so the charts do not pay it after the answers are in."""
    s = pd.Series([0.0])
    fig = go.Figure(go.Heatmap(z=[[0.0]], x=["t"], y=["n"], colorscale="Viridis", colorbar={"title": "%"}))
    fig.add_bar(x=s.astype(str), y=s, marker_color="#000000")
    fig.add_trace(go.Waterfall(x=s, y=s, measure=["absolute"], text=["0"], totals={"marker": {"color": "#000000"}}))
    fig.update_layout(title="", xaxis_title="", yaxis_title="", yaxis_range=[0, 1], legend={"y": 0}, margin={"l": 0})


def heatmap_figure(matrix: pd.DataFrame, activity_field: str, bucket: str):
    """Node x time heatmap of active % (tidy frame from :func:`gpulib.cost.usage.node_time_matrix`)."""
    piv = matrix.pivot(index="node", columns="time", values="active_pct").sort_index()
    fig = go.Figure(
        go.Heatmap(
            z=piv.to_numpy(),
            x=list(piv.columns),
            y=list(piv.index),
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": "active (%)"},
            hovertemplate="%{y}<br>%{x}<br>%{z:.0f} % active<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"GPU activity per node<br><sup>{activity_field.replace('DCGM_FI_', '')}, "
        f"mean per {format_duration(parse_window(bucket))}, % of all GPU time</sup>",
        xaxis_title="time (UTC)",
        yaxis_title="node",
        height=140 + 28 * max(len(piv), 4),
        margin={"l": 10, "r": 10, "t": 70, "b": 40},
    )
    return fig


def namespace_figure(ns: pd.DataFrame):
    """Grouped bars: allocated, active and idle GPU-hours per namespace."""
    fig = go.Figure()
    for col, name, colour in (
        ("allocated_gpu_hours", "allocated", "#8c959f"),
        ("active_gpu_hours", "active", "#1f5fa8"),
        ("idle_allocated_gpu_hours", "idle (allocated)", "#b36b00"),
    ):
        fig.add_bar(
            x=ns["namespace"].astype(str),
            y=ns[col],
            name=name,
            marker_color=colour,
            hovertemplate="%{x}: %{y:,.1f} GPU-h<extra>" + name + "</extra>",
        )
    fig.update_layout(
        barmode="group",
        title="Allocation vs activity per namespace",
        xaxis_title="namespace",
        yaxis_title="GPU time in the window (GPU-hours)",
        height=420,
        legend={"orientation": "h", "y": -0.25},
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
    )
    return fig


def waterfall_figure(wf: pd.DataFrame, currency: str):
    """Savings waterfall from :func:`gpulib.cost.analysis.savings_waterfall` (currency per month)."""
    fig = go.Figure(
        go.Waterfall(
            x=wf["step"],
            y=wf["value"],
            measure=wf["measure"],
            text=[
                ("-" if m == "relative" else "") + money(abs(v), currency) for v, m in zip(wf["value"], wf["measure"])
            ],
            textposition="outside",
            decreasing={"marker": {"color": "#1b7f3b"}},
            totals={"marker": {"color": "#1f5fa8"}},
            increasing={"marker": {"color": "#b00020"}},
        )
    )
    top = float(wf["value"].abs().max()) if len(wf) else 0.0
    fig.update_layout(
        title="Savings waterfall: monthly GPU spend after each action",
        yaxis_title=f"GPU spend ({currency}/month)",
        xaxis_title="action",
        height=460,
        showlegend=False,
        yaxis_range=[0, top * 1.15 or 1],
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
    )
    return fig


# ----------------------------------------------------------------------------------------------
# method
# ----------------------------------------------------------------------------------------------
def _path_note(data) -> str:
    """Which data path ran (gpulib.cost.totals.PATHS) and, on the raw path, how to install the recording rules."""

    note = (
        f"<b>Data path:</b> {html.escape(PATHS[data.path])}; {data.samples:,} numbers reached the report "
        f"({len(data.totals.queries)} PromQL queries)."
    )
    if data.path == "raw":
        note += (
            " Install the recording rules (group <code>gpu-runbooks.report</code> of "
            "<code>deploy/prometheus/gpu-alerts.yaml</code> or the PrometheusRule "
            "<code>deploy/prometheus/gpu-alerts.prometheusrule.yaml</code>, written by <code>gpuops alerts</code>) "
            "so Prometheus keeps these per-step values and the report reads their totals."
        )
    return note


_AGG_WORD = {"max": "maximum", "min": "minimum", "avg": "mean"}


def method_html(rep: CostReport, data, prices: pd.DataFrame, *, price_file: str | None = None) -> str:
    """How the numbers were made: activity metric, step, thresholds (from the data files), price table date/source.

    ``data`` is the :class:`gpulib.cost.steps.ReportData` analysed, ``prices`` the price rows behind ``rep`` with
    their age (:func:`gpulib.cost.price_age.report_price_age`)."""
    e = html.escape
    th = rep.thresholds
    agg = report_policy("series_agg") or "max"
    util_note = (
        "ratio of time the graphics engine was busy (DCGM profiling field DCGM_FI_PROF_GR_ENGINE_ACTIVE)"
        if rep.activity_field == GR_ENGINE_ACTIVE
        else "GPU_UTIL: percent of time a kernel ran (coarse; GR_ENGINE_ACTIVE was not exported)"
    )
    items = [
        f"<b>Activity metric:</b> <code>{e(rep.activity_field)}</code>, {e(util_note)}.",
        f"<b>Memory held:</b> <code>{FB_USED}</code> (MiB)"
        + ("" if data.has_fb else " <b>not available: zombie detection skipped</b>")
        + ".",
        f"<b>Sampling:</b> one point per series every {e(data.step)} over the last {e(data.window)} "
        f"({rep.window_hours:.0f} h), the {_AGG_WORD.get(agg, e(agg))} of the raw samples in that step "
        f"(report_policy.csv series_agg={e(agg)}); each point stands for one step of its GPU share "
        "(MIG g/7, time-sliced 1/replicas).",
        f"<b>Active / idle:</b> allocated time at or above / below {th.idle_activity_max:.0%} activity "
        "(active + idle = allocated); <i>mean activity</i> weights each hour by its activity and is what "
        "right-sizing uses.",
        "<b>Savings plan:</b> actions on one workload are alternatives (right-size, consolidate, quantise: the largest "
        "is kept) or applied in sequence on what the earlier ones leave (reclaim, then shrink, then spot), so no "
        "workload saves more than it spends and the headline is the sum of the listed actions "
        "(gpulib/data/cost/savings_rules.csv, docs/cost-method.md). A serving workload is never shrunk while its vllm: "
        "metrics (queue, KV cache, preemptions, latency) say it is overloaded; a zombie still holding its GPU is "
        "worth the GPU's whole price per month from now on.",
        f"<b>Idle:</b> allocated and activity &lt; {th.idle_activity_max:.0%}: {e(idle_definition(th))} "
        "<b>Zombie:</b> pod holds FB_USED &ge; "
        f"{th.zombie_fb_used_min_mib:,.0f} MiB with activity &lt; {th.zombie_activity_max:.0%} for &ge; "
        f"{format_duration(th.zombie_min_duration_s)} (gpulib/data/core/thresholds.csv).",
        f"<b>Monthly figures:</b> window cost &times; {rep.month_factor:.2f} (730 h per month / window hours; "
        "gpulib/data/cost/cost_policy.csv).",
        f"<b>Namespaces:</b> {e(', '.join(data.namespaces)) if data.namespaces else 'all'}.",
    ]
    if data.path != "samples":
        items.append(_path_note(data))
    if data.missing:
        items.append("<b>Not available:</b> " + e("; ".join(data.missing)))
    end = rep.newest()
    limit = float(report_policy("price_max_age_days"))
    src = e(price_file) if price_file else "gpulib/data/cost/gpu_prices.csv (defaults; override with price_file)"
    rows = [
        [
            e(str(r.model)),
            e(str(r.pricing)),
            f"{r.price_per_gpu_hour:.2f}",
            e(str(getattr(r, "as_of", "")))
            + (
                " <b style='color:#b00020'>(undated)</b>"
                if r.undated
                else f" <b style='color:#b36b00'>({r.age_days / 365.25:.1f} years old)</b>"
                if r.stale
                else ""
            ),
            e(str(getattr(r, "inferred", ""))),
            f"<small>{e(str(r.source))}</small>",
        ]
        for r in prices.itertuples()
    ]
    table = (
        _table(["model", "pricing", f"{rep.currency}/GPU-h", "as of", "inferred", "source"], rows, "price-table", {2})
        if rows
        else "<p>No price rows matched the GPU models in the window.</p>"
    )
    stale = prices[prices["stale"]]
    warn = ""
    if len(stale):
        lst = "; ".join(
            f"{m} {p} ({'undated' if u else f'as of {a}'})"
            for m, p, u, a in zip(stale["model"], stale["pricing"], stale["undated"], stale["as_of"])
        )
        warn = (
            f"<p id='stale-prices' style='color:#b36b00'><b>Stale prices:</b> {len(stale)} row(s) used here "
            f"are older than {limit:.0f} days before the window's end ({e(str(end)[:10])}) or undated: "
            f"{e(lst)}. Savings that use "
            "them may be off; pass a current price_file.</p>"
        )
    return (
        "<ul>"
        + "".join(f"<li>{i}</li>" for i in items)
        + "</ul>"
        + f"<p><b>Prices</b> ({e(rep.provider)}, {e(rep.currency)}) from {src}:</p>"
        + table
        + warn
    )


# ---------------------------------------------- what each step of gpu_utilization_report shows (gpulib.cost.steps)
def _html(text: str):
    """``text`` as the notebook displays HTML (IPython is there in a kernel only)."""
    from IPython.display import HTML

    return HTML(text)


def show_headline(c, ui) -> None:
    if c.summary is not None:
        ui.display(_html(headline_html(c.summary)))
    else:
        ui.note("No report: the window's data could not be loaded (see the box above).", "error")


def show_actions(c, ui) -> None:
    ui.display(_html(actions_html(c.rep)))


def show_heatmap(c, ui) -> None:
    ui.show(heatmap_figure(c.heat, c.rep.activity_field, c.bucket))


def show_namespaces(c, ui) -> None:
    ui.show(namespace_figure(c.allocation))


def show_idle(c, ui) -> None:
    ui.display(_html(idle_table_html(c.idle, c.rep.currency)))


def show_waterfall(c, ui) -> None:
    ui.show(waterfall_figure(c.savings, c.rep.currency))


def show_method(c, ui) -> None:
    ui.display(_html(c.method))
