"""``snapshot``: an incident folder of kubectl JSON, a dcgm-exporter scrape and dmesg."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

import gpulib
from gpulib.core.errors import EmptyResult, SnapshotError, UnknownNode
from gpulib.demo.simulator import FleetSimulator

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
    assert len(src.nodes()) == 8 and "jupyter-alice-0" in set(src.pods()["pod"])  # 8: with the DRA node h100-dra-0
    fb = src.summary("DCGM_FI_DEV_FB_USED", "1h", "max", node="a100-80-0").set_index("gpu")
    demo = (
        gpulib.connect("demo", end=END).summary("DCGM_FI_DEV_FB_USED", "1m", "last", node="a100-80-0").set_index("gpu")
    )
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


# ------------------------------------------------------------------ nvidia-smi dmon on a node without dcgm-exporter
def _dmon_snapshot(tmp_path, capture="h200_smi_dmon_pucvmet.txt", name="dmon-gpu-node-1.txt"):
    """A folder with only the real H200 ``nvidia-smi dmon -s pucvmet -c 5`` capture and the node's
    ``nvidia-smi -q`` (gpulib/data/captures/README.md), as copied from a node that runs no dcgm-exporter."""
    from gpulib.core.knowledge import data_path

    d = tmp_path / "snap"
    d.mkdir()
    (d / name).write_text(data_path(f"captures/{capture}").read_text())
    (d / "nvidia-smi-q-gpu-node-1.txt").write_text(data_path("captures/h200_580.159.04_smi_q.txt").read_text())
    for f in d.iterdir():
        os.utime(f, (END.timestamp(), END.timestamp()))
    return d


def test_dmon_file_serves_temperature_and_power_where_no_scrape_exists(tmp_path):
    src = gpulib.connect("snapshot", path=_dmon_snapshot(tmp_path))
    assert src.known_nodes() == ["gpu-node-1"] and src.end == END  # the dmon file's time, as for a scrape
    temp = src.series("DCGM_FI_DEV_GPU_TEMP", "1h", node="gpu-node-1")
    # 5 samples (dmon -c 5, default 1 s interval), the last at the file's time; gtemp 34 C in every line
    assert temp["value"].tolist() == [34.0] * 5 and temp["gpu"].unique().tolist() == ["0"]
    assert temp["timestamp"].max() == END and (temp["timestamp"].max() - temp["timestamp"].min()).total_seconds() == 4
    assert temp["uuid"].unique().tolist() == [
        "GPU-be06db1e-e628-a19f-dc00-711a9165e8fa"
    ]  # from the node's nvidia-smi -q
    power = src.summary("DCGM_FI_DEV_POWER_USAGE", "1h", "max", node="gpu-node-1")
    assert power["value"].tolist() == [81.0]  # pwr column: 81, 78, 78, 78, 78 W
    with pytest.raises(EmptyResult, match="its dmon file for gpu-node-1 has no column for DCGM_FI_DEV_XID_ERRORS"):
        src.series("DCGM_FI_DEV_XID_ERRORS", "1h", node="gpu-node-1")  # dmon has no XID column


def test_xid_triage_reads_the_thermal_panel_from_dmon(tmp_path):
    import gpulib.xid.steps as xs

    d = _dmon_snapshot(tmp_path)
    (d / "pods.json").write_text(json.dumps({"kind": "PodList", "items": []}))
    src = gpulib.connect("snapshot", path=d)
    inp = xs.collect(src, "gpu-node-1", "0", "6h")
    assert "DCGM_FI_DEV_GPU_TEMP" not in inp.missing and "DCGM_FI_DEV_POWER_USAGE" not in inp.missing
    assert inp.summaries["DCGM_FI_DEV_GPU_TEMP"]["value"].tolist() == [34.0]
    assert "DCGM_FI_DEV_XID_ERRORS" in inp.missing  # what dmon does not carry stays missing


def test_a_dmon_capture_with_date_and_time_keeps_its_own_timestamps(tmp_path):
    from gpulib.core.knowledge import data_path

    lines = data_path("captures/h200_smi_dmon_default.txt").read_text().splitlines()
    # the same capture as `dmon -o DT` prints it: Date and Time columns first (nvidia-smi dmon -h, -o D/T)
    head = ["#Date       Time        " + lines[0][1:], "#YYYYMMDD   HH:MM:SS    " + lines[1][1:]]
    body = [f" 20261129   11:59:{50 + i:02d}    {ln.strip()}" for i, ln in enumerate(lines[2:]) if ln.strip()]
    d = _dmon_snapshot(tmp_path)
    (d / "dmon-gpu-node-1.txt").write_text("\n".join(head + body) + "\n")
    src = gpulib.connect("snapshot", path=d, end=END)
    ts = src.series("DCGM_FI_DEV_GPU_TEMP", "1h", node="gpu-node-1")["timestamp"]
    assert ts.min() == datetime(2026, 11, 29, 11, 59, 50, tzinfo=timezone.utc) and len(ts) == len(body)
