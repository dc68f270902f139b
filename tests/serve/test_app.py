"""gpuops serve under load and faults, with a stub runner where the real papermill run is not the point:
a 200-post burst with duplicates (every alert is a run or a dedupe record, never more than the configured
kernels at once, a full queue answers 503 + Retry-After), a hanging run (the real in-process runner) killed at
its timeout with its kernel and the process the kernel started, bad requests answered 4xx with a reason, the index
rebuilt after a restart, and a schemathesis fuzz
of the OpenAPI schema with no 5xx (test_serve_fuzz)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-" + "y" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class StubRunner:
    """Writes a critical finding after ``delay`` seconds and measures how many runs overlap."""

    def __init__(self, delay: float = 0.05):
        self.delay, self.now, self.peak, self.calls = delay, 0, 0, []
        self._lock = threading.Lock()

    def __call__(self, folder, runbook, params, timeout):
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.calls.append((runbook, dict(params)))
        try:
            time.sleep(self.delay)
            save_findings(
                [
                    Finding(
                        severity=Severity.CRITICAL,
                        title=f"stub verdict for {params.get('node')}",
                        commands=[f"kubectl cordon {params.get('node')}"],
                    )
                ],
                folder / "findings.json",
                runbook=runbook,
                parameters=params,
            )
            (folder / f"{runbook}.html").write_text("<html><body><p>stub report</p></body></html>")
            return {"status": "done", "error": None}
        finally:
            with self._lock:
                self.now -= 1


def make(tmp_path, runner=None, **kw):
    from fastapi.testclient import TestClient

    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, **kw)
    app = create_app(cfg, runner or StubRunner())
    return app, TestClient(app)


def payload(alerts, group="g", version="4"):
    return {"version": version, "groupKey": group, "status": "firing", "receiver": "gpuops", "alerts": alerts}


def xid(node="dgx-h100-1", gpu="5", status="firing", host_label="Hostname"):
    return {"status": status, "labels": {"alertname": "GPUXidCritical", host_label: node, "gpu": gpu}}


# ------------------------------------------------------------------------------ requests
def test_bad_requests_get_4xx_with_a_reason(tmp_path):
    app, c = make(tmp_path, max_body=10_000)
    r = c.post("/alertmanager", json=payload([xid()]))
    assert r.status_code == 401 and "bearer" in r.json()["detail"]
    r = c.post("/alertmanager", json=payload([xid()]), headers={"Authorization": "Bearer " + "z" * 30})
    assert r.status_code == 403 and "wrong" in r.json()["detail"]
    r = c.post("/alertmanager", content=b'{"version": "4", ', headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422 and "JSON" in json.dumps(r.json())
    r = c.post("/alertmanager", json=payload([xid()], version="3"), headers=AUTH)
    assert r.status_code == 422 and "version" in json.dumps(r.json())
    r = c.post("/alertmanager", content=b"x" * 20_000, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413 and "10000 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit holds while the body streams
        for _ in range(30):
            yield b" " * 1000

    r = c.post("/alertmanager", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413
    assert list((tmp_path / "runs").glob("*/run.json")) == []


def test_alert_labels_are_validated_like_the_cli(tmp_path):
    app, c = make(tmp_path)
    r = c.post(
        "/alertmanager",
        json=payload(
            [xid(node="evil;rm -rf /"), xid(gpu="$(id)"), {"status": "firing", "labels": {"alertname": "NoSuchAlert"}}]
        ),
        headers=AUTH,
    )
    assert r.status_code == 202 and r.json()["runs"] == []
    reasons = " | ".join(r.json()["rejected"])
    assert "not a Kubernetes node name" in reasons and "not a GPU index" in reasons and "no route" in reasons
    assert c.get("/run/zombie_idle").status_code == 400
    assert (
        "set by the server" in c.get("/run/xid_ecc_triage", params={"kernel_log_file": "/etc/passwd"}).json()["detail"]
    )
    assert "set by the server" in c.get("/run/xid_ecc_triage", params={"source": "live"}).json()["detail"]
    assert "no parameter" in c.get("/run/xid_ecc_triage", params={"nodes": "a"}).json()["detail"]
    assert c.get("/run/learn_cost").status_code == 400  # lessons are not runbooks


def test_resolved_alerts_are_recorded_not_run_and_both_host_spellings_route(tmp_path):
    stub = StubRunner()
    app, c = make(tmp_path, stub)
    r = c.post(
        "/alertmanager", json=payload([xid(status="resolved"), xid(node="n2", host_label="hostname")]), headers=AUTH
    )
    assert r.status_code == 202 and r.json()["resolved"] == 1 and len(r.json()["runs"]) == 1
    assert app.state.service.pool.join(10)
    assert stub.calls == [("xid_ecc_triage", {"node": "n2", "gpu": "5", "source": "demo"})]
    log = app.state.service.store.alert_log()
    assert [e["action"] for e in log] == ["resolved", "run"]


def test_get_run_reuses_a_recent_run_else_starts_one(tmp_path):
    stub = StubRunner(delay=0.3)
    app, c = make(tmp_path, stub, fresh_for=60)
    r = c.get("/run/xid_ecc_triage", params={"node": "n1", "gpu": "3"}, follow_redirects=False)
    assert r.status_code == 303
    first = r.headers["location"]
    page = c.get(first).text
    assert "reloads every 2 s" in page or "gpuops-verdict" in page
    assert app.state.service.pool.join(10)
    again = c.get("/run/xid_ecc_triage", params={"gpu": "3", "node": "n1"}, follow_redirects=False)
    assert again.headers["location"] == first and len(stub.calls) == 1
    other = c.get("/run/xid_ecc_triage", params={"node": "n1", "gpu": "4"}, follow_redirects=False)
    assert other.headers["location"] != first
    done = c.get(first).text
    assert "data-status='done'" in done and "stub verdict for n1" in done and "stub report" in done
    rid = first.rsplit("/", 1)[1]
    assert "**Verdict:** critical" in c.get(f"{first}/summary.md").text
    assert c.get(f"{first}/findings.json").json()["findings"][0]["title"] == "stub verdict for n1"
    assert rid in c.get("/runs").text
    assert c.get("/runs/..%2F..%2Fetc").status_code == 404


def test_runs_page_is_the_run_index_with_cause_where_and_a_run_still_going(tmp_path):
    stub = StubRunner(delay=0.3)
    app, c = make(tmp_path, stub)
    first = c.get("/run/xid_ecc_triage", params={"node": "n1", "gpu": "3"}, follow_redirects=False).headers["location"]
    going = c.get("/runs").text  # the run is queued or running: the index says its report is not there yet
    assert "the report is still rendering" in going and f"<a href='{first}'>" in going
    assert app.state.service.pool.join(10)
    page = c.get("/runs").text
    (row,) = re.findall(r"<tr data-runbook=.*?</tr>", page)
    assert "data-node='n1' data-severity='critical'" in row and "<td class='cause'>stub verdict for n1</td>" in row
    assert "<td>n1 GPU 3</td>" in row and "node=n1, gpu=3</td>" in row and "still rendering" not in row
    assert "<select id='f-runbook'>" in page


def test_restart_rebuilds_the_index_and_marks_interrupted_runs_failed(tmp_path):
    # a run accepted but never started is run after the restart (it was marked failed "interrupted"
    # before, so an alert answered 202 was dropped); a run cut short while running is still marked interrupted
    app, c = make(tmp_path)
    c.post("/alertmanager", json=payload([xid()]), headers=AUTH)
    assert app.state.service.pool.join(10)
    (rid,) = [r["id"] for r in c.get("/runs", params={"format": "json"}).json()]
    stale = app.state.service.store.create("xid_ecc_triage", {"node": "n9"}, trigger={})  # never ran
    cut = app.state.service.store.create("xid_ecc_triage", {"node": "n8"}, trigger={})
    app.state.service.store.update(cut["id"], status="running", started=time.time())
    app2, c2 = make(tmp_path)
    assert app2.state.service.join(30)
    runs = {r["id"]: r for r in c2.get("/runs", params={"format": "json"}).json()}
    assert runs[rid]["status"] == "done" and runs[rid]["severity"] == "critical"
    assert runs[cut["id"]]["status"] == "failed" and "interrupted" in runs[cut["id"]]["error"]
    assert runs[stale["id"]]["status"] == "done" and runs[stale["id"]]["requeued"]


def test_notification_slack_and_generic_json(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    got = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for fmt in ("slack", "json"):
            app, c = make(
                tmp_path / fmt,
                notify_url=f"http://127.0.0.1:{srv.server_port}/hook",
                notify_format=fmt,
                public_url="https://gpuops.example.com",
            )
            c.post("/alertmanager", json=payload([xid()]), headers=AUTH)
            assert app.state.service.pool.join(10)
    finally:
        srv.shutdown()
    slack, generic = got
    assert (
        set(slack) == {"text", "blocks"}
        and "critical" in slack["text"]
        and "kubectl cordon dgx-h100-1" in slack["text"]
    )
    assert "https://gpuops.example.com/runs/" in slack["text"]
    assert generic["verdict"] == "critical" and generic["command"] == "kubectl cordon dgx-h100-1"
    assert generic["link"].startswith("https://gpuops.example.com/runs/") and TOKEN not in json.dumps(got)


# -------------------------------------------------------------------------------- faults
#: a runbook that hangs: its kernel starts a process in a session of its own (as a stray tool would), writes
#: both pids and whether it sees the webhook token into the run folder, then sleeps
HANG_CELL = """import os, subprocess, sys, time
from pathlib import Path
run = Path(os.environ["GPUOPS_FINDINGS_PATH"]).parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
(run / "token.txt").write_text(os.environ.get("GPUOPS_SERVE_TOKEN", "absent"))
(run / "pids.txt").write_text(f"{os.getpid()} {child.pid}")
time.sleep(300)"""


def planted_home(tmp_path, cell: str) -> Path:
    """A project folder whose runbooks/xid_ecc_triage.ipynb is ``cell`` after the real parameters cell, so the
    alert route, the parameter checks and the default (in-process) runner all find it by name."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    real = nbformat.read(str(ROOT / "runbooks" / "xid_ecc_triage.ipynb"), as_version=4)
    params = next(c for c in real.cells if "parameters" in c.metadata.get("tags", []))
    home = tmp_path / "home"
    (home / "runbooks").mkdir(parents=True)
    nb = new_notebook(cells=[new_markdown_cell("# Planted"), params, new_code_cell(cell)], metadata=real.metadata)
    nbformat.write(nb, str(home / "runbooks" / "xid_ecc_triage.ipynb"))
    return home


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.notebook
def test_a_hanging_render_is_killed_at_its_timeout_with_its_kernel_and_shown_failed(tmp_path, monkeypatch):
    """The default runner runs the notebook in this process; at the run timeout its kernel and the process the
    kernel started in its own session are killed, the render is failed with the timeout named (the fast verdict,
    out before the notebook started, stands), and the kernel never saw the webhook token."""
    from fastapi.testclient import TestClient

    from gpulib.catalogue import find_notebook
    from gpulib.execute import execute
    from gpulib.serve.runner import EngineRunner

    # the timeout must leave the kernel time to start on a loaded machine: four times what a run that
    # does nothing takes here and now, at least 15 s
    monkeypatch.setenv("GPUOPS_HOME", str(planted_home(tmp_path / "warm", "x = 1")))
    t0 = time.monotonic()
    execute(find_notebook("xid_ecc_triage"), {}, tmp_path / "warm-runs", progress=False)
    limit = max(15, round(4 * (time.monotonic() - t0)))
    monkeypatch.setenv("GPUOPS_HOME", str(planted_home(tmp_path, HANG_CELL)))
    monkeypatch.setenv("GPUOPS_SERVE_TOKEN", TOKEN)
    app = create_app(ServeConfig.build(out=tmp_path / "runs", run_timeout=limit))
    assert isinstance(app.state.service.runner, EngineRunner)
    c = TestClient(app)
    rid = c.post("/alertmanager", json=payload([xid()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(limit + 90)
    rec = c.get(f"/runs/{rid}/run.json").json()
    # the verdict came first, from the fast path, and stands; the evidence (the notebook) is what timed out
    assert rec["verdict_by"] == "fast" and rec["severity"] == "critical", rec
    assert rec["status"] == "done" and rec["render"] == "failed", rec
    assert rec["render_error"] == f"timed out after {limit} s: the run and its kernel were killed"
    folder = tmp_path / "runs" / rid
    assert (folder / "pids.txt").is_file(), f"the kernel did not reach its first cell within {limit} s"
    assert (folder / "token.txt").read_text() == "absent"
    kernel, child = map(int, (folder / "pids.txt").read_text().split())
    deadline = time.monotonic() + 10
    while (_alive(kernel) or _alive(child)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(kernel), "the run's kernel survived the timeout"
    assert not _alive(child), "the kernel's own-session child survived the timeout"
    page = c.get(f"/runs/{rid}").text
    assert "data-severity='critical'" in page and "could not be rendered: timed out" in page
    assert f"the notebook could not be rendered: timed out after {limit} s" in (folder / "summary.md").read_text()
    assert 'gpuops_serve_runs_total{outcome="critical",runbook="xid_ecc_triage"} 1.0' in c.get("/metrics").text


# ---------------------------------------------------------------------------------- load
def _serve_in_thread(app):
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return server, t, f"http://127.0.0.1:{port}"


def test_burst_of_200_posts_with_duplicates(tmp_path):
    stub = StubRunner(delay=0.2)
    # one run per node: 5 runs and their follow-ups, so a queue of 2 is what fills
    app, _ = make(tmp_path, stub, kernels=2, queue_limit=2, dedupe_window=600)
    server, thread, base = _serve_in_thread(app)
    # 200 posts over 40 distinct GPUs (5 groups x 8 GPUs): each GPU's alert arrives 5 times
    posts = [payload([xid(node=f"node-{i % 5}", gpu=str(i % 8))], group=f"group-{i % 5}") for i in range(200)]
    answers = {"202": 0, "503": 0}
    sent_at: dict[str, float] = {}
    lock = threading.Lock()

    def send(body):
        for attempt in range(200):  # what Alertmanager does: retry after Retry-After
            t = time.monotonic()
            r = requests.post(f"{base}/alertmanager", json=body, headers=AUTH, timeout=30)
            with lock:
                answers[str(r.status_code)] = answers.get(str(r.status_code), 0) + 1
            if r.status_code == 202:
                for rid in r.json()["runs"]:
                    with lock:
                        sent_at.setdefault(rid, t)
                return r.json()
            assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, r.text
            time.sleep(0.05)  # the test does not wait the full Retry-After
        raise AssertionError("never accepted")

    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(16) as ex:
            results = list(ex.map(send, posts))
        assert app.state.service.pool.join(60)
        wall = time.monotonic() - t0
    finally:
        server.should_exit = True
        thread.join(10)
    svc = app.state.service
    runs = [r for r in svc.store.list()]
    log = svc.store.alert_log()
    actions = [e["action"] for e in log if e["action"] in ("run", "attach", "dedupe")]
    accepted_alerts = sum(len(r["runs"]) + len(r["attached"]) + len(r["deduped"]) for r in results)
    assert accepted_alerts == 200  # every alert is a run, attached to one, or a dedupe record
    assert actions.count("run") == len(runs)
    # one run per node and incident; a GPU alerted after its node's run started gets one follow-up run at most
    by_node = {f"node-{n}": [r for r in runs if r["params"]["node"] == f"node-{n}"] for n in range(5)}
    assert all(1 <= len(v) <= 8 for v in by_node.values()), {k: len(v) for k, v in by_node.items()}
    assert len(runs) < 40 and actions.count("attach") == 40 - len(runs)
    for n in range(5):  # no GPU lost: each alerted GPU is looked at by a run of its node
        for g in range(8):
            assert any(r["params"]["gpu"] in ("", str(g)) for r in by_node[f"node-{n}"]), (n, g)
    assert actions.count("dedupe") == 160
    assert stub.peak <= 2 and svc.pool.peak <= 2  # never more than the configured kernels
    assert answers["503"] > 0  # the queue limit was reached and said so
    assert all(r["status"] == "done" and r["severity"] == "critical" for r in runs)
    lat = sorted(r["finished"] - r["created"] for r in runs)
    p95 = lat[int(0.95 * (len(lat) - 1))]
    figures = {
        "posts": 200,
        "alerts_in": 200,
        "runs": len(runs),
        "attached": actions.count("attach"),
        "dedupes": actions.count("dedupe"),
        "answers_202": answers["202"],
        "answers_503": answers["503"],
        "peak_kernels": svc.pool.peak,
        "p95_webhook_to_verdict_s": round(p95, 3),
        "stub_run_s": stub.delay,
        "wall_s": round(wall, 2),
    }
    out = os.environ.get("GPUOPS_SERVE_FIGURES")
    if out:
        Path(out).write_text(json.dumps(figures, indent=2))
    print(figures)


# ---------------------------------------------------------------------------------- fuzz
def test_serve_fuzz_openapi_no_5xx(tmp_path, monkeypatch):
    schemathesis = pytest.importorskip("schemathesis")
    monkeypatch.setenv("GPUOPS_SERVE_API_DOCS", "1")  # the schema is served only when the docs are opened
    from hypothesis import HealthCheck, given, settings

    app, _ = make(tmp_path, StubRunner(delay=0), queue_limit=5)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures, tried = [], []
    for op in schema.get_all_operations():
        operation = op.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=50, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def check(case):
            headers = dict(case.headers or {})
            if operation.method.upper() == "POST":
                headers.update(AUTH)
            resp = case.call(headers=headers)
            if resp.status_code >= 500:
                failures.append((operation.method, case.path, case.query, case.body, resp.status_code, resp.text[:300]))

        check()
        tried.append(f"{operation.method.upper()} {operation.path}")
    assert "POST /alertmanager" in tried and "GET /run/{runbook}" in tried
    assert failures == []


def test_fuzz_check_can_fail(tmp_path, monkeypatch):
    """The fuzz above would see a 5xx: an endpoint planted to fail is reported."""
    schemathesis = pytest.importorskip("schemathesis")
    monkeypatch.setenv("GPUOPS_SERVE_API_DOCS", "1")
    from hypothesis import HealthCheck, given, settings

    app, _ = make(tmp_path)

    @app.get("/planted")
    def planted(n: int = 0):
        raise RuntimeError("planted")

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    op = next(o.ok() for o in schema.get_all_operations() if o.ok().path == "/planted")
    seen = []

    @given(case=op.as_strategy())
    @settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case):
        try:
            seen.append(case.call().status_code)
        except RuntimeError:
            seen.append(500)

    check()
    assert 500 in seen


def test_run_folders_are_unique_under_a_burst(tmp_path):
    from gpulib.run.record import new_run_dir

    with ThreadPoolExecutor(16) as ex:
        dirs = list(ex.map(lambda _: new_run_dir(tmp_path, "xid_ecc_triage"), range(64)))
    assert len(set(dirs)) == 64 and all(d.is_dir() and d.parent == tmp_path for d in dirs)


def test_cli_alerts_and_serve_help(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from gpulib.cli import app as cli

    r = CliRunner().invoke(cli, ["alerts", "--base-url", "http://10.0.0.5:8080/", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "gpu-alerts.yaml").read_text()
    assert "runbook_url: http://10.0.0.5:8080/run/xid_ecc_triage?node=" in text and "8080//run" not in text
    assert (tmp_path / "routes.yaml").is_file() and (tmp_path / "gpu-alerts.prometheusrule.yaml").is_file()
    assert (
        CliRunner().invoke(cli, ["alerts", "--base-url", "gpuops.example.com", "--out", str(tmp_path)]).exit_code == 2
    )
    h = CliRunner().invoke(cli, ["serve", "--help"], env={"COLUMNS": "200"})
    assert h.exit_code == 0 and "--token-file" in h.output and "--queue-limit" in h.output and "Bearer" in h.output
    monkeypatch.delenv("GPUOPS_SERVE_TOKEN", raising=False)
    r = CliRunner().invoke(cli, ["serve", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "GPUOPS_SERVE_TOKEN" in r.output
