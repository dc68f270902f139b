"""Kernel-log lines that announce a dead GPU must never be dropped.

* The driver prints "fallen off the bus" with or without an ``Xid 79`` line: the open kernel module's
  ``RmInitAdapter`` prints ``NVRM: The NVIDIA GPU dddd:bb:dd.f`` / ``NVRM: (PCI ID: ...) installed in this system
  has`` / ``NVRM: fallen off the bus and is not responding to commands.`` (NVIDIA/open-gpu-kernel-modules
  src/nvidia/arch/nvalloc/unix/src/osapi.c); NVIDIA's NVSentinel turns that message, without an Xid, into a
  fatal RESTART_BM event (NVIDIA/NVSentinel health-monitors/syslog-health-monitor/pkg/gpufallen/types.go and
  gpufallen_handler.go @ 1275b0c3).
* An Xid line cut after its code (journald line limits, a ring buffer that wrapped) still names the code.
* ``dmesg --time-format iso`` stamps (real capture: gpulib/data/captures/h200_dmesg_iso_nvrm.txt).
* MIG: ``NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...`` keeps the PCI id and the GPU instance.
"""

from pathlib import Path

import pandas as pd

from gpulib.xid.kernel_log import parse_kernel_log

CAPTURES = Path(__file__).resolve().parents[2] / "gpulib" / "data" / "captures"


def test_fallen_off_the_bus_without_xid_line_is_xid_79():
    log = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.308551] nvidia: probe of 0000:b3:00.0 failed with error -1\n"
    )
    df = parse_kernel_log(log)
    assert df["xid"].tolist() == [79]
    assert df["pci_bus_id"].tolist() == ["0000:b3:00.0"]
    assert df["uptime_s"].tolist() == [1843.308145]
    assert "fallen off the bus" in df["message"].iloc[0]


def test_fallen_off_the_bus_one_line_form_without_xid():
    df = parse_kernel_log("[Mon Sep 14 04:48:45 2026] NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.\n")
    assert df["xid"].tolist() == [79] and df["pci_bus_id"].tolist() == ["0000:5d:00.0"]
    assert df["timestamp"].iloc[0] == pd.Timestamp("2026-09-14 04:48:45", tz="UTC")


def test_fallen_off_the_bus_after_its_xid_79_line_is_one_event():
    log = (
        "[ 4254.197860] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        "[ 4254.197871] NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.\n"
        "[ 4254.197900] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
    )  # another GPU: its own event
    df = parse_kernel_log(log)
    assert sorted(zip(df["xid"], df["pci_bus_id"])) == [(79, "0000:3b:00.0"), (79, "0000:5d:00.0")]


def test_xid_line_cut_before_the_comma_is_kept():
    df = parse_kernel_log("[ 4254.197872] NVRM: Xid (PCI:0000:5d:00): 79\n[ 9.1] NVRM: Xid (PCI:0000:3b:00): 48")
    assert df["xid"].tolist() == [79, 48]
    assert df["pci_bus_id"].tolist() == ["0000:5d:00.0", "0000:3b:00.0"]
    assert all("cut" in m for m in df["message"])


def test_dmesg_time_format_iso():
    line = "2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    df = parse_kernel_log(line)
    assert df["xid"].tolist() == [79]
    assert df["timestamp"].iloc[0] == pd.Timestamp("2024-11-15 12:02:03.470068", tz="UTC")
    assert pd.isna(df["host"].iloc[0]) and df["pci_bus_id"].iloc[0] == "0000:01:00.0"


def test_real_h200_dmesg_iso_capture_prefixes():
    text = (CAPTURES / "h200_dmesg_iso_nvrm.txt").read_text()
    assert len(parse_kernel_log(text)) == 0  # a healthy boot: no XID
    # the capture's own NVRM line, with an Xid body in place of its message, keeps the capture's stamp
    real = next(ln for ln in text.splitlines() if "NVRM: gpuClearFbhubPoisonIntr" in ln)
    stamp = real.split(" ", 1)[0]
    df = parse_kernel_log(f"{stamp} NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=python3, Graphics Exception\n")
    assert df["xid"].tolist() == [13]
    assert df["timestamp"].iloc[0] == pd.Timestamp(stamp.replace(",", "."))


def test_mig_xid_keeps_pci_id_and_gpu_instance():
    df = parse_kernel_log(
        "[ 77.1] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=812, name=python3, Contained: SM (0x1). "
        "RST: No, D-RST: No\n"
    )
    assert df["xid"].tolist() == [94]
    assert df["pci_bus_id"].tolist() == ["0000:01:00.0"]
    assert df["gpu_i_id"].tolist() == ["5"]
    assert df["pid"].tolist() == [812]
