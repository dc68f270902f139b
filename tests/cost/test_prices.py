"""Price table, user price files (good and malformed) and GPU model-name normalisation."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import gpulib.cost as cost
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table
from tests.helpers.cost_frames import frames, node, pod, series

FIX = Path(__file__).parents[1] / "fixtures" / "cost"
PRICES_CSV = Path(__file__).resolve().parents[2] / "gpulib" / "data" / "cost" / "gpu_prices.csv"


def _names():
    rows = []
    for line in (FIX / "gpu_product_names.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, expected = line.split("\t")
            rows.append((name, expected))
    return rows


@pytest.mark.parametrize("name,expected", _names())
def test_canonical_model_from_dcgm_and_gfd_names(name, expected):
    assert cost.canonical_model(name) == expected


@pytest.mark.parametrize("name", ["", None, "AMD Instinct MI300X", "NVIDIA GeForce GT 710"])
def test_unknown_names_are_none(name):
    assert cost.canonical_model(name) is None


def test_shipped_tables_have_sources_and_cover_price_models():
    prices = cost.load_prices()
    specs = load_table("gpu_specs")
    assert (prices["source"].str.len() > 10).all() and (specs["source"].str.len() > 10).all()
    assert set(prices["model"]) <= set(specs["model"])
    assert set(prices["pricing"]) == {"on_demand", "spot"}
    assert prices["as_of"].notna().all()


def test_default_aws_prices_match_facts_per_gpu():
    t = cost.price_table()
    # us-east-1 on-demand, after the June 2025 cut: p5.48xlarge $55.04/h for 8 H100 (AWS Machine Learning Blog,
    # https://aws.amazon.com/blogs/machine-learning/secure-short-term-gpu-capacity-for-ml-workloads-with-ec2-capacity-blocks-for-ml-and-sagemaker-training-plans/);
    # p4d.24xlarge $21.957642/h for 8 A100-40GB (datareceipts/data-receipts 109-gpu-pricing/hyperscalers.json,
    # retrieved 2026-11-09); g6.xlarge L4 $0.8048 (tsaol/aws-gpu: data/g6_instances.js @77fcd9fe)
    assert t.loc["H100-80GB", "on_demand"] == pytest.approx(55.04 / 8, abs=0.01)
    assert t.loc["A100-40GB", "on_demand"] == pytest.approx(21.957642 / 8, abs=0.01)
    assert t.loc["L4", "on_demand"] == pytest.approx(0.8048, abs=0.01)
    assert (t["spot"] < t["on_demand"]).all()


def test_gcp_provider_and_unknown_provider():
    t = cost.price_table(provider="gcp")
    # Cyclenerd/google-cloud-pricing-cost-calculator: pricing.yml @fd66b26f (generated 2026-07-30 from the
    # Google Cloud Billing Catalog API, https://cloud.google.com/billing/v1/how-tos/catalog-api):
    # a3-highgpu-8g us-central1 hour 88.4899999025753, hour_spot 50.6095408219178, 8 H100 per VM
    assert t.loc["H100-80GB", "on_demand"] == pytest.approx(88.4899999025753 / 8, abs=1e-3)
    assert t.loc["H100-80GB", "spot"] == pytest.approx(50.6095408219178 / 8, abs=1e-3)
    with pytest.raises(InvalidParameter, match="provider='oracle'"):
        cost.price_table(provider="oracle")


def test_user_price_file_in_eur_drives_the_analysis():
    prices = cost.load_prices(FIX / "prices_eur.csv")
    act = series("n1", "0", [0.9, 0.9, 0.02, 0.02], pod="a", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "a", "n1")])
    rep = cost.analyze_cost(nodes, pods, act, None, window="4h", prices=prices, provider="onprem", currency="EUR")
    s = cost.executive_summary(rep)
    assert s["currency"] == "EUR"
    assert s["idle_cost"] == pytest.approx(2 * 3.00)  # 2 idle h x EUR 3
    rep2 = cost.analyze_cost(
        nodes, pods, act, None, window="4h", price_file=FIX / "prices_eur.csv", provider="onprem", currency="EUR"
    )
    assert cost.executive_summary(rep2)["idle_cost"] == pytest.approx(6.0)


def test_currency_without_rows_is_an_error():
    with pytest.raises(InvalidParameter, match="currency='EUR'"):
        cost.price_table(provider="aws", currency="EUR")


def test_price_overrides_forms():
    t = cost.price_table(overrides={"H100-80GB": 3.9, "NVIDIA L4": {"spot": 0.1}})
    assert t.loc["H100-80GB", "on_demand"] == 3.9
    assert t.loc["L4", "spot"] == 0.1 and t.loc["L4", "on_demand"] == pytest.approx(0.8048)
    with pytest.raises(InvalidParameter, match="reserved"):
        cost.price_table(overrides={"H100-80GB": {"reserved": 1.0}})
    with pytest.raises(InvalidParameter, match="cheap"):
        cost.price_table(overrides={"H100-80GB": "cheap"})
    with pytest.raises(InvalidParameter, match=">= 0"):
        cost.price_table(overrides={"H100-80GB": -1})


@pytest.mark.parametrize(
    "fixture,match",
    [
        ("prices_missing_column.csv", r"lacks column\(s\) \['currency'\]"),
        ("prices_bad_value.csv", r"row 3: price_per_gpu_hour='twelve'"),
        ("prices_bad_pricing.csv", r"pricing='reserved'"),
        ("prices_no_source.csv", r"row 2 has no source"),
        ("prices_truncated.csv", r"row 3: price_per_gpu_hour"),
        ("does_not_exist.csv", r"does not exist"),
    ],
)
def test_malformed_price_files_name_file_and_row(fixture, match):
    with pytest.raises(cost.PriceFileError, match=match) as exc:
        cost.load_prices(FIX / fixture)
    assert fixture in str(exc.value)
    assert "price_per_gpu_hour" in exc.value.hint


def _raw_price_rows() -> pd.DataFrame:
    """The shipped price CSV read directly (not through gpulib), so these tests check the file itself."""
    return pd.read_csv(PRICES_CSV, dtype=str, keep_default_na=False)


def test_every_price_row_has_a_parseable_date():
    """Every row says when its price was read: YYYY-MM or YYYY-MM-DD, a real date, not after today."""
    raw = _raw_price_rows()
    bad = []
    for i, r in raw.iterrows():
        text = r["as_of"].strip()
        ok = re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", text) is not None
        if ok:
            try:
                when = pd.Timestamp(text)
            except ValueError:
                ok = False
            else:
                ok = when <= pd.Timestamp.now()
        if not ok:
            bad.append((i + 2, r["model"], r["provider"], r["pricing"], text))
    assert not bad, f"rows without a usable as_of date (line, model, provider, pricing, as_of): {bad}"


def test_spot_rows_say_they_are_indicative_with_their_date():
    """Spot prices move hourly: each spot row's source labels it 'spot, indicative, <as_of>'."""
    raw = _raw_price_rows()
    spot = raw[raw["pricing"] == "spot"]
    assert len(spot)
    bad = [
        (r["model"], r["provider"], r["as_of"])
        for _, r in spot.iterrows()
        if f"spot, indicative, {r['as_of']}" not in r["source"]
    ]
    assert not bad, bad


