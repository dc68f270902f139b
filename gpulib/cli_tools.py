"""The ``gpuops`` commands around the runbooks: ``collect`` (a node's evidence into a snapshot folder), ``exporter`` and
``backfill`` (the demo fleet as dcgm-exporter output), ``alerts`` (the Prometheus rules). :mod:`gpulib.cli` registers
them; each parses, calls the module that does the work and prints."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

import typer
import yaml

from gpulib.core.errors import CollectError, GpulibError, InvalidParameter
from gpulib.core.timeutil import parse_window
from gpulib.core.validate import command
from gpulib.demo.simulator import FleetSimulator
from gpulib.kube import collect as kc
from gpulib.kube.client import KubeCluster
from gpulib.run import diff as run_diff
from gpulib.run.report import EXIT_FAILED, fail
from gpulib.xid import write_alert_rules


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
        fail(exc)
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
        fail(exc)
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


def exporter_cmd(
    port: int = typer.Option(9400, help="listen port on 127.0.0.1"),
    node: Optional[str] = typer.Option(None, help="serve one node's GPUs only"),
    exporter: str = typer.Option("4.10", help="dcgm-exporter generation whose metric names and units to emit"),
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


def backfill_cmd(
    path: Path = typer.Argument(..., help="OpenMetrics file to write"),
    window: str = typer.Option("24h", help="how much history to write"),
    step: Optional[str] = typer.Option(None, help="sample spacing (default: the scenario's scrape interval)"),
    exporter: str = typer.Option("4.10", help="dcgm-exporter generation whose metric names and units to write"),
):
    """Write the demo fleet as OpenMetrics for `promtool tsdb create-blocks-from openmetrics FILE DIR`."""
    try:
        sim = FleetSimulator(exporter=exporter)
        st = parse_window(step, name="step").total_seconds() if step else None
        sim.write_openmetrics(path, window, st)
    except GpulibError as exc:
        fail(exc)
    typer.echo(f"wrote {path}; next: promtool tsdb create-blocks-from openmetrics {path} ./data")


def alerts_cmd(
    base_url: str = typer.Option(
        ...,
        "--base-url",
        help="where gpuops serve is reached, e.g. https://gpuops.example.com; "
        "every alert's runbook_url is BASE/run/<runbook>?node=...&gpu=...",
    ),
    out: Path = typer.Option(Path("deploy/prometheus"), "--out", "-o", help="folder for the generated files"),
    cluster_label: str = typer.Option(
        "cluster",
        "--cluster-label",
        help="the label naming a series' cluster (kubernetes-mixin's clusterLabel); every by/on list carries it",
    ),
):

    try:
        for p in write_alert_rules(out, base_url, cluster_label):
            typer.echo(f"wrote {p}")
    except GpulibError as exc:
        fail(exc)


def diff_cmd(
    runs: Optional[list[str]] = typer.Argument(None, help="RUN_A RUN_B: run folders or ids under --out"),
    last: Optional[int] = typer.Option(
        None, "--last", help="diff each of the last N runs of --runbook with the one before"
    ),
    runbook: Optional[str] = typer.Option(None, "--runbook", help="the runbook of --last"),
    param: Optional[list[str]] = typer.Option(None, "--param", "-p", help="KEY=VALUE the runs of --last share"),
    out: Path = typer.Option(Path("reports/out"), "--out", "-o", help="output root of the runs"),
    as_json: bool = typer.Option(False, "--json", help="print the diff as JSON"),
):
    """What changed between two runs of a runbook: findings new, gone and changed, and its key figures."""
    try:
        for a, b in run_diff.pairs(runs or [], last, runbook, param or [], out):
            d = run_diff.diff_runs(run_diff.load_run(a), run_diff.load_run(b))
            typer.echo(json.dumps(d, indent=2, default=str) if as_json else "\n".join(run_diff.lines(d)))
    except GpulibError as exc:
        fail(exc)
