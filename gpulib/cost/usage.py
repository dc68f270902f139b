"""GPU utilisation over a window: activity, memory held, allocation, idle GPU-hours and zombie pods.

Pure, vectorised pandas over the schema frames (:mod:`gpulib.core.schema`):

* activity comes from ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0..1) when present, else from
  ``DCGM_FI_DEV_GPU_UTIL`` (percent 0..100, the coarse "a kernel was running" figure) divided
  by 100; :func:`select_activity` returns which field was used so reports can say so
  (NVIDIA/dcgm-exporter: etc/default-counters.csv @ d5e5f510).
* memory held comes from ``DCGM_FI_DEV_FB_USED`` (MiB).
* :func:`classify_idle` is the one idle/zombie verdict per pod (the fleet overview, the report and the
  ``GPUMemoryHeldIdle`` alert rule use it or its thresholds).
* one *series* is one (node, GPU, MIG instance, pod) as dcgm-exporter labels it with Kubernetes
  mapping on: samples with an empty ``pod`` label are GPU time nobody was allocated.

Each sample stands for ``step_s`` seconds (the median spacing of its series) of ``share`` of a
GPU: 1 for a whole GPU, ``g/7`` for a MIG ``<g>g.*`` instance (7 compute
slices: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), ``1/replicas`` for a pod on a time-sliced or
MPS-shared GPU (NVIDIA/k8s-device-plugin: api/config/v1/ @ 1b826acc). Summing
``step_s * share / 3600`` gives GPU-hours, so MIG instances and shared replicas are costed by
their share of the physical GPU.

All per-sample work is column arithmetic plus ``groupby`` on an integer series id; nothing
loops over samples in Python (1,024 GPUs x 7 days at 60 s is ~10 M samples: benchmarks/RESULTS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table, threshold
from gpulib.core.timeutil import parse_window

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"

# : multiply the raw value by this to get a 0..1 ratio (units: NVIDIA/dcgm-exporter: etc/default-counters.csv @
# d5e5f510).
ACTIVITY_SCALE = {GR_ENGINE_ACTIVE: 1.0, GPU_UTIL: 0.01}

#: labels that identify one physical GPU / MIG instance, and one series (device + pod).
DEVICE_KEYS = ["node", "gpu", "gpu_i_id"]
SERIES_KEYS = ["node", "gpu", "gpu_i_profile", "gpu_i_id", "pod", "namespace", "container"]
_LABELS = ["uuid", "model"]
_SECONDS_PER_HOUR = 3600.0
#: a gap longer than this many steps breaks a zombie run (missing scrapes are not "held").
_GAP_STEPS = 1.5

_MIG_CLASS = re.compile(r"(?:^|\.)(\d+)g\.", re.IGNORECASE)


@dataclass(frozen=True)
class Thresholds:
    """Idle / zombie thresholds, defaulting to ``gpulib/data/core/thresholds.csv``."""

    idle_activity_max: float
    zombie_activity_max: float
    zombie_min_duration_s: float
    zombie_fb_used_min_mib: float

    @classmethod
    def from_table(cls, **overrides: float) -> "Thresholds":
        keys = cls.__dataclass_fields__
        unknown = set(overrides) - set(keys)
        if unknown:
            raise InvalidParameter(f"unknown threshold(s) {sorted(unknown)}; known: {sorted(keys)}")
        values = {k: float(overrides[k]) if overrides.get(k) is not None else threshold(k) for k in keys}
        return cls(**values)


# ----------------------------------------------------------------------------------------------
# activity selection and normalisation
# ----------------------------------------------------------------------------------------------
def _has_rows(df: pd.DataFrame | None) -> bool:
    return df is not None and len(df) > 0 and df["value"].notna().any()


def select_activity(
    gr_engine_active: pd.DataFrame | None = None, gpu_util: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, str]:
    """Pick the activity metric: ``GR_ENGINE_ACTIVE`` when it has data, else ``GPU_UTIL``.

    Returns ``(frame with value as a 0..1 ratio, field name used)``. Raises
    :class:`InvalidParameter` when neither has data.
    """
    if _has_rows(gr_engine_active):
        return normalise_activity(gr_engine_active, GR_ENGINE_ACTIVE), GR_ENGINE_ACTIVE
    if _has_rows(gpu_util):
        return normalise_activity(gpu_util, GPU_UTIL), GPU_UTIL
    raise InvalidParameter(
        f"no activity data: neither {GR_ENGINE_ACTIVE} nor {GPU_UTIL} has samples",
        hint="check that dcgm-exporter runs on the GPU nodes and its counters CSV enables one of them "
        "(both are on in dcgm-exporter's etc/default-counters.csv)",
    )


def normalise_activity(frame: pd.DataFrame, field: str) -> pd.DataFrame:
    """Return a copy whose ``value`` is activity as a ratio 0..1 (GPU_UTIL percent / 100), clipped."""
    if field not in ACTIVITY_SCALE:
        raise InvalidParameter(f"activity field {field!r} is not one of {sorted(ACTIVITY_SCALE)}")
    _require(frame, ["value"], "activity")
    out = frame.copy(deep=False)  # copy-on-write (pandas >= 3): the caller's frame is never changed
    out["value"] = (pd.to_numeric(out["value"], errors="coerce") * ACTIVITY_SCALE[field]).clip(0.0, 1.0)
    return out


# ----------------------------------------------------------------------------------------------
# shares of a GPU
# ----------------------------------------------------------------------------------------------
def mig_share(profile: pd.Series, compute_slices: pd.Series | float = 7.0) -> pd.Series:
    """Share of the physical GPU for MIG profile names (``"3g.40gb"`` -> 3/7); 1.0 for non-MIG rows.

    ``compute_slices`` is the GPU's compute slice count (7 on A100/H100/H200/B200: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/).
    Compute-instance names (``1c.3g.20gb``) are costed by their GPU instance (3g).
    """
    g = profile.astype("string").fillna("").str.extract(_MIG_CLASS, expand=False)
    g = pd.to_numeric(g, errors="coerce")
    share = g / compute_slices
    return share.fillna(1.0).clip(upper=1.0).astype(float)


def _node_replicas(nodes: pd.DataFrame | None) -> pd.Series:
    """node -> replicas per GPU for time-sliced / MPS nodes (1 otherwise)."""
    if nodes is None or len(nodes) == 0:
        return pd.Series(dtype=float)
    reps = pd.to_numeric(nodes["gpu_replicas"], errors="coerce").fillna(1.0)
    shared = nodes["sharing_strategy"].astype("string").fillna("").str.lower().isin(["time-slicing", "mps"])
    reps = reps.where(shared & (reps > 1), 1.0)
    return pd.Series(reps.to_numpy(dtype=float), index=nodes["node"].astype(str).to_numpy())


# ----------------------------------------------------------------------------------------------
# samples
# ----------------------------------------------------------------------------------------------
def prepare_samples(
    activity: pd.DataFrame,
    fb_used: pd.DataFrame | None = None,
    *,
    nodes: pd.DataFrame | None = None,
    window: str | timedelta | None = None,
    compute_slices: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Join activity (already a 0..1 ratio, see :func:`select_activity`) with FB_USED per sample.

    Adds ``sid`` (integer series id), ``activity``, ``fb_used_mib`` (NaN when FB_USED is absent),
    ``allocated`` (a pod label is present), ``step_s`` and ``share``; sorted by series and time.
    ``compute_slices`` maps model -> MIG compute slices (default 7). ``window`` is used as the
    sample duration only for series with a single sample.
    """
    _require(activity, ["timestamp", "value", *SERIES_KEYS], "activity")
    s = activity.copy(deep=False)  # copy-on-write: label columns are replaced below, not copied first
    for c in SERIES_KEYS + _LABELS:
        if c not in s.columns:
            s[c] = ""
        s[c] = _as_label(s[c])
    s["timestamp"] = _utc(s["timestamp"])
    s = s.rename(columns={"value": "activity"})
    s["activity"] = pd.to_numeric(s["activity"], errors="coerce")
    s = s[s["activity"].notna()].reset_index(drop=True)
    code = _combined_codes(s, SERIES_KEYS)
    t_ns = s["timestamp"].array.asi8
    order = np.lexsort((t_ns, code))
    if not (order == np.arange(len(order))).all():
        s = s.take(order).reset_index(drop=True)
        code = code[order]
    new = np.ones(len(code), dtype=bool)
    new[1:] = code[1:] != code[:-1]
    s["sid"] = np.cumsum(new) - 1

    s["fb_used_mib"] = _fb_per_sample(s, fb_used)
    s["allocated"] = (s["pod"] != "").to_numpy(dtype=bool)
    s["step_s"] = _step_seconds(s, window)

    # shares are a property of the series: compute once per series, broadcast by sid
    lab = s.drop_duplicates("sid").set_index("sid").sort_index()
    lab_model = lab["model"].astype(str)
    slices = lab_model.map(compute_slices).astype(float).fillna(7.0) if compute_slices else 7.0
    share = mig_share(lab["gpu_i_profile"], slices)
    reps = lab["node"].astype(str).map(_node_replicas(nodes)).astype(float).fillna(1.0)
    share = share.where(lab["pod"].astype(str) == "", share / reps)
    s["share"] = share.to_numpy(dtype=float)[s["sid"].to_numpy()]
    return s


