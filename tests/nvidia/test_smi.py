"""nvidia-smi parsers on published layouts. Expected numbers read off the fixture files by hand."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib.nvidia.smi as smi

FIX = Path(__file__).parents[1] / "fixtures" / "smi"


def q(name):
    return smi.parse_query((FIX / name).read_text())


def test_h200_full_report():
    df = q("h200_q.txt")
    assert len(df) == 1
    r = df.iloc[0]
    assert r["name"] == "NVIDIA H200" and r["uuid"] == "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732"
    assert r["pci_bus_id"] == "0000:03:00.0" and r["index"] == 0
    assert (r["driver_version"], r["cuda_version"]) == ("550.90.12", "12.4")
    assert [r[c] for c in ("ecc_sbe_volatile", "ecc_dbe_volatile", "ecc_sbe_aggregate", "ecc_dbe_aggregate")] == [
        0,
        0,
        0,
        0,
    ]
    assert np.isnan(r["retired_pages_sbe"]) and np.isnan(r["retired_pages_pending"])  # N/A on Hopper
    assert (r["remapped_rows_pending"], r["remapped_rows_failure"], r["remap_banks_max"]) == (0.0, 0.0, 3072.0)
    assert (r["temperature_gpu_c"], r["temperature_memory_c"], r["temperature_tlimit_margin_c"]) == (28, 25, 59)
    # H200 prints T.Limit margins (-2 / -8 C): slowdown = T.Limit (28 + 59) + 2, shutdown = T.Limit + 8
    assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"]) == (89, 95)
    assert r["temperature_thresholds_from"] == "T.Limit margins"
    assert (r["power_draw_w"], r["power_limit_w"], r["power_max_limit_w"]) == (74.58, 700.0, 700.0)
    assert r["clock_event_reasons"] == ["GPU_IDLE"] and r["clock_event_mask"] == 1
    assert (r["mig_mode_current"], r["ecc_mode_current"]) == ("Disabled", "Enabled")
    assert (r["fb_total_mib"], r["fb_used_mib"]) == (143771, 1)
    assert (r["pcie_gen_current"], r["pcie_width_current"]) == (5, 16)
    assert not r["truncated"]


def test_two_gpus_incident_values():
    df = q("h100x2_incident_q.txt")
    assert df["pci_bus_id"].tolist() == ["0000:18:00.0", "0000:2a:00.0"]
    assert df["index"].tolist() == [0.0, 1.0]
    bad = df.iloc[1]
    # volatile: SRAM corr 1 + DRAM corr 12; uncorrectable: parity 0 + SEC-DED 0 + DRAM 2
    assert (bad["ecc_sbe_volatile"], bad["ecc_dbe_volatile"]) == (13, 2)
    # aggregate: 1 + 177 correctable; 1 + 0 + 3 uncorrectable
    assert (bad["ecc_sbe_aggregate"], bad["ecc_dbe_aggregate"]) == (178, 4)
    assert (bad["remapped_rows_uncorrectable"], bad["remapped_rows_pending"], bad["remapped_rows_failure"]) == (
        1,
        1.0,
        0.0,
    )
    assert bad["clock_event_reasons"] == ["HW_SLOWDOWN", "SW_THERMAL", "HW_THERMAL"]
    assert bad["clock_event_mask"] == 0x08 | 0x20 | 0x40
    assert (bad["mig_mode_current"], bad["temperature_gpu_c"], bad["power_draw_w"]) == ("Enabled", 88, 689.40)
    assert (bad["reset_required"], bad["recovery_action"]) == (1.0, "Drain and Reset")
    assert df.iloc[0]["pcie_replays"] == 7


def test_truncated_capture_keeps_complete_fields_only():
    df = q("h100x2_truncated_q.txt")
    assert len(df) == 2 and df["truncated"].tolist() == [False, True]
    last = df.iloc[1]
    assert (last["ecc_sbe_volatile"], last["ecc_dbe_volatile"]) == (13, 2)  # volatile block is complete
    assert np.isnan(last["ecc_sbe_aggregate"]) and np.isnan(last["ecc_dbe_aggregate"])  # cut inside aggregate
    assert np.isnan(last["temperature_gpu_c"]) and np.isnan(last["remapped_rows_pending"])
    assert last["utilization_gpu_pct"] == 97


def test_old_layout_v100_single_gpu_of_eight():
    r = q("v100_q_i1.txt").iloc[0]
    assert np.isnan(r["index"]) and r["minor_number"] == 1  # -i 1: 1 block of 8 attached GPUs
    assert (r["ecc_sbe_aggregate"], r["ecc_dbe_aggregate"], r["ecc_sbe_volatile"]) == (3, 0, 0)
    assert (r["retired_pages_sbe"], r["retired_pages_dbe"], r["retired_pages_pending"]) == (1, 0, 0.0)
    assert np.isnan(r["remapped_rows_pending"])  # "Remapped Rows : N/A"
    assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"], r["temperature_max_operating_c"]) == (87, 90, 83)
    assert (r["power_draw_w"], r["power_limit_w"]) == (25.13, 250.0)
    assert r["clock_event_reasons"] == ["GPU_IDLE"]  # "Clocks Throttle Reasons" section
    assert r["mig_mode_current"] is None


def test_d_subset_two_gpus():
    df = q("a100x2_d_ecc_remap.txt")
    assert df["pci_bus_id"].tolist() == ["0000:10:1c.0", "0000:10:1d.0"]
    assert df["ecc_sbe_volatile"].tolist() == [177, 0] and df["ecc_dbe_aggregate"].tolist() == [0, 9]
    assert df["remapped_rows_pending"].tolist() == [1.0, 0.0]
    assert df["remapped_rows_failure"].tolist() == [0.0, 1.0]
    assert df["temperature_gpu_c"].isna().all() and df["name"].isna().all()
    assert df["clock_event_reasons"].isna().all()


@pytest.mark.parametrize("text", ["", "garbage\n", "GPU 00000000:03:00.0\n", "==============NVSMI LOG==============\n"])
def test_degenerate_inputs(text):
    df = smi.parse_query(text)
    assert list(df.columns) == smi.QUERY_COLUMNS
    assert len(df) == (1 if text.startswith("GPU ") else 0)


def test_query_accepts_bytes_and_none():
    assert len(smi.parse_query((FIX / "h200_q.txt").read_bytes())) == 1
    assert len(smi.parse_query(None)) == 0


def test_decode_clock_events():
    assert smi.decode_clock_events(0x44) == ["SW_POWER_CAP", "HW_THERMAL"]
    assert smi.decode_clock_events("0x0000000000000001") == ["GPU_IDLE"]
    assert smi.decode_clock_events("junk") == []


def test_table_h200_no_processes():
    t = smi.parse_table((FIX / "h200_table.txt").read_text())
    assert (t.driver_version, t.cuda_version) == ("550.90.12", "12.4")
    g = t.gpus.iloc[0]
    assert (g["index"], g["name"], g["pci_bus_id"]) == (0, "NVIDIA H200", "0000:03:00.0")
    assert (g["temperature_gpu_c"], g["power_draw_w"], g["power_limit_w"]) == (28, 74, 700)
    assert (g["memory_used_mib"], g["memory_total_mib"], g["mig_mode"]) == (1, 143771, "Disabled")
    assert np.isnan(g["fan_pct"]) and len(t.processes) == 0


def test_table_with_processes_565():
    t = smi.parse_table((FIX / "h100x2_table_procs.txt").read_text())
    assert t.gpus["ecc_uncorrected_volatile"].tolist() == [0, 2]
    assert t.processes["pid"].tolist() == [48213, 51877]
    assert t.processes["gpu"].tolist() == [0, 1]
    assert t.processes["memory_mib"].tolist() == [70304, 73114]
    assert t.processes["process"].iloc[1].startswith("/usr/bin/python3 -m vllm")


def test_table_driver_450_and_390_layouts():
    t450 = smi.parse_table((FIX / "rtx_450_table.txt").read_text())
    assert len(t450.gpus) == 2 and len(t450.processes) == 6
    assert t450.processes["type"].tolist().count("G") == 5
    assert t450.gpus["fan_pct"].tolist() == [0, 33]
    t390 = smi.parse_table((FIX / "gtx_390_table.txt").read_text())
    assert t390.cuda_version is None and t390.driver_version == "390.25"
    assert t390.gpus["utilization_gpu_pct"].tolist() == [98, 100]
    assert t390.processes["memory_mib"].tolist() == [10781, 10765, 389]
    assert t390.gpus["mig_mode"].isna().all()


@settings(max_examples=80, deadline=None)
@given(st.text())
def test_parsers_never_raise(text):
    assert list(smi.parse_query(text).columns) == smi.QUERY_COLUMNS
    smi.parse_table(text)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=20000))
def test_any_cut_of_a_real_report_parses(cut):
    text = (FIX / "h100x2_incident_q.txt").read_text()[:cut]
    df = smi.parse_query(text)
    assert len(df) <= 2
