"""The default runner of gpuops serve with warm kernels (``--warm-kernels``): a render takes a pre-started kernel,
the record says so, and the server's shutdown stops the kernels it still holds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.serve.test_app import AUTH, TOKEN, payload, planted_home, xid
from tests.test_warm import PROBE, wait_ready


@pytest.mark.notebook
def test_a_render_uses_a_warm_kernel_and_shutdown_stops_the_rest(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app

    monkeypatch.setenv("GPUOPS_HOME", str(planted_home(tmp_path, PROBE)))
    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN, warm_kernels=1, verdict="notebook"))
    svc = app.state.service
    with TestClient(app) as c:  # the context runs the app's startup and shutdown
        wait_ready(svc.warm, 1)
        rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
        assert svc.join(120)
        rec = c.get(f"/runs/{rid}/run.json").json()
        assert rec["render_warm"] is True and rec["render"] == "done", rec
        assert (tmp_path / "runs" / rid / "probe.txt").read_text().split()[1] == "False"
        wait_ready(svc.warm, 1)  # replaced in the background
        assert c.get("/healthz").json()["warm"]["ready"] == 1
    time.sleep(0.5)
    assert svc.warm.ready == 0  # shutdown stopped the kernel it still held


def _child_env(name: str) -> str | None:
    import os

    return os.environ.get(name)


def test_a_verdict_in_a_worker_process_is_the_in_process_verdict(tmp_path, monkeypatch):
    import os

    from gpulib.catalogue import find_notebook
    from gpulib.execute import prepare
    from gpulib.serve.config import TOKEN_ENV
    from gpulib.serve.runner import FastVerdicter, ProcessVerdicter

    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    monkeypatch.setenv(TOKEN_ENV, "a-secret-token-" + "x" * 20)
    info = find_notebook("xid_ecc_triage")
    params = prepare(info, given={"node": "dgx-h100-1", "gpu": "5"}, source="demo")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pv = ProcessVerdicter(2, unset=(TOKEN_ENV,))
    try:
        pids = pv.warm()
        assert len(pids) == 2 and os.getpid() not in pids  # two processes of their own
        assert pv._pool.submit(_child_env, TOKEN_ENV).result() is None  # the token does not reach them
        here = FastVerdicter()(tmp_path / "a", "xid_ecc_triage", params)
        there = pv(tmp_path / "b", "xid_ecc_triage", params)
        assert there == here and there["verdict"]["severity"] == "critical"
        assert (tmp_path / "b" / "verdict.json").read_text() == (tmp_path / "a" / "verdict.json").read_text()
        # a parameter that matches nothing is the same usage error there as here
        bad = {**params, "node": "no-such-node"}
        out = pv(tmp_path / "b", "xid_ecc_triage", bad)
        assert out == FastVerdicter()(tmp_path / "a", "xid_ecc_triage", bad)
        assert out["status"] == "bad parameter" and "no-such-node" in out["error"]
    finally:
        pv.close()


def test_a_dead_verdict_worker_fails_one_verdict_and_the_pool_is_replaced(tmp_path, monkeypatch):
    import os
    import signal
    from concurrent.futures.process import BrokenProcessPool

    from gpulib.catalogue import find_notebook
    from gpulib.execute import prepare
    from gpulib.serve.runner import ProcessVerdicter

    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    params = prepare(find_notebook("xid_ecc_triage"), given={"node": "dgx-h100-1", "gpu": "5"}, source="demo")
    pv = ProcessVerdicter(1)
    try:
        (pid,) = pv.warm()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            for _ in range(50):  # the pool learns of the death on its next use
                pv(tmp_path, "xid_ecc_triage", params)
        assert pv(tmp_path, "xid_ecc_triage", params)["verdict"]["severity"] == "critical"
        assert pv.warm() != [pid]
    finally:
        pv.close()


def test_verdict_workers_see_the_environment_of_their_verdicter_not_an_older_one(monkeypatch):
    # the forkserver is started once per process: its children must not keep the environment it had then
    from gpulib.serve.runner import ProcessVerdicter

    first = ProcessVerdicter(1)
    try:
        first.warm()
        monkeypatch.setenv("GPUOPS_DEMO_FLEET", "/a/later/fleet.yaml")
        second = ProcessVerdicter(1)
        try:
            second.warm()
            assert second._pool.submit(_child_env, "GPUOPS_DEMO_FLEET").result() == "/a/later/fleet.yaml"
        finally:
            second.close()
    finally:
        first.close()


def test_a_scheduled_report_gets_no_fast_verdict_in_the_server(tmp_path, monkeypatch):
    """Reports are defined like runbooks, but a report's headless verdict is the whole report (seconds of CPU on the
    demo, more on a fleet): in the server it would hold a verdict worker that an alert needs; its notebook decides."""
    from gpulib.serve.runner import FastVerdicter

    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    called = []
    monkeypatch.setattr("gpulib.serve.runner.fast_verdict", lambda *a, **k: called.append(a))
    assert FastVerdicter()(tmp_path, "gpu_utilization_report", {"source": "demo"}) is None
    assert FastVerdicter()(tmp_path, "gpu_reliability_report", {"source": "demo"}) is None
    assert called == []


def test_verdict_workers_end_when_their_server_is_killed(tmp_path):
    """A server killed with SIGKILL (the out-of-memory killer, ``kill -9``) runs no shutdown code; its verdict workers
    (children of multiprocessing's forkserver, not of the server) and the forkserver must not outlive it. Failed
    before: the workers waited on their call queue for ever, and each held the forkserver's alive pipe open."""
    import signal
    import subprocess
    import sys

    code = (
        "import sys, time; from gpulib.serve.runner import ProcessVerdicter; "
        "v = ProcessVerdicter(2); print(*v.warm(), flush=True); time.sleep(600)"
    )
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        workers = [int(p) for p in server.stdout.readline().split()]
        assert len(workers) == 2
        forkservers = {int(open(f"/proc/{w}/stat").read().rsplit(")", 1)[1].split()[1]) for w in workers}
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        left = set(workers) | forkservers
        end = time.monotonic() + 15
        while left and time.monotonic() < end:
            left = {p for p in left if Path(f"/proc/{p}").exists() and "Z" not in _state(p)}
            time.sleep(0.2)
        assert not left, f"still running after the server's SIGKILL: {sorted(left)}"
    finally:
        server.kill()


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
