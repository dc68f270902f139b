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

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

import gpulib.cost.recording as recording
from gpulib.core.errors import EmptyResult
from gpulib.core.timeutil import format_duration
from gpulib.cost.hygiene import mark_unrequested
from gpulib.cost.prices import mig_slices_of
from gpulib.cost.usage import (
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    SERIES_KEYS,
    Thresholds,
    prepare_samples,
    series_usage,
    zombie_runs,
)
from gpulib.kube.dra import dra_holders
from gpulib.sources.dcgm import normalise_labels
from gpulib.sources.signals import promql_names

__all__ = [
    "UsageTotals",
    "Answers",
    "PATHS",
    "activity_probes",
    "activity_of",
    "fetch_totals",
    "build_totals",
    "load_totals",
    "totals_from_samples",
    "totals_queries",
]

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
    """name -> range query at the rule's resolution returning only held-idle steps (their activity and memory)."""
    e = _per_step(path)
    held = f"(({e['held']}) == 1)"
    return {"act": f"({e['act']}) and {held}", "fb": f"({e['fb']}) and {held}"}


def _bucket_queries(path: str, bucket_s: float) -> dict[str, str]:
    e, b = _per_step(path), _range(bucket_s)
    return {
        "n": f"count_over_time({_over(path, e['act'], b)})",
        "act_sum": f"sum_over_time({_over(path, e['act'], b)})",
    }


def activity_probes() -> dict[str, str]:
    """field -> instant query: its GPU models now, under every name the field has had (signals.csv). The report's
    activity is GR_ENGINE_ACTIVE when any GPU exports it, else GPU_UTIL; the models give the MIG shares."""
    return {f: f"count by (modelName) ({promql_names(f)})" for f in (GR_ENGINE_ACTIVE, GPU_UTIL)}


def activity_of(probes: dict[str, list[dict]]) -> tuple[str, pd.Series]:
    """(activity field, its GPU models) from the answers of :func:`activity_probes`."""
    used = GR_ENGINE_ACTIVE if probes.get(GR_ENGINE_ACTIVE) else GPU_UTIL
    return used, pd.Series([r["metric"].get("modelName", "") for r in probes.get(used) or []], dtype="string")


# ----------------------------------------------------------------------------------------------
# sending: every query of the window at once
# ----------------------------------------------------------------------------------------------
@dataclass
class Answers:
    """What Prometheus answered for one window (:func:`fetch_totals`), before any frame is built."""

    path: str
    end_ts: float
    window_s: float
    bucket_s: float
    #: name -> instant answer (:func:`totals_queries`)
    vectors: dict[str, list[dict]]
    #: name -> range answer (:func:`_held_queries`, :func:`_bucket_queries`); ``held`` answers may still be on their
    #: way (a Future: :func:`fetch_totals` ``defer_held``)
    held: dict[str, list[dict] | Future]
    buckets: dict[str, list[dict]]
    #: field -> answer of :func:`activity_probes` (None when not asked)
    probes: dict[str, list[dict]] | None
    sent: list[str]


def _send(src, path: str, window_s: float, bucket_s: float, probe: bool, defer_held: bool = False) -> Answers:
    end_ts = src.end.timestamp()
    step_s = recording.rule_resolution()
    start = end_ts - window_s + step_s  # zombie steps only, at the rule's resolution
    # heatmap: per series per bucket (bucket ends aligned to multiples of the bucket, so buckets start there too)
    b_end = np.floor(end_ts / bucket_s) * bucket_s
    b_start = max(b_end - window_s + bucket_s, np.ceil((end_ts - window_s) / bucket_s) * bucket_s + bucket_s)
    jobs = {("n", k): (src.query, (q,)) for k, q in totals_queries(path, window_s).items()}
    jobs.update({("h", k): (src.range_query, (q, start, end_ts, step_s)) for k, q in _held_queries(path).items()})
    jobs.update(
        {("b", k): (src.range_query, (q, b_start, b_end, bucket_s)) for k, q in _bucket_queries(path, bucket_s).items()}
    )
    if probe:
        jobs.update({("m", f): (src.query, (q,)) for f, q in activity_probes().items()})
    # independent queries, sent side by side: Prometheus evaluates them in parallel while the client reads answers
    pool = ThreadPoolExecutor(max_workers=len(jobs))
    try:
        futures = {kind: pool.submit(fn, *args) for kind, (fn, args) in jobs.items()}
        got = {kind: f if defer_held and kind[0] == "h" else f.result() for kind, f in futures.items()}
    finally:
        pool.shutdown(wait=not defer_held)
    part = {p: {k: v for (kind, k), v in got.items() if kind == p} for p in ("n", "h", "b", "m")}
    return Answers(
        path=path,
        end_ts=end_ts,
        window_s=window_s,
        bucket_s=bucket_s,
        vectors=part["n"],
        held=part["h"],
        buckets=part["b"],
        probes=part["m"] if probe else None,
        sent=[args[0] for fn, args in jobs.values()],
    )


