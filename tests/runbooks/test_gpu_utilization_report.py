"""The GPU utilization report notebook (reports/gpu_utilization_report.ipynb) and its steps (gpulib.cost.steps) and
views (gpulib.cost.view).

Notebook runs go through the CLI's papermill path (``gpulib.execute.execute``), which writes the executed
notebook, the code-free HTML and findings.json, exactly as ``gpuops report`` does.

Expected money is worked out from the demo scenario (gpulib/data/demo/demo_fleet.yaml) and the price table by hand:
jupyter-alice-0 runs on a100-80-0 (A100-80GB, on-demand, aws 3.4309 USD/GPU-h in gpulib/data/cost/gpu_prices.csv:
p4de.24xlarge 27.44705 USD/h / 8), one GPU, zombie since 20 h before the window end and still holding it; a month
is 730 h (cost_policy.csv). Freeing it saves the GPU's whole price from now on; 20 h of it is the "so far" figure.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.pinned import DEMO_END

ROOT = Path(__file__).resolve().parents[2]
A100_80_ON_DEMAND = 3.4309
HOURS_PER_MONTH = 730.0
ZOMBIE = ("notebooks", "jupyter-alice-0")


@pytest.fixture
def report_env(monkeypatch):
    """The kernel imports this checkout's gpulib and replays the pinned demo window."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())


def run_report(execute, out: Path, **params):
    """``execute``: the kept-kernel run of tests/conftest.py (``kept_execute``)."""
    from gpulib.catalogue import find_notebook

    info = find_notebook("gpu_utilization_report")
    assert info.path == ROOT / "reports" / "gpu_utilization_report.ipynb"
    res = execute(info, params, out, progress=False, timeout=300)
    doc = json.loads((res.out_dir / "findings.json").read_text())
    return res, doc


def zombie_finding(doc: dict, ns: str, pod: str) -> dict:
    hits = [
        f
        for f in doc["findings"]
        if f["data"].get("action") == "reclaim" and f["data"].get("pod") == pod and f["data"].get("namespace") == ns
    ]
    assert len(hits) == 1, [f["title"] for f in doc["findings"]]
    return hits[0]


def table_html(page: str, table_id: str) -> str:
    m = re.search(rf"<table id=['\"]{table_id}['\"].*?</table>", page, re.S)
    assert m, f"table {table_id} not in the report"
    return m.group(0)


# ------------------------------------------------------------------------------ notebook runs
def test_demo_report_finds_zombie_with_monthly_saving(shared_runs):
    res = shared_runs.run("gpu_utilization_report", source="demo", window="7d")
    doc = res.doc
    assert res.failed is None and doc["errors"] == []
    f = zombie_finding(doc, *ZOMBIE)
    assert f["severity"] == "warning"
    # still held at the window end: the GPU's whole price per month from now on, not its 20 zombie hours
    assert f["data"]["monthly_saving"] == pytest.approx(A100_80_ON_DEMAND * HOURS_PER_MONTH, rel=0.01)
    assert f["data"]["window_cost"] == pytest.approx(20.0 * A100_80_ON_DEMAND, rel=0.05)
    # jupyter-alice-0 belongs to StatefulSet jupyter-alice (demo_fleet.yaml): scale the owner, never delete the pod
    assert any("kubectl -n notebooks scale statefulset/jupyter-alice --replicas=0" == c for c in f["commands"]), f[
        "commands"
    ]
    assert not any("delete pod" in c for c in f["commands"])

    page = res.html.read_text()
    idle = table_html(page, "idle-zombie-table")
    row = re.search(r"<tr>(?:(?!</tr>).)*jupyter-alice(?:(?!</tr>).)*</tr>", idle, re.S)
    assert row and "zombie" in row.group(0)
    assert "reclaim" in table_html(page, "top-actions").lower() or "Reclaim" in page
    assert len(re.findall(r"class=[\"']kpi-tile[\"']", page)) == 8
    assert "all-actions" in page and "stale-prices" in page
    # the method names the activity metric and the thresholds from thresholds.csv; the price table its date
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in page and "1,024 MiB" in page and "30m" in page
    assert "2025-01" in table_html(page, "price-table")
    # exported without code (exclude_input): no notebook source in the page
    assert "rb = nb.Runbook" not in page and "report.load_report_data" not in page
    assert page.count("plotly-graph-div") >= 3
    assert (res.out_dir.parent / "index.html").read_text().count(f"{res.out_dir.name}/gpu_utilization_report.html") == 1


