"""The live node history against a real Prometheus backfilled with the demo history written the way the exporters
write it (gpulib/demo/history_series.py: the windowed per-code XID count, the sticky XID gauge, Ready ``unknown``
for an unreachable node, a deleted pod's restart series ending): the XIDs, NotReady spells and restarts it reads
are the demo's own, and they move with the window end (``GPUOPS_END``)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from gpulib.demo.history import demo_history
from gpulib.demo.history_series import write_history_openmetrics
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.prom_history import STEP_S, UNREACHABLE
from gpulib.sources.prometheus import PrometheusSource
from tests.helpers.pinned import DEMO_END, need_prometheus
from tests.helpers.promharness import PrometheusServer, blocks_from_openmetrics

WINDOW = timedelta(days=7)
#: (window end, whether dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT is on): the demo end and two others, the count
#: on and off (off is dcgm-exporter's default: the history falls back to the gauge)
CASES = [(DEMO_END, True), (DEMO_END - pd.Timedelta("2d"), False), (DEMO_END + pd.Timedelta("3d"), True)]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"end{c[0]:%m%d}-count_{'on' if c[1] else 'off'}")
def case(request, tmp_path_factory):
    need_prometheus()
    end, count = request.param
    work = tmp_path_factory.mktemp("prom-history-live")
    sim = FleetSimulator(end=end)
    om = work / "history.om"
    write_history_openmetrics(sim, om, "9d", 600.0, xid_count=count)
    tsdb = work / "tsdb"
    blocks_from_openmetrics(om, tsdb)
    server = PrometheusServer(tsdb, work)
    src = PrometheusSource(server.url, end=end)
    yield src.node_history(WINDOW), demo_history(sim), pd.Timestamp(end), count
    server.stop()


def _truth(truth: pd.DataFrame, signal: str, end: pd.Timestamp) -> pd.DataFrame:
    t = truth[truth["signal"] == signal]
    return t[(t["time"] > end - WINDOW) & (t["time"] <= end)]


def _sticky_changes(truth: pd.DataFrame, end: pd.Timestamp) -> list[tuple]:
    """What an XID gauge shows at the history's steps: per GPU the last XID's code at each step (the exporter's
    sticky value), and each step where it changes to another code after the first."""
    steps = pd.date_range(end - WINDOW, end, freq=f"{int(STEP_S)}s")
    out = []
    for (node, gpu), g in truth[truth["signal"] == "xid"].groupby(["node", "gpu"]):
        g = g.sort_values("time", kind="stable")
        idx = np.searchsorted(g["time"].to_numpy(), steps.to_numpy(), side="right") - 1
        seen = [g["code"].iloc[i] if i >= 0 else "0" for i in idx]
        out += [(node, gpu, b) for a, b in zip(seen, seen[1:]) if b != a and b != "0"]
    return sorted(out)


@pytest.mark.prometheus
def test_the_live_xids_are_the_demo_xids(case):
    hist, truth, end, count = case
    x = hist.events[hist.events["signal"] == "xid"]
    live = sorted(zip(x["node"], x["gpu"], x["code"]))
    if count:
        want = _truth(truth, "xid", end)
        assert live == sorted(zip(want["node"], want["gpu"], want["code"]))
        assert "DCGM_EXP_XID_ERRORS_COUNT" in hist.read["xid"]
    else:
        assert live == _sticky_changes(truth, end)
        assert hist.read["xid"].startswith("DCGM_FI_DEV_XID_ERRORS changes")
    # the planted repeat offender moves with the window end: its XID 79s are found where the demo put them
    want79 = _truth(truth, "xid", end)
    want79 = want79[want79["code"] == "79"]["time"].sort_values().to_list()
    got79 = x[x["code"] == "79"]["time"].sort_values().to_list()
    assert len(got79) == len(want79) >= 1
    assert all(pd.Timedelta(0) <= g - w <= pd.Timedelta(seconds=2 * STEP_S) for g, w in zip(got79, want79))


@pytest.mark.prometheus
def test_the_live_not_ready_spells_are_the_demo_spells_with_their_reason(case):
    hist, truth, end, _ = case
    got = hist.events[hist.events["signal"] == "condition"]
    want = truth[(truth["signal"] == "condition") & (truth["end"] > end - WINDOW) & (truth["time"] <= end)]
    assert list(zip(got["node"], got["detail"])) == list(zip(want["node"], want["detail"]))
    assert all(abs(g - w) <= pd.Timedelta(seconds=STEP_S) for g, w in zip(got["time"], want["time"]))
    # the planted unreachable spells of l4-spot-0 (gpulib/data/demo/demo_history.yaml) are in the window at the
    # demo end; elsewhere the same spells move with it
    if end == DEMO_END:
        assert (got["detail"] == UNREACHABLE).sum() == 2


@pytest.mark.prometheus
def test_the_live_restarts_are_the_demo_restarts_and_a_deleted_pod_adds_none(case):
    hist, truth, end, _ = case
    got = hist.events[hist.events["signal"] == "pod_restart"].groupby("node")["value"].sum()
    want = _truth(truth, "pod_restart", end).groupby("node")["value"].sum()
    assert got.to_dict() == want.to_dict()
    # l4-spot-0's worker pods are deleted by its evictions within the window: the deletions are no restarts
    ev = _truth(truth, "eviction", end)
    assert (ev["node"] == "l4-spot-0").sum() >= 1
