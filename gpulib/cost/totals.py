"""The report's inputs as totals over the window: what Prometheus adds up, not every sample.

Per series (one GPU or MIG instance and the pod on it) the report needs, over its window: how many ``series_step``
steps it was seen, how many of them were idle, the sum and 95th percentile of the step's activity, the mean and
maximum memory held (:func:`gpulib.cost.usage.series_usage`), the steps held idle (:func:`zombie_runs`) and the
activity per node per heatmap bucket (:func:`node_time_matrix`). :func:`load_totals` asks Prometheus for exactly
those numbers:

* **rules** path: ``count_over_time`` / ``sum_over_time`` / ``quantile_over_time`` / ``avg_over_time`` /
  ``max_over_time`` over the recording-rule series of :mod:`gpulib.cost.recording` (``gpu-runbooks.report``),
  instant queries at the window end, so the answer is one number per series per query;
* **raw** path (the rules are not installed): the same functions over a subquery of the rule's own expression,
  ``(<expr>)[window:series_step]``, evaluated on the raw DCGM fields (same numbers, more work for Prometheus);
* the heatmap: the same sums at the heatmap bucket step (a range query: series x buckets points);
* zombie runs: a range query at ``series_step`` of the held-idle steps only (``== 1``), so what arrives is the
  zombie steps; the runs (start, length) are found by :func:`zombie_runs` at the rule's 5-minute resolution.

Only functions Thanos Query, Mimir and VictoriaMetrics accept are used (``*_over_time``, subqueries, ``and``,
``label_replace``, ``clamp``; no ``@`` modifier). A source that answers no PromQL (demo, snapshot) gives its samples
and :func:`totals_from_samples` adds them up in pandas with the same functions.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

import gpulib.cost.recording as recording
from gpulib.core.errors import EmptyResult
from gpulib.core.timeutil import format_duration
from gpulib.cost.hygiene import mark_unrequested
from gpulib.cost.usage import (
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    SERIES_KEYS,
    Thresholds,
    prepare_samples,
    series_usage,
    zombie_runs,
)
from gpulib.sources.dcgm import normalise_labels

__all__ = ["UsageTotals", "PATHS", "load_totals", "totals_from_samples", "totals_queries"]

_HOUR = 3600.0
#: the data paths, as the Method section names them
PATHS = {
    "rules": "totals over the recording rules (group gpu-runbooks.report)",
    "raw": "totals over subqueries of the raw DCGM fields (the recording rules are not installed)",
    "samples": "samples pulled at the series step and added up in the report (this source answers no PromQL)",
}


@dataclass
class UsageTotals:
    """Per-series totals of one window (``usage``: :func:`series_usage` columns), its zombie runs, and the
    frame the heatmap reads (``samples``: real samples, or one row per series per heatmap bucket)."""

    path: str
    activity_field: str
    usage: pd.DataFrame
    zombies: pd.DataFrame
    samples: pd.DataFrame
    end: pd.Timestamp
    step_s: float
    has_fb: bool = True
    #: the PromQL sent (empty for the samples path)
    queries: list[str] = field(default_factory=list)
    #: numbers received (points of every answer)
    points: int = 0

    def within(self, namespaces: list[str]) -> "UsageTotals":
        """The totals of the series in ``namespaces`` (``""``: GPU time nobody was allocated)."""

        def keep(f: pd.DataFrame) -> pd.DataFrame:
            return f[f["namespace"].astype("string").fillna("").isin(namespaces)] if "namespace" in f else f

        return replace(self, usage=keep(self.usage), zombies=keep(self.zombies), samples=keep(self.samples))


def totals_from_samples(samples: pd.DataFrame, field_used: str, th: Thresholds) -> UsageTotals:
    """The totals of samples already pulled (``prepare_samples`` + ``mark_unrequested``), added up in pandas."""
    step = float(samples["step_s"].median()) if len(samples) else 0.0
    end = samples["timestamp"].max() if len(samples) else pd.Timestamp.now(tz="UTC")
    return UsageTotals(
        path="samples",
        activity_field=field_used,
        usage=series_usage(samples, th),
        zombies=zombie_runs(samples, th),
        samples=samples,
        end=end,
        step_s=step,
        has_fb=bool(samples["fb_used_mib"].notna().any()),
        points=len(samples),
    )


# ----------------------------------------------------------------------------------------------
# the queries
# ----------------------------------------------------------------------------------------------
def _per_step(path: str) -> dict[str, str]:
    """Instant-vector expressions of one step's activity, idle flag, memory and held-idle flag."""
    if path == "rules":
        return {k: recording.rule_name(m) for k, m in _METRICS.items()}
    th = Thresholds.from_table()
    group = {r["record"]: r["expr"] for r in recording.recording_group(th)["rules"]}
    return {k: group[recording.rule_name(m)] for k, m in _METRICS.items()}


