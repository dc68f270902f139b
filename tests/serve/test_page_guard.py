"""A page (GET /run/..., the runbook_url of an alert: no token) can neither create nor write anything: the parameters
gpuops mcp refuses a caller (``collect``: a privileged pod on the node, made with the server's credentials) are
refused here too, and the fast verdict never runs a run that has them (the notebook of an authenticated route does)."""

from __future__ import annotations

from gpulib.mcp.tools import MCP_SERVER_ONLY
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.routing import PAGE_REFUSED
from gpulib.serve.runner import FastVerdicter
from tests.helpers.k8s_double import free_port
from tests.serve.test_app import TOKEN, StubRunner

NODE, GPU = "dgx-a100-07", "0"  # a GPU node of the double's fixtures (tests/fixtures/k8s)


def _live_app(tmp_path, monkeypatch, k8s_double, verdicter):
    from fastapi.testclient import TestClient

    monkeypatch.setenv("KUBECONFIG", str(k8s_double.kubeconfig))
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens: fails fast
    monkeypatch.setenv("GPUOPS_PROMETHEUS_RETRIES", "0")
    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, source="live")
    app = create_app(cfg, StubRunner(), verdicter)
    return app, TestClient(app)


def test_a_page_asking_for_collect_is_refused_and_creates_no_pod(tmp_path, monkeypatch, k8s_double):
    app, c = _live_app(tmp_path, monkeypatch, k8s_double, FastVerdicter())
    for value in ("true", "1", "yes"):
        r = c.get(f"/run/xid_ecc_triage?node={NODE}&gpu={GPU}&collect={value}", follow_redirects=False)
        assert r.status_code == 400, r.text
        assert "set by the server" in r.json()["detail"]
    assert app.state.service.join(30)
    assert k8s_double.created == []
    assert [q for q in k8s_double.requests if q.method == "POST"] == []
    assert list((tmp_path / "runs").glob("*/run.json")) == []


def test_the_fast_verdict_never_runs_a_run_that_collects(tmp_path, monkeypatch, k8s_double):
    """A run with ``collect`` (an authenticated route may set it) gets no fast verdict: its notebook decides."""
    calls = []

    def verdicter(folder, runbook, params):
        calls.append(params)
        return None

    app, c = _live_app(tmp_path, monkeypatch, k8s_double, verdicter)
    svc = app.state.service
    svc.start("xid_ecc_triage", {"node": NODE, "gpu": GPU, "collect": True}, {"url": "test"})
    svc.start("xid_ecc_triage", {"node": NODE, "gpu": GPU}, {"url": "test"})
    assert svc.join(30)
    assert calls == [{"node": NODE, "gpu": GPU, "source": "live"}]


def test_pages_refuse_at_least_what_gpuops_mcp_refuses():
    assert set(MCP_SERVER_ONLY) <= set(PAGE_REFUSED)
