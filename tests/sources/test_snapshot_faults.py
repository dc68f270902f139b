"""Malformed snapshot folders end in a SnapshotError naming the file (never a crash)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpulib.core.errors import GpulibError, SnapshotError
from gpulib.sources.snapshot import SnapshotSource

FIX = Path(__file__).parents[1] / "fixtures"
SCRAPE = FIX / "dcgm" / "scrape_old_hostname_t4.txt"  # a plain scrape: no timestamps


def _folder(tmp_path, *, nodes=True, pods=True, scrape=True):
    d = tmp_path / "snap"
    d.mkdir()
    if nodes:
        shutil.copy(FIX / "k8s" / "nodes.json", d / "nodes.json")
    if pods:
        shutil.copy(FIX / "k8s" / "pods.json", d / "pods.json")
    if scrape:
        shutil.copy(SCRAPE, d / "metrics.txt")
    return d


def _break(d: Path, case: str) -> str:
    """Break the folder one way; returns the file name the error must name."""
    if case == "nodes_invalid_utf8":
        (d / "nodes.json").write_bytes(b'{"items": [{"metadata": {"name": "\xff\xfe"}}]}')
        return "nodes.json"
    if case == "pods_invalid_utf8":
        (d / "pods.json").write_bytes(b'{"items": [\xc3\x28]}')
        return "pods.json"
    if case == "nodes_metadata_string":
        (d / "nodes.json").write_text('{"kind": "NodeList", "items": [{"metadata": "n1", "status": {}}]}')
        return "nodes.json"
    if case == "pods_metadata_string":
        (d / "pods.json").write_text('{"kind": "PodList", "items": [{"metadata": "p", "spec": "x"}]}')
        return "pods.json"
    if case == "nodes_deep":
        (d / "nodes.json").write_text("[" * 100000 + "]" * 100000)
        return "nodes.json"
    if case == "nodes_is_dir":
        (d / "nodes.json").unlink()
        (d / "nodes.json").mkdir()
        return "nodes.json"
    if case == "pods_symlink_loop":
        (d / "pods.json").unlink()
        os.symlink(d / "pods.json", d / "pods.json")
        return "pods.json"
    if case == "nodes_list_not_object":
        (d / "nodes.json").write_text("[1, 2]")
        return "nodes.json"
    if case == "pods_missing":
        (d / "pods.json").unlink()
        return "pods.json"
    raise AssertionError(case)


KUBE_CASES = [
    "nodes_invalid_utf8",
    "pods_invalid_utf8",
    "nodes_metadata_string",
    "pods_metadata_string",
    "nodes_deep",
    "nodes_is_dir",
    "pods_symlink_loop",
    "nodes_list_not_object",
    "pods_missing",
]


@pytest.mark.parametrize("case", KUBE_CASES)
def test_malformed_kubernetes_files_name_the_file(tmp_path, case):
    d = _folder(tmp_path)
    name = _break(d, case)
    src = SnapshotSource(d)
    with pytest.raises(SnapshotError) as e:
        (src.pods if name == "pods.json" else src.nodes)()
    assert name in str(e.value) and e.value.hint


@pytest.mark.parametrize("case", ["scrape_is_dir", "scrape_symlink_loop", "scrape_invalid_utf8", "scrape_binary"])
def test_malformed_scrapes_are_named_or_parsed(tmp_path, case):
    d = _folder(tmp_path, scrape=False)
    if case == "scrape_is_dir":
        (d / "metrics-a.txt").mkdir()
    elif case == "scrape_symlink_loop":
        os.symlink(d / "metrics-b.txt", d / "metrics-b.txt")
    elif case == "scrape_invalid_utf8":
        (d / "metrics.txt").write_bytes(SCRAPE.read_bytes() + b'\nDCGM_FI_DEV_GPU_TEMP{gpu="\xff"} 3\n')
    else:
        (d / "metrics.txt").write_bytes(os.urandom(4096))
    try:
        src = SnapshotSource(d)
    except SnapshotError as exc:
        assert "metrics" in str(exc)
        return
    assert case in ("scrape_invalid_utf8", "scrape_binary")
    src.preflight("1h")


def test_plain_scrape_without_timestamps_has_datetime_samples(tmp_path):
    import gpulib.fleet as fleet

    d = _folder(tmp_path)
    src = SnapshotSource(d)
    df = src.series("DCGM_FI_DEV_GPU_UTIL", "6h")
    assert len(df) and str(df["timestamp"].dt.tz) == "UTC"
    act = fleet.activity(src, "6h", "DCGM_FI_DEV_GPU_UTIL")
    assert len(act)
    fleet.stale_telemetry(act, src.end)


def test_scheduling_checks_without_pods_are_a_gpulib_error(tmp_path):
    from gpulib.fleet.scheduling import check_scheduling

    src = SnapshotSource(_folder(tmp_path))
    with pytest.raises(GpulibError):
        check_scheduling(src.nodes(), None)
