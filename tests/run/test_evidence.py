"""No OK without evidence, for every runbook (gpulib/run/evidence.py, gpulib/data/core/evidence.csv), and the fault
matrix of fields: every runbook x every input its decisions need, removed from the demo incident one at a time (and
every decision's inputs all at once), through the fast verdict (the runbook's own steps, headless, no notebook).

A decision with none of its inputs makes the run INCOMPLETE (an error naming the input under the name each
dcgm-exporter generation gives it and how to enable it); no removal ever gives OK. xid_ecc_triage checks its
decisions per node in its own step: tests/xid/test_evidence.py is its matrix.
"""

from __future__ import annotations

import pytest

from gpulib.demo.metrics import OFF_BY_DEFAULT
from gpulib.run.catalogue import RUNBOOKS
from gpulib.run.evidence import every_name, needs, runbooks
from gpulib.run.verdict import fast_verdict
from gpulib.sources.signals import GENERATIONS, aliases, name_in
from gpulib.xid.evidence import evidence_groups
from tests.helpers.pinned import DEMO_END
from tests.helpers.removal import remove

#: the demo incident each runbook is run on, at a window that keeps the matrix cheap (the incidents are inside it)
PARAMS = {
    "fleet_overview": {"window": "1h"},
    "gpu_utilization_report": {"window": "6h"},
}
CELLS = [(n.runbook, n) for rb in runbooks() for n in needs(rb)]
#: the alternatives of a decision resting on more than one input (a sole input is a cell of CELLS already)
SINGLES = sorted({(rb, i) for rb in runbooks() for n in needs(rb) if len(n.inputs) > 1 for i in n.inputs})


@pytest.fixture(autouse=True)
def _pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    for k in ("GPUOPS_FINDINGS_PATH", "KUBECONFIG", "GPUOPS_DEMO_EXPORTER"):
        monkeypatch.delenv(k, raising=False)


def verdict(runbook: str, **params):
    return fast_verdict(runbook, {"source": "demo", **PARAMS.get(runbook, {}), **params})


def test_every_runbook_of_the_catalogue_says_what_its_decisions_need():
    """The generic table covers every runbook but xid_ecc_triage, whose own table is checked per node."""
    assert set(runbooks()) | {"xid_ecc_triage"} == set(RUNBOOKS)
    assert evidence_groups()  # gpulib/data/xid/xid_evidence.csv


def test_every_named_input_is_one_a_source_can_serve():
    """A DCGM input is a canonical name of the signal contract (else no exporter name could ever satisfy it)."""
    for rb in runbooks():
        for n in needs(rb):
            for i in n.inputs:
                if i.startswith("DCGM_"):
                    assert aliases(i)[0] == i, (rb, n.decision, i)
                else:
                    assert i.startswith(("history:", "vllm:")), (rb, n.decision, i)


@pytest.mark.parametrize(("runbook", "need"), CELLS, ids=[f"{r}-{n.decision}" for r, n in CELLS])
def test_without_every_input_of_a_decision_the_run_is_incomplete_and_names_it(runbook, need, monkeypatch):
    remove(monkeypatch, need.inputs)
    v = verdict(runbook)
    assert v.worst != "ok" and v.errors, (runbook, need.decision, v.worst)
    text = " ".join(v.errors)
    assert f"{need.decision}: none of" in text, v.errors
    for i in need.inputs:
        assert i in text
        for g in GENERATIONS:  # the name each dcgm-exporter generation gives it
            assert name_in(i, g) in text if i.startswith("DCGM_") else True
    assert v.findings[0].title.startswith("Runbook incomplete")
    assert need.how in text  # how to enable one of them


@pytest.mark.parametrize(("runbook", "field"), SINGLES, ids=[f"{r}-{f}" for r, f in SINGLES])
def test_removing_any_one_input_never_gives_ok(runbook, field, monkeypatch):
    remove(monkeypatch, {field})
    v = verdict(runbook)
    assert v.worst != "ok", (runbook, field)
    sole = [n for n in needs(runbook) if n.inputs == (field,)]
    assert not sole or v.errors, (runbook, field, "the sole input of a decision is gone: INCOMPLETE")


def test_a_flapping_node_without_its_conditions_is_incomplete_not_ok(monkeypatch):
    """l4-spot-0 flaps (tests/decisions/reliability.csv flapping_node): with kube-state-metrics' conditions gone its
    history has XIDs only, and node_health said OK ('no rule matched') before."""
    remove(monkeypatch, {"history:condition"})
    v = verdict("node_health", node="l4-spot-0")
    assert v.worst != "ok" and v.errors and "node conditions" in v.errors[0]


def test_the_fleet_without_its_temperature_field_is_incomplete(monkeypatch):
    """Before: the thermal decision silently skipped, the run exited 'done' on the other findings."""
    remove(monkeypatch, {"DCGM_FI_DEV_GPU_TEMP"})
    v = verdict("fleet_overview")
    assert v.errors and every_name("DCGM_FI_DEV_GPU_TEMP") in v.errors[0]
    assert "DCGM_FI_DEV_GPU_TEMP_CELSIUS" in v.errors[0]


@pytest.mark.parametrize("runbook", runbooks())
def test_with_dcgm_exporters_default_counters_no_decision_lacks_evidence(runbook, monkeypatch):
    """The fields dcgm-exporter leaves out by default (ECC, SM_ACTIVE) are never the only evidence of a decision:
    a user on the default counters is not told INCOMPLETE."""
    remove(monkeypatch, OFF_BY_DEFAULT)
    v = verdict(runbook)
    assert not [e for e in v.errors if "no evidence" in e], v.errors


@pytest.mark.parametrize("runbook", runbooks())
def test_every_finding_lists_the_inputs_it_used(runbook):
    v = verdict(runbook)
    assert v.findings and not v.errors, v.errors
    for f in v.findings:
        assert f.data.get("inputs"), (runbook, f.title)
        for n in needs(runbook):
            if f.category in n.categories:
                assert set(f.data["inputs"]) & set(n.inputs), (runbook, f.title, n.decision)
