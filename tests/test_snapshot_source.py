"""``snapshot``: an incident folder of kubectl JSON, a dcgm-exporter scrape and dmesg."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

import gpulib
from gpulib.demo.simulator import FleetSimulator
from gpulib.core.errors import EmptyResult, SnapshotError, UnknownNode

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def snapdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("incident-1234")
    sim = FleetSimulator(end=END)
    (d / "nodes.json").write_text(json.dumps(sim.nodes_json()))
    (d / "pods.json").write_text(json.dumps(sim.pods_json()))
    (d / "metrics-a100-80-0.txt").write_text(sim.scrape_text(node="a100-80-0"))
    (d / "metrics-dgx-h100-1.txt").write_text(sim.scrape_text(node="dgx-h100-1"))
    (d / "dmesg-a100-80-0.txt").write_text(sim.kernel_log("a100-80-0"))
    for f in d.iterdir():
        os.utime(f, (END.timestamp(), END.timestamp()))
    return d


def test_snapshot_answers_like_the_demo(snapdir):
    src = gpulib.connect("snapshot", path=snapdir)
    assert src.end == END  # taken from the scrape files' time
    assert len(src.nodes()) == 7 and "jupyter-alice-0" in set(src.pods()["pod"])
    fb = src.summary("DCGM_FI_DEV_FB_USED", "1h", "max", node="a100-80-0").set_index("gpu")
    demo = gpulib.connect("demo", end=END).summary("DCGM_FI_DEV_FB_USED", "1m", "last", node="a100-80-0").set_index("gpu")
    assert fb.loc["4", "value"] == demo.loc["4", "value"] and fb.loc["4", "pod"] == "jupyter-alice-0"
    xid = src.summary("DCGM_FI_DEV_XID_ERRORS", "1h", "last").set_index(["node", "gpu"])["value"]
    assert xid.loc[("a100-80-0", "1")] == 64 and xid.loc[("dgx-h100-1", "5")] == 79
    assert "Xid" in src.kernel_log("a100-80-0") and src.kernel_log("dgx-h100-1") is None
    assert src.summary("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1h", "increase")["value"].isna().all()


def test_snapshot_errors_name_the_folder_and_file(tmp_path, snapdir):
    with pytest.raises(SnapshotError) as e:
        gpulib.connect("snapshot", path=tmp_path / "nope")
    assert "nope" in str(e.value)
    with pytest.raises(SnapshotError):
        gpulib.connect("snapshot")
    (tmp_path / "metrics.txt").write_text("")
    empty = gpulib.connect("snapshot", path=tmp_path)
    with pytest.raises(SnapshotError) as e2:
        empty.nodes()
    assert "nodes.json" in str(e2.value)
    with pytest.raises(EmptyResult):
        empty.series("DCGM_FI_DEV_GPU_TEMP", "1h")
    (tmp_path / "nodes.json").write_text('{"items": [')  # truncated kubectl output
    with pytest.raises(Exception) as e3:
        gpulib.connect("snapshot", path=tmp_path).nodes()
    assert "nodes.json" in str(e3.value)
    src = gpulib.connect("snapshot", path=snapdir)
    with pytest.raises(UnknownNode):
        src.kernel_log("gpu-node-404")
