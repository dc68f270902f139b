"""Node evidence collected from a pod reaches the same verdict as the demo (snapshot path and live path)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import gpulib
import gpulib.xid.steps as xs
from tests.helpers.collect_logs import demo_sections, framed

NODE, GPU = "dgx-h100-1", "5"


@pytest.fixture
def demo_src(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    return gpulib.connect("demo")


def _snapshot(tmp_path, src, *, metrics: bool = False):
    d = tmp_path / "snap"
    d.mkdir()
    (d / f"dmesg-{NODE}.txt").write_text(src.kernel_log(NODE))
    (d / f"nvidia-smi-q-{NODE}.txt").write_text(src.smi_query(NODE))
    (d / "nodes.json").write_text(json.dumps(src.nodes_json()))
    (d / "pods.json").write_text(json.dumps(src.pods_json()))
    return d


def _verdict(fs):
    top = fs[0]
    return top.severity, top.data.get("bucket"), top.data.get("rule"), top.sop_step


def test_kernel_log_xid_on_a_gpu_nvidia_smi_cannot_see_is_not_dropped(tmp_path, demo_src):
    """XID 79 (fell off the bus): nvidia-smi has no block for that GPU, and a snapshot has no DCGM labels to
    map its PCI bus id to index 5. Asking about GPU 5 must not answer 'no XID'."""
    snap = gpulib.connect("snapshot", path=str(_snapshot(tmp_path, demo_src)))
    fs = xs.findings(xs.collect(snap, NODE, GPU, "6h"))
    demo = xs.findings(xs.collect(demo_src, NODE, GPU, "6h"))
    assert demo[0].severity.value == "critical" and demo[0].data.get("bucket") == "RESTART_BM"
    assert _verdict(fs) == _verdict(demo)
    assert "0000:68:00" in " ".join(fs[0].evidence) + fs[0].title


def _start_double(tmp_path, src, monkeypatch):
    from tests.helpers.k8s_double import start_k8s_double

    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(filter(None, [os.environ.get(var, ""), "127.0.0.1"])))
    d = start_k8s_double(tmp_path, nodes=src.nodes_json()["items"], pods=src.pods_json()["items"])
    d.pod_script.log = framed(demo_sections(src, NODE), token="{token}")
    monkeypatch.setenv("KUBECONFIG", str(d.kubeconfig))
    return d


def test_gpuops_collect_then_snapshot_triage_reaches_the_demo_verdict(tmp_path, demo_src, monkeypatch):
    """`gpuops collect` against the API double writes a snapshot; `gpuops run xid_ecc_triage --source snapshot`
    on it gives the demo's verdict for dgx-h100-1 GPU 5 (XID 79: cordon, drain, reboot)."""
    from typer.testing import CliRunner

    from gpulib.cli import app

    double = _start_double(tmp_path, demo_src, monkeypatch)
    try:
        snap = tmp_path / "incident"
        r = CliRunner().invoke(app, ["collect", NODE, "--apply", "--out", str(snap)])
        assert r.exit_code == 0, r.output
        assert double.pods_in("gpuops-collect") == []
    finally:
        double.stop()
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    r = CliRunner().invoke(
        app,
        [
            "run",
            "xid_ecc_triage",
            "--source",
            "snapshot",
            "--snapshot",
            str(snap),
            "-q",
            "--out",
            str(tmp_path / "out"),
            "-p",
            "node=dgx-h100-1",
            "-p",
            "gpu=5",
        ],
    )
    found = json.loads(next((tmp_path / "out").glob("*xid_ecc_triage*/findings.json")).read_text())
    demo = xs.findings(xs.collect(demo_src, NODE, GPU, "6h"))
    top = sorted(found["findings"], key=lambda f: ["critical", "warning", "info", "ok"].index(f["severity"]))
    hw = [f for f in top if f.get("category") != "preflight" and "could not run" not in f["title"]]
    assert hw[0]["severity"] == demo[0].severity.value == "critical"
    assert hw[0]["sop_step"] == demo[0].sop_step and hw[0]["data"]["bucket"] == demo[0].data["bucket"] == "RESTART_BM"
    assert r.exit_code == 1, r.output  # a critical finding stands (the snapshot has no DCGM scrape, which is reported)