_METRICS = {"act": recording.ACTIVITY, "fb": recording.FB, "idle": recording.IDLE, "held": recording.HELD_IDLE}


def _over(path: str, expr: str, rng: str) -> str:
    """``expr`` over a range: the recorded series' samples, or a subquery at the rule's resolution."""
    step = format_duration(recording.rule_resolution())
    return f"{expr}[{rng}]" if path == "rules" else f"({expr})[{rng}:{step}]"


def _range(seconds: float) -> str:
    """A range of ``seconds`` less one second: exactly ``seconds / series_step`` steps whether the store's range is
    left-closed (Prometheus 2) or left-open (Prometheus 3, VictoriaMetrics), so a window of 2 h counts 24 steps of
    5 min, not 25 (the samples path's first point, at the window's start, stands for the 5 min before it)."""
    return format_duration(seconds - 1)


def totals_queries(path: str, window_s: float) -> dict[str, str]:
    """name -> instant query at the window end (one number per series)."""
    e, w = _per_step(path), _range(window_s)
    return {
        "n": f"count_over_time({_over(path, e['act'], w)})",
        "n_idle": f"sum_over_time({_over(path, e['idle'], w)})",
        "act_sum": f"sum_over_time({_over(path, e['act'], w)})",
        "act_p95": f"quantile_over_time(0.95, {_over(path, e['act'], w)})",
        "fb_mean": f"avg_over_time({_over(path, e['fb'], w)})",
        "fb_max": f"max_over_time({_over(path, e['fb'], w)})",
    }


def _held_queries(path: str) -> dict[str, str]:
    """name -> range query at the rule's resolution returning only held-idle steps."""
    e = _per_step(path)
    held = f"(({e['held']}) == 1)"
    return {"held": held, "act": f"({e['act']}) and {held}", "fb": f"({e['fb']}) and {held}"}


def _bucket_queries(path: str, bucket_s: float) -> dict[str, str]:
    e, b = _per_step(path), _range(bucket_s)
    return {
        "n": f"count_over_time({_over(path, e['act'], b)})",
        "act_sum": f"sum_over_time({_over(path, e['act'], b)})",
    }


# ----------------------------------------------------------------------------------------------
# answers -> frames
# ----------------------------------------------------------------------------------------------
def _key(metric: dict) -> tuple:
    lab = normalise_labels(metric)
    return tuple(lab[c] for c in (*SERIES_KEYS, "uuid", "model"))


_KEY_COLS = [*SERIES_KEYS, "uuid", "model"]


def _vector(result: list[dict]) -> dict[tuple, float]:
    return {_key(r["metric"]): float(r["value"][1]) for r in result}


def _label_frame(keys: list[tuple], end: pd.Timestamp, value: list[float]) -> pd.DataFrame:
    f = pd.DataFrame(keys, columns=_KEY_COLS)
    f["timestamp"] = end
    f["value"] = value
    return f


def _shares(keys: list[tuple], end, nodes, pods, window_s: float, slices) -> pd.DataFrame:
    """share and allocated per series, by the samples path's own rules (prepare_samples, mark_unrequested)."""
    lab = _label_frame(keys, end, [0.0] * len(keys))
    s = mark_unrequested(
        prepare_samples(lab, None, nodes=nodes, window=f"{int(window_s)}s", compute_slices=slices), pods
    )
    return s


