"""GPU price table: the shipped prices, a user price file, canonical model keys and the cost policy values.

Prices come from ``gpulib/data/cost/gpu_prices.csv`` (model x provider x on_demand/spot, price per GPU-hour,
each row with its date and source) and are defaults a user overrides with a price file (a CSV with
:data:`PRICE_COLUMNS`) or ``overrides={"H100-80GB": 3.9}`` / ``{"H100-80GB": {"spot": 1.2}}``.
Model names from dcgm-exporter (``modelName``) and GPU Feature Discovery (``nvidia.com/gpu.product``)
map to the keys of ``gpulib/data/nvidia/gpu_specs.csv`` through :func:`canonical_model`. Policy numbers
(hours per month, the default provider, consolidation limits) are ``gpulib/data/cost/cost_policy.csv``, the
report's settings (series step, table sizes, price age limit) ``gpulib/data/cost/report_policy.csv``, both read
through :func:`gpulib.core.knowledge.settings`.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter, PriceFileError
from gpulib.core.knowledge import load_table, settings

__all__ = [
    "PRICE_COLUMNS",
    "PRICINGS",
    "PriceFileError",
    "canonical_model",
    "canonical_models",
    "gpu_specs",
    "cost_policy",
    "cost_policy_list",
    "report_policy",
    "default_provider",
    "load_prices",
    "price_table",
]

#: columns a price file must have (extra columns are kept).
PRICE_COLUMNS = ["model", "provider", "pricing", "price_per_gpu_hour", "currency", "as_of", "source"]
PRICINGS = ("on_demand", "spot")


def cost_policy(key: str) -> float:
    """A number from ``gpulib/data/cost/cost_policy.csv`` (:func:`gpulib.core.knowledge.settings`)."""
    return settings("cost_policy").number(key)


def cost_policy_list(key: str) -> list[str]:
    """A ``;``-separated list from ``gpulib/data/cost/cost_policy.csv`` (owner kinds, namespaces)."""
    return settings("cost_policy").items_list(key)


def report_policy(key: str) -> str:
    """A setting from ``gpulib/data/cost/report_policy.csv`` as written there
    (:func:`gpulib.core.knowledge.settings`)."""
    return settings("report_policy").text(key)


def default_provider() -> str:
    """The price provider used unless the caller names one (``cost_policy.csv`` default_pricing_provider)."""
    return settings("cost_policy").text("default_pricing_provider").lower()


_MIG_SUFFIX = re.compile(r"\s+MIG\s+\d+C?\.?\d*G?\.?\S*$")


def _normalise_name(name: str) -> str:
    s = str(name).upper().replace("-", " ").replace("_", " ")
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s+SHARED$", "", s)
    s = re.sub(r"\s+MIG\s+\S+$", "", s)  # GFD single strategy: ...-MIG-1g.5gb
    s = re.sub(r"^(NVIDIA|TESLA)\s+", "", s)
    return s


@lru_cache(maxsize=1)
def _spec_index() -> dict[str, str]:
    specs = load_table("gpu_specs")
    index = {_normalise_name(n): m for n, m in zip(specs["name"], specs["model"])}
    index.update({_normalise_name(m): m for m in specs["model"]})
    return index


def canonical_model(name: str | None) -> str | None:
    """Map a dcgm-exporter ``modelName`` or GFD ``nvidia.com/gpu.product`` to the price/spec key.

    ``"NVIDIA H100 80GB HBM3"``, ``"NVIDIA-H100-80GB-HBM3"``, ``"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"``,
    ``"NVIDIA-A100-SXM4-80GB-SHARED"`` all resolve; unknown names return ``None``.
    """
    if name is None or (isinstance(name, float) and math.isnan(name)) or str(name).strip() == "":
        return None
    return _spec_index().get(_normalise_name(name))


def canonical_models(names: pd.Series) -> pd.Series:
    """Vectorised :func:`canonical_model` (maps each distinct name once)."""
    names = names.astype("string").fillna("")
    uniq = pd.unique(names)
    return names.map({u: canonical_model(u) for u in uniq}).astype("string")


def gpu_specs() -> pd.DataFrame:
    """One row per canonical model: memory_gb, tdp_w (first listed form factor), mig_compute_slices."""
    return load_table("gpu_specs").drop_duplicates("model").set_index("model")


def load_prices(path: str | Path | None = None) -> pd.DataFrame:
    """The price table: the shipped defaults, or a user CSV with :data:`PRICE_COLUMNS`.

    Raises :class:`PriceFileError` naming the file and the bad column/row.
    """
    if path is None:
        df = load_table("gpu_prices")
        where = "gpulib/data/cost/gpu_prices.csv"
    else:
        p = Path(path)
        if not p.is_file():
            raise PriceFileError(f"price file {str(p)!r} does not exist")
        try:
            df = pd.read_csv(p)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise PriceFileError(f"price file {str(p)!r} is not a readable CSV: {exc}") from exc
        where = str(p)
    missing = [c for c in PRICE_COLUMNS if c not in df.columns]
    if missing:
        raise PriceFileError(f"price file {where!r} lacks column(s) {missing}")
    df = df.copy()
    price = pd.to_numeric(df["price_per_gpu_hour"], errors="coerce")
    bad = price.isna() | (price < 0)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise PriceFileError(
            f"price file {where!r} row {i + 2}: price_per_gpu_hour="
            f"{df['price_per_gpu_hour'].iloc[i]!r} is not a non-negative number"
        )
    pricing = df["pricing"].astype("string").str.strip().str.lower().str.replace("-", "_")
    badp = ~pricing.isin(PRICINGS)
    if badp.any():
        i = int(np.flatnonzero(badp.to_numpy())[0])
        raise PriceFileError(
            f"price file {where!r} row {i + 2}: pricing={df['pricing'].iloc[i]!r} is not one of {list(PRICINGS)}"
        )
    nosrc = df["source"].astype("string").fillna("").str.strip() == ""
    if nosrc.any():
        raise PriceFileError(f"price file {where!r} row {int(np.flatnonzero(nosrc.to_numpy())[0]) + 2} has no source")
    df["price_per_gpu_hour"] = price.astype(float)
    df["pricing"] = pricing
    df["provider"] = df["provider"].astype("string").str.strip().str.lower()
    df["currency"] = df["currency"].astype("string").str.strip().str.upper()
    df["model"] = df["model"].astype("string").str.strip()
    return df


def price_table(
    prices: pd.DataFrame | None = None,
    *,
    provider: str | None = None,
    currency: str = "USD",
    overrides: Mapping[str, float | Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Per-model ``on_demand`` and ``spot`` $/GPU-hour for one provider and currency.

    Index: canonical model. Spot falls back to NaN (no spot saving computed) when absent.
    ``overrides``: ``{"H100-80GB": 3.9}`` sets on-demand; ``{"H100-80GB": {"spot": 1.2}}`` either.
    """
    prices = load_prices() if prices is None else prices
    provider = (provider or default_provider()).lower()
    currency = currency.upper()
    sel = prices[(prices["provider"] == provider) & (prices["currency"] == currency)]
    if sel.empty and not overrides:
        have = sorted({f"{p}/{c}" for p, c in zip(prices["provider"], prices["currency"])})
        raise InvalidParameter(
            f"no prices for provider={provider!r} currency={currency!r}; the table has {have}",
            hint="pass price_file= with rows for that provider/currency, or price_overrides=",
        )
    table = sel.pivot_table(index="model", columns="pricing", values="price_per_gpu_hour", aggfunc="min")
    table = table.reindex(columns=list(PRICINGS)).astype(float)
    for model, value in (overrides or {}).items():
        key = canonical_model(model) or str(model)
        vals = value if isinstance(value, Mapping) else {"on_demand": value}
        for pricing, v in vals.items():
            if pricing not in PRICINGS:
                raise InvalidParameter(f"price_overrides[{model!r}] has pricing {pricing!r}; use on_demand or spot")
            try:
                fv = float(v)
            except (TypeError, ValueError) as exc:
                raise InvalidParameter(f"price_overrides[{model!r}][{pricing!r}]={v!r} is not a number") from exc
            if not fv >= 0:
                raise InvalidParameter(f"price_overrides[{model!r}][{pricing!r}]={v!r} must be >= 0")
            table.loc[key, pricing] = fv
    table.index.name = "model"
    return table


def mig_slices_of(models: pd.Series) -> dict[str, float] | None:
    """Raw dcgm-exporter model name -> MIG compute slices of its GPU (gpu_specs.csv), for the models given."""
    raw_models = pd.unique(models.astype("string").fillna(""))
    model_keys = canonical_models(pd.Series(raw_models))
    spec = gpu_specs()["mig_compute_slices"]
    slices = {
        raw: float(spec.get(key, np.nan))
        for raw, key in zip(raw_models, model_keys)
        if key is not None and key is not pd.NA and pd.notna(spec.get(key, np.nan))
    }
    return slices or None
