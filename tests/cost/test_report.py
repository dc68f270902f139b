"""The report a manager signs off: KPI tiles that add up, every action with saving/confidence/signal, a Method
section naming the prices with their dates (stale ones flagged), and `gpuops report` taking the notebook's
parameters."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import gpulib
import gpulib.cost as cost
import gpulib.cost.steps as report
import gpulib.cost.view as view
import gpulib.vllm
from gpulib.cost.price_age import price_age
from tests.helpers.cost_frames import frames, node, pod, series

END = "2026-12-01T06:45:00Z"


@pytest.fixture(scope="module")
def demo():
    src = gpulib.connect("demo", end=END)
    data = report.load_report_data(src, "1d")
    data.serving = gpulib.vllm.serving_signals(src, report.serving_candidates(data.pods))
    rep = cost.analyze_cost(
        data.nodes, data.pods, data.gr_engine_active, data.fb_used, window="1d", serving=data.serving
    )
    return data, rep


def _tiles(html_text: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"data-kpi='([a-z_]+)' data-value='([0-9.e+-]+)'", html_text)}


def test_kpi_tiles_reconcile(demo):
    _, rep = demo
    s = cost.executive_summary(rep)
    t = _tiles(view.kpi_tiles_html(s))
    assert t["gpu_hours"] == pytest.approx(t["allocated_gpu_hours"] + t["unallocated_gpu_hours"])
    assert t["allocated_gpu_hours"] == pytest.approx(t["active_gpu_hours"] + t["idle_gpu_hours"])
    # the saving tile is the sum of every action the report lists (the "all actions" table total)
    listed = view.actions_html(rep)
    rows = re.findall(r"<tr><td[^>]*>(\d+)</td>", listed.split("skipped-actions")[0])
    assert len(rows) == len(rep.actions)
    assert t["potential_monthly_saving"] == pytest.approx(float(rep.actions["monthly_saving"].sum()))
    assert t["potential_monthly_saving"] <= t["monthly_cost"]


def test_every_listed_action_has_saving_confidence_and_signal(demo):
    _, rep = demo
    listed = view.actions_html(rep)
    table = listed.split("skipped-actions")[0]
    for r in rep.actions.itertuples():
        assert str(r.signal) and str(r.signal).replace("'", "&#x27;") in table
        assert f"{float(r.confidence):.0%}" in table
    s = cost.executive_summary(rep)
    for a in s["top_actions"]:
        assert a["signal"] and 0 < a["confidence"] <= 1


def test_price_age_flags_rows_older_than_a_year_and_undated():
    prices = pd.DataFrame({"model": ["A", "B", "C", "D"], "as_of": ["2025-01", "2026-01-21", "unknown", ""]})
    out = price_age(prices, "2026-12-01T06:45:00Z", max_age_days=365)
    assert list(out["stale"]) == [True, False, True, True]
    assert list(out["undated"]) == [False, False, True, True]
    assert out.loc[1, "age_days"] == pytest.approx(314.28, abs=0.01)


def test_shipped_aws_on_demand_prices_are_after_the_june_2025_cut():
    p = cost.load_prices()
    od = p[(p["provider"] == "aws") & (p["pricing"] == "on_demand")]
    assert (pd.to_datetime(od["as_of"]) >= pd.Timestamp("2025-06-01")).all()
    h100 = od[od["model"] == "H100-80GB"]["price_per_gpu_hour"].iloc[0]
    assert h100 < 0.6 * 12.29  # the pre-cut 98.32 USD/h p5.48xlarge, / 8 GPUs
    assert not p["source"].str.contains("facts" + ".md").any()


def test_method_section_defines_idle_as_the_recording_rule_counts_it(demo):
    """The Method section says exactly what an idle GPU-hour is (the idle series' definition)."""
    import html

    from gpulib.cost import recording

    data, rep = demo
    text = report.method_section(rep, data)
    assert html.escape(recording.idle_definition(rep.thresholds)) in text
    assert "maximum of the raw samples" in text


def test_method_section_lists_stale_price_rows_with_dates(demo):
    data, rep = demo
    html_text = report.method_section(rep, data)
    assert "price-table" in html_text and "2026-01-21" in html_text
    # the AWS spot rows date from 2025-01: older than a year before the window's end (2026-12-01)
    assert "id='stale-prices'" in html_text
    assert "A100-80GB spot (as of 2025-01)" in html_text


def _stale_rows_from_the_csv(provider: str, models: set[str], end: str) -> set[str]:
    """Rows of gpulib/data/cost/gpu_prices.csv for ``provider`` and ``models`` dated more than 365 days before
    ``end`` (a YYYY-MM date means the first of that month), or undated, worked out here from the file."""
    from pathlib import Path

    raw = pd.read_csv(
        Path(__file__).resolve().parents[2] / "gpulib" / "data" / "cost" / "gpu_prices.csv",
        dtype=str,
        keep_default_na=False,
    )
    ref = pd.Timestamp(end).tz_convert(None)
    out = set()
    for _, r in raw[(raw["provider"] == provider) & (raw["currency"] == "USD") & raw["model"].isin(models)].iterrows():
        text = r["as_of"].strip()
        parts = text.split("-")
        if len(parts) in (2, 3) and all(x.isdigit() for x in parts):
            when = pd.Timestamp(int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 1)
            if (ref - when).total_seconds() / 86400.0 <= 365:
                continue
        out.add(f"{r['model']} {r['pricing']}")
    return out


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_method_section_lists_exactly_the_rows_older_than_a_year(monkeypatch, provider):
    """The Method section's stale list names every price row used that is over 365 days older than the window's
    end (GPUOPS_END pinned) or undated, and no other."""
    monkeypatch.setenv("GPUOPS_END", END)
    src = gpulib.connect("demo", end=END)
    data = report.load_report_data(src, "1d")
    rep = cost.analyze_cost(data.nodes, data.pods, data.gr_engine_active, data.fb_used, window="1d", provider=provider)
    models = set(rep.usage["model_key"].dropna().astype(str))
    expected = _stale_rows_from_the_csv(provider, models, END)
    html_text = report.method_section(rep, data)
    m = re.search(r"<p id='stale-prices'.*?or undated: (.*?)\. Savings", html_text, re.S)
    listed = (
        set() if m is None else {re.sub(r" \((?:undated|as of [^)]*)\)$", "", x.strip()) for x in m.group(1).split(";")}
    )
    assert listed == expected
    assert (m is None) == (not expected)


def test_method_section_has_no_stale_warning_when_prices_are_current(tmp_path):
    acts = series("n0", "0", [0.5] * 4, pod="a-0", ns="ml")
    n, p = frames([node("n0")], [pod("ml", "a-0", "n0")])
    f = tmp_path / "prices.csv"
    f.write_text(
        "model,provider,pricing,price_per_gpu_hour,currency,as_of,source\n"
        "H100-80GB,aws,on_demand,6.88,USD,2026-01-01,test\n"
    )
    rep = cost.analyze_cost(n, p, acts, None, window="4h", price_file=f)
    data = report.ReportData(window="4h", step="1h", nodes=n, pods=p, gr_engine_active=acts)
    html_text = report.method_section(rep, data, price_file=str(f))
    assert "stale-prices" not in html_text and "2026-01-01" in html_text


def test_gpuops_report_takes_the_notebooks_parameters(monkeypatch, tmp_path):
    """`gpuops report --namespaces --provider --currency --price-file` reach the notebook's parameters."""
    from typer.testing import CliRunner

    from gpulib import cli
    from gpulib.run import render as engine

    seen = {}

    def fake_execute(info, params, out_root, **kw):
        seen.update(params)
        return engine.RunResult(name=info.name, out_dir=tmp_path, notebook=tmp_path / "x.ipynb", html=None)

    monkeypatch.setattr(engine, "execute", fake_execute)
    monkeypatch.setattr(cli, "_print_result", lambda *a, **k: None)
    prices = tmp_path / "p.csv"
    prices.write_text(
        "model,provider,pricing,price_per_gpu_hour,currency,as_of,source\n"
        "H100-80GB,gcp,on_demand,4.2,USD,2026-01-01,test\n"
    )
    res = CliRunner().invoke(
        cli.app,
        [
            "report",
            "--source",
            "demo",
            "--namespaces",
            "ml, ads",
            "--provider",
            "gcp",
            "--currency",
            "usd",
            "--price-file",
            str(prices),
            "--window",
            "1d",
        ],
    )
    assert res.exit_code == 0, res.output
    assert seen["namespaces"] == "ml, ads" and seen["provider"] == "gcp" and seen["currency"] == "USD"
    assert seen["price_file"] == str(prices.resolve()) and seen["window"] == "1d"
    bad = CliRunner().invoke(cli.app, ["report", "--provider", "ibm"])
    assert bad.exit_code == cli.EXIT_USAGE and "provider" in bad.output