def fetch_totals(src, window_s: float, bucket_s: float, *, probe: bool = True, defer_held: bool = False) -> Answers:
    """Ask ``src`` (a source that answers PromQL; NotProvided otherwise) for the window's totals, all queries at
    once: the rules path's, plus :func:`activity_probes` when ``probe``; the raw path's only when the recording-rule
    series have no point in the window (the rules are not installed). The answers of the rules path are exactly
    what a probe of the rule series (``count(count_over_time(<rule>[window]))``) would have asked first.

    ``defer_held``: return as soon as every answer but the held-idle steps' is in, with those two still on their way
    (:class:`~concurrent.futures.Future` in ``held``, an error raised by :func:`build_totals` when it reads them): they
    are the window's largest answers and come last, and :func:`build_totals` adds up everything else meanwhile."""
    got = _send(src, "rules", window_s, bucket_s, probe, defer_held)
    if got.vectors["n"]:
        return got
    for pending in got.held.values():  # the rule series are not there: what their held steps answer is not read
        if isinstance(pending, Future):
            pending.cancel()
    raw = _send(src, "raw", window_s, bucket_s, probe=False, defer_held=defer_held)
    raw.probes, raw.sent = got.probes, got.sent + raw.sent
    return raw


# ----------------------------------------------------------------------------------------------
# answers -> frames
# ----------------------------------------------------------------------------------------------
_KEY_COLS = [*SERIES_KEYS, "uuid", "model"]


class _Keys:
    """Series label set -> key (:data:`_KEY_COLS`), normalised once per label set: every answer of one window
    repeats the same series. A series without a pod label on a GPU a pod holds through DRA (``holders``:
    :func:`gpulib.kube.dra.dra_holders`) gets that pod, as the frames path's
    :func:`gpulib.kube.dra.attribute_series` gives it; once per series, not per point."""

    def __init__(self, holders: dict[tuple[str, str, str], tuple[str, str, str]] | None = None) -> None:
        self._seen: dict[tuple, tuple] = {}
        self._holders = holders or {}

    def __call__(self, metric: dict) -> tuple:
        raw = tuple(metric.items())
        key = self._seen.get(raw)
        if key is None:
            lab = normalise_labels(metric)
            held = self._holders.get((lab["node"], lab["uuid"], lab["gpu_i_profile"])) if not lab["pod"] else None
            if held is not None:
                lab["namespace"], lab["pod"], lab["container"] = held
            key = self._seen[raw] = tuple(lab[c] for c in _KEY_COLS)
        return key


def _vector(result: list[dict], key: _Keys) -> dict[tuple, float]:
    return {key(r["metric"]): float(r["value"][1]) for r in result}


def _arrays(r: dict) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, values) of one range-answer series: ``ts``/``v`` arrays, or the JSON ``values`` pairs."""
    if "ts" in r:
        return np.asarray(r["ts"], dtype=float), np.asarray(r["v"], dtype=float)
    pairs = np.asarray(r.get("values") or [], dtype=float).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


@dataclass
class _Flat:
    """A range answer as flat arrays: ``keys[i]`` is series i, ``sid`` the series of each point."""

    keys: list[tuple]
    sid: np.ndarray
    t: np.ndarray
    v: np.ndarray


def _flat(result: list[dict], key: _Keys) -> _Flat:
    keys, ts, vs = [], [], []
    for r in result:
        t, v = _arrays(r)
        keys.append(key(r["metric"]))
        ts.append(t)
        vs.append(v)
    lengths = np.array([len(t) for t in ts], dtype=np.int64)
    cat = (lambda parts: np.concatenate(parts)) if ts else (lambda parts: np.empty(0))
    return _Flat(keys, np.repeat(np.arange(len(keys)), lengths), cat(ts), cat(vs))


def _shares(keys: list[tuple], end, nodes, pods, window_s: float, slices) -> pd.DataFrame:
    """share and allocated per series, by the samples path's own rules (prepare_samples, mark_unrequested)."""
    lab = pd.DataFrame(keys, columns=_KEY_COLS)
    lab["timestamp"] = end
    lab["value"] = 0.0
    return mark_unrequested(
        prepare_samples(lab, None, nodes=nodes, window=f"{int(window_s)}s", compute_slices=slices), pods
    )


