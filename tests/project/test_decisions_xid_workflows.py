"""tests/decisions/xid_workflows.csv: NVIDIA's XID workflows and ignore rules, each case a row with the pids, GPC/TPC
units and times that matter, run as an on-call engineer runs it: ``gpuops run xid_ecc_triage`` on a snapshot folder
(the node's kernel log, its ``nvidia-smi -q``, nodes/pods/events). Every row goes through the fast verdict
(:func:`gpulib.run.verdict.fast_verdict`, what ``gpuops serve`` and ``gpuops mcp`` answer with); the rows marked
``papermill=yes`` also through the ``gpuops run`` command, rendered notebook and findings.json.

The expected values are NVIDIA's, written in the table by hand with their source (NVSentinel's health-events-analyzer
rules and NVIDIA's Xid catalog). The ``nvidia-smi -q`` is the real H200 capture of tests/fixtures/smi/h200_q.txt (see
its README) with a second GPU derived from it (bus 04:00.0, minor number 1, UUID and serial changed by one digit), so
that the "different GPUs" rows have a second GPU; both GPUs are healthy, so only the kernel log decides.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from gpulib.run.verdict import fast_verdict
from tests.helpers.gpuops_cli import gpuops
from tests.helpers.pinned import ROOT

TABLE = pd.read_csv(ROOT / "tests" / "decisions" / "xid_workflows.csv", dtype=str).fillna("")
ROWS = TABLE.to_dict("records")
END = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
NODE = "node-a"
BUS = {0: "0000:03:00", 1: "0000:04:00"}  # NVRM prints domain:bus:device (tests/fixtures/xid/README.md)
#: the message part of each Xid line, in the layout of the real lines kept under tests/fixtures/xid/ (see its README)
MESSAGE = {
    13: "Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM 0): Out Of Range Address",
    31: (
        "channel 0x00000002, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC6 GPCCLIENT_T1_13 faulted @ "
        "0x6f6f_320c2000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
    ),
    45: "Ch 00000010",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    92: "High single-bit ECC error rate",
}


def _split(cell: str) -> list[str]:
    return [c.strip() for c in cell.split(";;") if c.strip()]


def _smi() -> str:
    """The real one-GPU H200 ``nvidia-smi -q`` with a second GPU derived from the first."""
    q = (ROOT / "tests" / "fixtures" / "smi" / "h200_q.txt").read_text()
    head, gpu = q.split("GPU 00000000:03:00.0\n", 1)
    second = (
        gpu.replace("00000000:03:00.0", "00000000:04:00.0")
        .replace("Minor Number                          : 0", "Minor Number                          : 1")
        .replace("cb3dfa52", "cb3dfa53")
        .replace("1753724031847", "1753724031848")
    )
    assert second != gpu
    attached = "Attached GPUs                             : "
    head = head.replace(attached + "1", attached + "2")
    return f"{head}GPU 00000000:03:00.0\n{gpu}GPU 00000000:04:00.0\n{second}"


def _kernel_log(events: str) -> str:
    lines = []
    for ev in _split(events):
        at, *kvs = ev.split()
        kv = dict(x.split("=", 1) for x in kvs)
        code = int(kv["xid"])
        stamp = (END + dt.timedelta(hours=float(at.rstrip("h")))).strftime("%Y-%m-%dT%H:%M:%SZ")
        pid = f"pid={kv['pid']}, name=python3, " if "pid" in kv else ""
        msg = MESSAGE[code].format(**kv)
        lines.append(f"{stamp} {NODE} kernel: NVRM: Xid (PCI:{BUS[int(kv['gpu'])]}): {code}, {pid}{msg}")
    return "\n".join(lines) + "\n"


def _snapshot(folder: Path, row: dict) -> Path:
    node = {
        "metadata": {"name": NODE, "labels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
        "status": {"capacity": {"nvidia.com/gpu": "2"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    empty = {"apiVersion": "v1", "kind": "List", "items": []}
    (folder / "nodes.json").write_text(json.dumps({**empty, "items": [node]}))
    (folder / "pods.json").write_text(json.dumps(empty))
    (folder / "events.json").write_text(json.dumps(empty))
    (folder / f"nvidia-smi-q-{NODE}.txt").write_text(_smi())
    (folder / f"dmesg-{NODE}.txt").write_text(_kernel_log(row["events"]))
    return folder


def _check(row: dict, top: dict) -> None:
    """``top``: the top finding as findings.json writes it."""
    rid = row["id"]
    assert top["severity"] == row["expected"], (rid, top["severity"], top["title"])
    assert top["category"] == row["category"], (rid, top["category"], top["title"])
    assert top["node"] == NODE and str(top["gpu"]) == row["gpu"], (rid, top["node"], top["gpu"])
    data = top.get("data") or {}
    if row["workflow"]:
        assert row["workflow"] in (data.get("xid13"), data.get("xid31")), (rid, data)
    commands = top.get("commands") or []
    for c in _split(row["must_commands"]):
        assert any(c in x for x in commands), (rid, c, commands)
    for c in _split(row["must_not_commands"]):
        assert not any(c in x for x in commands), (rid, c, commands)
    text = " ".join([top["title"], top.get("summary", ""), top.get("sop_step", ""), top.get("escalation", "")])
    text += " ".join(top.get("evidence") or [])
    for t in _split(row["must_text"]):
        assert t in text, (rid, t, text)


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", END.isoformat())
    for k in ("GPUOPS_FINDINGS_PATH", "KUBECONFIG"):
        monkeypatch.delenv(k, raising=False)


def test_the_table_covers_nvidias_workflows():
    """Each NVIDIA branch the issue names has a row: a test can only fail for a rule the table holds."""
    have = {(r["workflow"] or r["id"].split("_")[0]) for r in ROWS}
    assert {"solo", "same_unit", "different_units", "same_gpu"} <= have
    assert {r["id"].split("_")[0] for r in ROWS} >= {"xid13", "xid31", "xid45", "xid63", "xid92"}
    assert sum(r["papermill"] == "yes" for r in ROWS) >= 3


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_fast_verdict(row, tmp_path, pinned):
    folder = _snapshot(tmp_path, row)
    v = fast_verdict("xid_ecc_triage", {"source": "snapshot", "snapshot_dir": str(folder), "node": NODE, "gpu": "0"})
    assert not v.errors and not v.usage_errors, (row["id"], v.errors, v.usage_errors)
    assert "kernel log" in v.inputs and "nvidia-smi -q" in v.inputs
    _check(row, v.findings[0].to_dict())


PAPERMILL = [r for r in ROWS if r["papermill"] == "yes"]


@pytest.mark.notebook
@pytest.mark.parametrize("row", PAPERMILL, ids=[r["id"] for r in PAPERMILL])
def test_gpuops_run(row, tmp_path, monkeypatch, capsys):
    """``gpuops run`` as on-call types it; the verdict is read back from the run's findings.json."""
    (tmp_path / "snap").mkdir()
    folder = _snapshot(tmp_path / "snap", row)
    unset = [k for k in os.environ if k.startswith("GPUOPS_") or k == "KUBECONFIG"]
    cmd = ["run", "xid_ecc_triage", "--snapshot", str(folder)]
    cmd += ["-p", "node", NODE, "-p", "gpu", row["gpu"], "-o", str(tmp_path / "out"), "-q", "--fail-on", "never"]
    code, out, err = gpuops(
        monkeypatch, capsys, cmd, env={"GPUOPS_END": END.isoformat(), "PYTHONPATH": str(ROOT)}, unset=unset
    )
    assert code == 0, (code, out[-2000:], err[-2000:])
    (doc_path,) = (tmp_path / "out").glob("*/findings.json")
    doc = json.loads(doc_path.read_text())
    assert doc["worst"] == row["expected"] and not doc.get("errors"), (doc["worst"], doc.get("errors"))
    _check(row, doc["findings"][0])
