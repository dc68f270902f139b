"""gpulib.run.record: the run index (``/runs`` and ``index.html``) shows a run's known verdict while its notebook
renders and after its render was interrupted, and a bad-parameter run is recorded as such, without a severity."""

from __future__ import annotations

import re

from gpulib.core.findings import Severity
from gpulib.serve.store import RunStore
from tests.serve.test_app import AUTH, payload, xid
from tests.serve.test_app_verdict_first import HeldRunner, _verdicter, make, wait_for


def _row(page: str, rid: str) -> str:
    """The index row of run ``rid``."""
    rows = [r for r in re.findall(r"<tr data-runbook.*?</tr>", page, re.S) if rid in r]
    assert len(rows) == 1, page
    return rows[0]


def _index_html(root, rid: str) -> str:
    from gpulib.run.index_page import write_index

    return _row(write_index(root).read_text(), rid)


def test_the_index_shows_the_fast_verdict_while_the_notebook_renders(tmp_path):
    runner = HeldRunner()
    app, c = make(tmp_path, runner, _verdicter("critical", "XID 79 on dgx-h100-1 GPU 5"))
    try:
        rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
        wait_for(c, rid, "rendering")
        for row in (_row(c.get("/runs").text, rid), _index_html(tmp_path / "runs", rid)):
            # the critical filter matches the row's data-severity; the cause is the verdict's
            assert "data-severity='critical'" in row and "XID 79 on dgx-h100-1 GPU 5" in row, row
    finally:
        runner.release.set()
        assert app.state.service.join(30)


def test_an_interrupted_render_keeps_its_verdict_in_the_index(tmp_path):
    runner = HeldRunner()
    app, c = make(tmp_path, runner, _verdicter("critical", "XID 79 on dgx-h100-1 GPU 5"))
    try:
        rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
        wait_for(c, rid, "rendering")
        RunStore(tmp_path / "runs")  # a server starting again on the same store: the render was cut short
        row = _index_html(tmp_path / "runs", rid)
        assert "data-severity='critical'" in row and "XID 79 on dgx-h100-1 GPU 5" in row, row
        assert "no findings written" not in row
    finally:
        runner.release.set()
        assert app.state.service.join(30)


def test_a_bad_parameter_is_recorded_as_such_without_a_severity(tmp_path):
    def bad(folder, runbook, params):
        return {
            "status": "bad parameter",
            "error": "bad parameter: node 'dgx-h100-9' is not in the fleet",
            "verdict": {"severity": "critical", "cause": "node 'dgx-h100-9' is not in the fleet", "sop_step": "",
                        "commands": [], "findings": 1, "errors": []},
        }

    runner = HeldRunner(Severity.CRITICAL)
    runner.release.set()
    app, c = make(tmp_path, runner, bad)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(30)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["status"] == "bad parameter" and not rec["severity"], rec
    row = _row(c.get("/runs").text, rid)
    assert "data-severity='critical'" not in row and "data-status='bad parameter'" in row, row
