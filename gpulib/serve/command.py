"""``gpuops serve``: its options, parsed into a :class:`gpulib.serve.ServeConfig` and served (:mod:`gpulib.cli`
registers the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gpulib.core.errors import GpulibError
from gpulib.run.report import fail
from gpulib.serve import run_server
from gpulib.serve.config import ServeConfig


def serve_cmd(
    host: str = typer.Option("127.0.0.1", help="listen address"),
    port: int = typer.Option(8080, help="listen port"),
    out: Path = typer.Option(
        Path("reports/serve"), "--out", "-o", help="run folders live here (restart rebuilds the index)"
    ),
    token_file: Optional[Path] = typer.Option(
        None, help="file holding the webhook bearer token (else $GPUOPS_SERVE_TOKEN)"
    ),
    source: str = typer.Option("demo", "--source", "-s", help="demo | live | snapshot folder, passed to every run"),
    routes_file: Optional[Path] = typer.Option(
        None,
        help=(
            "alert -> runbook table (default: generated from the data files, the same as deploy/prometheus/routes.yaml)"
        ),
    ),
    kernels: int = typer.Option(2, help="runs executing at once (papermill kernels)"),
    verdict: str = typer.Option(
        "fast", help="fast: the verdict first, without a kernel, then the notebook as its evidence | notebook"
    ),
    verdict_workers: int = typer.Option(2, help="fast verdicts computed at once"),
    verdict_in: str = typer.Option(
        "processes", help="processes: each verdict in a worker process (every core) | threads: in the server's"
    ),
    claims: str = typer.Option(
        "local", help="local | kubernetes: replicas claim each incident through a coordination.k8s.io Lease"
    ),
    replica: Optional[str] = typer.Option(
        None, help="this replica's name in a run store replicas share (default $POD_NAME, else the host name)"
    ),
    renders: str = typer.Option(
        "local", help="local: notebooks render in kernels of this server | kubernetes: each render is a Job"
    ),
    render_image: Optional[str] = typer.Option(None, help="render Jobs' image (default: this server pod's image)"),
    render_claim: Optional[str] = typer.Option(
        None, help="PersistentVolumeClaim of the run store the render Jobs mount (default: the one at --out)"
    ),
    render_namespace: Optional[str] = typer.Option(None, help="render Jobs' namespace (default: this server pod's)"),
    warm_kernels: int = typer.Option(2, help="kernels kept started with gpulib imported for renders (0: cold starts)"),
    render_nice: int = typer.Option(10, help="niceness added to the render kernels, so renders never slow verdicts"),
    queue_limit: int = typer.Option(50, help="queued runs beyond which POST /alertmanager answers 503 + Retry-After"),
    run_timeout: int = typer.Option(600, help="seconds before a run's kernel is killed and the run marked failed"),
    dedupe_window: int = typer.Option(900, help="seconds in which one alert group, GPU and runbook give one run"),
    fresh_for: int = typer.Option(900, help="GET /run/... reuses a run with the same parameters this recent (seconds)"),
    public_url: Optional[str] = typer.Option(None, help="base URL put in notifications (default http://HOST:PORT)"),
    notify_url: Optional[str] = typer.Option(None, help="webhook told each verdict (Slack-compatible or generic JSON)"),
    notify_format: str = typer.Option("slack", help="slack | json"),
    max_body: int = typer.Option(1_000_000, help="largest accepted request body in bytes"),
):
    """Serve runbooks over HTTP: Alertmanager's webhook runs the routed runbook; runbook_url links open the verdict.

    POST /alertmanager needs `Authorization: Bearer <token>` (Alertmanager's http_config.authorization);
    runs are dry runs (nothing is ever remediated) and every parameter is validated as `gpuops run` does.
    """
    try:
        cfg = ServeConfig.build(
            host=host,
            port=port,
            out=out,
            token_file=token_file,
            source=source,
            routes_file=routes_file,
            kernels=kernels,
            verdict=verdict,
            verdict_workers=verdict_workers,
            verdict_in=verdict_in,
            warm_kernels=warm_kernels,
            render_nice=render_nice,
            claims=claims,
            replica=replica,
            renders=renders,
            render_image=render_image,
            render_claim=render_claim,
            render_namespace=render_namespace,
            queue_limit=queue_limit,
            run_timeout=run_timeout,
            dedupe_window=dedupe_window,
            fresh_for=fresh_for,
            public_url=public_url,
            notify_url=notify_url,
            notify_format=notify_format,
            max_body=max_body,
        )
        run_server(cfg)  # the app is built before it listens: its own checks (e.g. --renders kubernetes) fail here
    except GpulibError as exc:
        fail(exc)
