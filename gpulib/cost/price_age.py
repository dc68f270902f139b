"""How old the prices behind a report are: rows older than a year before the window's end, or undated.

A price table ages (AWS cut its P4/P5 on-demand prices by up to 45 % from 2025-06-01, AWS News Blog
https://aws.amazon.com/blogs/aws/announcing-up-to-45-price-reduction-for-amazon-ec2-nvidia-gpu-accelerated-instances/,
so a table dated before that over-states every saving); the report's Method section lists the rows this module
flags. The age limit is ``price_max_age_days`` in ``gpulib/data/cost/report_policy.csv``; the rule is described
in ``docs/cost-method.md`` (Prices).
"""

from __future__ import annotations

import pandas as pd

from gpulib.cost.model import CostReport
from gpulib.cost.prices import load_prices, report_policy

__all__ = ["price_age", "report_price_age"]


def price_age(
    prices: pd.DataFrame, reference: pd.Timestamp | str, *, max_age_days: float | None = None
) -> pd.DataFrame:
    """``prices`` plus ``as_of_date`` (start of the stated day/month/year, NaT when undated), ``age_days``
    (relative to ``reference``), ``undated`` and ``stale`` (undated, or older than ``max_age_days``)."""
    limit = float(report_policy("price_max_age_days")) if max_age_days is None else float(max_age_days)
    ref = pd.Timestamp(reference)
    ref = ref.tz_localize("UTC") if ref.tzinfo is None else ref.tz_convert("UTC")
    out = prices.copy()
    text = (
        out["as_of"].astype("string").fillna("").str.strip()
        if "as_of" in out.columns
        else pd.Series("", index=out.index)
    )
    when = pd.to_datetime(
        text.where(text.str.match(r"^\d{4}(-\d{2}){0,2}$"), None), errors="coerce", utc=True, format="mixed"
    )
    out["as_of_date"] = when
    out["age_days"] = (ref - when).dt.total_seconds() / 86400.0
    out["undated"] = when.isna()
    out["stale"] = out["undated"] | (out["age_days"] > limit)
    return out


def report_price_age(rep: CostReport, price_file: str | None = None) -> pd.DataFrame:
    """The price rows behind ``rep`` (its provider and currency, the GPU models in its usage; from ``price_file`` or
    the shipped table), sorted by model and pricing, aged against the window's end (:func:`price_age`)."""
    prices = load_prices(price_file or None)
    used = set(rep.usage["model_key"].dropna().astype(str))
    sel = prices[
        (prices["provider"] == rep.provider) & (prices["currency"] == rep.currency) & prices["model"].isin(used)
    ]
    end = rep.newest()
    return price_age(sel.sort_values(["model", "pricing"]), end)
