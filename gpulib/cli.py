"""``gpuops``: list, run and schedule the runbooks and reports. This module only parses commands, calls the run
engine (:mod:`gpulib.execute`) or serve / collect / alerts, prints, and sets the exit code.

Exit codes: 0 = ran, no finding at or above ``--fail-on``; 1 = a finding at or above ``--fail-on``
stands (default: critical); 2 = bad usage (unknown runbook, parameter or value); 3 = the run failed or a
step could not get its data.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

try:
    import typer
except ImportError as exc:  # the base (GPU-node) install has no CLI stack: see the README's install section
    raise SystemExit("gpuops needs the runbooks extra: pip install 'gpu-runbooks[runbooks]' (or '[all]')") from exc

import json
import re
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from gpulib import __version__
from gpulib import execute as engine
from gpulib.catalogue import catalogue, find_notebook
from gpulib.core.errors import CollectError, GpulibError, InvalidParameter, usage_text
from gpulib.core.findings import Severity, sort_findings
from gpulib.core.redact import redact
from gpulib.core.timeutil import parse_window
from gpulib.core.validate import command, one_of
from gpulib.cost import load_prices, parse_namespaces
from gpulib.demo.simulator import FleetSimulator
from gpulib.execute import RunResult, outcome
from gpulib.inspection import PLOTLY_JS_MODES
from gpulib.kube import collect as kc
from gpulib.kube.client import KubeCluster
from gpulib.run.params import check_targets
from gpulib.serve.jobs import OUTCOME_FILE
from gpulib.xid import write_alert_rules

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="GPU runbooks for Kubernetes: run a runbook, get the verdict and the next command.",
)

EXIT_FINDING, EXIT_USAGE, EXIT_FAILED = 1, 2, 3


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuops {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version of gpuops and exit"
    ),
) -> None:
    """GPU runbooks for Kubernetes: run a runbook, get the verdict and the next command."""


# ------------------------------------------------------------------------------------- printing
def _print_result(res: RunResult, limit: int = 5) -> None:
    status = (
        "FAILED" if res.failed else ("BAD PARAMETER" if res.usage_errors else ("INCOMPLETE" if res.errors else "done"))
    )
    if res.failed:
        typer.echo(f"\n== {res.name}: {status} · no verdict: the run did not finish")
    else:
        by = Counter(f.severity.value for f in res.findings)
        split = ", ".join(f"{by[s.value]} {s.value}" for s in Severity if by[s.value])
        typer.echo(
            f"\n== {res.name}: {status} · worst finding: {res.worst} · {len(res.findings)} finding(s)"
            + (f": {split}" if split else "")
        )
    if res.failed:
        typer.echo(f"   error: {redact(res.failed)}", err=True)
    for e in res.usage_errors:
        typer.echo(f"   error: {redact(e)}", err=True)
    for e in res.errors:
        typer.echo(f"   missing data: {redact(e)}", err=True)
    ordered = sort_findings(res.findings)
    for f in ordered[:limit]:
        typer.echo("   " + f.as_text().replace("\n", "\n   "))
    rest = ordered[limit:]  # every critical and warning is named; only informational ones are left to findings.json
    for f in (f for f in rest if f.severity.rank <= 1):
        typer.echo(f"   [{f.severity.value.upper()}] {f.title}" + (f" ({f.where})" if f.where else ""))
    quiet = [f for f in rest if f.severity.rank > 1]
    if quiet:
        typer.echo(f"   ... {len(quiet)} informational finding(s) more in {res.out_dir / 'findings.json'}")
    typer.echo(f"   notebook: {res.notebook}\n   html:     {res.html}")


def _exit_code(results: list[RunResult], fail_on: str) -> int:
    if any(r.usage_errors for r in results):
        return EXIT_USAGE
    if any(r.failed or r.errors for r in results):
        return EXIT_FAILED
    if fail_on == "never":
        return 0
    limit = Severity(fail_on).rank
    if any(f.severity.rank <= limit for r in results for f in r.findings):
        return EXIT_FINDING
    return 0


def _fail(exc: GpulibError) -> None:
    typer.echo(usage_text(exc), err=True)
    raise typer.Exit(EXIT_USAGE)


# ------------------------------------------------------------------------------------- commands
@app.command("list")
def list_cmd(
    name: Optional[str] = typer.Argument(None, help="one runbook, report or lesson: only its parameters"),
    kind: Optional[str] = typer.Option(None, help="runbook, report or learn"),
):
    """List runbooks and reports with their parameters (`gpuops list NAME`: one of them)."""
    try:
        cat = {name: find_notebook(name)} if name else catalogue()
    except GpulibError as exc:
        _fail(exc)
    for info in cat.values():
        if kind and info.kind != kind:
            continue
        typer.echo(f"{info.name}  [{info.kind}]  {info.title}")
        if info.description:
            typer.echo(f"    {info.description}")
        for p in info.params:
            typer.echo(f"    -p {p.name} {p.default!r}" + (f"   # {p.help}" if p.help else ""))


@app.command(
    "run",
    help="Execute a runbook with papermill; write the notebook, its HTML (no code) and findings.json; print the "
    "findings.",
)
def run_cmd(
    name: str = typer.Argument(..., help="runbook or report name (see `gpuops list`)"),
    param: list[str] = typer.Option([], "-p", "--param", help="KEY=VALUE (or -p KEY VALUE); repeatable"),
    source: Optional[str] = typer.Option(None, "--source", "-s", help="demo | live | snapshot | a snapshot folder"),
    snapshot: Optional[Path] = typer.Option(
        None, "--snapshot", help="snapshot folder (nodes.json, pods.json, metrics*.txt)"
    ),
    out: Path = typer.Option(
        Path("reports/out"), "--out", "-o", help="output root; each run gets <timestamp>-<name>-<random>/"
    ),
    fail_on: str = typer.Option(
        "critical", help="exit 1 when a finding at or above this severity stands: critical | warning | info | never"
    ),
    timeout: int = typer.Option(900, help="per-cell timeout in seconds"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    run_dir: Optional[Path] = typer.Option(
        None,
        "--run-dir",
        help="write the run into exactly this folder, with outcome.json (gpuops serve's render Jobs); no --out",
    ),
    params_file: Optional[Path] = typer.Option(
        None, "--params-file", help="JSON object of parameters as gpuops serve checked and wrote them (params.json)"
    ),
):
    if fail_on not in ("critical", "warning", "info", "never"):
        _fail(InvalidParameter(f"--fail-on {fail_on!r}: use critical, warning, info or never"))
    try:
        info = find_notebook(name)
        given = _params_file(params_file) if params_file else None
        params = engine.prepare(
            info, _pairs(param), source=source, snapshot=str(snapshot) if snapshot else None, given=given
        )
        check_targets(params)
        if run_dir is not None:
            run_dir = run_dir.resolve()
            run_dir.mkdir(parents=True, exist_ok=True)
    except GpulibError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(InvalidParameter(f"--run-dir {run_dir}: {exc.strerror}"))
    # with --run-dir the run's root (its index) is the folder's parent, not --out: a render Job's working directory
    # is read-only and has no reports/out
    root = run_dir.parent if run_dir is not None else out.resolve()
    try:  # a crash (a full disk, no memory) is a failed run, exit 3, never "a finding stands" (1)
        res = engine.execute(info, params, root, progress=not quiet, timeout=timeout, out_dir=run_dir)
        if run_dir is not None:  # what gpuops serve records of the run, for the server that started this render
            (run_dir / OUTCOME_FILE).write_text(json.dumps(outcome(res), indent=2, default=str))
        _print_result(res)
    except Exception as exc:
        typer.echo(redact(f"error: the run failed: {type(exc).__name__}: {exc}"), err=True)
        raise typer.Exit(EXIT_FAILED) from None
    raise typer.Exit(_exit_code([res], fail_on))


#: what a --params-file is (the hint of its errors)
_PARAMS_FILE_HINT = (
    'a JSON object of parameter names and values, e.g. {"node": "dgx-h100-1", "gpu": "5"} '
    "(gpuops serve writes one as params.json in each run folder)"
)


def _params_file(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidParameter(f"--params-file {path}: {exc.strerror}", hint=_PARAMS_FILE_HINT) from None
    except json.JSONDecodeError as exc:
        raise InvalidParameter(f"--params-file {path} is not JSON: {exc}", hint=_PARAMS_FILE_HINT) from None
    if not isinstance(doc, dict):
        raise InvalidParameter(
            f"--params-file {path} holds {type(doc).__name__}, not an object of parameters", hint=_PARAMS_FILE_HINT
        )
    return doc


def _pairs(raw: list[str]) -> list[tuple[str, str]]:
    """``-p key=value`` pairs; ``main`` rewrites papermill-style ``-p key value`` into this form."""
    out = []
    for item in raw:
        if "=" not in item:
            raise InvalidParameter(f"-p {item!r}: give KEY VALUE or KEY=VALUE")
        k, v = item.split("=", 1)
        out.append((k.strip(), v))
    return out


@app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("reports/out"), "--out", "-o", help="output root"),
    include_learn: bool = typer.Option(True, help="also run the onboarding notebooks"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
):
    """Run every runbook and the utilization report on the demo fleet; write HTML and reports/out/index.html."""
    try:
        cat = catalogue()
    except GpulibError as exc:
        _fail(exc)
    results = []
    todo = [i for i in cat.values() if include_learn or i.kind != "learn"]
    for n, info in enumerate(todo, 1):
        typer.echo(f"[{n}/{len(todo)}] {info.name}")
        try:
            params = engine.prepare(info, source="demo")
        except GpulibError as exc:
            _fail(exc)
        res = engine.execute(info, params, out.resolve(), progress=not quiet)
        _print_result(res, limit=1)
        results.append(res)
    failed = [r.name for r in results if r.failed]
    typer.echo(f"\n{len(results) - len(failed)}/{len(results)} notebooks ran; index: {out.resolve() / 'index.html'}")
    if failed:
        typer.echo(f"failed: {', '.join(failed)}", err=True)
        raise typer.Exit(EXIT_FAILED)


@app.command("report")
def report_cmd(
    window: str = typer.Option("7d", help="report window (Prometheus duration)"),
    source: Optional[str] = typer.Option(None, "--source", "-s", help="demo | live | snapshot | a snapshot folder"),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot"),
    price_file: Optional[Path] = typer.Option(None, help="CSV of GPU prices overriding the shipped table"),
    namespaces: Optional[str] = typer.Option(None, help="comma-separated namespaces to report on (default: all)"),
    provider: Optional[str] = typer.Option(
        None, help="price rows to use: aws, gcp or azure (default: the policy default)"
    ),
    currency: Optional[str] = typer.Option(None, help="currency of the price rows to use (default USD)"),
    charts: Optional[str] = typer.Option(
        None, help="plotly.js in the HTML: inline (offline, ~5 MB) or cdn (e-mailable)"
    ),
    out: Path = typer.Option(Path("reports/out"), "--out", "-o"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
):
    """Run the GPU utilization and cost report (for CronJobs: exit 0 unless the run failed)."""
    try:
        info = find_notebook("gpu_utilization_report")
        pairs = (
            [("window", window)] + _report_options(price_file, namespaces, provider, currency) + _charts_option(charts)
        )
        params = engine.prepare(info, pairs, source=source, snapshot=str(snapshot) if snapshot else None)
    except GpulibError as exc:
        _fail(exc)
    res = engine.execute(info, params, out.resolve(), progress=not quiet)
    _print_result(res)
    raise typer.Exit(_exit_code([res], "never"))


def _charts_option(charts: str | None) -> list[tuple[str, str]]:
    if charts is None:
        return []
    if charts not in PLOTLY_JS_MODES:
        raise InvalidParameter(f"--charts {charts!r}: use one of {', '.join(PLOTLY_JS_MODES)}")
    return [("charts", charts)]


def _report_options(
    price_file: Path | None, namespaces: str | None, provider: str | None, currency: str | None
) -> list[tuple[str, str]]:
    """The report notebook's parameters from ``gpuops report`` options, checked before papermill starts."""
    pairs: list[tuple[str, str]] = []
    if price_file is not None:
        load_prices(price_file)  # PriceFileError (usage) names the bad column or row
        pairs.append(("price_file", str(price_file.resolve())))
    if namespaces is not None:
        bad = [n for n in (parse_namespaces(namespaces) or []) if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n)]
        if bad:
            raise InvalidParameter(f"--namespaces {namespaces!r}: {bad} are not Kubernetes namespace names")
        pairs.append(("namespaces", namespaces))
    if provider is not None:
        known = sorted(set(load_prices(price_file)["provider"].astype(str)))
        if provider.lower() not in known:
            raise InvalidParameter(f"--provider {provider!r}: the price table has {known}")
        pairs.append(("provider", provider.lower()))
    if currency is not None:
        if not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise InvalidParameter(f"--currency {currency!r}: give a 3-letter ISO 4217 code such as USD")
        pairs.append(("currency", currency.upper()))
    return pairs


