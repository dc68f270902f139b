"""Node verdicts from hand-built histories: each rule of gpulib/data/reliability/node_health_rules.csv fires on the
case it is written for, not on its near miss, and an exporter gap is neither quiet nor healthy."""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.core.errors import EmptyResult
from gpulib.core.schema import HISTORY_COLUMNS
from gpulib.reliability.steps import NodeHealthInputs, findings, verdicts
from gpulib.reliability.timeline import coverage
from gpulib.reliability.verdict import node_verdict
from gpulib.sources.history import NodeHistory

END = pd.Timestamp("2026-12-01T06:45:00Z")
N = "node-a"


def ev(*rows) -> pd.DataFrame:
    out = []
    for r in rows:
        d = dict(zip(("ago", "gpu", "signal", "code", "detail", "lasts"), r + ("",) * (6 - len(r))))
        t = END - pd.Timedelta(d["ago"])
        out.append(
            {
                "time": t,
                "end": t + pd.Timedelta(d["lasts"]) if d["lasts"] else pd.NaT,
                "node": N,
                "gpu": d["gpu"],
                "signal": d["signal"],
                "code": str(d["code"]),
                "value": 1.0,
                "detail": d["detail"],
                "origin": "test",
            }
        )
    return pd.DataFrame(out, columns=HISTORY_COLUMNS)


def verdict(frame):
    start = END - pd.Timedelta("30d")
    return node_verdict(frame, N, END, coverage(frame, N, start, END))


def test_nothing_is_healthy():
    assert verdict(ev(("3d", "0", "xid", 13))).verdict == "healthy"  # an application XID is not a GPU fault


def test_a_fresh_hardware_xid_without_diag_is_an_open_fault_and_a_passed_diag_closes_it():
    assert verdict(ev(("2h", "5", "xid", 79))).verdict == "faulted"
    closed = verdict(ev(("3h", "5", "xid", 79), ("2h", "5", "reset", "reset"), ("1h", "5", "diag", "dcgmi", "pass")))
    assert closed.verdict == "recovering"


def test_xid_48_then_64_a_minute_later_is_one_incident():
    v = verdict(ev(("20d", "1", "xid", 48), ("20d", "1", "xid", 64), ("10d", "1", "xid", 48)))
    assert v.verdict == "healthy"  # two incidents in 30 days: under the repeat-offender count of 3


def test_three_hardware_incidents_on_one_gpu_in_30_days_is_a_repeat_offender():
    v = verdict(ev(("25d", "6", "xid", 79), ("15d", "6", "xid", 79), ("5d", "6", "xid", 79)))
    assert v.verdict == "repeat_offender"
    f = findings(NodeHealthInputs(N, "7d", verdict=v))[0]
    assert f.gpu == "6" and "RMA" in f.escalation and f.data["count"] == 3
    assert sum("UTC: XID 79" in e for e in f.evidence) == 3


def test_three_incidents_spread_over_three_gpus_are_not_a_repeat_offender():
    v = verdict(ev(("25d", "1", "xid", 79), ("15d", "2", "xid", 79), ("5d", "3", "xid", 79)))
    assert v.verdict != "repeat_offender"


def test_a_rising_condition_rate_is_degrading_and_names_the_test():
    flaps = [(f"{h}h", "", "condition", "Ready", "Ready=False", "5m") for h in (10, 30, 50, 70, 90)]
    v = verdict(ev(*flaps))
    assert v.verdict == "degrading"
    f = findings(NodeHealthInputs(N, "7d", verdict=v))[0]
    assert "rate-ratio" in f.data["test"] and f.data["p"] < 0.01


def test_a_steady_condition_rate_is_not_degrading():
    flaps = [(f"{d}d", "", "condition", "Ready", "Ready=False", "5m") for d in range(1, 28, 3)]
    assert verdict(ev(*flaps)).verdict == "healthy"


def test_a_window_mostly_without_data_is_incomplete_not_healthy():
    frame = ev(("6d", "", "no_data", "dcgm-exporter", "", "5d"))
    hist = NodeHistory(frame, {"xid": "test"}, {}, END - pd.Timedelta("30d"), END)
    with pytest.raises(EmptyResult, match="no data is not healthy"):
        verdicts(NodeHealthInputs(N, "7d", hist, END - pd.Timedelta("7d"), END))


def test_a_gap_is_taken_out_of_the_exposure():
    # 4 flaps in the last 7 days; 21 days before them with no flap, but 20 of those days had no data: too
    # little observed time before to call a rise (the same flaps with full coverage are degrading)
    flaps = [(f"{h}h", "", "condition", "Ready", "Ready=False", "5m") for h in (10, 40, 80, 120)]
    gap = [("28d", "", "no_data", "dcgm-exporter", "", "20d")]
    assert verdict(ev(*flaps)).verdict == "degrading"
    assert verdict(ev(*flaps, *gap)).verdict == "healthy"


def test_overlapping_gaps_count_once():
    frame = ev(("6d", "", "no_data", "a", "", "4d"), ("5d", "", "no_data", "b", "", "4d"))
    cov = coverage(frame, N, END - pd.Timedelta("7d"), END)
    assert cov.no_data(END - pd.Timedelta("7d"), END) == pd.Timedelta("5d")


def _codes_nvidia_says_to_ignore() -> list[int]:
    """Codes used on datacenter GPUs whose immediate action in NVIDIA's catalog (gpulib/data/xid/xid_catalog.csv,
    read here as plain CSV) is IGNORE, RESTART_APP or CHECK_UVM."""
    import csv

    from tests.helpers.pinned import ROOT

    rows = csv.DictReader(open(ROOT / "gpulib" / "data" / "xid" / "xid_catalog.csv"))
    return sorted(
        int(r["code"])
        for r in rows
        if r["immediate_action"] in ("IGNORE", "RESTART_APP", "CHECK_UVM") and r["unused_on_datacenter"] == "no"
    )


def test_codes_nvidia_says_to_ignore_are_no_hardware_incident():
    """One XID 92 made a node faulted; three XID 63 (row-remap events) in 30 days a repeat offender."""
    codes = _codes_nvidia_says_to_ignore()
    assert {37, 38, 44, 63, 66, 67, 92, 93, 94, 108, 121, 137, 152, 153, 157, 159, 160, 161, 162} <= set(codes)
    for code in codes:
        v = verdict(ev(("2h", "5", "xid", code)))
        assert v.verdict == "healthy", (code, [h.evidence for h in v.hits])
    thrice = verdict(ev(("20d", "5", "xid", 63), ("10d", "5", "xid", 63), ("2d", "5", "xid", 63)))
    assert thrice.verdict == "healthy", [h.evidence for h in thrice.hits]


def test_an_xid_s_incident_class_comes_from_nvidia_s_immediate_action():
    from gpulib.reliability.timeline import classify

    got = classify(ev(("2h", "5", "xid", 79), ("2h", "5", "xid", 92), ("2h", "5", "xid", 48), ("2h", "5", "xid", 13)))
    # 79: RESTART_BM, 92: IGNORE, 48: WORKFLOW_XID_48, 13: RESTART_APP (the catalog's immediate_action column)
    assert list(got["incident_class"]) == ["node_reboot", "ignore", "memory", "application"]
