"""gpulib/run/verdict.py: the fast verdict is the definition run headless, and it says what it rests on: the outcome
of every step and the inputs of the steps that ran, in findings.json too."""

from __future__ import annotations

import pytest

from gpulib.run.catalogue import definition
from gpulib.run.verdict import fast_verdict
from tests.helpers.pinned import DEMO_END


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    for k in ("GPUOPS_FINDINGS_PATH", "KUBECONFIG"):
        monkeypatch.delenv(k, raising=False)


def test_the_fast_verdict_names_each_steps_outcome_and_the_inputs_it_rests_on(pinned):
    v = fast_verdict("xid_ecc_triage", {"source": "demo", "node": "dgx-h100-1", "gpu": "5"})
    rb = definition("xid_ecc_triage")
    assert list(v.steps) == [s.title for s in rb.steps]
    assert v.steps["Remediation plan (dry run)"] == "not run headless"  # it has effects: the notebook's alone
    assert v.steps["Temperature and power"] == "not run headless"  # it only shows
    assert v.steps["Triage"] == "ran" and v.worst == "critical"
    assert {"kernel log", "nvidia-smi -q", "DCGM_FI_DEV_XID_ERRORS", "pods"} <= set(v.inputs)


def test_a_verdict_whose_steps_could_not_run_rests_on_no_input(pinned):
    v = fast_verdict("xid_ecc_triage", {"source": "demo", "node": "dgx-h100-9", "gpu": "5"})
    assert v.usage_errors and v.inputs == []
    assert v.steps["Check the parameters and gather the inputs"] == "failed"
    assert v.steps["Triage"] == "not checked"


@pytest.mark.notebook
def test_the_notebooks_findings_json_names_its_steps_and_inputs(shared_runs, pinned):
    doc = shared_runs.run("xid_ecc_triage", source="demo", node="dgx-h100-1", gpu="5").doc
    assert set(doc["steps"].values()) == {"ran"}  # the notebook runs every step, the dry-run plan included
    assert "kernel log" in doc["inputs"]


def test_each_input_is_named_once(pinned):
    """Two steps of xid_ecc_triage read the same DCGM fields; the verdict names each input once (it listed
    DCGM_FI_DEV_ECC_DBE_VOL_TOTAL and four others twice)."""
    v = fast_verdict("xid_ecc_triage", {"source": "demo", "node": "dgx-h100-1", "gpu": "5"})
    assert len(v.inputs) == len(set(v.inputs)), [i for i in v.inputs if v.inputs.count(i) > 1]