@app.command(
    "collect",
    help="Collect a node's kernel log, nvidia-smi reports (and a DCGM diagnostic) with a short-lived pod into a "
    "snapshot folder.",
)
def collect_cmd(
    node: str = typer.Argument(..., help="the GPU node to collect evidence from"),
    apply: bool = typer.Option(False, "--apply", help="create the pod (default: dry run, print the pod spec)"),
    diag: Optional[int] = typer.Option(
        None, "--diag", help="also run `dcgmi diag -r LEVEL -j` (1-4): it LOADS the GPUs"
    ),
    force: bool = typer.Option(False, "--force", help="run --diag even though GPU pods run on the node"),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="snapshot folder to write (default: collect-<node>-<UTC time>)"
    ),
    image: Optional[str] = typer.Option(None, help="collection image (default: collect_settings.csv)"),
    namespace: Optional[str] = typer.Option(None, help="namespace of the pod (default: collect_settings.csv)"),
    timeout: Optional[float] = typer.Option(None, help="seconds the pod may run (default: collect_settings.csv)"),
    kubeconfig: Optional[Path] = typer.Option(None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)"),
    context: Optional[str] = typer.Option(None, help="kubeconfig context (default: current)"),
):

    over = {
        "namespace": namespace,
        "timeout_s": timeout,
        "diag_timeout_s": timeout,
        "image": image if diag is None else None,
        "diag_image": image if diag is not None else None,
    }
    try:
        spec = kc.pod_spec(node, diag_level=diag, **over)
        kc.validate_spec(spec)
    except GpulibError as exc:
        _fail(exc)
    if diag is not None:
        typer.echo(
            f"note: dcgmi diag -r {diag} loads every GPU of {node} for minutes (level 3: about 15 min); it is "
            "refused while GPU pods run there unless --force"
        )
    if not apply:
        typer.echo(
            f"dry run: the pod below would run on {node}; add --apply to create it "
            f"(RBAC: deploy/collect/rbac.yaml)\n---"
        )
        typer.echo(yaml.safe_dump(spec, sort_keys=False).rstrip())
        return
    folder = out or Path(f"collect-{node}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}")
    try:
        cluster = KubeCluster(kubeconfig=kubeconfig, context=context)
        res = kc.collect_node(cluster, node, apply=True, diag_level=diag, force=force, out_dir=folder, **over)
    except CollectError as exc:
        typer.echo(f"error: {exc}", err=True)
        partial = exc.result
        if partial is not None and partial.files:
            typer.echo(f"kept what finished in {folder}: {', '.join(p.name for p in partial.files)}", err=True)
        for p in partial.problems if partial is not None else []:
            typer.echo(f"   {p}", err=True)
        raise typer.Exit(EXIT_FAILED)
    except InvalidParameter as exc:
        _fail(exc)
    except GpulibError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED)
    typer.echo(f"collected {node} with pod {res.namespace}/{res.pod} (deleted): {folder}")
    for f in res.files:
        typer.echo(f"   {f.name}")
    for p in res.problems:
        typer.echo(f"   note: {p}")
    typer.echo(
        "next: "
        + command(
            "gpuops", "run", "xid_ecc_triage", "--source", "snapshot", "--snapshot", str(folder), "-p", "node", node
        )
    )


