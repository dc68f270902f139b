"""No OK without evidence (gpulib/xid/evidence.py, gpulib/data/xid/xid_evidence.csv): each decision of the triage
(XID, memory, thermal) needs at least one of its inputs; with none of them the run is INCOMPLETE and names what is
missing and how to get it. A fault matrix over the fast verdict (the runbook's own steps, headless): removing the
inputs of a decision never yields OK, and removing any single input never turns a finding into OK."""

from __future__ import annotations

import pytest

from gpulib.core.errors import EmptyResult
from gpulib.demo.source import DemoSource
from gpulib.run.verdict import fast_verdict
from gpulib.xid.evidence import evidence_groups
from tests.helpers.pinned import DEMO_END

TEXT_INPUTS = {"kernel log": "kernel_log", "nvidia-smi -q": "smi_query"}


@pytest.fixture(autouse=True)
def _pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)


def remove(monkeypatch, inputs: set[str]) -> None:
    """The demo source without ``inputs``: a text input the source does not have (None), a DCGM field not exported
    (EmptyResult, as every source raises for a field it does not serve)."""
    for name, method in TEXT_INPUTS.items():
        if name in inputs:
            monkeypatch.setattr(DemoSource, method, lambda self, node: None)
    fields = {i for i in inputs if i.startswith("DCGM_")}
    for method in ("summary", "series"):
        real = getattr(DemoSource, method)

        def gone(self, field, *a, _real=real, **k):
            if field in fields:
                raise EmptyResult(f"{field} is not exported by this source")
            return _real(self, field, *a, **k)

        monkeypatch.setattr(DemoSource, method, gone)


def verdict(node: str, gpu: str):
    return fast_verdict("xid_ecc_triage", {"source": "demo", "node": node, "gpu": gpu})


def test_a_healthy_gpu_without_any_xid_evidence_is_incomplete_not_ok(monkeypatch):
    """The false all-clear with the old names: no kernel log at hand and the XID field not exported."""
    remove(monkeypatch, {"kernel log", "DCGM_FI_DEV_XID_ERRORS"})
    v = verdict("dgx-h100-0", "2")
    assert v.worst != "ok" and v.errors, [f.title for f in v.findings]
    assert v.findings[0].title.startswith("Runbook incomplete")
    text = " ".join(v.errors)
    assert "kernel log" in text and "DCGM_FI_DEV_XID_ERRORS" in text and "kubectl debug" in text
    assert "DCGM_FI_DEV_XID_ERROR)" in text  # the name dcgm-exporter 4.9+ gives it (gpulib/data/sources/signals.csv)


@pytest.mark.parametrize("group", evidence_groups(), ids=lambda g: g.decision)
@pytest.mark.parametrize(("node", "gpu"), [("dgx-h100-0", "2"), ("dgx-h100-1", "5")])
def test_without_every_input_of_a_decision_the_verdict_is_never_ok(group, node, gpu, monkeypatch):
    remove(monkeypatch, set(group.inputs))
    v = verdict(node, gpu)
    assert v.worst != "ok" and any(group.decision in e for e in v.errors), (group.decision, v.errors)


def _inputs() -> list[str]:
    return sorted({i for g in evidence_groups() for i in g.inputs})


@pytest.mark.parametrize("single", _inputs())
def test_removing_one_input_never_turns_the_xid79_gpu_ok(single, monkeypatch):
    remove(monkeypatch, {single})
    assert verdict("dgx-h100-1", "5").worst != "ok"


def test_with_every_input_present_the_healthy_gpu_is_ok_and_rests_on_them():
    v = verdict("dgx-h100-0", "2")
    assert v.worst == "ok" and not v.errors
    assert {"kernel log", "nvidia-smi -q"} <= set(v.inputs)
