"""The rate-ratio test against values worked by hand from the binomial distribution."""

from __future__ import annotations

import math

import pytest

from gpulib.reliability.rates import per_thousand, rate_ratio


def test_p_value_is_the_binomial_tail_worked_by_hand():
    # 2 events in 10 days, then 10 in 10 days: under equal rates k1 | n=12 ~ Bin(12, 1/2);
    # P(X >= 10) = (C(12,10) + C(12,11) + C(12,12)) / 2**12 = (66 + 12 + 1) / 4096
    rr = rate_ratio(2, 10.0, 10, 10.0)
    assert rr.p_value == pytest.approx(79 / 4096)
    assert rr.ratio == pytest.approx(5.0)
    assert rr.low < 5.0 < rr.high


def test_unequal_exposures_shift_the_null_share():
    # 0 before in 21 days, 10 in 7 days: P(X >= 10 | n=10, p=7/28) = 0.25**10
    rr = rate_ratio(0, 21.0, 10, 7.0)
    assert rr.p_value == pytest.approx(0.25**10)
    assert math.isinf(rr.ratio) and math.isinf(rr.high) and rr.low > 1.0


def test_equal_rates_give_no_signal_and_a_ci_around_one():
    rr = rate_ratio(20, 20.0, 10, 10.0)
    assert rr.p_value > 0.4
    assert rr.low < 1.0 < rr.high


def test_no_exposure_is_no_rate_not_zero():
    assert math.isnan(per_thousand(0, 0.0))
    assert per_thousand(3, 1500.0) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        rate_ratio(1, 0.0, 1, 1.0)


@pytest.mark.parametrize("k0,t0,k1,t1", [(3, 21.0, 5, 7.0), (2, 10.0, 7, 10.0), (0, 14.0, 3, 7.0), (4, 7.0, 4, 7.0)])
@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.01])
def test_the_interval_printed_beside_the_test_agrees_with_it(k0, t0, k1, t1, alpha):
    """The test is one-sided at alpha, so the interval is the one-sided (lower-bound) exact interval at 1 - alpha: a
    significant rise has its lower bound above 1 and no other (3 in 21 d vs 5 in 7 d was "regression: yes" beside a
    two-sided 95 % interval containing 1)."""
    rr = rate_ratio(k0, t0, k1, t1, confidence=1 - alpha)
    assert (rr.p_value < alpha) == (rr.low > 1.0), rr.text()
    assert math.isinf(rr.high) and "one-sided" in rr.text().split("CI")[0]


def test_the_regressions_of_the_report_have_their_interval_above_one():
    """Through the report (Bonferroni across a change's classes): every regression's interval excludes 1."""
    import gpulib
    import gpulib.reliability.report_steps as R

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
        report = R.build(R.load(gpulib.connect("demo"), "30d"), "30d")
    regs = [c for c in report.changes if c.regression]
    assert regs and all(c.test.low > 1.0 for c in regs), [(c.what, c.test.text()) for c in regs]