def test_live_report_finds_the_same_zombie(report_env, live_env, tmp_path, kept_execute):
    # the real-Prometheus fixture holds 6h10m of the scenario at 60 s
    res, doc = run_report(kept_execute, tmp_path, source="live", window="6h")
    assert res.failed is None and doc["errors"] == []
    assert doc["parameters"]["source"] == "live"
    f = zombie_finding(doc, *ZOMBIE)
    expected = 6.0 * A100_80_ON_DEMAND * HOURS_PER_MONTH / 6.0  # zombie for the whole 6 h window
    assert f["data"]["monthly_saving"] == pytest.approx(expected, rel=0.03)


def test_bad_window_is_recorded_and_html_still_written(report_env, tmp_path, kept_execute):
    res, doc = run_report(kept_execute, tmp_path, source="demo", window="7days")
    assert res.failed is None  # the notebook completed
    assert any("7days" in e and "window" in e for e in doc["errors"]), doc["errors"]
    assert doc["findings"][0]["title"].startswith("Runbook incomplete")
    page = res.html.read_text()
    assert "could not run" in page and "7days" in page


# ------------------------------------------------------------------------------ helpers (no kernel)
def test_parse_namespaces():
    from gpulib.cost.steps import parse_namespaces

    assert parse_namespaces("") is None
    assert parse_namespaces(" ml , ads,,") == ["ml", "ads"]
    assert parse_namespaces(None) is None


def test_step_and_bucket_from_policy():
    from gpulib.cost.steps import heatmap_bucket, series_step

    assert series_step("7d") == "5m"  # report_policy.csv series_step (with series_agg=max)
    assert series_step("1m") == "1m"  # never coarser than the window
    assert heatmap_bucket("7d", "2m") == "7200s"  # 604800 s / 84 columns = 7200 s, a whole number of 2m steps
    assert heatmap_bucket("6h", "2m") == "360s"  # 21600 / 84 = 257 s -> rounded up to 3 steps
    from gpulib.core.errors import InvalidWindow

    with pytest.raises(InvalidWindow, match="7days"):
        series_step("7days")


def test_unknown_namespace_names_the_known_ones():
    import gpulib
    from gpulib.core.errors import InvalidParameter
    from gpulib.cost.steps import load_report_data

    src = gpulib.connect("demo", end=DEMO_END)
    with pytest.raises(InvalidParameter, match=r"nosuchns.*notebooks"):
        load_report_data(src, "1h", namespaces=["notebooks", "nosuchns"])


def test_namespace_filter_and_gpu_util_fallback():
    """Without GR_ENGINE_ACTIVE the report runs on GPU_UTIL and the method says so; namespaces restrict the rollups."""
    import gpulib
    import gpulib.cost as cost
    import gpulib.cost.steps as report

    src = gpulib.connect("demo", end=DEMO_END)
    data = report.load_report_data(src, "6h", namespaces=["notebooks"])
    data.gpu_util, data.gr_engine_active = src.series("DCGM_FI_DEV_GPU_UTIL", "6h", step=data.step), None
    rep = cost.analyze_cost(
        data.nodes, data.pods, None, data.fb_used, gpu_util=data.gpu_util, window="6h", namespaces=data.namespaces
    )
    assert data.activity_field == "DCGM_FI_DEV_GPU_UTIL" and rep.activity_field == "DCGM_FI_DEV_GPU_UTIL"
    assert set(cost.namespace_allocation(rep)["namespace"]) == {"notebooks"}
    html = report.method_section(rep, data)
    assert "GPU_UTIL: percent of time a kernel ran" in html and "Namespaces:</b> notebooks" in html


