"""The default runner of gpuops serve with warm kernels (``--warm-kernels``): a render takes a pre-started kernel,
the record says so, and the server's shutdown stops the kernels it still holds."""

from __future__ import annotations

import time

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
