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


def test_the_report_shows_numbers_rounded_for_a_reader(run_notebook):
    """No float with more than 4 significant digits, no exponent and no ``inf`` in what the report shows (tables,
    findings, notes; the charts' data is not text). Failed before: 33.3333, 0.0767677, 3.08111e-05 in the tables,
    'CI 2.79-713.39, one-sided p = 3.1e-05' in the change finding, rate ratios of inf."""
    import html
    import json
    import re

    from tests.core.test_human_numbers import human_text_problems

    _, text = run_notebook(NOTEBOOK)()
    shown = []
    for cell in json.loads(text)["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "application/vnd.plotly.v1+json" in data:
                continue
            page = "".join(data.get("text/html", "")) or "".join(out.get("text", ""))
            page = re.sub(r"(?s)<script.*?</script>|<style.*?</style>", "", page)
            shown.append(html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert shown and human_text_problems("\n".join(shown)) == []
