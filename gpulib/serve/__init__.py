"""``gpuops serve``: Alertmanager's webhook and runbook_url links run the catalogue's runbooks in a bounded pool.

Modules: config (settings, token), routing (alert -> runbook + validated parameters, dedupe), store (run
folders on disk, the index rebuilt from them), pool (bounded worker pool), runner (a run through the run
engine, gpulib.execute, in the worker thread, killed at its timeout), notify (Slack-compatible / generic JSON),
pages (HTML), app (the FastAPI application, which writes each run's summary.md).
"""

from __future__ import annotations

import uvicorn

from gpulib.serve.app import create_app
from gpulib.serve.config import ServeConfig


def run_server(cfg: ServeConfig) -> None:
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning", access_log=False)


__all__ = ["ServeConfig", "run_server"]