@app.command("exporter")
def exporter_cmd(
    port: int = typer.Option(9400, help="listen port on 127.0.0.1"),
    node: Optional[str] = typer.Option(None, help="serve one node's GPUs only"),
    exporter: str = typer.Option("4.8", help="dcgm-exporter generation whose metric names and units to emit"),
):
    """Serve the demo fleet as a dcgm-exporter-format /metrics endpoint (for trying dashboards and alerts)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            sim = FleetSimulator(exporter=exporter)
            body = sim.scrape_text(node=node).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    typer.echo(f"demo dcgm-exporter on http://127.0.0.1:{port}/metrics (Ctrl-C to stop)")
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


@app.command("backfill")
def backfill_cmd(
    path: Path = typer.Argument(..., help="OpenMetrics file to write"),
    window: str = typer.Option("24h", help="how much history to write"),
    step: Optional[str] = typer.Option(None, help="sample spacing (default: the scenario's scrape interval)"),
    exporter: str = typer.Option("4.8", help="dcgm-exporter generation whose metric names and units to write"),
):
    """Write the demo fleet as OpenMetrics for `promtool tsdb create-blocks-from openmetrics FILE DIR`."""
    try:
        sim = FleetSimulator(exporter=exporter)
        st = parse_window(step, name="step").total_seconds() if step else None
        sim.write_openmetrics(path, window, st)
    except GpulibError as exc:
        _fail(exc)
    typer.echo(f"wrote {path}; next: promtool tsdb create-blocks-from openmetrics {path} ./data")


@app.command(
    "alerts",
    help="Generate the Prometheus alert rules, their routes table (for gpuops serve), the PrometheusRule and the "
    "promtool fixture.",
)
def alerts_cmd(
    base_url: str = typer.Option(
        ...,
        "--base-url",
        help="where gpuops serve is reached, e.g. https://gpuops.example.com; "
        "every alert's runbook_url is BASE/run/<runbook>?node=...&gpu=...",
    ),
    out: Path = typer.Option(Path("deploy/prometheus"), "--out", "-o", help="folder for the generated files"),
):

    try:
        for p in write_alert_rules(out, base_url):
            typer.echo(f"wrote {p}")
    except GpulibError as exc:
        _fail(exc)


@app.command("serve")
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
    from gpulib.serve import ServeConfig, run_server

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
        _fail(exc)


@app.command("mcp")
def mcp_cmd(
    transport: str = typer.Option("stdio", help="stdio (an MCP client starts gpuops) | http (streamable HTTP)"),
    host: str = typer.Option("127.0.0.1", help="listen address (http)"),
    port: int = typer.Option(8090, help="listen port (http); the endpoint is /mcp"),
    token_file: Optional[Path] = typer.Option(
        None, help="file holding the bearer token of the http transport (else $GPUOPS_MCP_TOKEN)"
    ),
    source: str = typer.Option("demo", "--source", "-s", help="demo | live | snapshot folder, for every run"),
    out: Path = typer.Option(Path("reports/out"), "--out", "-o", help="run folders are written and read here"),
    kernels: int = typer.Option(2, help="runs executing at once (more calls wait)"),
    run_timeout: int = typer.Option(600, help="seconds before a run's kernel is killed and the run marked failed"),
):
    """Serve the runbooks to AI assistants over the Model Context Protocol (read-only tools: list, run, read a run,
    look up an XID, plan a node collection); http needs `Authorization: Bearer <token>`."""
    try:
        from gpulib.mcp import server as mcp_server
        from gpulib.mcp.tools import Tools
    except ImportError as exc:
        raise SystemExit("gpuops mcp needs the mcp extra: pip install 'gpu-runbooks[mcp]' (or '[all]')") from exc
    from gpulib.serve.config import TOKEN_ENV as SERVE_TOKEN_ENV
    from gpulib.serve.config import read_token

    try:
        one_of(transport, ("stdio", "http"), param="--transport")
        token = read_token(token_file, env=mcp_server.TOKEN_ENV) if transport == "http" else ""
        hidden = (mcp_server.TOKEN_ENV, SERVE_TOKEN_ENV)
        tools = Tools(out, source, kernels=kernels, run_timeout=run_timeout, unset_env=hidden)
    except GpulibError as exc:
        _fail(exc)
    if transport == "stdio":
        mcp_server.serve_stdio(tools)
    else:
        mcp_server.serve_http(tools, token, host, port)


def _rewrite_papermill_style(argv: list[str]) -> list[str]:
    """Accept papermill's ``-p key value`` (two tokens) as well as ``-p key=value``."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("-p", "--param") and i + 2 < len(argv) + 1 and i + 1 < len(argv) and "=" not in argv[i + 1]:
            if i + 2 >= len(argv):
                raise InvalidParameter(f"{a} {argv[i + 1]} needs a value: -p KEY VALUE")
            out += [a, f"{argv[i + 1]}={argv[i + 2]}"]
            i += 3
            continue
        out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = _rewrite_papermill_style(argv)
    except GpulibError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_USAGE)
    app(args=argv, prog_name="gpuops")


if __name__ == "__main__":  # pragma: no cover
    main()
