"""``gpuops serve``: Alertmanager's webhook and runbook_url links run the catalogue's runbooks in a bounded pool.

Modules: config (settings, token), routing (alert -> runbook + validated parameters, dedupe), store (run
folders on disk, the index rebuilt from them), pool (bounded worker pool), runner (a run through the run
engine, gpulib.run.render, in the worker thread, killed at its timeout), notify (Slack-compatible / generic JSON),
pages (HTML), app (the FastAPI application, which writes each run's summary.md).
"""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule, imported on first use (PEP 562): ``gpulib.serve.config`` (the token rules that
#: ``gpuops mcp`` shares) imports without FastAPI and uvicorn
_EXPORTS = {"ServeConfig": "config", "create_app": "app"}


def run_server(cfg) -> None:
    """Serve ``cfg`` (a :class:`ServeConfig`) with uvicorn until SIGTERM or SIGINT, then stop clean: uvicorn shuts the
    app down (the warm kernels, the verdict processes) and raises the signal again once it is done, which here exits
    through ``finally`` (not the default handler, which would skip it), so every process the server started that is
    still there is stopped too (:func:`gpulib.serve.reaper.stop_descendants`)."""
    import uvicorn

    from gpulib.serve.app import create_app
    from gpulib.serve.bodylimit import HeaderDeadline
    from gpulib.serve.pool import tune_malloc
    from gpulib.serve.reaper import exit_on_signals, stop_descendants

    tune_malloc()  # before the first render: no arena grows on a dynamic threshold (gpulib/serve/pool.py)
    app = create_app(cfg)
    exit_on_signals()
    HeaderDeadline.timeout_s = float(cfg.header_timeout)
    try:  # h11 with a deadline on the request headers (gpulib/serve/bodylimit.py)
        uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning", access_log=False, http=HeaderDeadline)
    finally:
        stop_descendants()


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
__all__ = ["ServeConfig", "create_app", "run_server"]
