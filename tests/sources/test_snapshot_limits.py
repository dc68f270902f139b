"""A snapshot folder is read within bounds: a symlink that leaves the folder, a FIFO or a device is refused with a
SnapshotError that has a hint (never followed, never a hang), a file larger than the settings' bound is refused
before it is read, and a run over such a folder is INCOMPLETE (never a hang or a crash)."""

from __future__ import annotations

import json
import os
import threading

import pytest

import gpulib
from gpulib.core.errors import SnapshotError, SnapshotFileRefused
from gpulib.core.knowledge import settings
from gpulib.run.verdict import fast_verdict

NODE, GPU = "dgx-h100-1", "5"


@pytest.fixture
def snap(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    demo = gpulib.connect("demo")
    d = tmp_path / "snap"
    d.mkdir()
    (d / "nodes.json").write_text(json.dumps(demo.nodes_json()))
    (d / "pods.json").write_text(json.dumps(demo.pods_json()))
    (d / f"nvidia-smi-q-{NODE}.txt").write_text(demo.smi_query(NODE))
    return d


def _refused(d, what: str):
    with pytest.raises(SnapshotFileRefused) as e:
        gpulib.connect("snapshot", path=str(d)).kernel_log(NODE)
    assert isinstance(e.value, SnapshotError) and e.value.hint
    assert what in str(e.value)
    return e.value


def test_a_symlink_leaving_the_folder_is_not_followed(snap, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("NVRM: Xid (PCI:0000:68:00): 79, from outside the folder\n")
    (snap / f"dmesg-{NODE}.txt").symlink_to(secret)
    err = _refused(snap, "outside")
    assert "from outside the folder" not in str(err)


def test_a_symlink_inside_the_folder_is_read(snap):
    (snap / "captures").mkdir()
    (snap / "captures" / "dmesg.txt").write_text("kernel: hello\n")
    (snap / f"dmesg-{NODE}.txt").symlink_to(snap / "captures" / "dmesg.txt")
    assert gpulib.connect("snapshot", path=str(snap)).kernel_log(NODE) == "kernel: hello\n"


def test_a_device_is_refused(snap):
    (snap / f"dmesg-{NODE}.txt").symlink_to("/dev/null")  # outside and a device: refused either way
    _refused(snap, "dmesg")


def test_a_fifo_is_refused_not_waited_on(snap):
    fifo = snap / f"dmesg-{NODE}.txt"
    os.mkfifo(fifo)
    box = {}

    def read():
        try:
            box["text"] = gpulib.connect("snapshot", path=str(snap)).kernel_log(NODE)
        except Exception as exc:
            box["exc"] = exc

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # blocked opening the FIFO: release it (a writer appears, then goes) and fail
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(10)
        pytest.fail("reading a FIFO in the snapshot hung")
    assert isinstance(box.get("exc"), SnapshotFileRefused), box
    assert "FIFO" in str(box["exc"]) or "not a regular file" in str(box["exc"])


def test_a_file_over_the_size_bound_is_refused_before_it_is_read(snap):
    bound = int(settings("snapshot_limits")["max_file_mb"]) * 1024 * 1024
    with open(snap / f"dmesg-{NODE}.txt", "wb") as fh:
        fh.truncate(bound + 1)  # sparse: no disk used
    _refused(snap, f"{bound // (1024 * 1024)} MB")


def test_a_run_over_a_fifo_is_incomplete_not_hung(snap):
    os.mkfifo(snap / f"dmesg-{NODE}.txt")
    box = {}
    t = threading.Thread(
        target=lambda: box.update(
            v=fast_verdict(
                "xid_ecc_triage", {"source": "snapshot", "snapshot_dir": str(snap), "node": NODE, "gpu": GPU}
            )
        ),
        daemon=True,
    )
    t.start()
    t.join(60)
    if t.is_alive():
        os.close(os.open(snap / f"dmesg-{NODE}.txt", os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        pytest.fail("a run over a FIFO hung")
    v = box["v"]
    assert v.errors and any("FIFO" in e or "not a regular file" in e for e in v.errors), v.errors
