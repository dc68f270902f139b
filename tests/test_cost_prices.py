"""Price table, user price files (good and malformed) and GPU model-name normalisation."""
from __future__ import annotations

from pathlib import Path

import pytest

from cost_frames import frames, node, pod, series
import gpulib.cost.analysis as cost
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table

FIX = Path(__file__).parent / "fixtures" / "cost"


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
    # tsaol/aws-gpu data/*_instances.js @77fcd9fe (instances.vantage.sh, 2026-01-21), us-east-1, after the
    # June 2025 cut: p5.48xlarge $55.04/h for 8 H100; p4d.24xlarge $21.957642/h for 8 A100-40GB; g6.xlarge L4 $0.8048
    assert t.loc["H100-80GB", "on_demand"] == pytest.approx(55.04 / 8, abs=0.01)
    assert t.loc["A100-40GB", "on_demand"] == pytest.approx(21.957642 / 8, abs=0.01)
    assert t.loc["L4", "on_demand"] == pytest.approx(0.8048, abs=0.01)
    assert (t["spot"] < t["on_demand"]).all()


def test_gcp_provider_and_unknown_provider():
    t = cost.price_table(provider="gcp")
    assert t.loc["H100-80GB", "on_demand"] == pytest.approx(4.20)
    assert t.loc["H100-80GB", "spot"] == pytest.approx(2.25)
    with pytest.raises(InvalidParameter, match="provider='oracle'"):
        cost.price_table(provider="oracle")


def test_user_price_file_in_eur_drives_the_analysis():
    prices = cost.load_prices(FIX / "prices_eur.csv")
    act = series("n1", "0", [0.9, 0.9, 0.02, 0.02], pod="a", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "a", "n1")])
    rep = cost.analyze_cost(nodes, pods, act, None, window="4h", prices=prices, provider="onprem", currency="EUR")
    s = cost.executive_summary(rep)
    assert s["currency"] == "EUR"
    assert s["idle_cost"] == pytest.approx(2 * 3.00)       # 2 idle h x EUR 3
    rep2 = cost.analyze_cost(nodes, pods, act, None, window="4h", price_file=FIX / "prices_eur.csv",
                             provider="onprem", currency="EUR")
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


@pytest.mark.parametrize("fixture,match", [
    ("prices_missing_column.csv", r"lacks column\(s\) \['currency'\]"),
    ("prices_bad_value.csv", r"row 3: price_per_gpu_hour='twelve'"),
    ("prices_bad_pricing.csv", r"pricing='reserved'"),
    ("prices_no_source.csv", r"row 2 has no source"),
    ("prices_truncated.csv", r"row 3: price_per_gpu_hour"),
    ("does_not_exist.csv", r"does not exist"),
])
def test_malformed_price_files_name_file_and_row(fixture, match):
    with pytest.raises(cost.PriceFileError, match=match) as exc:
        cost.load_prices(FIX / fixture)
    assert fixture in str(exc.value)
    assert "price_per_gpu_hour" in exc.value.hint