def _combined_codes(df: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """One int64 per row identifying its combination of categorical ``keys`` (mixed-radix of the codes)."""
    code = np.zeros(len(df), dtype=np.int64)
    for c in keys:
        cat = df[c].cat
        code = code * (len(cat.categories) + 1) + cat.codes.to_numpy().astype(np.int64) + 1
    return code


def _utc(col: pd.Series) -> pd.Series:
    """Timestamps as tz-aware UTC datetimes (nanosecond unit so integer keys agree across frames)."""
    if not isinstance(col.dtype, pd.DatetimeTZDtype):
        col = pd.to_datetime(col, utc=True)
    return col.dt.tz_convert("UTC").dt.as_unit("ns")


def _as_label(col: pd.Series) -> pd.Series:
    """Labels as categoricals of strings (missing -> ""), cheap to group at fleet scale.

    Series frames repeat each label over runs of consecutive rows (a series' samples), so only the
    first row of every run is converted and factorised, and the codes are repeated over the run:
    at 2 M rows this is ~10x cheaper than factorising every row, with the same result.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.cat.add_categories([""]) if "" not in col.cat.categories else col
        return col.fillna("")
    values = col.to_numpy(dtype=object)
    if len(values) < 2:
        return col.astype("string").fillna("").astype("category")
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    heads = pd.Series(values[starts], dtype="object").astype("string").fillna("").astype("category")
    codes = np.repeat(heads.cat.codes.to_numpy(), np.diff(np.append(starts, len(values))))
    return pd.Series(pd.Categorical.from_codes(codes, dtype=heads.dtype), index=col.index, name=col.name)


def _fb_per_sample(s: pd.DataFrame, fb_used: pd.DataFrame | None) -> pd.Series:
    """FB_USED (MiB) of the sample's device at the sample's timestamp (device-level, pod-agnostic).

    Devices are matched through a small table of distinct (node, gpu, gpu_i_id) keys, then the
    samples are joined on integer (device, timestamp) keys, so no per-sample strings are built.
    """
    if fb_used is None or len(fb_used) == 0:
        return pd.Series(np.nan, index=s.index)
    _require(fb_used, ["timestamp", "value", "node", "gpu"], "fb_used")
    fb = pd.DataFrame(
        {c: (fb_used[c].reset_index(drop=True) if c in fb_used.columns else "") for c in DEVICE_KEYS},
        index=pd.RangeIndex(len(fb_used)),
    )
    for c in DEVICE_KEYS:
        fb[c] = _as_label(fb[c])
    fb_code = _combined_codes(fb, DEVICE_KEYS)
    s_code = _combined_codes(s, DEVICE_KEYS)
    # distinct devices of each frame (small), matched by their label strings
    fb_u, fb_dev = np.unique(fb_code, return_inverse=True)
    s_u, s_dev = np.unique(s_code, return_inverse=True)
    fb_first = pd.Series(np.arange(len(fb_code))).groupby(fb_dev).first().to_numpy()
    s_first = pd.Series(np.arange(len(s_code))).groupby(s_dev).first().to_numpy()
    fb_keys = fb.iloc[fb_first][DEVICE_KEYS].astype(str).assign(_f=np.arange(len(fb_u)))
    s_keys = s.iloc[s_first][DEVICE_KEYS].astype(str).assign(_s=np.arange(len(s_u)))
    dev_map = fb_keys.merge(s_keys, on=DEVICE_KEYS, how="left")
    fb_to_s = dev_map.sort_values("_f")["_s"].to_numpy(dtype=float)
    # one int64 key per sample: device x time (ms since the earliest sample)
    fb_t = _utc(fb_used["timestamp"]).array.asi8 // 1_000_000
    s_t = s["timestamp"].array.asi8 // 1_000_000
    t0 = min(int(fb_t.min()), int(s_t.min()))
    span = max(int(fb_t.max()), int(s_t.max())) - t0 + 1
    fb_sdev = fb_to_s[fb_dev]
    ok = ~np.isnan(fb_sdev)
    right_key = fb_sdev[ok].astype(np.int64) * span + (fb_t[ok] - t0)
    vals = pd.to_numeric(fb_used["value"], errors="coerce").to_numpy(dtype=float)[ok]
    right = pd.Series(vals, index=right_key)
    if right.index.has_duplicates:
        right = right.groupby(level=0).max()
    left_key = s_dev.astype(np.int64) * span + (s_t - t0)
    pos = right.index.get_indexer(left_key)
    out = np.where(pos >= 0, right.to_numpy()[pos], np.nan)
    return pd.Series(out, index=s.index)


def _step_seconds(s: pd.DataFrame, window: str | timedelta | None) -> pd.Series:
    """Median spacing of each series' samples (s); single-sample series get the fleet median or the window."""
    gaps = s["timestamp"].diff().dt.total_seconds()
    gaps = gaps.where(s["sid"].eq(s["sid"].shift()))
    step = gaps.groupby(s["sid"]).transform("median")
    fallback = gaps.median()
    if pd.isna(fallback):
        if window is None:
            raise InvalidParameter(
                "every series has a single sample, so the sample duration is unknown",
                hint="pass window=... (e.g. '6h') or query a range series with a step",
            )
        fallback = parse_window(window).total_seconds()
    return step.fillna(fallback).astype(float)


def _require(df: pd.DataFrame | None, cols: list[str], name: str) -> None:
    if df is None:
        raise InvalidParameter(f"{name} frame is missing")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InvalidParameter(
            f"{name} frame lacks column(s) {missing}",
            hint="build it with the gpulib.core.schema columns (SERIES_COLUMNS/NODE_COLUMNS/POD_COLUMNS)",
        )


# ----------------------------------------------------------------------------------------------
# per-series totals and roll-ups
# ----------------------------------------------------------------------------------------------
def series_usage(samples: pd.DataFrame, thresholds: Thresholds | None = None) -> pd.DataFrame:
    """One row per series (device x pod) with GPU-hours, activity and memory over the window.

    Columns: SERIES_KEYS, uuid, model, ``gpu_hours`` (share-weighted), ``allocated_gpu_hours``,
    ``active_gpu_hours`` (allocated samples at or above ``idle_activity_max``), ``idle_allocated_gpu_hours``
    (allocated samples below it: active + idle = allocated), ``busy_gpu_hours`` (activity x allocated
    GPU-hours, for sizing), ``unallocated_gpu_hours``, ``activity_mean``,
    ``activity_p95``, ``fb_used_mean_mib``, ``fb_used_max_mib``, ``share``, ``samples``.
    """
    th = thresholds or Thresholds.from_table()
    w = samples["step_s"] * samples["share"] / _SECONDS_PER_HOUR
    alloc = samples["allocated"].to_numpy()
    cols = pd.DataFrame(
        {
            "sid": samples["sid"],
            "gpu_hours": w,
            "allocated_gpu_hours": w * alloc,
            # active + idle = allocated: a sample is idle below idle_activity_max, active otherwise
            "active_gpu_hours": w * alloc * (samples["activity"] >= th.idle_activity_max),
            "idle_allocated_gpu_hours": w * alloc * (samples["activity"] < th.idle_activity_max),
            # activity-weighted allocated time (mean activity x hours): what sizing needs
            "busy_gpu_hours": w * alloc * samples["activity"],
            "unallocated_gpu_hours": w * ~alloc,
            "activity_sum": samples["activity"] * w,
            "fb": samples["fb_used_mib"],
            "activity": samples["activity"],
        }
    )
    g = cols.groupby("sid", sort=True)
    out = g[
        [
            "gpu_hours",
            "allocated_gpu_hours",
            "active_gpu_hours",
            "busy_gpu_hours",
            "idle_allocated_gpu_hours",
            "unallocated_gpu_hours",
            "activity_sum",
        ]
    ].sum()
    out["activity_mean"] = (out.pop("activity_sum") / out["gpu_hours"]).where(out["gpu_hours"] > 0)
    out["activity_p95"] = g["activity"].quantile(0.95)
    out["fb_used_mean_mib"] = g["fb"].mean()
    out["fb_used_max_mib"] = g["fb"].max()
    out["samples"] = g.size()
    labels = samples.drop_duplicates("sid").set_index("sid")[SERIES_KEYS + _LABELS + ["share"]]
    labels = labels.astype({c: str for c in SERIES_KEYS + _LABELS})
    return labels.join(out).reset_index()


LEVELS = {
    "gpu": ["node", "gpu", "gpu_i_profile", "gpu_i_id"],
    "node": ["node"],
    "namespace": ["namespace"],
    "workload": ["namespace", "workload", "owner_kind"],
    "pod": ["namespace", "pod"],
}


def attach_workloads(usage: pd.DataFrame, pods: pd.DataFrame | None) -> pd.DataFrame:
    """Add ``workload`` and ``owner_kind`` from the pods frame (pod name when the pod is unknown)."""
    out = usage.copy()
    if pods is not None and len(pods):
        _require(pods, ["namespace", "pod", "workload", "owner_kind"], "pods")
        p = pods[["namespace", "pod", "workload", "owner_kind"]].astype("string").fillna("")
        p = p.drop_duplicates(["namespace", "pod"]).set_index(["namespace", "pod"])
        key = pd.MultiIndex.from_arrays([out["namespace"].astype(str), out["pod"].astype(str)])
        out["workload"] = p["workload"].reindex(key).to_numpy()
        out["owner_kind"] = p["owner_kind"].reindex(key).to_numpy()
    for c in ("workload", "owner_kind"):
        if c not in out.columns:
            out[c] = pd.NA
    out["workload"] = out["workload"].astype("string").replace("", pd.NA).fillna(out["pod"].astype("string"))
    out["owner_kind"] = out["owner_kind"].astype("string").fillna("")
    return out


def rollup(usage: pd.DataFrame, level: str, *, allocated_only: bool | None = None) -> pd.DataFrame:
    """Sum :func:`series_usage` (optionally priced) to ``level`` in gpu/node/namespace/workload/pod.

    Namespace, workload and pod levels cover allocated series only (unallocated time has no
    owner). ``active_pct`` = active / allocated GPU-hours x 100.
    """
    if level not in LEVELS:
        raise InvalidParameter(f"level={level!r} is not one of {sorted(LEVELS)}")
    keys = LEVELS[level]
    if allocated_only is None:
        allocated_only = level in ("namespace", "workload", "pod")
    u = usage[usage["pod"] != ""] if allocated_only else usage
    if level == "workload" and "workload" not in u.columns:
        u = attach_workloads(u, None)
    sums = [
        c
        for c in (
            "gpu_hours",
            "allocated_gpu_hours",
            "active_gpu_hours",
            "busy_gpu_hours",
            "idle_allocated_gpu_hours",
            "unallocated_gpu_hours",
            "cost",
            "allocated_cost",
            "idle_cost",
            "unallocated_cost",
        )
        if c in u.columns
    ]
    g = u.groupby(keys, sort=True, dropna=False)
    out = g[sums].sum()
    out["fb_used_max_mib"] = g["fb_used_max_mib"].max()
    out["activity_p95"] = g["activity_p95"].max()
    out["series"] = g.size()
    out["active_pct"] = (100.0 * out["active_gpu_hours"] / out["allocated_gpu_hours"]).where(
        out["allocated_gpu_hours"] > 0
    )
    out["allocated_pct"] = (100.0 * out["allocated_gpu_hours"] / out["gpu_hours"]).where(out["gpu_hours"] > 0)
    return out.reset_index()


# ----------------------------------------------------------------------------------------------
# zombies
# ----------------------------------------------------------------------------------------------
def zombie_runs(samples: pd.DataFrame, thresholds: Thresholds | None = None) -> pd.DataFrame:
    """Stretches where a pod holds memory while its GPU does nothing, lasting >= the threshold.

    A sample is *held-idle* when the pod label is set, ``FB_USED >= zombie_fb_used_min_mib`` and
    activity ``< zombie_activity_max``. Consecutive held-idle samples of one series form a run
    (a gap longer than 1.5 steps breaks it); a run lasting ``>= zombie_min_duration_s``
    (last - first + one step) is a zombie. One row per run: SERIES_KEYS, uuid, model, share,
    ``start``, ``end``, ``duration_s``, ``fb_used_mean_mib``, ``activity_max``, ``gpu_hours``.
    """
    th = thresholds or Thresholds.from_table()
    held = (
        samples["allocated"]
        & (samples["fb_used_mib"] >= th.zombie_fb_used_min_mib)
        & (samples["activity"] < th.zombie_activity_max)
    ).to_numpy()
    sid = samples["sid"].to_numpy()
    ts = samples["timestamp"]
    gap = ts.diff().dt.total_seconds().to_numpy() > _GAP_STEPS * samples["step_s"].to_numpy()
    new_run = np.ones(len(samples), dtype=bool)
    if len(samples) > 1:
        new_run[1:] = (sid[1:] != sid[:-1]) | (held[1:] != held[:-1]) | gap[1:]
    run = np.cumsum(new_run)
    h = samples.loc[held, ["sid", "timestamp", "step_s", "share", "fb_used_mib", "activity"]]
    empty_cols = (
        SERIES_KEYS + _LABELS + ["share", "start", "end", "duration_s", "fb_used_mean_mib", "activity_max", "gpu_hours"]
    )
    if h.empty:
        return pd.DataFrame(columns=empty_cols)
    g = h.groupby(run[held], sort=True)
    runs = pd.DataFrame(
        {
            "sid": g["sid"].first(),
            "start": g["timestamp"].min(),
            "end": g["timestamp"].max(),
            "step_s": g["step_s"].first(),
            "fb_used_mean_mib": g["fb_used_mib"].mean(),
            "activity_max": g["activity"].max(),
            "n": g.size(),
        }
    )
    runs["duration_s"] = (runs["end"] - runs["start"]).dt.total_seconds() + runs["step_s"]
    runs = runs[runs["duration_s"] >= th.zombie_min_duration_s]
    labels = samples.drop_duplicates("sid").set_index("sid")[SERIES_KEYS + _LABELS + ["share"]]
    labels = labels.astype({c: str for c in SERIES_KEYS + _LABELS})
    runs = runs.join(labels, on="sid")
    runs["gpu_hours"] = runs["n"] * runs["step_s"] * runs["share"] / _SECONDS_PER_HOUR
    return runs[empty_cols].reset_index(drop=True)


#: the verdicts of :func:`classify_idle`
IDLE_STATES = ("zombie", "idle", "busy")
IDLE_COLUMNS = [
    "namespace",
    "pod",
    "node",
    "devices",
    "activity_mean",
    "activity_max",
    "fb_used_max_mib",
    "zombie_s",
    "zombie_gpu_hours",
    "state",
]


def classify_idle(samples: pd.DataFrame, thresholds: Thresholds | None = None) -> pd.DataFrame:
    """The one idle/zombie rule: one verdict per allocated pod over the window of ``samples``
    (:func:`prepare_samples`), used by the fleet overview, the utilization report and the alert rules.

    * ``zombie``: the pod has a :func:`zombie_runs` run: memory held (``FB_USED >= zombie_fb_used_min_mib``)
      with activity ``< zombie_activity_max`` on every sample for ``>= zombie_min_duration_s``;
    * ``idle``: not a zombie, and the pod's mean activity is ``< idle_activity_max``;
    * ``busy``: the rest.

    Thresholds default to ``gpulib/data/core/thresholds.csv``. Without FB_USED (``fb_used_mib`` all NaN) no pod
    can be a zombie. Columns: :data:`IDLE_COLUMNS` (``devices``: ``node/GPU g`` [``MIG i``] the pod used;
    ``zombie_s``: its longest zombie run; activity as a 0..1 ratio).
    """
    th = thresholds or Thresholds.from_table()
    a = samples[samples["allocated"]]
    if a.empty:
        return pd.DataFrame(columns=IDLE_COLUMNS)
    keys = ["namespace", "pod"]
    lab = a[keys + DEVICE_KEYS].astype(str)
    dev = lab["node"] + "/GPU " + lab["gpu"] + np.where(lab["gpu_i_id"] != "", " MIG " + lab["gpu_i_id"], "")
    f = pd.DataFrame(
        {
            "namespace": lab["namespace"],
            "pod": lab["pod"],
            "node": lab["node"],
            "device": dev,
            "activity": a["activity"],
            "fb": a["fb_used_mib"],
        }
    )
    g = f.groupby(keys, sort=True)
    out = pd.DataFrame(
        {
            "node": g["node"].first(),
            "devices": g["device"].agg(lambda d: sorted(set(d))),
            "activity_mean": g["activity"].mean(),
            "activity_max": g["activity"].max(),
            "fb_used_max_mib": g["fb"].max(),
        }
    )
    z = zombie_runs(samples, th)
    if len(z):
        zg = z.assign(namespace=z["namespace"].astype(str), pod=z["pod"].astype(str)).groupby(keys)
        out["zombie_s"] = zg["duration_s"].max().reindex(out.index).fillna(0.0)
        out["zombie_gpu_hours"] = zg["gpu_hours"].sum().reindex(out.index).fillna(0.0)
    else:
        out["zombie_s"] = 0.0
        out["zombie_gpu_hours"] = 0.0
    zombie = out["zombie_s"] > 0
    idle = out["activity_mean"] < th.idle_activity_max
    out["state"] = np.select([zombie, idle], ["zombie", "idle"], "busy")
    return out.reset_index()[IDLE_COLUMNS]


# ----------------------------------------------------------------------------------------------
# charts
# ----------------------------------------------------------------------------------------------
def node_time_matrix(samples: pd.DataFrame, freq: str = "1h") -> pd.DataFrame:
    """Tidy node x time-bucket utilisation for a heatmap.

    Columns: ``node``, ``time`` (bucket start, UTC), ``active_pct`` (share-weighted mean activity
    x 100 over every GPU of the node, allocated or not), ``allocated_pct`` (share of GPU time with
    a pod). Pivot with ``df.pivot(index="node", columns="time", values="active_pct")``.
    """
    try:
        bucket = samples["timestamp"].dt.floor(freq)
    except ValueError as exc:
        raise InvalidParameter(f"freq={freq!r} is not a pandas frequency such as '1h' or '15min'") from exc
    w = samples["step_s"] * samples["share"]
    f = pd.DataFrame(
        {
            "node": samples["node"],
            "time": bucket,
            "w": w,
            "aw": w * samples["activity"],
            "alw": w * samples["allocated"],
        }
    )
    g = f.groupby(["node", "time"], sort=True, observed=True)[["w", "aw", "alw"]].sum()
    g["active_pct"] = 100.0 * g["aw"] / g["w"]
    g["allocated_pct"] = 100.0 * g["alw"] / g["w"]
    out = g[["active_pct", "allocated_pct"]].reset_index()
    out["node"] = out["node"].astype(str)
    return out


def window_hours(window: str | timedelta | None, samples: pd.DataFrame | None = None) -> float:
    """Window length in hours: parsed from ``window`` or, when None, the samples' time span + one step."""
    if window is not None:
        return parse_window(window).total_seconds() / _SECONDS_PER_HOUR
    if samples is None or samples.empty:
        raise InvalidParameter(
            "window is None and there are no samples to measure it from", hint="pass window='7d' (the report window)"
        )
    span = (samples["timestamp"].max() - samples["timestamp"].min()).total_seconds()
    return (span + float(samples["step_s"].median())) / _SECONDS_PER_HOUR


def mig_compute_slices() -> dict[str, float]:
    """Canonical model -> MIG compute slices, from ``gpu_specs.csv`` (models without MIG omitted)."""
    specs = load_table("gpu_specs")
    specs = specs[pd.to_numeric(specs["mig_compute_slices"], errors="coerce").notna()]
    return dict(zip(specs["model"], specs["mig_compute_slices"].astype(float)))