def test_idle_table_keeps_zombies_below_the_cut():
    from types import SimpleNamespace

    import gpulib.cost.view as view

    full = pd.DataFrame(
        {
            "namespace": ["a", "b", "c"],
            "workload": ["w1", "w2", "w3"],
            "owner_kind": ["Deployment"] * 3,
            "allocated_gpu_hours": [10.0, 8.0, 2.0],
            "idle_allocated_gpu_hours": [9.0, 7.0, 1.5],
            "active_pct": [2.0, 3.0, 1.0],
            "fb_used_max_mib": [2048.0, float("nan"), 4096.0],
            "idle_cost": [90.0, 70.0, 15.0],
            "zombie": [False, False, True],
            "zombie_hours": [0.0, 0.0, 1.5],
        }
    )
    import gpulib.cost.report_frames as cost_mod

    orig = cost_mod.top_idle_workloads
    cost_mod.top_idle_workloads = lambda rep, n=10: full.head(n).reset_index(drop=True)
    try:
        t = cost_mod.idle_zombie_table(SimpleNamespace(), n=1)
    finally:
        cost_mod.top_idle_workloads = orig
    assert list(t["workload"]) == ["w1", "w3"]  # top 1 by idle cost + the zombie below the cut
    page = view.idle_table_html(t, "EUR")
    assert "<b style='color:#b00020'>zombie</b> 1.5 GPU-h" in page and "90.00 EUR" in page and "15.00 EUR" in page


def test_kpi_tiles_render_the_summary_numbers():
    from gpulib.cost.view import kpi_tiles_html, top_actions_html

    s = {
        "currency": "USD",
        "window_hours": 168.0,
        "gpu_hours": 1000.0,
        "allocated_pct": 75.4,
        "active_pct": 40.0,
        "activity_metric": "DCGM_FI_DEV_GPU_UTIL",
        "idle_gpu_hours": 123.4,
        "idle_cost": 456.0,
        "unallocated_gpu_hours": 246.0,
        "unallocated_cost": 1200.0,
        "monthly_cost": 52000.0,
        "window_cost": 12000.0,
        "potential_monthly_saving": 3400.0,
        "zombie_pods": 2,
        "allocated_gpu_hours": 754.0,
        "active_gpu_hours": 630.6,
        "busy_pct": 31.0,
        "top_actions": [
            {"label": "Reclaim idle / zombie GPUs", "target": "ns/pod<x>", "monthly_saving": 3400.0, "detail": "zombie"}
        ],
    }
    page = kpi_tiles_html(s)
    for text in ("75 %", "40 %", "123 GPU-h", "456 USD", "52,000 USD/mo", "3,400 USD", ">2<", "7d"):
        assert text in page, text
    acts = top_actions_html(s)
    assert "ns/pod&lt;x&gt;" in acts and "3,400 USD" in acts  # escaped
    assert "No savings action" in top_actions_html({**s, "top_actions": []})


def test_idle_table_does_not_call_busy_workloads_idle():
    """Workloads 99.6 % and 100 % active were labelled "idle" because every row that was not a zombie
    got that label; the label now follows the share of allocated time that was idle."""
    import gpulib.cost.view as view

    t = pd.DataFrame(
        {
            "namespace": ["train", "infer", "nb"],
            "workload": ["llm", "vllm", "lab"],
            "owner_kind": ["PyTorchJob", "Deployment", "StatefulSet"],
            "allocated_gpu_hours": [1000.0, 500.0, 100.0],
            "idle_allocated_gpu_hours": [4.0, 0.01, 97.0],
            "active_pct": [99.6, 100.0, 3.0],
            "fb_used_max_mib": [70000.0, 30000.0, 1024.0],
            "idle_cost": [40.0, 0.1, 900.0],
            "zombie": [False, False, False],
            "zombie_hours": [0.0, 0.0, 0.0],
        }
    )
    page = view.idle_table_html(t, "USD")
    cells = [row.split("</td>")[3] for row in page.split("<tr>")[2:]]  # the "state" column of each data row
    assert [c.rsplit(">", 1)[-1] for c in cells] == ["mostly active", "mostly active", "idle"], cells
