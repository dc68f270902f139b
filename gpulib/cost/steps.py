"""The steps of the GPU utilization and cost report (``reports/gpu_utilization_report.ipynb``) and its definition
(:data:`RUNBOOK`, which the notebook and the headless verdict both run), one call per notebook step: the window's
data pulled from a source (:func:`load_report_data`), costed (:func:`cost_report`:
:func:`gpulib.cost.analysis.analyze_cost` over it), and each section's table or chart (:mod:`gpulib.cost.view`).

    data = load_report_data(src, "7d", namespaces=parse_namespaces("ml, ads"))
    data.serving = gpulib.vllm.serving_signals(src, serving_candidates(data.pods, data.namespaces))
    rep = cost_report(data)
    view.headline_html(cost.executive_summary(rep))

The vLLM serving verdicts come from the vllm domain, which builds on this one (it may not be imported here): the
runbook's context names its check, ``serving_signals`` (:func:`gpulib.vllm.serving_signals`). Report settings
(series step, heatmap resolution, table sizes) live in ``gpulib/data/cost/report_policy.csv``.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pandas as pd

import gpulib.cost.view as view
from gpulib.core.errors import EmptyResult, InvalidParameter, NotProvided
from gpulib.core.knowledge import settings
from gpulib.core.runbook import DIR, FILE, Param, Runbook, Step
from gpulib.core.timeutil import format_duration, parse_window
from gpulib.cost.analysis import (
    analyze_cost,
    executive_summary,
    idle_zombie_table,
    namespace_allocation,
    savings_waterfall,
)
from gpulib.cost.hygiene import mark_unrequested
from gpulib.cost.model import CostReport
from gpulib.cost.price_age import report_price_age
from gpulib.cost.prices import cost_policy_list, report_policy
from gpulib.cost.totals import Answers, UsageTotals, build_totals, fetch_totals
from gpulib.cost.usage import (
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    Thresholds,
    node_time_matrix,
    prepare_samples,
    select_activity,
)
from gpulib.kube.dra import attribute_series

__all__ = [
    "ReportData",
    "idle_samples",
    "parse_namespaces",
    "series_step",
    "heatmap_bucket",
    "load_report_data",
    "serving_candidates",
    "cost_report",
    "method_section",
    "heatmap",
    "namespace_chart",
    "idle_section",
    "waterfall",
]


def parse_namespaces(text: str | list[str] | None) -> list[str] | None:
    """``"ml, ads"`` -> ``["ml", "ads"]``; ``""`` / None -> None (all namespaces)."""
    if text is None:
        return None
    items = text if isinstance(text, list) else str(text).split(",")
    out = [s.strip() for s in items if s and s.strip()]
    return out or None


def series_step(window: str | timedelta) -> str:
    """The step the report pulls series at: the policy step, or the whole window when that is shorter."""
    w = parse_window(window)
    step = parse_window(report_policy("series_step"), name="series_step")
    return format_duration(min(step, w))


def heatmap_bucket(window: str | timedelta, step: str) -> str:
    """Heatmap bucket: window / ``heatmap_columns`` rounded up to a whole number of steps (pandas freq)."""
    w = parse_window(window).total_seconds()
    s = parse_window(step, name="step").total_seconds()
    cols = settings("report_policy").number("heatmap_columns")
    seconds = max(s, math.ceil(w / cols / s) * s)
    return f"{int(seconds)}s"


@dataclass
class ReportData:
    """Frames the report analyses, and what was used or missing."""

    window: str
    step: str
    nodes: pd.DataFrame
    pods: pd.DataFrame
    gr_engine_active: pd.DataFrame | None = None
    gpu_util: pd.DataFrame | None = None
    fb_used: pd.DataFrame | None = None
    namespaces: list[str] | None = None
    missing: list[str] = field(default_factory=list)
    #: vLLM live-check verdict per serving workload (gpulib.vllm.serving_signals over serving_candidates)
    serving: pd.DataFrame | None = None
    #: the window's totals as Prometheus added them up (gpulib.cost.totals), when the source answers PromQL
    totals: UsageTotals | None = None

    @property
    def activity_field(self) -> str:
        if self.totals is not None:
            return self.totals.activity_field
        return GR_ENGINE_ACTIVE if self.gr_engine_active is not None else GPU_UTIL

    @property
    def samples(self) -> int:
        """Numbers that reached the report (samples, or the points of the totals' answers)."""
        if self.totals is not None:
            return self.totals.points
        return sum(len(f) for f in (self.gr_engine_active, self.gpu_util, self.fb_used) if f is not None)

    @property
    def has_fb(self) -> bool:
        return self.totals.has_fb if self.totals is not None else self.fb_used is not None

    @property
    def path(self) -> str:
        """Which data path ran: ``rules``, ``raw`` or ``samples`` (:data:`gpulib.cost.totals.PATHS`)."""
        return self.totals.path if self.totals is not None else "samples"


def _try_series(src, fld: str, window: str, step: str, missing: list[str]) -> pd.DataFrame | None:
    try:
        return src.series(fld, window, step=step, agg=report_policy("series_agg") or None)
    except EmptyResult as exc:
        missing.append(f"{fld}: {str(exc).split(' (hint:')[0]}")
        return None


def load_report_data(
    src, window: str, *, namespaces: list[str] | None = None, step: str | None = None, totals: bool = True
) -> ReportData:
    """Pull nodes, pods and the DCGM series the cost analysis needs, at the report's coarse step.

    A source that answers PromQL (prometheus, live) gives totals instead (:func:`gpulib.cost.totals.load_totals`:
    the recording rules, else subqueries of the raw fields); ``totals=False`` pulls the samples anyway.
    Activity is ``GR_ENGINE_ACTIVE`` when exported, else ``GPU_UTIL``; ``FB_USED`` is optional (no
    zombie detection without it). Raises :class:`InvalidParameter` for a namespace the cluster does
    not have, :class:`~gpulib.core.errors.InvalidWindow` for a bad window, :class:`EmptyResult` when no
    activity field has data.
    """
    parse_window(window)
    step = step or series_step(window)
    # a source that answers PromQL adds the window up itself (gpulib.cost.totals): its queries go out first and
    # Prometheus evaluates them while the Kubernetes API is read
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        asked = pool.submit(_fetch_totals, src, window, step) if totals else None
        nodes, pods = src.nodes(), src.pods()
        if namespaces:
            known = set(pods["namespace"].astype(str))
            unknown = [n for n in namespaces if n not in known]
            if unknown:
                raise InvalidParameter(
                    f"namespaces={','.join(namespaces)!r}: no pods in {unknown}; "
                    f"namespaces with pods: {', '.join(sorted(known))}"
                )
        if asked is not None:  # the charts' library loads while Prometheus evaluates (gpulib.cost.view)
            view.load_chart_classes()
        try:
            answers = asked.result() if asked is not None else None
        except NotProvided:
            answers = None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # an error above does not wait for the PromQL
    if answers is not None:
        summed = build_totals(answers, nodes=nodes, pods=pods, th=Thresholds.from_table())
        missing = [] if summed.has_fb else [f"{FB_USED}: no series in the last {window}"]
        return ReportData(
            window=window, step=step, nodes=nodes, pods=pods, namespaces=namespaces, missing=missing, totals=summed
        )
    missing: list[str] = []
    fb_missing: list[str] = []
    # activity and memory are independent queries: run them side by side, so the client reads one
    # answer while the server still evaluates the other (at fleet scale each takes seconds)
    with ThreadPoolExecutor(max_workers=1) as pool:
        fb_job = pool.submit(_try_series, src, FB_USED, window, step, fb_missing)
        gr = _try_series(src, GR_ENGINE_ACTIVE, window, step, missing)
        util = None if gr is not None else _try_series(src, GPU_UTIL, window, step, missing)
        fb = fb_job.result()
    if gr is None and util is None:
        raise EmptyResult(
            f"neither {GR_ENGINE_ACTIVE} nor {GPU_UTIL} has samples in the last {window}", query=GR_ENGINE_ACTIVE
        )
    missing += fb_missing
    # GPUs held through DRA carry no pod label unless the exporter maps DRA pods: the claims say who holds them
    gr, util, fb = (attribute_series(f, pods) for f in (gr, util, fb))
    return ReportData(
        window=window,
        step=step,
        nodes=nodes,
        pods=pods,
        gr_engine_active=gr,
        gpu_util=util,
        fb_used=fb,
        namespaces=namespaces,
        missing=missing,
    )


def _fetch_totals(src, window: str, step: str) -> Answers:
    """The totals' answers (:func:`gpulib.cost.totals.fetch_totals`); NotProvided for a source without PromQL."""
    bucket = parse_window(heatmap_bucket(window, step), name="bucket").total_seconds()
    return fetch_totals(src, parse_window(window).total_seconds(), bucket, defer_held=True)


def _prometheus_totals(src, window: str, step: str, nodes: pd.DataFrame, pods: pd.DataFrame) -> UsageTotals:
    """The totals path (:func:`gpulib.cost.totals.fetch_totals` + ``build_totals``: which activity field the fleet
    exports and its GPU models are asked with the totals); raises NotProvided for a source without PromQL."""
    return build_totals(_fetch_totals(src, window, step), nodes=nodes, pods=pods, th=Thresholds.from_table())


def serving_candidates(pods: pd.DataFrame, namespaces: list[str] | None = None) -> pd.DataFrame:
    """(namespace, workload) of the serving workloads whose vLLM live check the savings plan needs (owner kinds
    in cost_policy.csv ``inference_owner_kinds`` with a GPU request); pass them to
    :func:`gpulib.vllm.serving_signals` and its rows to ``analyze_cost(serving=...)``."""
    p = pods[pods["owner_kind"].astype("string").fillna("").isin(cost_policy_list("inference_owner_kinds"))]
    p = p[pd.to_numeric(p["gpu_request"], errors="coerce").fillna(0) > 0]
    if namespaces:
        p = p[p["namespace"].astype(str).isin(namespaces)]
    return p[["namespace", "workload"]].astype(str).drop_duplicates().reset_index(drop=True)


def idle_samples(src, window: str) -> tuple[pd.DataFrame, str]:
    """The samples the one idle/zombie rule (:func:`gpulib.cost.usage.classify_idle`) runs on, pulled exactly as
    the report pulls them (:func:`load_report_data`: ``series_step``, ``series_agg``), so the fleet overview and
    the report give a pod the same verdict. Returns (samples, activity field used)."""
    data = load_report_data(src, window, totals=False)
    act, field_used = select_activity(data.gr_engine_active, data.gpu_util)
    # as analyze_cost marks them: a pod that requested no GPU holds no allocated GPU time (gpulib.cost.hygiene)
    return mark_unrequested(prepare_samples(act, data.fb_used, nodes=data.nodes, window=window), data.pods), field_used


# ----------------------------------------------------------------------------------------------
# the notebook's steps
# ----------------------------------------------------------------------------------------------
def cost_report(
    data: ReportData, *, price_file: str | None = None, provider: str | None = None, currency: str = "USD"
) -> CostReport:
    """Step "Load the window's data and cost it": :func:`gpulib.cost.analysis.analyze_cost` over ``data``
    (its window, namespaces and serving verdicts); empty ``price_file`` / ``provider``: the shipped defaults."""
    return analyze_cost(
        data.nodes,
        data.pods,
        data.gr_engine_active,
        data.fb_used,
        gpu_util=data.gpu_util,
        window=data.window,
        price_file=price_file or None,
        provider=provider or None,
        currency=currency,
        namespaces=data.namespaces,
        serving=data.serving,
        totals=data.totals,
    )


def method_section(rep: CostReport, data: ReportData, *, price_file: str | None = None) -> str:
    """The Method section's HTML: how the numbers were made and the prices behind them, with their age."""
    return view.method_html(rep, data, report_price_age(rep, price_file or None), price_file=price_file or None)


def heatmap(rep: CostReport, data: ReportData):
    """Step "Node x time heatmap": mean activity per node per bucket (:func:`heatmap_bucket` of the window)."""
    bucket = heatmap_bucket(data.window, data.step)
    return view.heatmap_figure(node_time_matrix(rep.samples, bucket), rep.activity_field, bucket)


def namespace_chart(rep: CostReport):
    """Step "Namespace allocation": allocated, active and idle GPU-hours per namespace."""
    return view.namespace_figure(namespace_allocation(rep))


def idle_section(rep: CostReport) -> str:
    """Step "Idle and zombie workloads": the table of :func:`gpulib.cost.analysis.idle_zombie_table`."""
    return view.idle_table_html(idle_zombie_table(rep), rep.currency)


def waterfall(rep: CostReport):
    """Step "Savings waterfall": monthly spend after each kind of action."""
    return view.waterfall_figure(savings_waterfall(rep), rep.currency)


# ------------------------------------------------------------------------------------------------- the runbook
def gather_report(c) -> None:
    """The window's data (:func:`load_report_data`) with the vLLM verdicts of its serving workloads (the context's
    ``serving_signals``), costed (:func:`cost_report`), its executive summary and its Method section; each name set
    as soon as it is known."""
    c.data = load_report_data(c.src, c.window, namespaces=parse_namespaces(c.namespaces))
    c.data.serving = c.serving_signals(c.src, serving_candidates(c.data.pods, c.data.namespaces))
    c.rep = cost_report(c.data, price_file=c.price_file, provider=c.provider, currency=c.currency)
    c.summary = executive_summary(c.rep)
    c.method = method_section(c.rep, c.data, price_file=c.price_file)


def gather_heatmap(c) -> None:
    """Mean activity per node per bucket (as :func:`heatmap`)."""
    c.bucket = heatmap_bucket(c.data.window, c.data.step)
    c.heat = node_time_matrix(c.rep.samples, c.bucket)


def gather_namespaces(c) -> None:
    c.allocation = namespace_allocation(c.rep)


def gather_idle(c) -> None:
    c.idle = idle_zombie_table(c.rep)


def gather_waterfall(c) -> None:
    c.savings = savings_waterfall(c.rep)


def _start(c) -> dict[str, Any]:
    return {"data": None, "rep": None, "summary": None, "method": None}


def _findings(c):
    return c.rep.findings if c.rep is not None else None


_VIEW = "gpulib.cost.view:"
RUNBOOK = Runbook(
    name="gpu_utilization_report",
    domain="cost",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param("snapshot_dir", "", "folder with nodes.json, pods.json, metrics*.txt (source snapshot)", kind=DIR),
        Param("window", "7d", "report window, Prometheus duration: 24h, 7d, 30d"),
        Param("namespaces", "", "comma-separated namespaces to report on (empty: all)"),
        Param(
            "price_file",
            "",
            "CSV overriding gpulib/data/cost/gpu_prices.csv with the same columns (empty: shipped defaults)",
            kind=FILE,
        ),
        Param("currency", "USD", "currency of the price rows to use"),
        Param("provider", "", "price provider rows to use aws, gcp or azure (empty: the policy default)"),
        Param(
            "charts",
            "",
            "plotly.js in the HTML: inline (once, opens offline), cdn (small enough to e-mail) or shared (one copy "
            "beside the run folders); empty: the run's way (inline, unless GPUOPS_CHARTS says)",
        ),
    ),
    steps=(
        Step(
            "Load the window's data and cost it",
            gather_report,
            needs=("src",),
            inputs=(GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED, "nodes", "pods", "vLLM serving metrics", "GPU prices"),
        ),
        Step("Headline", None, _VIEW + "show_headline"),
        Step("Savings plan", None, _VIEW + "show_actions", needs=("rep",)),
        Step("Node x time heatmap", gather_heatmap, _VIEW + "show_heatmap", needs=("rep",)),
        Step("Namespace allocation", gather_namespaces, _VIEW + "show_namespaces", needs=("rep",)),
        Step("Idle and zombie workloads", gather_idle, _VIEW + "show_idle", needs=("rep",)),
        Step("Savings waterfall", gather_waterfall, _VIEW + "show_waterfall", needs=("rep",)),
        Step("Method", None, _VIEW + "show_method", needs=("method",)),
    ),
    findings=_findings,
    start=_start,
    figures=lambda c: _key_figures(c),
)


def _key_figures(c) -> dict[str, dict[str, Any]]:
    """The figures ``gpuops diff`` compares run to run (the headline's idle GPU-hours and cost, zombie pods)."""
    if c.rep is None:
        return {}
    s = executive_summary(c.rep)
    return {
        "idle_gpu_hours": {"label": "Idle GPU-hours", "unit": "GPU-h", "value": s["idle_gpu_hours"], "better": "lower"},
        "idle_cost": {"label": "Idle cost", "unit": s["currency"], "value": s["idle_cost"], "better": "lower"},
        "zombie_pods": {"label": "Zombie pods", "unit": "pods", "value": s["zombie_pods"], "better": "lower"},
    }
