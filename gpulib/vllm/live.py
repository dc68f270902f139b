"""Live check of a running vLLM deployment from vLLM's own ``vllm:`` metrics (running / waiting requests, KV-cache
usage, TTFT and end-to-end p99, preemptions; https://docs.vllm.ai/en/latest/usage/metrics.html) joined with the DCGM
memory and activity of its pods, ending in a scale-up / scale-down / retune verdict (:func:`verdict`; the finding is
:func:`gpulib.vllm.findings.assess`). Thresholds are ``gpulib/data/vllm/vllm_deploy.csv``.

Without PromQL the check reads the source's ``app_series("vllm", window)`` (the demo backend serves simulated
``vllm:`` series there, :mod:`gpulib.demo.vllm_series`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.errors import EmptyResult, InvalidParameter, NotProvided, SourceError
from gpulib.core.knowledge import settings
from gpulib.core.timeutil import parse_window
from gpulib.core.validate import promql_string

__all__ = ["Verdict", "histogram_quantile", "vllm_metrics", "verdict", "dcgm_for_pods", "waiting_requests"]


def _f(key: str) -> float:
    return settings("vllm_deploy").number(key)


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' ``histogram_quantile`` over cumulative bucket counts {upper bound: count} (+Inf included)."""
    les = sorted(buckets)
    if not les or not math.isinf(les[-1]):
        raise InvalidParameter("histogram buckets need a +Inf bucket")
    total = buckets[les[-1]]
    if total <= 0:
        return float("nan")
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if math.isinf(le):
                return prev_le  # Prometheus returns the upper bound of the last finite bucket
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c) if c > prev_c else le
        prev_le, prev_c = le, c
    return prev_le


def _selector(namespace: str, workload: str) -> str:
    """Label matchers with both values escaped (the workload is matched literally, then ``-<suffix>``)."""
    return f"namespace={promql_string(namespace)},pod=~{promql_string(re.escape(str(workload)) + '-.*')}"


