"""The demo's XID 79 GPU (dgx-h100-1 GPU 5) under every dcgm-exporter generation's names: never a false all-clear.

The snapshot has no kernel log, so the XID can only come from dcgm-exporter's XID gauge, whose name changed
(DCGM_FI_DEV_XID_ERRORS -> DCGM_FI_DEV_XID_ERROR, gpulib/data/sources/signals.csv).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

import gpulib
import gpulib.xid.steps as xs
from gpulib.core.findings import Severity
from gpulib.demo.simulator import FleetSimulator

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
NODE, GPU = "dgx-h100-1", "5"


def _snapshot(d, exporters: dict[str, str]):
    """A snapshot folder: kubectl JSON and one scrape per node, each node's exporter of the given generation."""
    base = FleetSimulator(end=END)
    (d / "nodes.json").write_text(json.dumps(base.nodes_json()))
    (d / "pods.json").write_text(json.dumps(base.pods_json()))
    for node, gen in exporters.items():
        (d / f"metrics-{node}.txt").write_text(FleetSimulator(end=END, exporter=gen).scrape_text(node=node))
    for f in d.iterdir():
        os.utime(f, (END.timestamp(), END.timestamp()))
    return d


def _verdict(src):
    inp = xs.collect(src, NODE, GPU, "6h")
    return inp, xs.findings(inp)


@pytest.mark.parametrize(
    "exporters",
    [
        {NODE: "4.8"},
        {NODE: "4.10"},
        {NODE: "4.9"},
        {NODE: "4.10", "a100-80-0": "4.8"},  # a mixed fleet
        {NODE: "4.8", "a100-80-0": "4.10"},
    ],
    ids=["4.8", "4.10", "4.9", "mixed-new-here", "mixed-old-here"],
)
def test_the_gpu_that_fell_off_the_bus_is_critical_xid_79_under_every_generation(tmp_path, exporters):
    src = gpulib.connect("snapshot", path=_snapshot(tmp_path, exporters))
    inp, fs = _verdict(src)
    assert fs and fs[0].severity == Severity.CRITICAL, [f.title for f in fs]
    assert "XID 79" in fs[0].title and fs[0].data.get("bucket") == "RESTART_BM"
    assert "DCGM_FI_DEV_XID_ERRORS" not in inp.missing


def test_temperature_reads_in_canonical_units_from_a_4_10_scrape(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = gpulib.connect("snapshot", path=_snapshot(tmp_path / "old", {NODE: "4.8"}))
    new = gpulib.connect("snapshot", path=_snapshot(tmp_path / "new", {NODE: "4.10"}))
    for field in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE"):
        a = old.summary(field, "1h", "last", node=NODE).set_index("gpu")["value"]
        b = new.summary(field, "1h", "last", node=NODE).set_index("gpu")["value"]
        assert b.round(6).equals(a.round(6)), field
