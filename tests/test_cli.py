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
