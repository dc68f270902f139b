"""runbooks/node_health.ipynb executed with papermill on the demo fleet's history (gpulib/data/demo/demo_history.yaml):
the planted repeat offender and flapping node get their verdicts, a node that matches nothing is a usage error."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib import cli

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "runbooks" / "node_health.ipynb"

pytestmark = pytest.mark.notebook


@pytest.fixture
def run_nb(run_notebook):
    return run_notebook(NOTEBOOK)


def test_default_node_is_the_repeat_offender_with_its_evidence(run_nb):
    doc, text = run_nb()  # defaults: h200-infer-0, 7d
    assert doc["errors"] == []
    top = doc["findings"][0]
    # demo_history.yaml: GPU 6 falls off the bus at -52d, -33d, -19d, -9d, -4d: three of them in the rules' 30 days
    assert top["data"]["verdict"] == "repeat_offender" and top["gpu"] == "6" and top["data"]["count"] == 3
    assert "RMA" in top["escalation"] and "kubectl cordon h200-infer-0" in top["commands"]
    assert "no data" not in text or "not provided by this source" in text
    assert "h200-infer-0: every signal, last 7d" in text


def test_the_flapping_node_is_degrading_with_the_test_named(run_nb):
    doc, _ = run_nb(node="l4-spot-0")
    top = doc["findings"][0]
    assert top["data"]["verdict"] == "degrading" and top["data"]["p"] < 0.01
    assert "Poisson rate-ratio" in top["data"]["test"]


def test_a_node_that_matches_nothing_is_a_usage_error(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "node_health", "-p", "node", "no-such-node", "--out", str(tmp_path), "-q"])
    assert e.value.code == cli.EXIT_USAGE