def build_totals(
    got: Answers,
    *,
    nodes: pd.DataFrame,
    pods: pd.DataFrame,
    th: Thresholds,
    compute_slices: dict[str, float] | None = None,
    activity_field: str | None = None,
) -> UsageTotals:
    """The window's :class:`UsageTotals` from the answers of :func:`fetch_totals`; ``activity_field`` and
    ``compute_slices`` default to what :func:`activity_probes` answered. Raises :class:`EmptyResult` when no
    activity has data."""
    if activity_field is None:
        activity_field, models = activity_of(got.probes or {})
        compute_slices = compute_slices if compute_slices is not None else mig_slices_of(models)
    window_s, step_s, bucket_s = got.window_s, recording.rule_resolution(), got.bucket_s
    end = pd.Timestamp(got.end_ts, unit="s", tz="UTC")
    # GPUs held through DRA carry no pod label unless the exporter maps DRA pods: the claims say who holds them
    key = _Keys(dra_holders(pods))
    answers = {k: _vector(v, key) for k, v in got.vectors.items()}
    keys = sorted(answers["n"])
    if not keys:
        raise EmptyResult(
            f"neither {GR_ENGINE_ACTIVE} nor {GPU_UTIL} has samples in the last {format_duration(window_s)}",
            query=got.sent[-1],
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
    buckets = {k: _flat(v, key) for k, v in got.buckets.items()}
    samples = _bucket_samples(buckets, lab, keys, idx, bucket_s, step_s)
    # the held-idle steps last: with fetch_totals(defer_held=True) they are still being answered until here
    held = {k: _flat(v.result() if isinstance(v, Future) else v, key) for k, v in got.held.items()}
    points = sum(len(a) for a in answers.values()) + sum(len(f.t) for f in (*held.values(), *buckets.values()))
    return UsageTotals(
        path=got.path,
        activity_field=activity_field,
        usage=usage,
        zombies=_zombies(held, nodes, pods, window_s, step_s, th, compute_slices),
        samples=samples,
        end=end,
        step_s=step_s,
        has_fb=bool(np.isfinite(col["fb_max"]).any()),
        queries=got.sent,
        points=points,
    )


def load_totals(
    src,
    window_s: float,
    *,
    nodes: pd.DataFrame,
    pods: pd.DataFrame,
    bucket_s: float,
    th: Thresholds,
    compute_slices: dict[str, float] | None = None,
    activity_field: str | None = None,
) -> UsageTotals:
    """Ask ``src`` (a source that answers PromQL) for the window's totals (:func:`fetch_totals`) and add them up
    (:func:`build_totals`): the rules path when the recording-rule series exist in the window, else the raw path.
    Raises :class:`EmptyResult` when no activity has data."""
    got = fetch_totals(src, window_s, bucket_s, probe=activity_field is None)
    return build_totals(
        got, nodes=nodes, pods=pods, th=th, compute_slices=compute_slices, activity_field=activity_field
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


_ZOMBIE_COLS = [*_KEY_COLS, "share", "start", "end", "duration_s", "fb_used_mean_mib", "activity_max", "gpu_hours"]


def _points_frame(f: _Flat) -> pd.DataFrame:
    """The long frame of a range answer (labels per series, repeated per point), as prepare_samples reads it; only
    the points of series with a pod. Labels are categoricals of the series' label strings (categories sorted, as
    :func:`gpulib.cost.usage.prepare_samples` makes them), so no string is built per point."""
    pod = _KEY_COLS.index("pod")
    kept = [i for i, k in enumerate(f.keys) if k[pod] != ""]
    if not kept:
        return pd.DataFrame(columns=[*_KEY_COLS, "timestamp", "value"])
    series = np.full(len(f.keys), -1, dtype=np.int64)
    series[kept] = np.arange(len(kept))
    at = series[f.sid]
    take = at >= 0
    at = at[take]
    cols: dict[str, Any] = {}
    for j, c in enumerate(_KEY_COLS):
        labels = pd.Series([f.keys[i][j] for i in kept], dtype=object).astype("string").fillna("").astype("category")
        cols[c] = pd.Categorical.from_codes(labels.cat.codes.to_numpy()[at], dtype=labels.dtype)
    cols["timestamp"] = pd.to_datetime(f.t[take], unit="s", utc=True)
    cols["value"] = f.v[take]
    return pd.DataFrame(cols)


def _zombies(held: dict[str, _Flat], nodes, pods, window_s, step_s, th, slices) -> pd.DataFrame:
    """zombie_runs over the held-idle steps (a missing step breaks a run, as a non-held sample does)."""
    frames = {name: _points_frame(held[name]) for name in ("act", "fb")}
    if frames["act"].empty:
        return pd.DataFrame(columns=_ZOMBIE_COLS)
    s = prepare_samples(frames["act"], frames["fb"], nodes=nodes, window=f"{int(window_s)}s", compute_slices=slices)
    s = mark_unrequested(s, pods)
    s["step_s"] = step_s  # the rule's resolution, not the spacing of the held steps
    return zombie_runs(s, th)


def _bucket_samples(
    buckets: dict[str, _Flat], lab: pd.DataFrame, keys: list[tuple], idx: np.ndarray, bucket_s: float, step_s: float
) -> pd.DataFrame:
    """One row per series per heatmap bucket, weighted like the samples they add up (node_time_matrix reads it).
    ``lab`` (share, allocated) row i is the series ``keys[idx[i]]``."""
    n, a = buckets["n"], buckets["act_sum"]
    if not len(n.t):
        return pd.DataFrame(columns=["node", "timestamp", "step_s", "share", "activity", "allocated"])
    # per series of the n answer: its row of lab (-1: a series the totals did not see), its activity sums
    row_of = np.full(len(keys), -1, dtype=np.int64)
    row_of[idx] = np.arange(len(idx))
    where = {k: i for i, k in enumerate(keys)}
    lab_row = np.array([row_of[where[k]] if k in where else -1 for k in n.keys], dtype=np.int64)[n.sid]
    # a series the totals did not see (none: the buckets lie inside the window) has no share
    share = np.append(lab["share"].to_numpy(dtype=float), np.nan)[lab_row]
    allocated = np.append(lab["allocated"].to_numpy(dtype=bool), True)[lab_row]
    act = _aligned(n, a)
    return pd.DataFrame(
        {
            "node": np.array([k[0] for k in n.keys], dtype=object)[n.sid].tolist(),
            # a point at t adds up (t - bucket, t]: the bucket that starts at t - bucket
            "timestamp": pd.to_datetime(n.t - bucket_s, unit="s", utc=True),
            "step_s": n.v * step_s,
            "share": share,
            "activity": act / n.v,
            "allocated": allocated,
        }
    )


def _aligned(n: _Flat, a: _Flat) -> np.ndarray:
    """``a``'s value at each point (series key, time) of ``n``; NaN where ``a`` has none."""
    pos = {k: i for i, k in enumerate(a.keys)}
    starts = np.searchsorted(a.sid, np.arange(len(a.keys) + 1))
    bounds = np.searchsorted(n.sid, np.arange(len(n.keys) + 1))
    out = np.full(len(n.t), np.nan)
    for i, k in enumerate(n.keys):
        j = pos.get(k)
        if j is None:
            continue
        lo, hi = bounds[i], bounds[i + 1]
        ta, va = a.t[starts[j] : starts[j + 1]], a.v[starts[j] : starts[j + 1]]
        tn = n.t[lo:hi]
        if len(ta) == len(tn) and np.array_equal(ta, tn):
            out[lo:hi] = va
        else:
            at = np.searchsorted(ta, tn).clip(0, max(len(ta) - 1, 0))
            hit = (ta[at] == tn) if len(ta) else np.zeros(len(tn), dtype=bool)
            out[lo:hi] = np.where(hit, va[at] if len(ta) else np.nan, np.nan)
    return out
