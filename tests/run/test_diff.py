"""gpuops diff: two demo reports with different window ends (and a fleet that changed between them) list the
findings new, gone and changed and the key figures with their change; a report run after an earlier one opens with
"Since last time", and the run index links it to its diff."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from gpulib.core.knowledge import data_path
from gpulib.core.settings import FINDINGS_ENV
from gpulib.demo.source import DemoSource
from gpulib.run import diff
from gpulib.run.catalogue import context, definition, find_notebook
from gpulib.run.evidence import watch
from gpulib.run.notebook import Session
from gpulib.runbook import quiet
from tests.helpers.pinned import DEMO_END

ROOT = Path(__file__).resolve().parents[2]
REPORT = "gpu_utilization_report"


def _run(root: Path, stamp: str, end, scenario=None) -> Path:
    """One run folder of the utilization report on the demo fleet ending at ``end``: the runbook's definition
    headless (the notebook's own steps), findings.json and key_figures.json written as a run writes them."""
    rb = definition(REPORT)
    folder = root / f"{stamp}-{REPORT}-abc123"
    folder.mkdir(parents=True)
    old = os.environ.get(FINDINGS_ENV)
    os.environ[FINDINGS_ENV] = str(folder / "findings.json")
    try:
        ns = {**rb.defaults(), "source": "demo"}
        with quiet():
            s = Session(rb, ns, headless=True, extra=context(REPORT))
            src = DemoSource(scenario, end=end)
            s.engine.src, ns["src"], s.reads = src, src, watch(src)
            s.run_all()
            s.finish(save=True)
    finally:
        os.environ.pop(FINDINGS_ENV) if old is None else os.environ.__setitem__(FINDINGS_ENV, old)
    return folder


def _changed_fleet() -> dict:
    """The demo fleet a week on: ads' idle scorer pod now holds memory at ~0 % activity (a zombie), and notebooks'
    dev-bob is gone."""
    fleet = copy.deepcopy(yaml.safe_load(data_path("demo/demo_fleet.yaml").read_text()))
    for node in fleet["nodes"]:
        for w in node.get("workloads", []):
            if w["pod"] == "ab-test-scorer-84c6d7f5b9-zt5nk":
                w.update(persona="zombie", since="-20h")
        node["workloads"] = [w for w in node.get("workloads", []) if not w["pod"].startswith("dev-bob")]
    return fleet


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff-runs")
    a = _run(root, "20261122T120000Z", DEMO_END - timedelta(days=7))
    b = _run(root, "20261129T120000Z", DEMO_END, _changed_fleet())
    return root, a, b


def test_diff_of_two_demo_reports_lists_what_changed(two_runs):
    root, a, b = two_runs
    d = diff.diff_runs(diff.load_run(a), diff.load_run(b))
    assert d["before"]["window_end"].startswith("2026-11-22T12:00") and d["after"]["window_end"].startswith(
        "2026-11-29T12:00"
    )
    new = [f["title"] for f in d["new"]]
    gone = [f["title"] for f in d["gone"]]
    assert any("ab-test-scorer-84c6d7f5b9-zt5nk" in t and t.startswith("Zombie") for t in new), new
    assert "Idle allocated GPUs: notebooks/dev-bob" in gone, gone
    figs = {f["key"]: f for f in d["figures"]}
    assert figs["zombie_pods"]["before"] == 1 and figs["zombie_pods"]["after"] == 2
    assert figs["zombie_pods"]["change"] == 1 and figs["zombie_pods"]["verdict"] == "worse"
    assert {"idle_gpu_hours", "idle_cost"} <= set(figs)
    assert all(f["before"] is not None and f["after"] is not None for f in figs.values())


def _gpuops(args: list[str], capsys) -> tuple[int, str, str]:
    """``gpuops ARGS`` in this process (:func:`gpulib.cli.main`, what ``python -m gpulib.cli`` runs): exit code,
    stdout, stderr."""
    from gpulib import cli

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    out = capsys.readouterr()
    return exc.value.code or 0, out.out, out.err


def test_gpuops_diff_prints_it_and_last_n_finds_the_runs(two_runs, capsys):
    root, a, b = two_runs
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(  # the command itself once, as a process; its other uses in this process
        [sys.executable, "-m", "gpulib.cli", "diff", str(a), str(b)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Zombie pods: 1.0 -> 2.0 pods (+1.0, worse)" in out.stdout
    assert re.search(r"New findings: [1-9]", out.stdout) and "Gone findings:" in out.stdout
    code, stdout, stderr = _gpuops(
        ["diff", "--last", "2", "--runbook", REPORT, "-p", "source=demo", "--out", str(root), "--json"], capsys
    )
    assert code == 0, stderr
    assert json.loads(stdout)["after"]["id"] == b.name
    code, _, stderr = _gpuops(["diff", str(a)], capsys)
    assert code == 2 and "two runs" in stderr


def test_a_finding_whose_severity_or_cause_moved_is_changed_not_new():
    base = {"category": "fleet", "node": None, "gpu": None, "data": {}}
    a = diff.RunView("a", Path("a"), "r", {}, [{**base, "severity": "warning", "title": "Fleet health score 55/100"}])
    b = diff.RunView("b", Path("b"), "r", {}, [{**base, "severity": "critical", "title": "Fleet health score 41/100"}])
    d = diff.diff_runs(a, b)
    assert d["new"] == [] and d["gone"] == []
    ((c,),) = [d["changed"]]
    assert c["what"] == ["severity", "cause"] and c["after"]["title"] == "Fleet health score 41/100"


def test_a_report_run_after_an_earlier_one_opens_with_since_last_time(tmp_path, _notebook_kernels):
    """Both runs in this worker's kept kernel (tests/helpers/shared_runs.py ``KeptKernels``: emptied and given this
    process' environment before each run), handed to the run as ``gpuops serve`` hands a warm one."""
    from gpulib.run import render

    info = find_notebook("gpu_reliability_report")
    out = tmp_path / "reports"
    first = render.execute(
        info, {"charts": "cdn"}, out, progress=False, timeout=300, warm=_notebook_kernels.lend("notebook")
    )
    assert first.warm
    assert first.html is not None and "Since last time" not in first.html.read_text()
    assert not (first.out_dir / diff.DIFF_HTML).exists()
    second = render.execute(
        info, {"charts": "cdn"}, out, progress=False, timeout=300, warm=_notebook_kernels.lend("notebook")
    )
    assert second.warm
    page = second.html.read_text()
    body = re.search(r"<body[^>]*>", page)
    assert page[body.end() :].startswith(f"<section id='{diff.SECTION_ID}'"), page[body.end() : body.end() + 200]
    assert f"Against run {first.out_dir.name}" in page and "Fleet health score" in page
    assert (second.out_dir / diff.DIFF_HTML).is_file()
    index = (out / "index.html").read_text()
    assert f"href='{second.out_dir.name}/diff.html'>diff</a>" in index
    assert f"href='{first.out_dir.name}/diff.html'" not in index