def load_totals(
    src,
    window_s: float,
    *,
    nodes: pd.DataFrame,
    pods: pd.DataFrame,
    bucket_s: float,
    th: Thresholds,
    compute_slices: dict[str, float] | None = None,
    activity_field: str = GR_ENGINE_ACTIVE,
) -> UsageTotals:
    """Ask ``src`` (a source that answers PromQL) for the window's totals: the rules path when the recording-rule
    series exist in the window, else the raw path. Raises :class:`EmptyResult` when no activity has data."""
    end_ts = src.end.timestamp()
    end = pd.Timestamp(end_ts, unit="s", tz="UTC")
    sent: list[str] = []

    def instant(q: str) -> list[dict]:
        sent.append(q)
        return src.query(q)

    probe = f"count(count_over_time({recording.rule_name(recording.ACTIVITY)}[{format_duration(window_s)}]))"
    path = "rules" if instant(probe) else "raw"
    step_s = recording.rule_resolution()
    # every other query is independent of the others: sent side by side, so Prometheus evaluates them in parallel
    start = end_ts - window_s + step_s  # zombie steps only, at the rule's resolution
    # heatmap: per series per bucket (bucket ends aligned to multiples of the bucket, so buckets start there too)
    b_end = np.floor(end_ts / bucket_s) * bucket_s
    b_start = max(b_end - window_s + bucket_s, np.ceil((end_ts - window_s) / bucket_s) * bucket_s + bucket_s)
    jobs = {("n", k): (instant, (q,)) for k, q in totals_queries(path, window_s).items()}
    jobs.update({("h", k): (src.range_query, (q, start, end_ts, step_s)) for k, q in _held_queries(path).items()})
    jobs.update(
        {("b", k): (src.range_query, (q, b_start, b_end, bucket_s)) for k, q in _bucket_queries(path, bucket_s).items()}
    )
    sent += [args[0] for kind, (fn, args) in jobs.items() if kind[0] != "n"]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {kind: pool.submit(fn, *args) for kind, (fn, args) in jobs.items()}
        got = {kind: f.result() for kind, f in futures.items()}
    answers = {k: _vector(v) for (kind, k), v in got.items() if kind == "n"}
    held = {k: v for (kind, k), v in got.items() if kind == "h"}
    buckets = {k: v for (kind, k), v in got.items() if kind == "b"}
    keys = sorted(answers["n"])
    if not keys:
        raise EmptyResult(
            f"neither {GR_ENGINE_ACTIVE} nor {GPU_UTIL} has samples in the last {format_duration(window_s)}",
            query=sent[-1],
        )
    lab = _shares(keys, end, nodes, pods, window_s, compute_slices)
    order = {k: i for i, k in enumerate(keys)}
    lab_keys = [tuple(r) for r in lab[_KEY_COLS].astype(str).itertuples(index=False)]
    idx = np.array([order[k] for k in lab_keys])
    col = {name: np.array([a.get(keys[i], np.nan) for i in idx]) for name, a in answers.items()}
    share = lab["share"].to_numpy(dtype=float)
    alloc = lab["allocated"].to_numpy(dtype=bool)
    n, n_idle = col["n"], np.nan_to_num(col["n_idle"])
    hours = n * step_s * share / _HOUR
    usage = lab[_KEY_COLS].astype(str).copy()
    usage.insert(0, "sid", lab["sid"].to_numpy())
    usage["share"] = share
    usage["gpu_hours"] = hours
    usage["allocated_gpu_hours"] = hours * alloc
    usage["active_gpu_hours"] = (n - n_idle) * step_s * share / _HOUR * alloc
    usage["busy_gpu_hours"] = col["act_sum"] * step_s * share / _HOUR * alloc
    usage["idle_allocated_gpu_hours"] = n_idle * step_s * share / _HOUR * alloc
    usage["unallocated_gpu_hours"] = hours * ~alloc
    usage["activity_mean"] = col["act_sum"] / n
    usage["activity_p95"] = col["act_p95"]
    usage["fb_used_mean_mib"] = col["fb_mean"]
    usage["fb_used_max_mib"] = col["fb_max"]
    usage["samples"] = n.astype(int)
    usage = usage[[c for c in _USAGE_ORDER if c in usage.columns]]
    points = sum(len(a) for a in answers.values())
    points += sum(len(r["ts"]) for res in (*held.values(), *buckets.values()) for r in res)
    zombies = _zombies(held, nodes, pods, window_s, step_s, th, compute_slices)
    samples = _bucket_samples(buckets, lab, bucket_s, step_s)
    return UsageTotals(
        path=path,
        activity_field=activity_field,
        usage=usage,
        zombies=zombies,
        samples=samples,
        end=end,
        step_s=step_s,
        has_fb=bool(np.isfinite(col["fb_max"]).any()),
        queries=sent,
        points=points,
    )


