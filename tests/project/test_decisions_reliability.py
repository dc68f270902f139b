"""tests/decisions/reliability.csv: every planted case of the demo history (gpulib/data/demo/demo_history.yaml) gets
its verdict through the domain calls the notebooks make, the controls get none, and the rows marked papermill=yes get
the same verdict through the notebook (runbooks/node_health.ipynb, reports/gpu_reliability_report.ipynb)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import gpulib
import gpulib.reliability.report_steps as R
import gpulib.reliability.steps as S
from gpulib.core.errors import UnknownNode
from tests.helpers.gpuops_cli import gpuops

ROOT = Path(__file__).resolve().parents[2]
ROWS = list(csv.DictReader(open(ROOT / "tests" / "decisions" / "reliability.csv")))
END = "2026-12-01T06:45:00Z"


@pytest.fixture(scope="module")
def src():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        yield gpulib.connect("demo")


@pytest.fixture(scope="module")
def report(src):
    return R.build(R.load(src, "30d"), "30d")


def _params(row):
    return dict(kv.split("=", 1) for kv in row["params"].split(";;") if kv.strip())


def _node_verdict(src, row):
    p = _params(row)
    inp = S.read_history(src, p["node"], p.get("window", "7d"))
    S.verdicts(inp)
    return S.findings(inp)


def _about(findings, target):
    node, _, gpu = target.partition("/")
    return [f for f in findings if f.node == node and (not gpu or f.gpu in (gpu, None))]


def _report_verdicts(rep, target):
    if "/" in target:
        node, gpu = target.split("/")
        return ["repeat_offender"] if ((rep.offenders["node"] == node) & (rep.offenders["gpu"] == gpu)).any() else []
    kind, scope, cls = target.split(":")
    hits = [c for c in rep.changes if c.kind == kind and c.scope == scope and cls in ("*", c.what)]
    assert hits, f"no change {kind} on {scope} in the report"
    return ["regression" for c in hits if c.regression]


@pytest.mark.parametrize("row", ROWS, ids=[r["case"] for r in ROWS])
def test_decision(row, src, report):
    if row["runbook"] == "node_health":
        if row["expected"] == "usage":
            with pytest.raises(UnknownNode):
                _node_verdict(src, row)
            return
        found = _about(_node_verdict(src, row), row["target"])
        verdicts = {f.data["verdict"] for f in found if f.severity.value != "ok"}
        if row["expected"] == "none":
            assert verdicts == set(), f"control {row['target']} got {verdicts}"
        else:
            top = min(found, key=lambda f: f.severity.rank)
            assert top.data["verdict"] == row["expected"], [f.title for f in found]
    else:
        got = _report_verdicts(report, row["target"])
        assert got == ([] if row["expected"] == "none" else [row["expected"]])


PAPERMILL = sorted({(r["runbook"], r["params"]) for r in ROWS if r["papermill"] == "yes"})


@pytest.mark.notebook
@pytest.mark.parametrize("runbook,params", PAPERMILL)
def test_decision_through_the_notebook(runbook, params, tmp_path, monkeypatch, capsys):
    args = ["run", runbook, "--out", str(tmp_path), "-q"]
    for kv in filter(None, params.split(";;")):
        k, v = kv.split("=", 1)
        args += ["-p", k.strip(), v.strip()]
    gpuops(monkeypatch, capsys, args, env={"PYTHONPATH": str(ROOT), "GPUOPS_END": END}, cwd=ROOT)
    doc = json.loads(next(tmp_path.rglob("findings.json")).read_text())
    rows = [r for r in ROWS if r["runbook"] == runbook and r["params"] == params and r["papermill"] == "yes"]
    for row in rows:
        if runbook == "node_health":
            node, _, gpu = row["target"].partition("/")
            mine = [f for f in doc["findings"] if f["node"] == node and (not gpu or f["gpu"] in (gpu, None))]
            assert mine and mine[0]["data"]["verdict"] == row["expected"]
        else:
            kind, scope, _ = row["target"].split(":")
            regs = [f for f in doc["findings"] if f["category"] == "reliability-change"]
            assert [(f["data"]["kind"], f["data"]["scope"]) for f in regs] == [(kind, scope)]


@pytest.mark.parametrize("node,gpu", [("dgx-h100-1", "5"), ("a100-80-0", "1")])
def test_one_gpu_state_has_one_severity_in_node_health_xid_triage_and_fleet_overview(src, node, gpu):
    """node_health called the open XID 79 on dgx-h100-1 GPU 5 a warning while xid_ecc_triage called it
    critical. The same GPU state gets the same severity from every runbook that reports it."""
    import gpulib.xid.steps as xs
    from tests.project.test_decisions_incidents import _fleet

    health = [f for f in _node_verdict(src, {"params": f"node={node}"}) if f.gpu == gpu]
    faulted = [f for f in health if f.data["verdict"] == "faulted"]
    triage = [f for f in xs.findings(xs.collect(src, node, gpu, "6h")) if f.gpu == gpu]
    fleet = [f for f in _fleet(src, {}) if f.node == node and f.gpu == gpu and f.category == "xid"]
    assert faulted and triage, (health, triage)
    top = min(triage, key=lambda f: f.severity.rank).severity
    assert {f.severity for f in faulted} == {top}, ([f.title for f in faulted], top)
    assert all(f.severity == top for f in fleet), [(f.title, f.severity) for f in fleet]
