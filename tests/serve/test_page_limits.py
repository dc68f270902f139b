"""Page-started runs (GET /run/..., the runbook_url: no token) cannot starve alerts: they wait in a small bounded share
of their own (``page_queue_limit``), one client starts at most ``page_runs_per_client`` of them per
``page_rate_window_s`` (429 + Retry-After), and an alert that comes after a flood of pages is accepted."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from gpulib.core.knowledge import settings
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from tests.serve.test_app import AUTH, TOKEN, payload, xid


class Blocked:
    """A run that waits for ``release`` (the kernels stay busy, so every later run queues)."""

    def __init__(self):
        self.release = threading.Event()

    def __call__(self, folder, runbook, params, timeout):
        self.release.wait(60)
        return {"status": "done", "error": None, "verdict": {}}


def _pages(c, n, node="n1"):
    return [
        c.get("/run/xid_ecc_triage", params={"node": node, "gpu": "3", "window": f"{i}h"}, follow_redirects=False)
        for i in range(1, n + 1)
    ]


def test_forty_page_runs_then_an_alert_the_alert_is_accepted(tmp_path):
    blocked = Blocked()
    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, kernels=1, queue_limit=10)
    app = create_app(cfg, blocked)
    try:
        c = TestClient(app)
        answers = _pages(c, 40)
        r = c.post("/alertmanager", json=payload([xid()]), headers=AUTH)
        assert r.status_code == 202, r.text
        assert len(r.json()["runs"]) == 1
        started = [a for a in answers if a.status_code == 303]
        refused = [a for a in answers if a.status_code != 303]
        # a page run is one running plus its queue share at most; the others are refused with a reason and a retry
        assert 1 <= len(started) <= 1 + cfg.page_queue_limit
        assert refused and all(a.status_code in (429, 503) for a in refused)
        assert all(a.headers.get("Retry-After") and a.json()["detail"] for a in refused)
        # the alert's run comes before every page run still waiting
        assert app.state.service.store.get(r.json()["runs"][0])["status"] == "queued"
    finally:
        blocked.release.set()
        assert app.state.service.join(30)


def test_one_client_is_rate_limited_and_another_is_not(tmp_path):
    blocked = Blocked()
    blocked.release.set()  # runs finish at once: only the rate limit refuses
    per = int(settings("serve_limits")["page_runs_per_client"])
    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, kernels=2)
    app = create_app(cfg, blocked)
    try:
        one = TestClient(app, client=("10.0.0.1", 40000))
        answers = _pages(one, per + 3)
        codes = [a.status_code for a in answers]
        assert codes[:per] == [303] * per, codes
        assert set(codes[per:]) == {429}, codes
        assert int(answers[-1].headers["Retry-After"]) >= 1
        other = TestClient(app, client=("10.0.0.2", 40000))
        assert _pages(other, 1)[0].status_code == 303
        # the alerts' webhook is not rate limited
        r = one.post("/alertmanager", json=payload([xid(node="n9")]), headers=AUTH)
        assert r.status_code == 202 and len(r.json()["runs"]) == 1
    finally:
        assert app.state.service.join(30)
