"""A run store on a full disk: an alert is answered 507 with the reason and a Retry-After (Alertmanager retries), no
ghost "queued" run and no temporary file is left, /healthz and /readyz say the store is failing, and once there is
space again the next alert is a run and the health is back.

The full disk is simulated under the store only: a write of a file there is cut half-way and then fails with ENOSPC,
as a filesystem that fills up does."""

from __future__ import annotations

import errno
import pathlib

from fastapi.testclient import TestClient

from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from tests.serve.test_app import AUTH, TOKEN, StubRunner, payload, xid


def _fill(monkeypatch, root: pathlib.Path):
    real = pathlib.Path.write_text

    def write_text(self, data, *args, **kwargs):
        if str(self).startswith(str(root)):
            real(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def test_a_full_run_store_answers_507_leaves_no_ghost_and_shows_on_healthz(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    app = create_app(ServeConfig.build(out=root, token=TOKEN), StubRunner())
    svc = app.state.service
    c = TestClient(app, raise_server_exceptions=False)
    _fill(monkeypatch, root)

    r = c.post("/alertmanager", json=payload([xid()], group="a"), headers=AUTH)
    assert r.status_code == 507, (r.status_code, r.text)
    assert "run store" in r.json()["detail"] and "No space left" in r.json()["detail"]
    assert int(r.headers["Retry-After"]) > 0
    p = c.get("/run/xid_ecc_triage", params={"node": "n1", "gpu": "3"}, follow_redirects=False)
    assert p.status_code == 507 and "run store" in p.json()["detail"]

    assert svc.store.list() == [] and len(svc.store) == 0
    assert [d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")] == []
    assert list(root.rglob("*.tmp")) == []
    h = c.get("/healthz")
    assert h.status_code == 503 and h.json()["ok"] is False and "No space left" in h.json()["store_error"]
    assert c.get("/readyz").status_code == 503

    monkeypatch.undo()  # space again
    r = c.post("/alertmanager", json=payload([xid()], group="b"), headers=AUTH)
    assert r.status_code == 202 and len(r.json()["runs"]) == 1
    assert svc.join(30)
    assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
