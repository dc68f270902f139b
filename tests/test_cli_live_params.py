"""CLI: live runs never fall back to demo node/GPU names, a bad value is exit 2 without being repeated in a
suggested re-run, papermill's kernel warning is not shown, a summary.md sits beside the HTML, and dry-run
plans against no cluster stay out of the user's audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib import cli
from gpulib.catalogue import find_notebook
from gpulib.core.errors import InvalidParameter
from gpulib.inspection import target_defaults

ROOT = Path(__file__).resolve().parent.parent


def _gpuops(*args, env=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gpulib.cli", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


def test_live_run_without_node_is_exit_2_naming_it():
    p = _gpuops("run", "xid_ecc_triage", "--source", "live", "-q")
    assert p.returncode == cli.EXIT_USAGE, p.stderr
    assert "-p node" in p.stderr and "dgx-h100-1" in p.stderr  # says the default is a demo name


def test_live_target_defaults():
    xid, nccl = find_notebook("xid_ecc_triage"), find_notebook("nccl_check")
    # gpu: "empty: every GPU of the node" -> empty, not the demo's GPU 5
    assert target_defaults(xid, {"node": "gpu-node-7"}, "live") == {"gpu": ""}
    assert target_defaults(nccl, {}, "live") == {"node": ""}  # node: "empty: skip"
    assert target_defaults(xid, {}, "demo") == {}
    with pytest.raises(InvalidParameter, match="-p node"):
        target_defaults(xid, {"gpu": "3"}, "snapshot")


def test_bad_gpu_is_exit_2_and_not_repeated(tmp_path, demo_end):
    p = _gpuops(
        "run",
        "xid_ecc_triage",
        "-p",
        "node",
        "dgx-h100-1",
        "-p",
        "gpu",
        "abc",
        "-q",
        "-o",
        str(tmp_path),
        env={"GPUOPS_END": demo_end.isoformat()},
    )
    assert p.returncode == cli.EXIT_USAGE, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "abc" in out  # the error names the bad value
    assert not [ln for ln in out.splitlines() if "gpuops run" in ln and "abc" in ln]


@pytest.mark.notebook
def test_run_opens_with_the_verdict_and_writes_summary_md(tmp_path, demo_end):
    p = _gpuops(
        "run",
        "xid_ecc_triage",
        "-p",
        "node",
        "dgx-h100-1",
        "-p",
        "gpu",
        "5",
        "-q",
        "-o",
        str(tmp_path),
        env={"GPUOPS_END": demo_end.isoformat()},
    )
    assert p.returncode == cli.EXIT_FINDING, p.stdout + p.stderr
    assert "without encryption" not in p.stdout + p.stderr
    d = next(tmp_path.glob("*-xid_ecc_triage-*"))
    summary = (d / "summary.md").read_text()
    assert summary.startswith("# xid_ecc_triage: DONE") and "**Verdict:** critical" in summary
    assert "XID 79" in summary and "xid_ecc_triage.html" in summary
    # the verdict opens the page, above the evidence, with the kube-prometheus runbook headings
    html = (d / "xid_ecc_triage.html").read_text()
    assert "Computing: the verdict replaces" not in html
    v = html.index("Verdict: ")
    assert v < html.index("Source: ") and "CRITICAL" in html[v : v + 400] and "XID 79" in html[v : v + 600]
    for h in ("<h4>Meaning</h4>", "<h4>Impact</h4>", "<h4>Diagnosis</h4>", "<h4>Mitigation</h4>"):
        assert html.index(h, v) < html.index("Source: ")
    assert "Run it: <code>gpuops run xid_ecc_triage --source demo -p node dgx-h100-1 -p gpu 5" in html


def test_plan_without_cluster_is_not_audited_in_the_users_log(tmp_path, monkeypatch):
    import gpulib.kube.remediate as remediate

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GPUOPS_AUDIT_LOG", raising=False)
    res = remediate.cordon("dgx-h100-1", cluster=None, reason="test")
    assert res.mode == "plan"
    assert not (tmp_path / ".gpuops" / "audit.jsonl").exists()
    named = tmp_path / "named.jsonl"
    remediate.cordon("dgx-h100-1", cluster=None, reason="test", audit_log=str(named))
    assert json.loads(named.read_text().splitlines()[0])["target"]["name"] == "dgx-h100-1"