_USAGE_ORDER = [
    "sid",
    *_KEY_COLS,
    "share",
    "gpu_hours",
    "allocated_gpu_hours",
    "active_gpu_hours",
    "busy_gpu_hours",
    "idle_allocated_gpu_hours",
    "unallocated_gpu_hours",
    "activity_mean",
    "activity_p95",
    "fb_used_mean_mib",
    "fb_used_max_mib",
    "samples",
]


def _range_frame(result: list[dict], value: str) -> pd.DataFrame:
    rows = []
    for r in result:
        k = _key(r["metric"])
        rows.append(pd.DataFrame({"k": [k] * len(r["ts"]), "t": np.asarray(r["ts"], float), value: r["v"]}))
    if not rows:
        return pd.DataFrame(columns=["k", "t", value])
    return pd.concat(rows, ignore_index=True)


_ZOMBIE_COLS = [*_KEY_COLS, "share", "start", "end", "duration_s", "fb_used_mean_mib", "activity_max", "gpu_hours"]


def _zombies(held, nodes, pods, window_s, step_s, th, slices) -> pd.DataFrame:
    """zombie_runs over the held-idle steps (a missing step breaks a run, as a non-held sample does)."""
    frames = {}
    for name in ("act", "fb"):
        f = _range_frame(held[name], "value")
        lab = pd.DataFrame(list(f["k"]), columns=_KEY_COLS) if len(f) else pd.DataFrame(columns=_KEY_COLS)
        lab["timestamp"] = pd.to_datetime(f["t"].to_numpy(dtype=float), unit="s", utc=True)
        lab["value"] = pd.to_numeric(f["value"]).to_numpy(dtype=float) if len(f) else []
        frames[name] = lab[lab["pod"] != ""].reset_index(drop=True)
    if frames["act"].empty:
        return pd.DataFrame(columns=_ZOMBIE_COLS)
    s = prepare_samples(frames["act"], frames["fb"], nodes=nodes, window=f"{int(window_s)}s", compute_slices=slices)
    s = mark_unrequested(s, pods)
    s["step_s"] = step_s  # the rule's resolution, not the spacing of the held steps
    return zombie_runs(s, th)


def _bucket_samples(buckets, lab: pd.DataFrame, bucket_s: float, step_s: float) -> pd.DataFrame:
    """One row per series per heatmap bucket, weighted like the samples they add up (node_time_matrix reads it)."""
    n = _range_frame(buckets["n"], "n")
    a = _range_frame(buckets["act_sum"], "act_sum").set_index(["k", "t"])["act_sum"]
    if n.empty:
        return pd.DataFrame(columns=["node", "timestamp", "step_s", "share", "activity", "allocated"])
    key = pd.MultiIndex.from_arrays([n["k"], n["t"]])
    info = lab.assign(k=[tuple(r) for r in lab[_KEY_COLS].astype(str).itertuples(index=False)]).set_index("k")
    out = pd.DataFrame(
        {
            "node": [k[0] for k in n["k"]],
            # a point at t adds up (t - bucket, t]: the bucket that starts at t - bucket
            "timestamp": pd.to_datetime(n["t"].to_numpy() - bucket_s, unit="s", utc=True),
            "step_s": n["n"].to_numpy(dtype=float) * step_s,
            "share": info["share"].reindex(n["k"]).to_numpy(dtype=float),
            "activity": a.reindex(key).to_numpy(dtype=float) / n["n"].to_numpy(dtype=float),
            "allocated": info["allocated"].reindex(n["k"]).to_numpy(dtype=bool),
        }
    )
    return out
