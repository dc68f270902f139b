"""Event rates and the test that says whether one rate is higher than another.

Two Poisson counts ``k1`` over exposure ``t1`` (the later period) and ``k0`` over ``t0`` (the earlier one) are
compared with the **exact conditional test** of Przyborowski and Wilenski (1940): given ``n = k0 + k1``, under
equal rates ``k1`` is Binomial(n, t1 / (t0 + t1)); the one-sided p-value is P(X >= k1). The test is R's two-sample
``poisson.test(c(k1, k0), c(t1, t0), alternative = "greater")``
(https://stat.ethz.ch/R-manual/R-devel/library/stats/html/poisson.test.html: a binomial test of the first count given
the total) and statsmodels' ``test_poisson_2indep(method="exact-cond", alternative="larger")``
(https://www.statsmodels.org/stable/generated/statsmodels.stats.rates.test_poisson_2indep.html). The rate ratio's
interval is the one R's ``poisson.test`` gives with that alternative: the one-sided Clopper-Pearson bound of the
binomial proportion at ``confidence``, mapped to a ratio ``RR = p / (1 - p) * t0 / t1`` (upper end infinite). It is
the inversion of the same one-sided test, so at ``confidence = 1 - alpha`` the lower bound is above 1 exactly when
p < alpha. (statsmodels' ``confint_poisson_2indep`` lists ``exact-cond`` as not implemented:
https://www.statsmodels.org/v0.15.0/generated/statsmodels.stats.rates.confint_poisson_2indep.html.) Computed with
the regularized incomplete beta function, which is what scipy's binomial test computes for this alternative
(https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.binomtest.html: P(X >= k) = I_p(k, n - k + 1),
the exact one-sided bound the beta quantile, https://en.wikipedia.org/wiki/Binomial_distribution#Cumulative_distribution_function),
through ``scipy.special`` (``betainc``, ``betaincinv``): importing ``scipy.stats`` alone took 13 s of a 22 s
reliability report on the loaded 2-core box (benchmarks/RESULTS.md, reliability report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulib.core.money import human_number

TEST_NAME = "exact conditional Poisson rate-ratio test (Przyborowski & Wilenski 1940), one-sided"


@dataclass(frozen=True)
class RateRatio:
    """The later rate over the earlier one, its one-sided interval ``[low, inf)`` and the test's one-sided p-value."""

    k0: int
    t0: float
    k1: int
    t1: float
    ratio: float
    low: float
    high: float
    p_value: float
    confidence: float
    test: str = TEST_NAME

    @property
    def rate0(self) -> float:
        return self.k0 / self.t0 if self.t0 else math.nan

    @property
    def rate1(self) -> float:
        return self.k1 / self.t1 if self.t1 else math.nan

    def text(self, unit: str = "") -> str:
        n = human_number  # no inf, no exponent: a reader's numbers (none before: the ratio has no upper bound)
        hi = "no upper bound" if math.isinf(self.high) else n(self.high)
        rr = f">{n(self.low)} (none before)" if math.isinf(self.ratio) else n(self.ratio)
        return (
            f"{self.k1} in {self.t1:.1f}{unit} vs {self.k0} in {self.t0:.1f}{unit}: rate ratio {rr} "
            f"({n(self.confidence * 100)} % one-sided CI {n(self.low)}-{hi}), "
            f"one-sided p = {n(self.p_value)} ({self.test})"
        )


def rate_ratio(k0: int, t0: float, k1: int, t1: float, *, confidence: float = 0.95) -> RateRatio:
    """Compare ``k1`` events over exposure ``t1`` with ``k0`` over ``t0`` (same unit, both > 0); ``confidence``:
    the one-sided interval's level, ``1 - alpha`` of the test it is printed beside."""
    from scipy.special import betainc, betaincinv

    if t0 <= 0 or t1 <= 0:
        raise ValueError("both exposures must be longer than zero")
    k0, k1 = int(k0), int(k1)
    n = k0 + k1
    share = t1 / (t0 + t1)
    if n == 0:
        return RateRatio(k0, t0, k1, t1, math.nan, 0.0, math.inf, 1.0, confidence)
    # P(X >= k1), X ~ Binomial(n, share), and the one-sided Clopper-Pearson interval [low, 1] of the proportion
    p_value = float(betainc(k1, n - k1 + 1, share)) if k1 > 0 else 1.0
    low = float(betaincinv(k1, n - k1 + 1, 1.0 - confidence)) if k1 > 0 else 0.0

    def to_ratio(p: float) -> float:
        return math.inf if p >= 1.0 else p / (1.0 - p) * t0 / t1

    ratio = math.inf if k0 == 0 else (k1 / t1) / (k0 / t0)
    return RateRatio(k0, t0, k1, t1, ratio, to_ratio(low), to_ratio(1.0), min(p_value, 1.0), confidence)


def per_thousand(count: float, gpu_days: float) -> float:
    """Events per 1,000 GPU-days; NaN when there was no observed exposure (no data is not zero)."""
    return count / gpu_days * 1000.0 if gpu_days > 0 else math.nan
