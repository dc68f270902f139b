"""The FastAPI application of ``gpuops serve`` (https://fastapi.tiangolo.com/): the routes over the run service
(:mod:`gpulib.serve.service`).

Alertmanager's webhook body (version 4) is documented at
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config ; its bearer token comes from the
receiver's ``http_config.authorization`` (https://prometheus.io/docs/alerting/latest/configuration/#http_config).
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal, Optional

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

import gpulib.serve.pages as pages
from gpulib.core.errors import GpulibError, RunStoreError
from gpulib.core.plotlyjs import SHARED_NAME
from gpulib.core.settings import env
from gpulib.run.index_page import read_run
from gpulib.run.record import ACTIVE, Status, findings_file, read_summary
from gpulib.serve.bodylimit import BodyLimit, UnicodeJson
from gpulib.serve.cloudevents_in import parse, to_payload
from gpulib.serve.config import ServeConfig, bearer_refusal
from gpulib.serve.payload import Accepted, WebhookPayload
from gpulib.serve.pool import QueueFull
from gpulib.serve.retention import Retention, unreadable
from gpulib.serve.routing import check_params
from gpulib.serve.service import PAGE, PAGE_PRIORITY, Runner, Service, Verdicter

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[a-z0-9_]+-[0-9a-f]{6}$")
#: how long a browser may keep the store's plotly.js (a year: its name changes with its version)
ASSET_MAX_AGE_S = 365 * 86400
#: set to 1 to serve the API's docs (/docs, /redoc, /openapi.json); closed by default: they list every route to anyone
DOCS_ENV = "GPUOPS_SERVE_API_DOCS"
__all__ = ["RUN_ID", "Service", "create_app"]


def create_app(cfg: ServeConfig, runner: Runner | None = None, verdicter: Verdicter | None = None) -> FastAPI:
    svc = Service(cfg, runner, verdicter)
    docs = env(DOCS_ENV) == "1"
    app = FastAPI(
        title="gpuops serve",
        version="1",
        description="Runs gpu-runbooks when an alert fires; runbook_url links open the verdict. Dry runs only.",
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.service = svc
    #: the run store's bounds (gpulib/serve/retention.py), pruned at start and every retain_check_s
    retention = Retention(svc.store, keep_recent_s=max(cfg.dedupe_window, cfg.fresh_for))
    app.state.retention = retention
    retention.start()
    bearer = HTTPBearer(auto_error=False)

    def need_token(cred: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> None:
        refused = bearer_refusal(f"{cred.scheme} {cred.credentials}" if cred else None, cfg.token)
        if refused is not None:
            code, why = refused
            raise HTTPException(code, why, headers={"WWW-Authenticate": "Bearer"} if code == 401 else None)

    def record(run_id: str) -> dict[str, Any]:
        rec = svc.store.get(run_id) if RUN_ID.match(run_id) else None
        if rec is None:
            bad = broken(run_id)
            if bad is not None:
                raise HTTPException(409, bad["error"])
            raise HTTPException(404, f"no run {run_id[:80]!r}")
        return rec

    def broken(run_id: str) -> dict[str, Any] | None:
        """The record of a run folder whose run.json cannot be read (gpulib/serve/retention.py unreadable)."""
        if not RUN_ID.match(run_id) or not svc.store.folder(run_id).is_dir():
            return None
        return next((r for r in unreadable(svc.store) if r["id"] == run_id), None)

    @app.post(
        "/alertmanager",
        status_code=202,
        response_model=Accepted,
        dependencies=[Depends(need_token)],
        responses={
            503: {"description": "queue full; see Retry-After"},
            507: {"description": "the run store cannot be written (a full disk); see Retry-After"},
            401: {},
            403: {},
            413: {},
        },
    )
    def alertmanager(payload: WebhookPayload):
        code, body = svc.handle(payload)
        if code in (503, 507):
            return JSONResponse(body, status_code=code, headers={"Retry-After": str(cfg.retry_after)})
        return JSONResponse(body, status_code=202)

    @app.post(
        "/cloudevents",
        status_code=202,
        response_model=Accepted,
        dependencies=[Depends(need_token)],
        responses={400: {"description": "not an NVSentinel health event"}, 503: {}, 507: {}, 401: {}, 403: {}, 413: {}},
    )
    async def cloudevents(request: Request):
        """An NVSentinel health event (CloudEvents, structured or binary mode), routed as the alert it stands for
        (gpulib/serve/cloudevents_in.py)."""
        try:
            payload = to_payload(parse(dict(request.headers), await request.body()))
        except GpulibError as exc:
            raise HTTPException(400, str(exc)) from None
        code, body = await run_in_threadpool(svc.handle, payload)
        if code in (503, 507):
            return JSONResponse(body, status_code=code, headers={"Retry-After": str(cfg.retry_after)})
        return JSONResponse(body, status_code=202)

    @app.get("/run/{runbook}", response_class=HTMLResponse, responses={303: {}, 400: {}, 429: {}, 503: {}, 507: {}})
    def run(runbook: str, request: Request):
        try:
            params = check_params(runbook, dict(request.query_params), svc.catalogue, page=True)
        except GpulibError as exc:
            raise HTTPException(400, str(exc)) from None
        rec = svc.store.newest(runbook, params, since=time.time() - cfg.fresh_for)
        if rec is None:
            client = request.client.host if request.client else ""
            wait = svc.page_rate.wait_s(client)
            if wait:
                return JSONResponse(
                    {
                        "detail": f"this client started {cfg.page_runs_per_client} runs from pages within "
                        f"{cfg.page_rate_window_s:g} s; retry later (alerts are not limited)"
                    },
                    status_code=429,
                    headers={"Retry-After": str(wait)},
                )
            try:
                rec = svc.start(runbook, params, {"url": f"/run/{runbook}"}, priority=PAGE_PRIORITY, lane=PAGE)
            except QueueFull:
                return JSONResponse(
                    {"detail": f"the queue of page-started runs is full ({cfg.page_queue_limit} waiting); retry later"},
                    status_code=503,
                    headers={"Retry-After": str(cfg.retry_after)},
                )
            except RunStoreError as exc:
                return JSONResponse(
                    {"detail": f"{exc}; retry later"}, status_code=507, headers={"Retry-After": str(cfg.retry_after)}
                )
        return RedirectResponse(f"/runs/{rec['id']}", status_code=303)

    @app.get("/runs", responses={200: {"content": {"text/html": {}, "application/json": {}}}})
    def runs(format: Literal["html", "json"] = "html"):
        recs, bad = svc.store.list(), unreadable(svc.store)  # a run.json that cannot be read is listed as such
        if format == "json":
            return JSONResponse(recs + bad)
        return HTMLResponse(pages.index([read_run(svc.store.folder(r["id"])) for r in recs] + bad))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, responses={404: {}})
    def run_page(run_id: str):
        bad = broken(run_id) if svc.store.get(run_id) is None else None
        if bad is not None:
            return HTMLResponse(pages.unreadable(bad))
        rec = record(run_id)
        if rec["status"] in ACTIVE:
            return HTMLResponse(pages.progress(rec))
        if rec["status"] == Status.RENDERING:
            return HTMLResponse(pages.rendering(rec))
        htmls = sorted(svc.store.folder(run_id).glob("*.html"))
        if not htmls:
            return HTMLResponse(pages.failed(rec))
        # streamed in chunks (pages.report): a large report read whole for each reader would hold it once per reader
        return StreamingResponse(pages.report(htmls[0], pages.banner(rec)), media_type="text/html; charset=utf-8")

    @app.get("/plotly-{version}.min.js", responses={404: {}})
    def plotly_js(version: str, request: Request):
        """The store's one plotly.js, which each report names as ``../plotly-<version>.min.js`` (from ``/runs/<id>``:
        here); the version is in the name, so a browser may keep it for good
        (https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Cache-Control#immutable)."""
        name = f"plotly-{version}.min.js"
        path = svc.store.root / name
        if not SHARED_NAME.match(name) or not path.is_file():
            raise HTTPException(404, f"no plotly.js {version[:40]!r} in this run store")
        # the name holds the version: name and size are its validator (a revalidation is a 304, not 5 MB)
        tag = f'"{name}-{path.stat().st_size}"'
        headers = {"Cache-Control": f"public, max-age={ASSET_MAX_AGE_S}, immutable", "ETag": tag}
        if tag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return FileResponse(path, media_type="text/javascript; charset=utf-8", headers=headers)

    @app.get("/runs/{run_id}/run.json", responses={404: {}, 409: {"description": "its run.json cannot be read"}})
    def run_json(run_id: str):
        return JSONResponse(record(run_id))

    @app.get("/runs/{run_id}/findings.json", responses={404: {}})
    def findings(run_id: str):
        record(run_id)
        p = findings_file(svc.store.folder(run_id))  # until the notebook has written its findings: the fast verdict's
        if p is None:
            raise HTTPException(404, "this run wrote no findings (yet)")
        return FileResponse(p, media_type="application/json")

    @app.get("/runs/{run_id}/summary.md", response_class=PlainTextResponse, responses={404: {}})
    def summary(run_id: str):
        record(run_id)
        text = read_summary(svc.store.folder(run_id))
        if text is None:
            raise HTTPException(404, "the run has not finished")
        return PlainTextResponse(text, media_type="text/markdown")

    @app.get("/healthz", responses={503: {"description": "a verdict is stuck, or the run store cannot be written"}})
    def healthz():
        """Alive: 503 while a verdict call runs well past its deadline (``verdict_stuck_grace_s``) or the run store
        cannot be written (``store_error``)."""
        verdicts = svc.verdicts.stats() if svc.verdicts else {}
        warm = {"ready": svc.warm.ready, "failed": svc.warm.failed} if svc.warm else {}
        stuck = svc.stuck_verdicts()
        body = {
            "ok": not stuck and svc.store.error is None,
            "stuck_verdicts": stuck,
            "store_error": svc.store.error,
            "expired_verdicts": svc.decide.expired if svc.decide else 0,
            **svc.pool.stats(),
            "verdicts": verdicts,
            "warm": warm,
            "runs": len(svc.store),
            "unreadable_runs": [r["id"] for r in unreadable(svc.store)],
            "retention": retention.stats(),
        }
        return JSONResponse(body, status_code=200 if body["ok"] else 503)

    @app.get("/readyz", responses={503: {"description": "not taking alerts now; see reasons"}})
    def readyz():
        """Ready for alerts: 503 with the reasons while a verdict is stuck, the alerts' queue is full or the run store
        cannot be written."""
        reasons = []
        if svc.stuck_verdicts():
            reasons.append(f"{svc.stuck_verdicts()} verdict(s) stuck past their deadline")
        if svc.store.error:
            reasons.append(svc.store.error)
        pool = svc.verdicts or svc.pool
        if cfg.queue_limit and pool.waiting() >= cfg.queue_limit:
            reasons.append(f"the alerts' queue is full ({cfg.queue_limit} waiting)")
        return JSONResponse({"ready": not reasons, "reasons": reasons}, status_code=503 if reasons else 200)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics():
        return Response(generate_latest(svc.registry), media_type=CONTENT_TYPE_LATEST)

    app.router.add_event_handler("shutdown", svc.close)
    app.router.add_event_handler("shutdown", retention.stop)
    app.add_middleware(UnicodeJson)  # added before BodyLimit, which so wraps it: the body it reads is bounded
    app.add_middleware(BodyLimit, limit=cfg.max_body)
    return app
