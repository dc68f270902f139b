"""gpulib.sources.reduce.aggregate_steps (what ``<agg>_over_time(x[step])`` returns on a range query, computed on
raw samples for the demo and snapshot sources) against the plain per-series, per-window loop it replaced, on random
frames with irregular samples, duplicate times, a sample on a window's edge, empty series keys and series that
start at the same time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpulib.core.schema import SERIES_COLUMNS
from gpulib.sources.reduce import aggregate_steps


def loop(raw: pd.DataFrame, start: float, end: float, step: float, agg: str) -> pd.DataFrame:
    """One series and one window at a time (the definition, written out)."""
    keys = [c for c in SERIES_COLUMNS if c not in ("timestamp", "value") and c in raw.columns]
    grid = np.arange(np.ceil(start / step) * step, end + step / 2, step)
    fn = {"avg": np.mean, "max": np.max, "min": np.min}[agg]
    rows = []
    # series in order of first appearance in time, ties in the frame's order
    for key, g in raw.sort_values("timestamp", kind="stable").groupby(keys, dropna=False, sort=False):
        ts = np.array([t.timestamp() for t in g["timestamp"]])
        vals = g["value"].to_numpy(dtype=float)
        for t in grid:
            inside = (ts >= t - step - 1e-6) & (ts <= t + 1e-6)
            if inside.any():
                rows.append(
                    {
                        "timestamp": pd.Timestamp(t, unit="s", tz="UTC"),
                        "value": fn(vals[inside]),
                        **dict(zip(keys, key)),
                    }
                )
    return pd.DataFrame(rows, columns=["timestamp", "value", *keys])


def frame(seed: int, series: int = 7, samples: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    t0 = 1_764_000_000.0
    for s in range(series):
        times = t0 + np.sort(rng.choice(np.arange(0, 3600, 15), size=samples, replace=True))  # duplicates too
        if s % 3 == 0:
            times = np.append(times, t0 + 600.0)  # exactly on a 300 s edge
        for t in times:
            rows.append(
                {
                    "timestamp": pd.Timestamp(t, unit="s", tz="UTC"),
                    "node": f"n{s % 3}",
                    "gpu": str(s),
                    "uuid": f"GPU-{s}",
                    "pci_bus_id": "",
                    "model": "H100",
                    "pod": "" if s % 2 else f"p{s}",
                    "namespace": "",
                    "container": "",
                    "gpu_i_profile": "",
                    "gpu_i_id": "",
                    "value": float(rng.integers(0, 100)),
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("agg", ["avg", "max", "min"])
@pytest.mark.parametrize("step", [60.0, 300.0, 37.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_window_of_every_series_is_the_loops(agg, step, seed):
    raw = frame(seed)
    start, end = 1_764_000_000.0 + 120, 1_764_000_000.0 + 3300
    got = aggregate_steps(raw, start, end, step, agg).reset_index(drop=True)
    want = loop(raw, start, end, step, agg)
    assert len(got) > 0
    pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12)


def test_series_in_several_passes_give_the_same_frame():
    """A fleet whose keys do not fit one int64 band is reduced in passes of series; the passes join seamlessly."""
    raw = frame(3, series=9)
    start, end = 1_764_000_000.0, 1_764_000_000.0 + 3600
    whole = aggregate_steps(raw, start, end, 300.0, "max")
    parts = aggregate_steps(raw, start, end, 300.0, "max", series_per_pass=2)
    pd.testing.assert_frame_equal(parts, whole)


@pytest.mark.parametrize("agg", ["avg", "max"])
def test_a_frame_whose_series_come_in_runs_or_interleaved_gives_the_same_windows(agg):
    """The demo's frames hold one series after another (numbered by comparing neighbours), Prometheus' may interleave
    them, and one series may come back after another (numbered by grouping): the windows are the loop's either way."""
    raw = frame(5, series=6).sort_values(["uuid", "timestamp"], kind="stable").reset_index(drop=True)
    start, end = 1_764_000_000.0, 1_764_000_000.0 + 3600
    runs = aggregate_steps(raw, start, end, 120.0, agg)
    shuffled = raw.sample(frac=1.0, random_state=0)
    split = pd.concat([raw.iloc[: len(raw) // 2], raw.iloc[len(raw) // 2 :].iloc[::-1]])  # a series cut in two runs
    for other in (shuffled, split):
        pd.testing.assert_frame_equal(
            aggregate_steps(other, start, end, 120.0, agg).reset_index(drop=True),
            loop(other, start, end, 120.0, agg),
            check_dtype=False,
            rtol=1e-12,
        )
    pd.testing.assert_frame_equal(runs.reset_index(drop=True), loop(raw, start, end, 120.0, agg), check_dtype=False)


def test_no_sample_in_the_range_is_an_empty_frame():
    raw = frame(4)
    assert aggregate_steps(raw, 1_700_000_000.0, 1_700_000_600.0, 60.0, "avg").empty
    assert aggregate_steps(raw.iloc[0:0], 1_764_000_000.0, 1_764_003_600.0, 60.0, "avg").empty
