"""The demo fleet's 90-day history (gpulib/data/demo/demo_history.yaml via gpulib/demo/history.py): the planted
cases are in it, exporter gaps hold no DCGM event, and the window of Source.node_history is applied."""

from __future__ import annotations

import pandas as pd
import pytest

import gpulib
from gpulib.core.errors import UnknownNode

END = "2026-12-01T06:45:00Z"
DCGM = ("xid", "ecc_sbe", "ecc_dbe", "remap_failure", "pcie_replay")


@pytest.fixture(scope="module")
def src():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        yield gpulib.connect("demo")


@pytest.fixture(scope="module")
def ev(src):
    return src.node_history("90d").events


def test_history_spans_ninety_days(ev):
    span = ev["time"].max() - ev["time"].min()
    assert span > pd.Timedelta(days=85)
    assert ev["time"].min() >= pd.Timestamp(END) - pd.Timedelta(days=90)


def test_history_is_deterministic(ev):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        again = gpulib.connect("demo").node_history("90d").events
    pd.testing.assert_frame_equal(ev, again)


def test_exporter_gaps_hold_no_dcgm_event(ev):
    gaps = ev[ev["signal"] == "no_data"]
    assert set(gaps["node"]) == {"a100-80-1", "l4-spot-0"}
    for _, g in gaps.iterrows():
        inside = ev[(ev["node"] == g["node"]) & ev["signal"].isin(DCGM) & (ev["time"] >= g["time"])]
        assert (inside["time"] >= g["end"]).all(), f"a DCGM event inside the exporter gap of {g['node']}"


def test_the_driver_upgrade_raises_xid13_on_its_pool_only(src, ev):
    pools = src.nodes().set_index("node")["instance_type"]
    x13 = ev[(ev["signal"] == "xid") & (ev["code"] == "13")].copy()
    x13["pool"] = x13["node"].map(pools)
    change = pd.Timestamp(END) - pd.Timedelta(days=14)
    p5 = x13[x13["pool"] == "p5.48xlarge"]
    rest = x13[x13["pool"] != "p5.48xlarge"]
    # 14 days after vs 76 days before: the rate per day after is several times the rate before on p5 only
    rate = lambda d, after: len(d[(d["time"] >= change) == after]) / (14 if after else 76)  # noqa: E731
    assert rate(p5, True) > 3 * rate(p5, False)
    assert rate(rest, True) < 3 * max(rate(rest, False), 1e-9)


def test_the_repeat_offender_comes_back_five_times(ev):
    x79 = ev[(ev["signal"] == "xid") & (ev["code"] == "79") & (ev["node"] == "h200-infer-0")]
    assert len(x79) == 5 and set(x79["gpu"]) == {"6"}
    cordons = ev[(ev["signal"] == "cordon") & (ev["node"] == "h200-infer-0")]
    assert len(cordons) == 5 and cordons["end"].notna().all() and (cordons["end"] > cordons["time"]).all()


def test_the_scenario_incidents_are_in_the_history_at_the_series_time(src, ev):
    x = ev[(ev["node"] == "dgx-h100-1") & (ev["signal"] == "xid") & (ev["code"] == "79")]
    assert x["time"].tolist() == [pd.Timestamp(END) - pd.Timedelta(hours=2)]
    assert x["gpu"].tolist() == ["5"]


def test_node_history_keeps_the_window_and_the_node(src):
    h = src.node_history("7d", node="l4-spot-0")
    assert set(h.events["node"]) == {"l4-spot-0"}
    assert (h.events["time"] >= pd.Timestamp(END) - pd.Timedelta(days=7)).all()
    assert h.read and not h.missing


def test_node_history_of_an_unknown_node_is_a_usage_error(src):
    with pytest.raises(UnknownNode):
        src.node_history("7d", node="no-such-node")
