"""reports/gpu_reliability_report.ipynb executed with papermill on the demo fleet's history."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "reports" / "gpu_reliability_report.ipynb"

pytestmark = pytest.mark.notebook


def test_demo_report_finds_the_planted_cases(run_notebook):
    doc, text = run_notebook(NOTEBOOK)()
    assert doc["errors"] == []
    cats = {(f["category"], f.get("data", {}).get("verdict")) for f in doc["findings"]}
    assert ("reliability-change", "regression") in cats and ("reliability", "repeat_offender") in cats
    regs = [f for f in doc["findings"] if f["category"] == "reliability-change"]
    assert [f["data"]["scope"] for f in regs] == ["p5.48xlarge"]
    assert "https://arxiv.org/abs/2407.21783" in text and "Fleet health score" in text
