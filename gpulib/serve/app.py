"""The FastAPI application of ``gpuops serve`` (https://fastapi.tiangolo.com/): routes and the run service.

Alertmanager's webhook body (version 4) is documented at
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config ; its bearer token comes from the
receiver's ``http_config.authorization`` (https://prometheus.io/docs/alerting/latest/configuration/#http_config).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field

import gpulib.serve.notify as notify
import gpulib.serve.pages as pages
from gpulib.core.errors import GpulibError
from gpulib.core.redact import redact
from gpulib.core.runrecord import read_run
from gpulib.core.summary import read_verdict, write_summary
from gpulib.execute import prepare
from gpulib.serve.config import ServeConfig, bearer_refusal
from gpulib.serve.pool import QueueFull, WorkerPool
from gpulib.serve.routing import Deduper, check_params, load_catalogue, load_routes, route_alert
from gpulib.serve.runner import EngineRunner
from gpulib.serve.store import RunStore

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[a-z0-9_]+-[0-9a-f]{6}$")
Runner = Callable[[Path, str, dict[str, Any], float], dict[str, Any]]


# ------------------------------------------------------------------------------------ payload
class Alert(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = ""
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str = ""


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: Literal["4"]
    groupKey: str = Field(max_length=4096)
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    truncatedAlerts: int = 0
    alerts: list[Alert] = Field(max_length=1000)


class Accepted(BaseModel):
    runs: list[str]
    deduped: list[str]
    resolved: int
    rejected: list[str]


# ------------------------------------------------------------------------------------ service
class Service:
    """Runs, the pool and the metrics; the HTTP layer below only translates."""

    def __init__(self, cfg: ServeConfig, runner: Runner | None = None):
        self.cfg = cfg
        self.store = RunStore(cfg.out)
        self.catalogue = load_catalogue()
        self.routes = load_routes(cfg.routes_file, self.catalogue)
        self.dedupe = Deduper(cfg.dedupe_window)
        self.runner = runner or EngineRunner(self.catalogue.__getitem__)
        self.registry = CollectorRegistry()
        self.m_runs = Counter(
            "gpuops_serve_runs_total",
            "Finished runs by runbook and outcome",
            ["runbook", "outcome"],
            registry=self.registry,
        )
        self.m_alerts = Counter(
            "gpuops_serve_alerts_total",
            "Alerts received by what was done with them",
            ["action"],
            registry=self.registry,
        )
        self.m_duration = Histogram(
            "gpuops_serve_run_duration_seconds",
            "Run wall time",
            ["runbook"],
            buckets=(5, 10, 20, 30, 60, 120, 300, 600, 1200),
            registry=self.registry,
        )
        self.m_rejected = Counter(
            "gpuops_serve_queue_full_total", "Requests answered 503 because the queue was full", registry=self.registry
        )
        self.pool = WorkerPool(self._execute, cfg.kernels, cfg.queue_limit)
        Gauge("gpuops_serve_queue_depth", "Runs waiting for a kernel", registry=self.registry).set_function(
            lambda: self.pool.depth
        )
        Gauge("gpuops_serve_runs_active", "Runs executing now", registry=self.registry).set_function(
            lambda: self.pool.active
        )
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------- runs
    def link(self, run_id: str) -> str:
        return f"{self.cfg.public_url}/runs/{run_id}"

    def start(self, runbook: str, params: dict[str, Any], trigger: dict[str, Any]) -> dict[str, Any]:
        """A new queued run (QueueFull when the queue is at its limit; the run is then forgotten)."""
        rec = self.store.create(runbook, params, trigger=trigger)
        try:
            self.pool.submit(rec["id"])
        except QueueFull:
            self.store.forget(rec["id"])
            self.m_rejected.inc()
            raise
        return rec

    def _execute(self, run_id: str) -> None:
        rec = self.store.update(run_id, status="running", started=time.time())
        folder = self.store.folder(run_id)
        try:  # the request's parameters were checked when it came in; here the server's source is added
            params = prepare(self.catalogue[rec["runbook"]], given=rec["params"], source=self.cfg.source)
            outcome = self.runner(folder, rec["runbook"], params, self.cfg.run_timeout)
        except GpulibError as exc:  # e.g. a live run without the node the runbook needs
            outcome = {"status": "failed", "error": redact(str(exc))}
        except Exception as exc:  # a runner bug must not kill the worker thread
            outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        v = outcome["verdict"] if "verdict" in outcome else read_verdict(folder)
        cmd = v.get("commands", [None])[0] if v.get("commands") else None
        rec = self.store.update(
            run_id,
            status=outcome["status"],
            error=outcome.get("error"),
            finished=time.time(),
            severity=v.get("severity") if outcome["status"] != "failed" else None,
            cause=v.get("cause"),
            command=cmd,
            sop_step=v.get("sop_step"),
        )
        write_summary(folder, rec, self.link(run_id), v)
        self.m_runs.labels(
            rec["runbook"], rec["status"] if rec["status"] != "done" else (rec["severity"] or "ok")
        ).inc()
        self.m_duration.labels(rec["runbook"]).observe(rec["finished"] - rec["started"])
        if self.cfg.notify_url:
            err = notify.send(self.cfg.notify_url, rec, self.link(run_id), self.cfg.notify_format)
            if err:
                self.store.update(run_id, notify_error=err)

    # ----------------------------------------------------------------------------- alerts
    def handle(self, payload: WebhookPayload) -> tuple[int, dict[str, Any]]:
        runs, deduped, rejected, resolved = [], [], [], 0
        for alert in payload.alerts:
            name = alert.labels.get("alertname", "")
            entry = {
                "time": time.time(),
                "groupKey": payload.groupKey,
                "alertname": name,
                "status": alert.status,
                "fingerprint": alert.fingerprint,
                "labels": alert.labels,
            }
            if alert.status == "resolved":
                resolved += 1
                self.store.log_alert({**entry, "action": "resolved"})
                self.m_alerts.labels("resolved").inc()
                continue
            try:
                runbook, params = route_alert(alert.model_dump(), self.routes, self.catalogue)
            except GpulibError as exc:
                rejected.append(f"{name}: {exc}")
                self.store.log_alert({**entry, "action": "rejected", "reason": str(exc)})
                self.m_alerts.labels("rejected").inc()
                continue
            key = Deduper.key(payload.groupKey, runbook, params)
            trigger = {
                "alertname": name,
                "groupKey": payload.groupKey,
                "fingerprint": alert.fingerprint,
                "runbook_url": alert.annotations.get("runbook_url", ""),
            }
            try:
                run_id, new = self.dedupe.claim(key, lambda: self.start(runbook, params, trigger)["id"])
            except QueueFull:
                self.store.log_alert({**entry, "action": "queue_full", "runbook": runbook, "params": params})
                self.m_alerts.labels("queue_full").inc()
                return 503, {
                    "detail": f"run queue is full ({self.cfg.queue_limit} waiting); retry later",
                    "runs": runs,
                    "deduped": deduped,
                }
            (runs if new else deduped).append(run_id)
            self.store.log_alert(
                {**entry, "action": "run" if new else "dedupe", "run": run_id, "runbook": runbook, "params": params}
            )
            self.m_alerts.labels("run" if new else "dedupe").inc()
        return 202, {"runs": runs, "deduped": deduped, "resolved": resolved, "rejected": rejected}


# ------------------------------------------------------------------------------- body limit
class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, by Content-Length or while it streams."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        cl = headers.get(b"content-length")
        too_big = JSONResponse({"detail": f"request body over {self.limit} bytes"}, status_code=413)
        if cl is not None:
            try:
                if int(cl) > self.limit:
                    return await too_big(scope, receive, send)
            except ValueError:
                return await JSONResponse({"detail": "bad Content-Length"}, status_code=400)(scope, receive, send)
        if cl is not None or scope.get("method") in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        # no Content-Length (chunked): read up to the limit here, then hand the body on
        chunks, seen = [], 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                return await too_big(scope, receive, send)
            if not msg.get("more_body"):
                break
        body, done = b"".join(chunks), False

        async def replay():
            nonlocal done
            if not done:
                done = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# ------------------------------------------------------------------------------------- the app
def create_app(cfg: ServeConfig, runner: Runner | None = None) -> FastAPI:
    svc = Service(cfg, runner)
    app = FastAPI(
        title="gpuops serve",
        version="1",
        description="Runs gpu-runbooks when an alert fires; runbook_url links open the verdict. Dry runs only.",
    )
    app.state.service = svc
    bearer = HTTPBearer(auto_error=False)

    def need_token(cred: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> None:
        refused = bearer_refusal(f"{cred.scheme} {cred.credentials}" if cred else None, cfg.token)
        if refused is not None:
            code, why = refused
            raise HTTPException(code, why, headers={"WWW-Authenticate": "Bearer"} if code == 401 else None)

    def record(run_id: str) -> dict[str, Any]:
        rec = svc.store.get(run_id) if RUN_ID.match(run_id) else None
        if rec is None:
            raise HTTPException(404, f"no run {run_id[:80]!r}")
        return rec

    @app.post(
        "/alertmanager",
        status_code=202,
        response_model=Accepted,
        dependencies=[Depends(need_token)],
        responses={503: {"description": "queue full; see Retry-After"}, 401: {}, 403: {}, 413: {}},
    )
    def alertmanager(payload: WebhookPayload):
        code, body = svc.handle(payload)
        if code == 503:
            return JSONResponse(body, status_code=503, headers={"Retry-After": str(cfg.retry_after)})
        return JSONResponse(body, status_code=202)

    @app.get("/run/{runbook}", response_class=HTMLResponse, responses={303: {}, 400: {}, 503: {}})
    def run(runbook: str, request: Request):
        try:
            params = check_params(runbook, dict(request.query_params), svc.catalogue)
        except GpulibError as exc:
            raise HTTPException(400, str(exc)) from None
        rec = svc.store.newest(runbook, params, since=time.time() - cfg.fresh_for)
        if rec is None:
            try:
                rec = svc.start(runbook, params, {"url": f"/run/{runbook}"})
            except QueueFull:
                return JSONResponse(
                    {"detail": "run queue is full; retry later"},
                    status_code=503,
                    headers={"Retry-After": str(cfg.retry_after)},
                )
        return RedirectResponse(f"/runs/{rec['id']}", status_code=303)

    @app.get("/runs", responses={200: {"content": {"text/html": {}, "application/json": {}}}})
    def runs(format: Literal["html", "json"] = "html"):
        recs = svc.store.list()
        if format == "json":
            return JSONResponse(recs)
        return HTMLResponse(pages.index([read_run(svc.store.folder(r["id"])) for r in recs]))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, responses={404: {}})
    def run_page(run_id: str):
        rec = record(run_id)
        if rec["status"] in ("queued", "running"):
            return HTMLResponse(pages.progress(rec))
        htmls = sorted(svc.store.folder(run_id).glob("*.html"))
        if not htmls:
            return HTMLResponse(pages.failed(rec))
        body = htmls[0].read_text()
        i = body.find("<body")
        j = body.find(">", i) + 1 if i >= 0 else 0
        return HTMLResponse(body[:j] + pages.banner(rec) + body[j:])

    @app.get("/runs/{run_id}/run.json", responses={404: {}})
    def run_json(run_id: str):
        return JSONResponse(record(run_id))

    @app.get("/runs/{run_id}/findings.json", responses={404: {}})
    def findings(run_id: str):
        record(run_id)
        p = svc.store.folder(run_id) / "findings.json"
        if not p.is_file():
            raise HTTPException(404, "this run wrote no findings (yet)")
        return FileResponse(p, media_type="application/json")

    @app.get("/runs/{run_id}/summary.md", response_class=PlainTextResponse, responses={404: {}})
    def summary(run_id: str):
        record(run_id)
        p = svc.store.folder(run_id) / "summary.md"
        if not p.is_file():
            raise HTTPException(404, "the run has not finished")
        return PlainTextResponse(p.read_text(), media_type="text/markdown")

    @app.get("/healthz")
    def healthz():
        return {"ok": True, **svc.pool.stats(), "runs": len(svc.store.list())}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics():
        return Response(generate_latest(svc.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(BodyLimit, limit=cfg.max_body)
    return app
