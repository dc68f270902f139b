"""The reliability report's figures on the demo fleet's history (gpulib/data/demo/demo_history.yaml) and on hand-built
histories: the planted driver regression is found, the control upgrade and the Operator change stay quiet, gaps are
no data, the repeat offender ranks first."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gpulib
import gpulib.reliability.report_steps as R
from gpulib.reliability import fleet as F

END = "2026-12-01T06:45:00Z"


@pytest.fixture(scope="module")
def rep():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        src = gpulib.connect("demo")
        return R.build(R.load(src, "30d"), "30d")


def test_only_the_planted_upgrade_is_a_regression(rep):
    regs = [(c.kind, c.scope, c.what) for c in rep.changes if c.regression]
    assert regs == [("driver_change", "p5.48xlarge", "application")]
    quiet = {(c.kind, c.scope) for c in rep.changes if not c.regression}
    assert ("driver_change", "p4de.24xlarge") in quiet and ("operator_change", "every pool") in quiet


def test_the_regression_names_its_test_and_its_interval(rep):
    c = next(c for c in rep.changes if c.regression)
    assert c.test.low > 1.0 and c.test.ratio > c.test.low and "rate-ratio" in c.test.test
    f = next(f for f in R.report_findings(rep) if f.category == "reliability-change")
    assert f.data["ci"][0] > 1.0 and f.data["p"] < 0.05 and "Poisson" in f.data["test"]


def test_the_repeat_offender_ranks_first(rep):
    top = rep.offenders.iloc[0]
    assert (top["node"], top["gpu"]) == ("h200-infer-0", "6") and top["incidents"] == 3


def test_an_exporter_gap_is_taken_out_of_the_exposure(rep):
    fh = rep.fh
    full = 8 * 30.0  # a100-80-1: 8 GPUs, 30 days, but 18 h without data (demo_history.yaml)
    assert F.exposure(fh, {"a100-80-1"}) == pytest.approx(full - 8 * 0.75)


def test_no_exposure_is_no_rate_not_zero(rep):
    fh = rep.fh
    gap = pd.DataFrame(
        [
            {
                "time": fh.start,
                "end": fh.end,
                "node": "a100-80-1",
                "gpu": "",
                "signal": "no_data",
                "code": "",
                "value": 0.0,
                "detail": "",
                "origin": "t",
            }
        ]
    )
    blind = F.FleetHistory(
        pd.concat([fh.events, gap], ignore_index=True), fh.nodes, fh.start, fh.end, history_start=fh.history_start
    )
    rates = F.rates_table(blind, F.fleet_incidents(blind))
    row = rates[rates["pool"] == "p4de.24xlarge"]
    assert (row["GPU-days"] > 0).all()  # a100-80-0 still reports
    assert F.exposure(blind, {"a100-80-1"}) == 0.0


def test_alert_outcomes_count_cleared_runs_per_rule(rep):
    a = rep.alerts.set_index("alert rule")
    assert a.loc["GPUXidError", "cleared share"] == 1.0  # demo_history.yaml: every third XID 13 alert, verdict ok
    assert a.loc["GPUXidCritical", "cleared (ok)"] == 0


def test_cordon_time_is_counted_inside_the_window(rep):
    oos = rep.out_of_service
    mine = oos[oos["node"] == "h200-infer-0"]
    assert len(mine) == 3 and mine["hours"].round(2).tolist() == [4.83] * 3  # 5 h each, 10 min after the XID


def test_score_is_between_zero_and_hundred_and_falls_with_incidents(rep):
    s = rep.score
    assert 0 < s.score < 100
    assert math.isclose(s.incident_term, 0.47 / (0.47 + s.hw_rate))


def test_codes_nvidia_says_to_ignore_are_not_counted_as_hardware_incidents():
    """The report counted XIDs whose immediate action is IGNORE / RESTART_APP / CHECK_UVM as hardware."""
    from tests.reliability.test_verdict import _codes_nvidia_says_to_ignore, ev

    events = ev(*[("2h", "5", "xid", c) for c in (92, 63, 137, 159, 13)], ("1h", "6", "xid", 79))
    nodes = pd.DataFrame({"node": ["node-a"], "pool": ["p"], "model": ["H100"], "gpus": [8], "driver_now": ["570"]})
    start, end = events["time"].min() - pd.Timedelta("1h"), events["time"].max() + pd.Timedelta("1h")
    fh = F.FleetHistory(events, nodes, start, end)
    inc = F.fleet_incidents(fh)
    hard = inc[inc["hardware"]]
    assert list(hard["gpu"]) == ["6"], inc[["gpu", "what", "incident_class", "hardware"]]
    assert set(_codes_nvidia_says_to_ignore()) >= {92, 63, 137, 159, 13}
