"""``gpuops``: list, run and schedule the runbooks and reports. This module only parses commands, calls the run
engine (:mod:`gpulib.run.render`) or serve / collect / alerts, prints, and sets the exit code.

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

from gpulib import __version__
from gpulib.cli_tools import alerts_cmd, backfill_cmd, collect_cmd, diff_cmd, exporter_cmd
from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.redact import redact
from gpulib.cost import load_prices, parse_namespaces
from gpulib.inspection import PLOTLY_JS_MODES
from gpulib.kube.publish import parse_what, publish_run
from gpulib.mcp.command import mcp_cmd
from gpulib.mixin.build import mixin_cmd
from gpulib.run import render as engine
from gpulib.run.batch import default_jobs, run_each
from gpulib.run.catalogue import catalogue, find_notebook
from gpulib.run.params import check_targets, prepare
from gpulib.run.record import INDEX_FILE, EngineRecord, findings_file, write_outcome
from gpulib.run.render import RunResult, outcome
from gpulib.run.report import EXIT_FAILED, EXIT_FINDING, EXIT_USAGE, FAIL_ON, exit_code, fail, result_lines
from gpulib.serve.command import serve_cmd

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="GPU runbooks for Kubernetes: run a runbook, get the verdict and the next command.",
)

__all__ = ["app", "main", "EXIT_FINDING", "EXIT_USAGE", "EXIT_FAILED"]


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
    for text, err in result_lines(res, limit):
        typer.echo(text, err=err)


def _exit_code(results: list[RunResult], fail_on: str) -> int:
    return exit_code(results, fail_on)


_fail = fail


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
    publish: Optional[str] = typer.Option(
        None,
        "--publish",
        help="events: the verdict as a Kubernetes Event on its node; events,condition: also the "
        "node condition GpuRunbooksVerdict (gpulib/kube/publish.py)",
    ),
):
    if fail_on not in FAIL_ON:
        _fail(InvalidParameter(f"--fail-on {fail_on!r}: use critical, warning, info or never"))
    try:
        info = find_notebook(name)
        given = _params_file(params_file) if params_file else None
        params = prepare(info, _pairs(param), source=source, snapshot=str(snapshot) if snapshot else None, given=given)
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
    root, res = (run_dir.parent if run_dir is not None else out.resolve()), None
    try:  # a crash (a full disk, no memory) is a failed run, exit 3, never "a finding stands" (1)
        res = engine.execute(info, params, root, progress=not quiet, timeout=timeout, out_dir=run_dir)
        if run_dir is not None:  # what gpuops serve records of the run, for the server that started this render
            write_outcome(run_dir, outcome(res))
        _print_result(res)
    except Exception as exc:  # the engine records its own crash; one after it (writing, printing) is the run's too
        if res is not None:
            EngineRecord(res.out_dir).broken(exc)
        typer.echo(redact(f"error: the run failed: {type(exc).__name__}: {exc}"), err=True)
        raise typer.Exit(EXIT_FAILED) from None
    _publish_run(res.out_dir, publish)
    raise typer.Exit(_exit_code([res], fail_on))


def _publish_run(folder: Path, publish: Optional[str]) -> None:
    """``gpuops run --publish``: write the verdict back to the cluster; a failure is said, the run's exit code stays."""
    if not publish:
        return
    try:
        for line in publish_run(findings_file(folder), parse_what(publish)):
            typer.echo(redact(line))
    except GpulibError as exc:
        typer.echo(redact(f"could not publish: {exc}"), err=True)


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
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="notebooks run at once [default: CPUs]"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
):
    """Run every runbook and the utilization report on the demo fleet; write HTML and reports/out/index.html (plotly.js
    once, as OUT/plotly-<version>.min.js, which each report names: keep them together)."""
    try:
        todo = [i for i in catalogue().values() if include_learn or i.kind != "learn"]
        results = run_each(
            todo,
            out.resolve(),
            jobs=jobs or default_jobs(),
            progress=not quiet,
            started=lambda n, info: typer.echo(f"[{n}/{len(todo)}] {info.name}"),
            finished=lambda res: _print_result(res, limit=1),
            charts="shared",
        )
    except GpulibError as exc:
        _fail(exc)
    failed = [r.name for r in results if r.failed]
    typer.echo(f"\n{len(results) - len(failed)}/{len(results)} notebooks ran; index: {out.resolve() / INDEX_FILE}")
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
        None,
        help="plotly.js in the HTML: inline (offline, ~5 MB; the default), cdn (e-mailable) or shared (one "
        "plotly-<version>.min.js in --out that the report names)",
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
        params = prepare(info, pairs, source=source, snapshot=str(snapshot) if snapshot else None)
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


app.command(
    "collect",
    help="Collect a node's kernel log, nvidia-smi reports (and a DCGM diagnostic) with a short-lived pod into a "
    "snapshot folder.",
)(collect_cmd)
app.command("exporter")(exporter_cmd)
app.command("backfill")(backfill_cmd)
app.command(
    "alerts",
    help="Generate the Prometheus alert rules, their routes table (for gpuops serve), the PrometheusRule and the "
    "promtool fixture.",
)(alerts_cmd)
app.command("serve")(serve_cmd)
app.command("mcp")(mcp_cmd)
app.command("mixin", help="Generate the Grafana/Prometheus mixin (alerts, recording rules, dashboards).")(mixin_cmd)
app.command("diff", help="What changed between two runs of a runbook (findings, key figures).")(diff_cmd)


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
