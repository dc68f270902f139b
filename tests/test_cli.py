"""The gpuops CLI: listing, parameter handling, exit codes, outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulib import cli
from gpulib.catalogue import NotebookInfo
from gpulib.core.errors import InvalidParameter
from gpulib.inspection import Param, resolve_params


def run(args, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_list_shows_runbooks_and_parameters(capsys):
    code, out, _ = run(["list"], capsys)
    assert code in (0, None)
    assert "fleet_overview  [runbook]  Fleet overview" in out and "-p window '6h'" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "fleet_overview", "-p", "window", "6hours"], "window='6hours' is not a duration"),
        (["run", "fleet_ovrview"], "did you mean fleet_overview"),
        (["run", "fleet_overview", "-p", "nodes", "x"], "has no parameter 'nodes'"),
        (["run", "fleet_overview", "-p", "window"], "needs a value"),
        (["run", "fleet_overview", "--source", "snapshot"], "needs --snapshot DIR"),
        (["run", "fleet_overview", "--source", "prod"], "--source 'prod'"),
        (["run", "fleet_overview", "--fail-on", "sometimes"], "--fail-on"),
    ],
)
def test_bad_usage_exits_2_with_a_specific_message(args, needle, capsys):
    code, out, err = run(args, capsys)
    assert code == cli.EXIT_USAGE and needle in err


def test_typed_parameters():
    info = NotebookInfo("x", None, "runbook", params=[Param("gpu", 0), Param("apply", False), Param("names", ["a"])])
    assert resolve_params(info, [("gpu", "3"), ("apply", "true"), ("names", "a, b")]) == {
        "gpu": 3,
        "apply": True,
        "names": ["a", "b"],
    }
    with pytest.raises(InvalidParameter) as e:
        resolve_params(info, [("gpu", "three")])
    assert "expected int" in str(e.value)


@pytest.mark.notebook
def test_run_writes_notebook_html_findings_and_index(tmp_path, demo_end):
    env = {**__import__("os").environ, "GPUOPS_END": demo_end.isoformat()}
    p = subprocess.run(
        [sys.executable, "-m", "gpulib.cli", "run", "fleet_overview", "-p", "window", "2h", "-q", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == cli.EXIT_FINDING, p.stderr  # the demo fleet has critical findings
    assert "[CRITICAL]" in p.stdout and "gpuops run xid_ecc_triage" in p.stdout
    d = next(tmp_path.glob("*-fleet_overview-*"))
    doc = json.loads((d / "findings.json").read_text())
    assert doc["parameters"]["window"] == "2h" and doc["worst"] == "critical"
    nb = json.loads((d / "fleet_overview.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])
    html = (d / "fleet_overview.html").read_text()
    assert "plotly" in html and "nb.Runbook(" not in html  # charts embedded, code hidden
    assert d.name in (tmp_path / "index.html").read_text()


def test_the_cli_starts_without_the_notebook_kernel_libraries():
    """``gpuops`` parses its command before any notebook runs: importing the CLI loads neither IPython (the
    Runbook's table formatter) nor papermill; the run engine loads papermill when a run starts."""
    import subprocess
    import sys

    code = "import sys, gpulib.cli; print(sorted(m for m in ('IPython', 'papermill') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_header_of_a_run_that_did_not_finish_claims_no_verdict(tmp_path, capsys):
    from gpulib.execute import RunResult

    res = RunResult("fleet_overview", tmp_path, tmp_path / "n.ipynb", None, failed="RuntimeError: Kernel died")
    cli._print_result(res)
    head = capsys.readouterr().out.strip().splitlines()[0]
    assert head.startswith("== fleet_overview: FAILED ·") and "worst finding: ok" not in head and "no verdict" in head


def test_the_header_counts_the_findings_by_severity(tmp_path, capsys):
    from gpulib.core.findings import Finding, Severity
    from gpulib.execute import RunResult

    fs = [Finding(Severity.CRITICAL, "a"), Finding(Severity.WARNING, "b"), Finding(Severity.CRITICAL, "c")]
    fs.append(Finding(Severity.INFO, "d"))
    cli._print_result(RunResult("fleet_overview", tmp_path, tmp_path / "n.ipynb", None, findings=fs))
    head = capsys.readouterr().out.strip().splitlines()[0]
    assert head == "== fleet_overview: done · worst finding: critical · 4 finding(s): 2 critical, 1 warning, 1 info"


def test_version_prints_the_packages_version(capsys):
    import gpulib

    code, out, _ = run(["--version"], capsys)
    assert code in (0, None) and out.strip() == f"gpuops {gpulib.__version__}"


def test_backfill_writes_the_chosen_exporter_generation(tmp_path, capsys):
    om = tmp_path / "demo.om"
    code, out, _ = run(["backfill", str(om), "--window", "2m", "--exporter", "4.10"], capsys)
    assert code in (0, None) and "promtool tsdb create-blocks-from openmetrics" in out
    text = om.read_text()
    assert "DCGM_FI_DEV_XID_ERROR{" in text and "DCGM_FI_DEV_GPU_TEMP_CELSIUS{" in text
    assert "DCGM_FI_DEV_GPU_TEMP{" not in text
    code, _, err = run(["backfill", str(om), "--window", "2m", "--exporter", "5.0"], capsys)
    assert code != 0 and "4.10" in err
