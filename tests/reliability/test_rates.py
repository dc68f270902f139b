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
