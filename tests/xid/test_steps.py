"""xid_ecc_triage never says OK without input, and reads XID events over each step (never point samples)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpulib.xid.steps as xs
from gpulib.core.errors import EmptyResult, GpulibError
from gpulib.core.findings import Severity
from gpulib.core.schema import POD_COLUMNS, empty
from gpulib.sources.base import Source

END = pd.Timestamp("2026-11-29T12:00:00Z")
SCRAPE = 60.0


class StubPrometheus(Source):
    """Raw samples every 60 s; a plain range query returns point samples on the step grid (5 min lookback),
    as Prometheus does (https://prometheus.io/docs/prometheus/latest/querying/basics/#staleness)."""

    name = "stub"

    def __init__(self, raw: dict[str, pd.DataFrame]):
        super().__init__(end=END.to_pydatetime())
        self.raw = raw

    def known_nodes(self):
        return ["n1"]

    def _nodes(self):
        return pd.DataFrame({"node": ["n1"], "gpu_count": [8]})

    def _pods(self):
        return empty(POD_COLUMNS)

    def _native_step(self):
        return SCRAPE

    def _series(self, field, window, node, gpu, step):
        if field not in self.raw:
            raise EmptyResult(f"no {field}", query=field)
        df = self.raw[field]
        end = self.end.timestamp()
        df = df[df["timestamp"] >= pd.Timestamp(end - window.total_seconds(), unit="s", tz="UTC")]
        step = step or max(30.0, math.ceil(window.total_seconds() / 720 / 30) * 30)
        if step == SCRAPE:
            return df
        ts = df["timestamp"].map(pd.Timestamp.timestamp).to_numpy()
        grid = np.arange(math.ceil((end - window.total_seconds()) / step) * step, end + 1, step)
        idx = np.searchsorted(ts, grid, side="right") - 1
        ok = (idx >= 0) & (grid - ts[np.clip(idx, 0, None)] <= 300)
        out = df.iloc[idx[ok]].copy()
        out["timestamp"] = pd.to_datetime(grid[ok], unit="s", utc=True)
        return out

    def _summary(self, field, window, stat, node, gpu):
        raise EmptyResult(f"no {field}", query=field)

    def _inventory(self, window):
        return set(self.raw), []


def _gauge(days: int, spike_at: pd.Timestamp, code: int) -> pd.DataFrame:
    ts = pd.date_range(END - pd.Timedelta(days=days), END, freq="60s")
    v = np.zeros(len(ts))
    hit = (ts >= spike_at) & (ts < spike_at + pd.Timedelta(minutes=10))
    v[hit] = code
    return pd.DataFrame(
        {
            "timestamp": ts,
            "node": "n1",
            "gpu": "5",
            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "model": "H100",
            "pci_bus_id": "",
            "pod": "",
            "namespace": "",
            "container": "",
            "gpu_i_profile": "",
            "gpu_i_id": "",
            "value": v,
        }
    )


def test_no_input_at_all_is_not_ok():
    inp = xs.collect(StubPrometheus({}), "n1", "5", "6h")
    with pytest.raises(GpulibError) as e:
        xs.findings(inp)
    assert "no input" in str(e.value).lower() and e.value.hint


def test_xid_79_in_a_year_long_window_is_found():
    spike = END - pd.Timedelta(days=100, minutes=17)  # 10 minutes of XID 79, between two 12 h grid points
    src = StubPrometheus({"DCGM_FI_DEV_XID_ERRORS": _gauge(365, spike, 79)})
    inp = xs.collect(src, "n1", "5", "365d")
    events = xs.xid_timeline(inp)
    assert 79 in set(events["xid"]), events
    top = xs.findings(inp)[0]
    assert top.severity == Severity.CRITICAL and "79" in top.title
