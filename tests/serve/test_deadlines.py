"""A slow dependency cannot wedge gpuops serve: every fast verdict has a wall-clock deadline (``verdict_deadline_s``),
after which the run is INCOMPLETE and the worker is replaced, so the next alert is accepted and decided; /healthz
says unhealthy (and /readyz not ready) while a verdict outlives its deadline by more than ``verdict_stuck_grace_s``.
The slow dependency is a Prometheus on 127.0.0.1 that trickles its answers a byte at a time."""

from __future__ import annotations

import json
import threading
import time

from fastapi.testclient import TestClient

from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.runner import ProcessVerdicter
from tests.helpers.faultserver import FaultServer
from tests.serve.test_app import AUTH, TOKEN, payload, xid

NODE = "dgx-a100-07"  # a GPU node of the Kubernetes API double's fixtures (tests/fixtures/k8s)
DEADLINE = 4.0


class Quick:
    """A render that fails at once without evidence (the notebook is not the point here): the fast verdict stands."""

    def __call__(self, folder, runbook, params, timeout):
        return {"status": "failed", "error": "no render in this test"}


def _wait(svc, run_id, key, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        rec = svc.store.get(run_id)
        if rec.get(key):
            return rec
        time.sleep(0.1)
    return svc.store.get(run_id)


def _wait_verdict(svc, run_id, limit):
    return _wait(svc, run_id, "verdict_at", limit)


def test_a_trickling_prometheus_makes_the_verdict_incomplete_by_its_deadline(tmp_path, monkeypatch, k8s_double):
    monkeypatch.setenv("KUBECONFIG", str(k8s_double.kubeconfig))
    monkeypatch.setenv("GPUOPS_PROMETHEUS_TIMEOUT", "600")  # only the verdict's deadline can end it
    with FaultServer("trickle", delay=2) as prom:
        monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", prom.url)
        cfg = ServeConfig.build(
            out=tmp_path / "runs", token=TOKEN, source="live", verdict_workers=1, verdict_deadline_s=DEADLINE
        )
        app = create_app(cfg, Quick(), ProcessVerdicter(1))  # the server's default: verdicts in worker processes
        svc = app.state.service
        try:
            c = TestClient(app)
            t0 = time.monotonic()
            r = c.post("/alertmanager", json=payload([xid(node=NODE, gpu="0")], group="a"), headers=AUTH)
            assert r.status_code == 202 and len(r.json()["runs"]) == 1
            rec = _wait_verdict(svc, r.json()["runs"][0], DEADLINE + 30)
            took = rec["verdict_at"] - rec["created"] if rec.get("verdict_at") else time.monotonic() - t0
            assert rec.get("verdict_status") == "incomplete", json.dumps(rec)
            assert took < DEADLINE + 5, f"verdict after {took:.1f}s at a {DEADLINE:g}s deadline"
            assert "deadline" in rec["error"]
            rec = _wait(svc, rec["id"], "finished", 10)  # the render (failing at once here) leaves the verdict standing
            assert rec["status"] == "incomplete", json.dumps(rec)
            assert "deadline" in " ".join(rec["verdict"]["errors"])
            # the worker was replaced: the next alert is accepted and decided within its own deadline
            r = c.post("/alertmanager", json=payload([xid(node=NODE, gpu="1")], group="b"), headers=AUTH)
            assert r.status_code == 202 and len(r.json()["runs"]) == 1
            rec = _wait_verdict(svc, r.json()["runs"][0], DEADLINE + 30)
            assert rec.get("verdict_status") == "incomplete", json.dumps(rec)
            assert c.get("/healthz").status_code == 200
        finally:
            svc.close()


def test_healthz_and_readyz_say_so_while_a_verdict_is_stuck(tmp_path):
    release = threading.Event()
    calls = []

    def stuck_once(folder, runbook, params):
        calls.append(runbook)
        if len(calls) == 1:
            release.wait(60)  # ignores every deadline (a C call that never returns)
        return None

    cfg = ServeConfig.build(
        out=tmp_path / "runs", token=TOKEN, verdict_deadline_s=1, verdict_stuck_grace_s=1, verdict_workers=1
    )
    app = create_app(cfg, Quick(), stuck_once)
    svc = app.state.service
    try:
        c = TestClient(app)
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        r = c.post("/alertmanager", json=payload([xid(node="n1")], group="a"), headers=AUTH)
        rec = _wait_verdict(svc, r.json()["runs"][0], 10)
        assert rec.get("verdict_status") == "incomplete", rec
        time.sleep(1.5)  # past the deadline and the grace: the stuck call is still there
        h = c.get("/healthz")
        assert h.status_code == 503 and h.json()["ok"] is False and h.json()["stuck_verdicts"] == 1
        assert c.get("/readyz").status_code == 503
        # still accepting: the next alert is decided by a new worker
        r = c.post("/alertmanager", json=payload([xid(node="n2")], group="b"), headers=AUTH)
        assert r.status_code == 202 and len(r.json()["runs"]) == 1
        end = time.monotonic() + 10
        while len(calls) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        assert len(calls) == 2
    finally:
        release.set()
        assert svc.join(30)
    end = time.monotonic() + 10
    while c.get("/healthz").status_code != 200 and time.monotonic() < end:
        time.sleep(0.1)
    assert c.get("/healthz").json()["ok"] is True
