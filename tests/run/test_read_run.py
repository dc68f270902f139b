"""gpulib.run.record: one record per run folder, from what the engine, the notebook and gpuops serve wrote."""

from __future__ import annotations

import json
import subprocess
import sys

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.run.index_page import read_run
from gpulib.run.record import created_at, write_status

RUN = "20261201T064500Z-xid_ecc_triage-1a2b3c"


def _folder(tmp_path, name=RUN):
    d = tmp_path / name
    d.mkdir()
    return d


def test_a_finished_run_gives_verdict_where_and_times(tmp_path):
    d = _folder(tmp_path)
    write_status(d, runbook="xid_ecc_triage", status="running", started=100.0, params={"node": "n1", "gpu": "3"})
    save_findings(
        [
            Finding(Severity.INFO, "note"),
            Finding(Severity.CRITICAL, "XID 79 on n1 GPU 3", node="n1", gpu="3", commands=["kubectl cordon n1"]),
        ],
        d / "findings.json",
        runbook="xid_ecc_triage",
        parameters={"node": "n1", "gpu": "3"},
    )
    (d / "xid_ecc_triage.html").write_text("<html></html>")
    write_status(d, status="done", finished=142.5)
    rec = read_run(d)
    assert (rec["status"], rec["severity"], rec["cause"]) == ("done", "critical", "XID 79 on n1 GPU 3")
    assert (rec["node"], rec["gpu"], rec["commands"], rec["findings"]) == ("n1", "3", ["kubectl cordon n1"], 2)
    assert (rec["started"], rec["finished"], rec["html"]) == (100.0, 142.5, "xid_ecc_triage.html")
    assert rec["created"] == 1796107500.0  # date -u -d 2026-12-01T06:45:00Z +%s
    full = read_run(d, full=True)
    assert [f["title"] for f in full["findings"]] == ["XID 79 on n1 GPU 3", "note"]  # most severe first


def test_a_run_whose_process_died_is_interrupted_and_a_live_one_running(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    d = _folder(tmp_path)
    write_status(d, runbook="xid_ecc_triage", status="running", started=1.0)
    assert read_run(d)["status"] == "running"  # this process wrote it and lives
    doc = json.loads((d / "status.json").read_text())
    (d / "status.json").write_text(json.dumps({**doc, "pid": int(dead.stdout)}))
    rec = read_run(d)
    assert rec["status"] == "interrupted" and "ended before the run finished" in rec["cause"]


def test_serve_run_json_says_the_status_and_incomplete_is_inferred_for_old_folders(tmp_path):
    d = _folder(tmp_path)
    (d / "run.json").write_text(json.dumps({"id": RUN, "runbook": "xid_ecc_triage", "status": "queued", "params": {}}))
    assert read_run(d)["status"] == "queued"
    old = _folder(tmp_path, "20261201T064501Z-fleet_overview-abcdef")
    save_findings([], old / "findings.json", runbook="fleet_overview", errors=["no DCGM data"])
    rec = read_run(old)
    assert (rec["status"], rec["errors"], rec["cause"]) == ("incomplete", ["no DCGM data"], "no finding")
    assert created_at("not-a-run") is None


def test_every_string_read_is_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_TOKEN", "tok-secret-123456")
    d = _folder(tmp_path)
    write_status(
        d, status="failed", error="GET https://u:pw@prom/ with tok-secret-123456", params={"x": "tok-secret-123456"}
    )
    text = json.dumps(read_run(d, full=True))
    assert "tok-secret-123456" not in text and "pw@" not in text and text.count("***") >= 3
