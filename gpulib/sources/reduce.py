"""Long SERIES frames reduced the way PromQL does it: one value per series (``*_over_time``) or per step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.schema import SERIES_COLUMNS, SUMMARY_COLUMNS


def summarise_frame(df: pd.DataFrame, stat: str) -> pd.DataFrame:
    """Reduce a long SERIES frame to one value per series, the way PromQL's *_over_time functions do."""
    keys = [c for c in SUMMARY_COLUMNS if c not in ("stat", "value")]
    if df.empty:
        return pd.DataFrame(columns=keys + ["value"])
    df = df.sort_values("timestamp")
    g = df.groupby(keys, sort=True, dropna=False)["value"]
    if stat == "avg":
        out = g.mean()
    elif stat == "max":
        out = g.max()
    elif stat == "min":
        out = g.min()
    elif stat == "p95":
        out = g.quantile(0.95, interpolation="linear")
    elif stat == "last":
        out = g.last()
    elif stat == "increase":
        out = g.apply(increase)
    else:  # pragma: no cover - validated by caller
        raise InvalidParameter(stat)
    return out.reset_index()


def _series_codes(raw: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """A number per row naming its series (its ``keys``' values), numbered in order of first appearance. A frame whose
    series come in runs (the demo's and a snapshot's: one device's samples after another's) is numbered by comparing
    each row with the one before, which costs a fraction of hashing every label of every row; any other frame is
    grouped."""
    if not keys:
        return np.zeros(len(raw), dtype=np.int64)
    change = np.zeros(len(raw), dtype=bool)
    change[0] = True
    for k in keys:
        a = raw[k].to_numpy(dtype=object)
        na = pd.isna(a)
        change[1:] |= (a[1:] != a[:-1]) & ~(na[1:] & na[:-1])
    starts = np.flatnonzero(change)
    if not raw.iloc[starts][keys].duplicated().any():  # every series is one run
        return np.cumsum(change) - 1
    return raw.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()


#: how close (in µs) a sample may lie outside ``[t - step, t]`` and still count (float rounding of a step's bounds)
_EDGE_US = 1


def aggregate_steps(
    raw: pd.DataFrame, start: float, end: float, step: float, agg: str, *, series_per_pass: int | None = None
) -> pd.DataFrame:
    """Points every ``step`` in [start, end] (aligned to the step), each the ``agg`` of the samples in
    [t - step, t] of its series: what PromQL's ``<agg>_over_time(x[step])`` returns on a range query.

    Vectorised over every series at once: samples sorted by (series, time) and each series' times offset into its own
    band of one integer key, so one :func:`numpy.searchsorted` finds every window's first and last sample and one
    ``reduceat`` reduces them (the cost grows with samples + windows, with no Python call per series or window)."""
    keys = [c for c in SERIES_COLUMNS if c not in ("timestamp", "value") and c in raw.columns]
    grid = np.arange(np.ceil(start / step) * step, end + step / 2, step)
    if raw.empty or not len(grid):
        return raw.iloc[0:0]
    codes = _series_codes(raw, keys)
    us = pd.DatetimeIndex(raw["timestamp"]).as_unit("us").asi8
    # series in order of first appearance in time (ties: in the frame's order), then each series' samples in time
    _, first = np.unique(codes[np.argsort(us, kind="stable")], return_index=True)
    codes = np.argsort(np.argsort(first, kind="stable"), kind="stable")[codes]
    order = np.lexsort((us, codes))
    codes, us = codes[order], us[order]
    vals = raw["value"].to_numpy(dtype=float)[order]
    lo_us = np.round((grid - step) * 1e6).astype(np.int64) - _EDGE_US
    hi_us = np.round(grid * 1e6).astype(np.int64) + _EDGE_US
    base = min(int(us.min()), int(lo_us.min()))
    band = 1 << int(max(int(us.max()), int(hi_us.max())) - base + 1).bit_length()  # one series' span of keys
    firsts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])  # first sorted row of each series, in code order
    group_codes = codes[firsts]
    outs = []
    chunk = max(1, min(series_per_pass or len(group_codes), (1 << 62) // band))  # code * band fits in an int64
    for c0 in range(0, len(group_codes), chunk):
        gc = group_codes[c0 : c0 + chunk]
        sel = (codes >= gc[0]) & (codes <= gc[-1])
        key = (codes[sel] - gc[0]) * band + (us[sel] - base)
        off = np.flatnonzero(sel)[0]
        qlo = ((gc - gc[0])[:, None] * band + (lo_us - base)[None, :]).ravel()
        qhi = ((gc - gc[0])[:, None] * band + (hi_us - base)[None, :]).ravel()
        lo = np.searchsorted(key, qlo, side="left")
        hi = np.searchsorted(key, qhi, side="right")
        ok = hi > lo
        if not ok.any():
            continue
        idx = np.empty(2 * int(ok.sum()), dtype=np.int64)
        idx[0::2], idx[1::2] = lo[ok], hi[ok]
        v = np.append(vals[sel], 0.0)
        if agg == "avg":
            value = np.add.reduceat(v, idx)[0::2] / (hi[ok] - lo[ok])
        else:
            value = {"max": np.maximum, "min": np.minimum}[agg].reduceat(v, idx)[0::2]
        g = np.repeat(np.arange(c0, c0 + len(gc)), len(grid))[ok]
        outs.append((g, np.tile(grid, len(gc))[ok], value, off + lo[ok]))
    if not outs:
        return raw.iloc[0:0]
    g, t, value, row = (np.concatenate(x) for x in zip(*outs))
    at = np.lexsort((t, g))  # series in order of first appearance, then time
    frame = pd.DataFrame({"timestamp": pd.to_datetime(t[at], unit="s", utc=True), "value": value[at]})
    src = raw.iloc[order[row[at]]]
    for k in keys:
        frame[k] = src[k].to_numpy()
    return frame


def increase(v: pd.Series | np.ndarray) -> float:
    """Counter increase with resets, as PromQL computes it when samples span the whole range."""
    x = np.asarray(v, dtype=float)
    if len(x) < 2:
        return float("nan")
    d = x[1:] - x[:-1]
    return float(x[-1] - x[0] + x[:-1][d < 0].sum())
