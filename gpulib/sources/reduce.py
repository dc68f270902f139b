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


def aggregate_steps(raw: pd.DataFrame, start: float, end: float, step: float, agg: str) -> pd.DataFrame:
    """Points every ``step`` in [start, end] (aligned to the step), each the ``agg`` of the samples in
    [t - step, t] of its series: what PromQL's ``<agg>_over_time(x[step])`` returns on a range query."""
    keys = [c for c in SERIES_COLUMNS if c not in ("timestamp", "value")]
    grid = np.arange(np.ceil(start / step) * step, end + step / 2, step)
    fn = {"avg": np.mean, "max": np.max, "min": np.min}[agg]
    parts = []
    for key, g in raw.sort_values("timestamp").groupby([k for k in keys if k in raw.columns], dropna=False, sort=False):
        ts = g["timestamp"].map(pd.Timestamp.timestamp).to_numpy()
        vals = g["value"].to_numpy(dtype=float)
        lo = np.searchsorted(ts, grid - step - 1e-6, side="left")
        hi = np.searchsorted(ts, grid + 1e-6, side="right")
        ok = hi > lo
        if not ok.any():
            continue
        out = np.array([fn(vals[a:b]) for a, b in zip(lo[ok], hi[ok])])
        frame = pd.DataFrame({"timestamp": pd.to_datetime(grid[ok], unit="s", utc=True), "value": out})
        for k, v in zip([k for k in keys if k in raw.columns], key if isinstance(key, tuple) else (key,)):
            frame[k] = v
        parts.append(frame)
    return pd.concat(parts, ignore_index=True) if parts else raw.iloc[0:0]


def increase(v: pd.Series | np.ndarray) -> float:
    """Counter increase with resets, as PromQL computes it when samples span the whole range."""
    x = np.asarray(v, dtype=float)
    if len(x) < 2:
        return float("nan")
    d = x[1:] - x[:-1]
    return float(x[-1] - x[0] + x[:-1][d < 0].sum())