def vllm_metrics(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """Per pod of ``workload``: running/waiting (avg, max), KV usage max, preemptions, TTFT and e2e p99 (s)."""
    w = parse_window(window)
    cols = [
        "pod",
        "running_avg",
        "running_max",
        "waiting_avg",
        "waiting_max",
        "kv_usage_max",
        "preemptions",
        "ttft_p99_s",
        "e2e_p99_s",
    ]
    series = None
    try:  # PromQL where the source has it, else the source's own (simulated) vllm: series
        rows = _prometheus_rows(src, _selector(namespace, workload), f"{int(w.total_seconds())}s")
    except NotProvided:
        try:
            series = src.app_series("vllm", w)
        except NotProvided:
            raise NotProvided(
                f"source {src.describe()} has no vLLM metrics",
                hint="use source='live' (the Prometheus that scrapes vLLM's /metrics) or the demo fleet",
            ) from None
        rows = _series_rows(series, namespace, workload)
    df = pd.DataFrame(rows, columns=cols)
    if df.empty:
        raise _no_series(src, namespace, workload, window, series)
    return df.sort_values("pod").reset_index(drop=True)


def _no_series(src, namespace: str, workload: str, window: str, series) -> Exception:
    """Why :func:`vllm_metrics` found nothing: other pods export ``vllm:`` series, so ``workload``/``namespace``
    name no vLLM deployment (a usage error, exit 2); or no pod does (missing data: vLLM's /metrics is not scraped)."""
    what = f"no vllm: series for pods {workload}-* in namespace {namespace} in the last {window}"
    if series is None:
        q = f"count by (namespace, pod) (last_over_time(vllm:num_requests_running[{int(parse_window(window).total_seconds())}s]))"
        pods = {(r["metric"].get("namespace", ""), r["metric"].get("pod", "")) for r in src.instant_query(q)}
    else:
        pods = {(lab["namespace"], lab["pod"]) for name, lab, _ in series if name == "vllm:num_requests_running"}
    if pods:
        known = sorted(f"{ns}/{pod}" for ns, pod in pods)
        return InvalidParameter(
            f"{what}; pods exporting vllm: series: {', '.join(known[:12])}"
            + (f" and {len(known) - 12} more" if len(known) > 12 else ""),
            hint="set namespace and deployment to a vLLM deployment's (its pods are <deployment>-*)",
        )
    return EmptyResult(
        what,
        query=f"vllm:num_requests_running{{{_selector(namespace, workload)}}}",
        hint="no pod exports vllm: series: check that Prometheus scrapes vLLM's /metrics endpoint "
        "(https://docs.vllm.ai/en/latest/usage/metrics.html) in this window",
    )


def _series_rows(series, namespace: str, workload: str) -> list[dict]:
    """The rows of :func:`vllm_metrics` from raw ``(metric, labels, values)`` series of the window."""
    per: dict[str, dict] = {}
    for name, lab, v in series:
        if lab["namespace"] != namespace or not lab["pod"].startswith(workload + "-"):
            continue
        r = per.setdefault(lab["pod"], {"pod": lab["pod"], "_ttft": {}, "_e2e": {}})
        if name == "vllm:num_requests_running":
            r["running_avg"], r["running_max"] = float(v.mean()), float(v.max())
        elif name == "vllm:num_requests_waiting":
            r["waiting_avg"], r["waiting_max"] = float(v.mean()), float(v.max())
        elif name == "vllm:kv_cache_usage_perc":
            r["kv_usage_max"] = float(v.max())
        elif name == "vllm:num_preemptions_total":
            r["preemptions"] = float(v[-1] - v[0])
        elif name.endswith("_bucket"):
            key = "_ttft" if "first_token" in name else "_e2e"
            r[key][float(lab["le"])] = float(v[-1] - v[0])
    for r in per.values():
        r["ttft_p99_s"] = histogram_quantile(0.99, r.pop("_ttft"))
        r["e2e_p99_s"] = histogram_quantile(0.99, r.pop("_e2e"))
    return list(per.values())


def _prometheus_rows(src, sel: str, w: str) -> list[dict]:
    queries = {
        "running_avg": f"avg_over_time(vllm:num_requests_running{{{sel}}}[{w}])",
        "running_max": f"max_over_time(vllm:num_requests_running{{{sel}}}[{w}])",
        "waiting_avg": f"avg_over_time(vllm:num_requests_waiting{{{sel}}}[{w}])",
        "waiting_max": f"max_over_time(vllm:num_requests_waiting{{{sel}}}[{w}])",
        "kv_usage_max": f"max_over_time(vllm:kv_cache_usage_perc{{{sel}}}[{w}]) or max_over_time(vllm:gpu_cache_usage_perc{{{sel}}}[{w}])",
        "preemptions": f"increase(vllm:num_preemptions_total{{{sel}}}[{w}])",
        "ttft_p99_s": f"histogram_quantile(0.99, sum by (pod, le) (increase(vllm:time_to_first_token_seconds_bucket{{{sel}}}[{w}])))",
        "e2e_p99_s": f"histogram_quantile(0.99, sum by (pod, le) (increase(vllm:e2e_request_latency_seconds_bucket{{{sel}}}[{w}])))",
    }
    per: dict[str, dict] = {}
    for col, q in queries.items():
        for r in src.instant_query(q):
            pod = r["metric"].get("pod", "")
            per.setdefault(pod, {"pod": pod})[col] = float(r["value"][1])
    return list(per.values())


@dataclass
class Verdict:
    """What the live check concludes for one deployment: ``name`` (scale_up | scale_down | retune | ok), the reasons
    for a scale-up (``why``), whether the latency target is missed, and the replicas it counts."""

    name: str
    replicas: int
    why: list[str] = field(default_factory=list)
    over_latency: bool = False


def verdict(
    metrics: pd.DataFrame,
    *,
    max_num_seqs: int | None = None,
    latency_p99_s: float | None = None,
    replicas: int | None = None,
) -> Verdict:
    """Scale up (requests queue, latency over target, or KV cache full with preemptions), scale down (KV cache
    under ``kv_usage_low`` and the running batch under ``running_low_ratio`` of ``max_num_seqs``, more than one
    replica), retune (KV cache full, no queue yet) or ok, from :func:`vllm_metrics`."""
    n = replicas or len(metrics)
    over_latency = latency_p99_s is not None and bool((metrics["e2e_p99_s"] > latency_p99_s).any())
    queueing = (metrics["waiting_max"] > _f("hpa_waiting_target")).any()
    kv_full = (metrics["kv_usage_max"] >= _f("kv_usage_high")).any()
    preempting = (metrics["preemptions"] > 0).any()
    if queueing or over_latency or (kv_full and preempting):
        why = []
        if queueing:
            why.append(f"requests queue (waiting max {metrics['waiting_max'].max():.0f})")
        if over_latency:
            why.append(f"e2e p99 {metrics['e2e_p99_s'].max():.2f} s > target {latency_p99_s:g} s")
        if kv_full:
            why.append(f"KV cache {metrics['kv_usage_max'].max():.0%} full")
        if preempting:
            why.append(f"{metrics['preemptions'].sum():.0f} preemptions")
        return Verdict("scale_up", n, why, over_latency)
    run_ratio = metrics["running_avg"].mean() / max_num_seqs if max_num_seqs else None
    if (
        (metrics["kv_usage_max"] < _f("kv_usage_low")).all()
        and (run_ratio is None or run_ratio < _f("running_low_ratio"))
        and n > 1
    ):
        return Verdict("scale_down", n)
    if kv_full:
        return Verdict("retune", n)
    return Verdict("ok", n)


def dcgm_for_pods(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """DCGM FB used (GiB, max) and activity (p95) per pod of ``workload`` (empty frame when unavailable)."""
    try:
        fb = src.summary("DCGM_FI_DEV_FB_USED", window, "max")
        act = src.summary("DCGM_FI_PROF_GR_ENGINE_ACTIVE", window, "p95")
    except SourceError:
        return pd.DataFrame(columns=["pod", "fb_used_gib", "activity"])
    sel = lambda df: df[(df["namespace"] == namespace) & df["pod"].str.startswith(workload + "-")]  # noqa: E731
    f = sel(fb).groupby("pod")["value"].sum() / 1024
    a = sel(act).groupby("pod")["value"].mean()
    return pd.DataFrame({"fb_used_gib": f, "activity": a}).reset_index().rename(columns={"index": "pod"})


def waiting_requests(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """``vllm:num_requests_waiting`` series of the pods of ``workload`` in ``namespace`` (the live check's chart)."""
    s = src.series("vllm:num_requests_waiting", window)
    return s[(s["namespace"] == namespace) & s["pod"].str.startswith(workload + "-")].reset_index(drop=True)
