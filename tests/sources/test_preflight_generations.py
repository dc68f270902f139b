"""The preflight says per node which dcgm-exporter generation's names it found, and names a missing field under
every name it has had (gpulib/data/sources/signals.csv)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import gpulib
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.base import capabilities_from

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def test_a_mixed_fleet_snapshot_says_which_generation_each_node_serves(tmp_path):
    base = FleetSimulator(end=END)
    (tmp_path / "nodes.json").write_text(json.dumps(base.nodes_json()))
    (tmp_path / "pods.json").write_text(json.dumps(base.pods_json()))
    for node, gen in (("dgx-h100-1", "4.10"), ("a100-80-0", "4.8")):
        (tmp_path / f"metrics-{node}.txt").write_text(FleetSimulator(end=END, exporter=gen).scrape_text(node=node))
        os.utime(tmp_path / f"metrics-{node}.txt", (END.timestamp(), END.timestamp()))
    caps = gpulib.connect("snapshot", path=tmp_path).preflight("1h")
    assert caps.generations == {"a100-80-0": "<=4.8", "dgx-h100-1": ">=4.9"}
    assert caps.has("DCGM_FI_DEV_XID_ERRORS") and caps.has("DCGM_FI_DEV_GPU_TEMP")  # canonical names
    gen = [f for f in caps.findings if f.title.startswith("dcgm-exporter field names per node")]
    assert gen and "dgx-h100-1: >=4.9" in gen[0].evidence and "a100-80-0: <=4.8" in gen[0].evidence


def test_a_node_lacking_a_field_under_every_name_is_named(tmp_path):
    base = FleetSimulator(end=END)
    (tmp_path / "nodes.json").write_text(json.dumps(base.nodes_json()))
    old = FleetSimulator(end=END, exporter="4.8").scrape_text(node="a100-80-0")
    new = FleetSimulator(end=END, exporter="4.10").scrape_text(node="dgx-h100-1")
    new = "\n".join(line for line in new.splitlines() if "DCGM_FI_DEV_XID_ERROR" not in line)  # XID off on it
    (tmp_path / "metrics-a100-80-0.txt").write_text(old)
    (tmp_path / "metrics-dgx-h100-1.txt").write_text(new + "\n")
    caps = gpulib.connect("snapshot", path=tmp_path).preflight("1h")
    (gen,) = [f for f in caps.findings if f.title.startswith("dcgm-exporter field names per node")]
    assert (
        "dgx-h100-1: >=4.9; absent under every name: DCGM_FI_DEV_XID_ERRORS (nor as DCGM_FI_DEV_XID_ERROR)"
        in gen.evidence
    )
    assert "a100-80-0: <=4.8" in gen.evidence


def test_a_field_absent_under_every_name_is_named_under_each():
    caps = capabilities_from(
        {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
        [{"hostname": "n1", "DCGM_FI_SYSTEM_DRIVER_VERSION": "580.1", "pod": "p"}],
    )
    assert caps.generations == {"n1": ">=4.9"}
    missing = next(f for f in caps.findings if "not exported" in f.title)
    assert any(e.startswith("DCGM_FI_DEV_XID_ERRORS (nor as DCGM_FI_DEV_XID_ERROR): ") for e in missing.evidence)
