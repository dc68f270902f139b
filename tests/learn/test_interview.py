"""Interview prep answers (gpulib/data/learn/interview_answers.csv, interview_followups.csv) say true things."""

from __future__ import annotations

from gpulib.core.knowledge import load_table
from gpulib.learn import interview


def test_zombie_pod_count_prints_as_a_whole_number():
    """The lesson stores its figures as floats (round(float(x), 2)), so a count of 1 arrives as 1.0."""
    figs = {
        "idle_gpu_hours": 219.0,
        "idle_cost": 771.0,
        "zombie_pods": 1.0,
        "active_pct": 73.0,
        "potential_monthly_saving": 75820.0,
        "monthly_cost": 200000.0,
        "currency": "USD",
    }
    text = interview.model_answer("monitoring_cost", figs)
    assert "1 zombie pod" in text and "1.0 zombie" not in text


def test_mig_answer_does_not_promise_isolation_from_every_xid():
    """XID 79 (fallen off the bus), an uncontained ECC error (XID 95) and a DBE that needs a GPU reset take down
    every MIG instance: the project's own XID 95 row says to drain the other instances before the reset."""
    row95 = load_table("xid_catalog").set_index("code").loc[95]
    assert "drain the other instances" in row95["notes"]
    ans = interview.follow_ups("resource_management")
    mig = ans[ans["question"].str.contains("MIG or time-slicing")].iloc[0]["answer"]
    assert "an XID in one instance does not kill the others" not in mig
    for code in ("79", "95"):
        assert f"XID {code}" in mig, code
    assert "reset" in mig and "every instance" in mig