def test_live_collect_reaches_the_same_verdict_as_a_snapshot_of_the_same_evidence(live_env, demo_pinned, tmp_path):
    """Live source with collect on (Prometheus + the API double serving the demo's node artefacts as pod logs)
    against a snapshot holding the same files: same top verdict, and the pod is gone."""
    live_env.pod_script.log = framed(demo_sections(demo_pinned, NODE), token="{token}")
    live = gpulib.connect("live", collect=True, collect_dir=str(tmp_path / "kept"))
    inp = xs.collect(live, NODE, GPU, "6h")
    assert inp.kernel_log == demo_pinned.kernel_log(NODE) and inp.smi is not None
    assert live_env.pods_in("gpuops-collect") == [] and len(live_env.created) == 1
    fs_live = xs.findings(inp)
    snap = gpulib.connect("snapshot", path=str(tmp_path / "kept"), end=demo_pinned.end)
    fs_snap = xs.findings(xs.collect(snap, NODE, GPU, "6h"))
    fs_demo = xs.findings(xs.collect(demo_pinned, NODE, GPU, "6h"))
    assert _verdict(fs_live) == _verdict(fs_snap) == _verdict(fs_demo)
    # without collect the live path has no kernel log (and says so), so the collect is what carries the verdict
    plain = xs.collect(gpulib.connect("live"), NODE, GPU, "6h")
    assert plain.kernel_log is None and "kernel log" in plain.missing


def test_the_collected_kernel_log_format_is_read():
    """`dmesg --time-format iso` (what the collection pod runs) puts NVRM right after the timestamp, no host."""
    from gpulib.core.knowledge import data_path
    from gpulib.xid import parse_kernel_log

    real = data_path("captures/h200_dmesg_iso_nvrm.txt").read_text()  # real H200, driver 580.159.04: NVRM lines, no Xid
    assert "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04" in real
    assert parse_kernel_log(real).empty
    line = "2026-12-01T08:20:48,832638+00:00 NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
    ev = parse_kernel_log(real + line + "\n")
    assert len(ev) == 1 and int(ev["xid"].iloc[0]) == 79 and ev["pci_bus_id"].iloc[0] == "0000:18:00.0"
    assert ev["timestamp"].iloc[0] == pd.Timestamp("2026-12-01T08:20:48.832638Z") and ev["host"].isna().iloc[0]
    # syslog / journalctl -o short-iso keep their host
    j = parse_kernel_log("2026-12-01T08:20:48+0000 dgx-h100-1 kernel: NVRM: Xid (PCI:0000:18:00): 48, pid=1, DBE\n")
    assert j["host"].iloc[0] == "dgx-h100-1" and int(j["xid"].iloc[0]) == 48


def test_live_collect_failure_makes_the_gather_step_fail_not_a_verdict(tmp_path, demo_src, monkeypatch):
    """A collection that fails (image cannot be pulled) raises its named error out of the triage's input
    gathering (the runbook renders it and the run is INCOMPLETE), and leaves no pod."""
    from gpulib.core.errors import CollectError

    double = _start_double(tmp_path, demo_src, monkeypatch)
    double.pod_script.waiting_reason = "ImagePullBackOff"
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", "http://127.0.0.1:9")  # never reached: the collection fails first
    try:
        live = gpulib.connect("live", collect=True)
        with pytest.raises(CollectError, match="ImagePullFailed"):
            xs.collect(live, NODE, GPU, "6h")
        assert double.created and double.pods_in("gpuops-collect") == []
    finally:
        double.stop()
