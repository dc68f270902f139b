"""The fast verdict (gpulib/run/verdict.py: the runbook's definition run headless, no kernel) against the
notebook's findings.json, on every row of the decision tables (tests/decisions/*.csv): every runbook they name has a
definition, so every row gets the same findings, in the same order, with the same errors and parameters, through
both paths, and each row's expected decision is reached by the fast path too."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.run.catalogue import RUNBOOKS, defined
from gpulib.run.verdict import fast_verdict, supports
from tests.helpers.pinned import DEMO_END
from tests.project import test_decisions_incidents as incidents
from tests.project import test_decisions_reliability as reliability
from tests.project import test_decisions_xid as xid

XID_ROWS = [("xid_ecc_triage", {"node": r["node"], "gpu": r["gpu"]}, r) for r in xid.ROWS]
INCIDENT_ROWS = [(r["runbook"], incidents.params_of(r), r) for r in incidents.ROWS]
RELIABILITY_ROWS = [
    (r["runbook"], reliability._params(r), {**r, "id": r["case"]}) for r in reliability.ROWS if r["papermill"] == "yes"
]
ROWS = XID_ROWS + INCIDENT_ROWS + RELIABILITY_ROWS
DECISION_ROWS = XID_ROWS + INCIDENT_ROWS
#: the dcgm-exporter generations the demo serves its fields under for the decision checks (GPUOPS_DEMO_EXPORTER; ""
#: the canonical names as is): the tables' decisions hold under the old names and under today's
EXPORTERS = ("4.8", "4.10")
_FAST: dict[str, object] = {}


def _key(runbook: str, params: dict) -> str:
    return runbook + json.dumps(params, sort_keys=True, default=str) + os.environ.get("GPUOPS_DEMO_EXPORTER", "")


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    for k in ("GPUOPS_FINDINGS_PATH", "KUBECONFIG", "GPUOPS_DEMO_EXPORTER"):
        monkeypatch.delenv(k, raising=False)


def fast(runbook: str, params: dict):
    k = _key(runbook, params)
    if k not in _FAST:
        _FAST[k] = fast_verdict(runbook, {"source": "demo", **params})
    return _FAST[k]


def as_saved(v) -> dict:
    """The fast verdict as findings.json holds it: written by the same writer (gpulib.core.findings.save_findings:
    redaction, JSON round trip, the version-2 fields) and read back."""
    with tempfile.TemporaryDirectory() as d:
        path = save_findings(
            v.findings,
            Path(d) / "findings.json",
            runbook=v.runbook,
            parameters=v.parameters,
            errors=v.errors,
            usage_errors=v.usage_errors,
        )
        doc = json.loads(path.read_text())
    doc.setdefault("usage_errors", [])
    return doc


def test_every_runbook_the_tables_name_has_a_definition():
    named = {r for r, _, _ in ROWS}
    assert named <= set(RUNBOOKS)
    assert {r for r in named if not defined(r)} == set()


@pytest.mark.notebook
@pytest.mark.parametrize(("runbook", "params", "row"), ROWS, ids=[r["id"] for _, _, r in ROWS])
def test_fast_verdict_equals_the_notebooks(runbook, params, row, shared_runs, pinned):
    nb = shared_runs.run(runbook, source="demo", **params)
    assert nb.failed is None, nb.failed
    doc = nb.doc
    mine = as_saved(fast(runbook, params))
    assert mine["worst"] == doc["worst"], (row["id"], mine["worst"], doc["worst"])
    assert [f["title"] for f in mine["findings"]] == [f["title"] for f in doc["findings"]], row["id"]
    assert mine["findings"] == doc["findings"], row["id"]
    assert mine["errors"] == doc["errors"] and mine["usage_errors"] == doc.get("usage_errors", []), row["id"]
    assert mine["parameters"] == doc["parameters"], row["id"]


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize(("runbook", "params", "row"), DECISION_ROWS, ids=[r["id"] for _, _, r in DECISION_ROWS])
def test_fast_verdict_reaches_the_tables_decision(runbook, params, row, exporter, pinned, monkeypatch):
    """Each row's expected decision from the fast path alone (no notebook), checked as the tables check it, with the
    demo's fields served under each exporter generation's names and units."""
    monkeypatch.setenv("GPUOPS_DEMO_EXPORTER", exporter)
    v = fast(runbook, params)
    fs = [Finding.from_dict(d) for d in as_saved(v)["findings"]]
    expected = row["expected"]
    if expected == "usage":
        assert v.usage_errors and fs[0].category == "usage" and fs[0].severity is Severity.CRITICAL, row["id"]
        return
    if expected == "incomplete":
        assert v.errors and not v.usage_errors and fs[0].category == "data", row["id"]
        assert v.worst != "ok", row["id"]
        return
    assert not v.errors, (row["id"], v.errors)
    if runbook == "xid_ecc_triage":
        xid._check(row, fs, expected, row["root_cause"])
    else:
        incidents.check_row(row, fs)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize(("runbook", "params", "row"), RELIABILITY_ROWS, ids=[r["id"] for _, _, r in RELIABILITY_ROWS])
def test_fast_verdict_reaches_the_reliability_tables_decision(runbook, params, row, exporter, monkeypatch):
    """tests/decisions/reliability.csv at its own window end, checked as its notebook test checks findings.json,
    under each exporter generation's names."""
    monkeypatch.setenv("GPUOPS_END", reliability.END)
    monkeypatch.setenv("GPUOPS_DEMO_EXPORTER", exporter)
    fs = as_saved(fast_verdict(runbook, {"source": "demo", **params}))["findings"]
    if runbook == "node_health":
        node, _, gpu = row["target"].partition("/")
        mine = [f for f in fs if f["node"] == node and (not gpu or f["gpu"] in (gpu, None))]
        assert mine and mine[0]["data"]["verdict"] == row["expected"], row["id"]
    else:
        kind, scope, _ = row["target"].split(":")
        regs = [f for f in fs if f["category"] == "reliability-change"]
        assert [(f["data"]["kind"], f["data"]["scope"]) for f in regs] == [(kind, scope)], row["id"]


def test_missing_data_is_incomplete_never_ok(pinned, monkeypatch):
    """A source that cannot answer a step: the fast verdict is INCOMPLETE (a warning on top, the error listed)."""
    from gpulib.core.errors import SourceError
    from gpulib.demo.source import DemoSource

    def down(self, *a, **k):
        raise SourceError("Prometheus is down", hint="check the URL")

    monkeypatch.setattr(DemoSource, "summary", down)
    monkeypatch.setattr(DemoSource, "series", down)
    v = fast_verdict("xid_ecc_triage", {"source": "demo", "node": "dgx-h100-1", "gpu": "5"})
    assert v.errors and "Prometheus is down" in v.errors[0]
    assert v.findings[0].title.startswith("Runbook incomplete") and v.worst != "ok"


def test_a_parameter_that_matches_nothing_is_a_usage_error(pinned):
    v = fast_verdict("nccl_check", {"source": "demo", "node": "dgx-h100-9"})
    assert v.usage_errors and "dgx-h100-9" in v.usage_errors[0]
    assert v.findings[0].severity is Severity.CRITICAL and v.findings[0].category == "usage"


def test_recording_the_history_has_no_fast_verdict():
    """record_history appends to a file: a fast verdict beside the notebook would record the run twice."""
    assert not supports("nccl_check", {"record_history": True})
    assert supports("nccl_check", {"record_history": False})
    assert not supports("cost_report", {})
    with pytest.raises(KeyError):
        fast_verdict("nccl_check", {"record_history": True})
