"""Rendered ``nvidia-smi -q`` of the demo fleet and the packaged 2xH200 NCCL captures.

Expected values are worked out from the scenario (gpulib/data/demo/demo_fleet.yaml) and the simulator's
documented model, not read back from the renderer: a100-80-0 GPU 1 has a DBE at -90 min (DBE volatile
0 -> 2, aggregate 3 -> 5, uncorrectable remapped rows 7 -> 9, remap failure from -89 min); GPU 3 has
rising SBE at 2,500/h over the last 12 h (30,000 at the end); PCI bus of GPU i is 0x18 + 0x10 * i.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import gpulib
from gpulib.core.errors import InvalidParameter, UnknownNode
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, DEMO_NVLINK_STATUS, DEMO_TOPOLOGY, demo_file, render_smi_query
from gpulib.demo.simulator import FleetSimulator
from gpulib.nccl.results import parse_nccl_tests_all
from gpulib.nvidia.smi import parse_query
from gpulib.nvidia.topology import parse_topology
from tests.helpers.pinned import DEMO_END

FIX = Path(__file__).parents[1] / "fixtures"
CAP = Path(__file__).parents[2] / "gpulib" / "data" / "captures"


@pytest.fixture(scope="module")
def sim():
    return FleetSimulator(end=DEMO_END)


def _by_bus(df, bus):
    return df.set_index("pci_bus_id").loc[bus]


def test_dbe_remap_failure_gpu(sim):
    df = parse_query(render_smi_query(sim, "a100-80-0"))
    assert len(df) == 8 and df["index"].tolist() == [float(i) for i in range(8)]
    g1 = _by_bus(df, "0000:28:00.0")
    assert g1["index"] == 1.0 and g1["name"] == "NVIDIA A100-SXM4-80GB"
    assert (g1["ecc_dbe_volatile"], g1["ecc_dbe_aggregate"]) == (2.0, 5.0)
    assert g1["remapped_rows_uncorrectable"] == 9.0
    assert g1["remapped_rows_failure"] == 1.0 and g1["remapped_rows_pending"] == 1.0
    assert g1["fb_used_mib"] == 0.0  # the job crashed on the DBE
    g3 = _by_bus(df, "0000:48:00.0")
    assert g3["ecc_sbe_volatile"] == 30000.0 and g3["ecc_dbe_volatile"] == 0.0
    assert g3["remapped_rows_correctable"] == 1.0 and g3["remapped_rows_failure"] == 0.0
    assert g1["power_limit_w"] == 400.0 and g1["temperature_slowdown_c"] == 89.0 and g1["pcie_gen_current"] == 4.0


def test_values_agree_with_the_demo_source():
    src = gpulib.connect("demo", end=DEMO_END)
    df = parse_query(src.smi_query("h200-infer-0"))
    temp = src.summary("DCGM_FI_DEV_GPU_TEMP", "10m", "last", node="h200-infer-0").set_index("gpu")
    uuids = temp["uuid"]
    for r in df.itertuples():
        g = str(int(r.index))
        assert r.uuid == uuids[g]
        assert r.temperature_gpu_c == temp.loc[g, "value"]
    hot = df[df["index"] == 2.0].iloc[0]
    assert hot["temperature_gpu_c"] >= 85  # thermal incident since -3h
    assert {"HW_SLOWDOWN", "HW_THERMAL", "SW_THERMAL"} <= set(hot["clock_event_reasons"])
    assert "GPU_IDLE" not in hot["clock_event_reasons"]


def test_gpu_off_the_bus_has_no_block(sim):
    text = render_smi_query(sim, "dgx-h100-1")
    assert text.splitlines()[0] == "Unable to determine the device handle for GPU0000:68:00.0: Unknown Error"
    df = parse_query(text)
    assert len(df) == 7 and "0000:68:00.0" not in set(df["pci_bus_id"])
    assert df["index"].isna().all()  # 8 attached, 7 reported: positions are not indices
    assert re.search(r"^Attached GPUs +: 8$", text, re.M)


def test_mig_and_no_hbm_nodes(sim):
    mig = parse_query(render_smi_query(sim, "a100-40-mig-0"))
    assert (mig["mig_mode_current"] == "Enabled").all() and mig["utilization_gpu_pct"].isna().all()
    l4 = parse_query(render_smi_query(sim, "l4-spot-0"))
    assert len(l4) == 4 and l4["ecc_dbe_volatile"].isna().all() and l4["remapped_rows_failure"].isna().all()


def test_layout_matches_the_real_capture(sim):
    """Every ``key : value`` line puts the colon at the real H200 capture's column."""

    def colon_columns(text):
        return {ln.index(" : ") + 1 for ln in text.splitlines() if " : " in ln and not ln.startswith("Unable")}

    real = colon_columns((CAP / "2xh200_580.159.04_smi_q.txt").read_text())
    assert real == {55}
    assert colon_columns(render_smi_query(sim, "a100-80-0")) == real


def test_unknown_node(sim):
    with pytest.raises(InvalidParameter, match="gpu-node-7"):
        render_smi_query(sim, "gpu-node-7")
    with pytest.raises(UnknownNode):
        gpulib.connect("demo", end=DEMO_END).smi_query("gpu-node-7")


def test_packaged_nccl_captures_are_verbatim():
    probe = demo_file(DEMO_NCCL_TESTS).read_text()
    assert demo_file(DEMO_NCCL_TESTS) == CAP / "2xh200_nccl_probe.txt"  # the one copy, not a packaged duplicate
    misc = (CAP / "2xh200_smi_misc.txt").read_text()
    topo_text = demo_file(DEMO_TOPOLOGY).read_text()
    nvl = demo_file(DEMO_NVLINK_STATUS).read_text()
    assert topo_text in misc and nvl in misc
    topo = parse_topology(topo_text)
    assert topo.gpus == ["GPU0", "GPU1"] and topo.link(0, 1) == "NV18" and topo.interconnect == "NVLink"
    speeds = [float(x) for x in re.findall(r"Link \d+: ([\d.]+) GB/s", nvl)]
    assert len(speeds) == 36 and set(speeds) == {26.562}
    colls = [r.collective for r in parse_nccl_tests_all(probe)]
    assert colls == ["all_reduce", "all_gather", "reduce_scatter"]
    assert math.isclose(parse_nccl_tests_all(probe)[0].busbw_at(4294967296), 346.80)
