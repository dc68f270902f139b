"""gpuops serve, verdict first: the run record, /runs/{id}, summary.md, findings.json and the notification carry
the fast verdict (gpulib.verdict, in the server's worker thread) while the notebook is still rendering, and the
page says so; the notebook's verdict replaces a fast one that differs (and notifies again); a failed render keeps
the verdict and shows the failure; a runbook without a fast verdict is decided by its notebook; a restart during a
render keeps the verdict."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.runner import FastVerdicter
from tests.helpers.pinned import DEMO_END
from tests.serve.test_app import AUTH, TOKEN, payload, xid


class HeldRunner:
    """A notebook render that waits for ``release`` and then writes ``severity`` findings and an HTML report."""

    def __init__(self, severity=Severity.CRITICAL, title=None, status="done", same=False):
        self.release, self.severity, self.title, self.status, self.calls = threading.Event(), severity, title, status, 0
        self.same = same  # write the fast verdict's findings, as the notebook of the same data does

    def __call__(self, folder, runbook, params, timeout):
        self.calls += 1
        assert self.release.wait(60)
        if self.status == "failed":
            return {"status": "failed", "error": "timed out after 5 s: the run and its kernel were killed"}
        title = self.title or f"XID 79 on {params['node']} GPU {params['gpu']}: hardware (RESTART_BM)"
        if self.same:
            (folder / "findings.json").write_text((folder / "verdict.json").read_text())
        else:
            save_findings([Finding(self.severity, title, commands=["kubectl cordon x"])], folder / "findings.json")
        (folder / f"{runbook}.html").write_text("<html><body><p>the notebook report</p></body></html>")
        return {"status": self.status, "error": None}


class Hook:
    def __init__(self):
        got = self.got = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}/hook"


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.srv.shutdown()


def make(tmp_path, runner, verdicter, **kw):
    from fastapi.testclient import TestClient

    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, notify_format="json", **kw)
    app = create_app(cfg, runner, verdicter)
    return app, TestClient(app)


def wait_for(c, rid, status, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rec = c.get(f"/runs/{rid}/run.json").json()
        if rec["status"] == status:
            return rec
        time.sleep(0.05)
    raise AssertionError(f"{rid} never reached {status}: {rec}")


def test_the_verdict_is_out_while_the_notebook_renders(tmp_path, pinned, hook):
    runner = HeldRunner(same=True)
    app, c = make(tmp_path, runner, FastVerdicter(), notify_url=hook.url)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    rec = wait_for(c, rid, "rendering")
    # the real domain decision on the demo fleet: dgx-h100-1 GPU 5 has XID 79 (demo_fleet.yaml)
    assert rec["verdict_by"] == "fast" and rec["severity"] == "critical" and "XID 79" in rec["cause"], rec
    assert rec["command"] and "dgx-h100-1" in rec["command"]
    page = c.get(f"/runs/{rid}").text
    assert (
        "data-severity='critical'" in page
        and "Still to come: the notebook" in page
        and "the notebook report" not in page
    )
    summary = c.get(f"/runs/{rid}/summary.md").text
    assert "**Verdict:** critical" in summary and "still rendering" in summary
    fj = c.get(f"/runs/{rid}/findings.json").json()
    assert fj["worst"] == "critical" and fj["findings"][0]["title"] == rec["cause"]
    end = time.monotonic() + 10
    while not hook.got and time.monotonic() < end:
        time.sleep(0.05)
    assert hook.got and hook.got[0]["verdict"] == "critical" and hook.got[0]["status"] == "rendering"
    assert runner.calls <= 1  # the render had not finished when all of the above was read
    runner.release.set()
    assert app.state.service.join(60)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["status"] == "done" and rec["render"] == "done" and rec["verdict_by"] == "fast", rec
    assert rec["verdict_at"] <= rec["render_finished"]
    assert "the notebook report" in c.get(f"/runs/{rid}").text
    assert "still rendering" not in (tmp_path / "runs" / rid / "summary.md").read_text()
    assert len(hook.got) == 1, "the same verdict was notified twice"


def _verdicter(severity: str, cause: str):
    def v(folder, runbook, params):
        return {
            "status": "done",
            "error": None,
            "verdict": {
                "severity": severity,
                "cause": cause,
                "sop_step": "",
                "commands": [],
                "findings": 1,
                "errors": [],
            },
        }

    return v


def test_a_notebook_verdict_that_differs_replaces_the_fast_one_and_is_notified(tmp_path, hook):
    runner = HeldRunner(Severity.CRITICAL, title="the notebook's cause")
    runner.release.set()
    app, c = make(tmp_path, runner, _verdicter("warning", "the fast cause"), notify_url=hook.url)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(30)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["severity"] == "critical" and rec["cause"] == "the notebook's cause" and rec["verdict_by"] == "notebook"
    assert rec["verdict_changed"]["fast"]["cause"] == "the fast cause"
    assert [g["verdict"] for g in hook.got] == ["warning", "critical"]
    assert "replaced the first (fast) one" in c.get(f"/runs/{rid}").text


def test_a_failed_render_keeps_the_verdict_and_says_the_evidence_failed(tmp_path):
    runner = HeldRunner(status="failed")
    runner.release.set()
    app, c = make(tmp_path, runner, _verdicter("critical", "XID 79 on dgx-h100-1 GPU 5"))
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(30)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["status"] == "done" and rec["severity"] == "critical" and rec["render"] == "failed", rec
    assert "timed out" in rec["render_error"]
    page = c.get(f"/runs/{rid}").text
    assert "could not be rendered: timed out" in page and "data-severity='critical'" in page


def test_a_runbook_without_a_fast_verdict_is_decided_by_its_notebook(tmp_path):
    runner = HeldRunner(Severity.WARNING, title="from the notebook")
    runner.release.set()
    app, c = make(tmp_path, runner, lambda folder, runbook, params: None)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(30)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["verdict_by"] == "notebook" and rec["severity"] == "warning" and rec["cause"] == "from the notebook"
    assert rec["status"] == "done" and rec["render"] == "done"


def test_a_broken_fast_verdict_falls_back_to_the_notebook(tmp_path):
    def broken(folder, runbook, params):
        raise RuntimeError("a bug")

    runner = HeldRunner(Severity.CRITICAL)
    runner.release.set()
    app, c = make(tmp_path, runner, broken)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(30)
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert rec["verdict_by"] == "notebook" and rec["severity"] == "critical" and "a bug" in rec["verdict_error"]


def test_a_restart_during_the_render_keeps_the_verdict(tmp_path):
    runner = HeldRunner()
    app, c = make(tmp_path, runner, _verdicter("critical", "XID 79"))
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    wait_for(c, rid, "rendering")
    from gpulib.serve.store import RunStore

    rec = RunStore(tmp_path / "runs").get(rid)  # a second server on the same folder: the index rebuilt
    assert rec["status"] == "done" and rec["severity"] == "critical" and rec["render"] == "failed"
    assert "interrupted" in rec["render_error"]
    runner.release.set()
    assert app.state.service.join(30)


def test_verdict_mode_is_checked():
    from gpulib.core.errors import InvalidParameter

    with pytest.raises(InvalidParameter, match="--verdict"):
        ServeConfig.build(out="/tmp/x", token=TOKEN, verdict="slow")