def test_the_june_2025_aws_cut_is_reflected_in_the_h100_price():
    """p5.48xlarge on-demand per GPU is below the pre-cut 12.29 (98.32 USD/h / 8) and equals the first-party figure."""
    raw = _raw_price_rows()
    row = raw[(raw["provider"] == "aws") & (raw["pricing"] == "on_demand") & (raw["instance_type"] == "p5.48xlarge")]
    assert len(row) == 1
    row = row.iloc[0]
    price = float(row["price_per_gpu_hour"])
    # AWS Machine Learning Blog, "Secure short-term GPU capacity for ML workloads with EC2 Capacity Blocks for ML
    # and SageMaker training plans" (2026-05): "p5.48xlarge ... $55.04/hour on-demand" in US East (N. Virginia),
    # https://aws.amazon.com/blogs/machine-learning/secure-short-term-gpu-capacity-for-ml-workloads-with-ec2-capacity-blocks-for-ml-and-sagemaker-training-plans/
    p5_on_demand_usd_per_h = 55.04
    assert price < 12.29
    assert price == pytest.approx(p5_on_demand_usd_per_h / 8, abs=1e-4)
    assert int(row["gpus_per_instance"]) == 8 and row["region"] == "us-east-1"
    assert "aws.amazon.com/blogs/machine-learning/secure-short-term-gpu-capacity" in row["source"]
    # the cut itself, first-party: P5 On-Demand -44 % from the 2025-05-31 baseline, effective 2025-06-01
    assert "aws.amazon.com/blogs/aws/announcing-up-to-45-price-reduction" in row["source"]
    assert pd.Timestamp(row["as_of"]) >= pd.Timestamp("2025-06-01")
    # 98.32 * (1 - 0.44) = 55.06: the listed price is the announced cut, to the cent-per-hour rounding
    assert p5_on_demand_usd_per_h == pytest.approx(98.32 * (1 - 0.44), abs=0.05)
