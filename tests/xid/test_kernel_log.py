"""XID catalog and kernel-log parser. Expected values are read off the fixture lines / NVIDIA's catalog by hand."""

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib.xid as xid
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.knowledge import load_table

FIX = Path(__file__).parents[1] / "fixtures" / "xid"
#: dmesg.txt of this folder ships once, as the troubleshooting lesson's input (origins in tests/fixtures/xid/README.md)
LEARN = Path(__file__).parents[2] / "gpulib" / "data" / "learn"
FACTS_13 = [
    8,
    13,
    31,
    32,
    38,
    43,
    44,
    45,
    48,
    56,
    57,
    58,
    61,
    62,
    63,
    64,
    68,
    69,
    74,
    79,
    80,
    81,
    92,
    94,
    95,
    109,
    119,
    120,
    121,
    140,
    143,
    154,
    155,
]


def test_catalog_covers_facts_codes_and_neighbours():
    codes = set(load_table("xid_catalog")["code"])
    assert set(range(1, 173)) <= codes
    for c in FACTS_13:
        assert {c - 1, c, c + 1} & codes == {c - 1, c, c + 1}


def test_catalog_rows_have_source_and_valid_category():
    cat = load_table("xid_catalog")
    assert cat["source"].str.len().min() > 20
    assert set(cat["category"]) <= set(xid.CATEGORIES)
    assert set(cat["fatal"]) == {"yes", "no"}


@pytest.mark.parametrize(
    "code,mnemonic,imm,inv,fatal,category",
    [
        (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "CONTACT_SUPPORT", True, "hardware-PCIe"),
        (
            13,
            "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
            "RESTART_APP",
            "WORKFLOW_XID_13",
            False,
            "application",
        ),
        (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", "WORKFLOW_XID_48", True, "memory"),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", "IGNORE", False, "memory"),
        (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", "CONTACT_SUPPORT", True, "memory"),
        (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", "IGNORE (sympathetic)", False, "memory"),
        (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", "IGNORE (sympathetic)", True, "memory"),
        (74, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT", True, "NVLink"),
        (119, "GSP_RPC_TIMEOUT", "RESET_GPU", "INVESTIGATE_SW", True, "driver"),
        (
            154,
            "GPU_RECOVERY_ACTION_CHANGED",
            "XID_154",
            "N/A (informational, follow the Xid that caused it)",
            False,
            "meta",
        ),
    ],
)
def test_lookup_matches_nvidia_catalog(code, mnemonic, imm, inv, fatal, category):
    r = xid.lookup(code)
    assert (r.code, r.mnemonic, r.immediate_action, r.investigatory_action, r.fatal, r.category) == (
        code,
        mnemonic,
        imm,
        inv,
        fatal,
        category,
    )
    assert r.known


def test_dcgm_severity_from_health_watch():
    assert xid.lookup(79).dcgm_severity == "FAIL"
    assert xid.lookup(94).dcgm_severity == "WARN"
    assert xid.lookup(64).dcgm_subsystem == "memory"
    assert xid.lookup(13).dcgm_severity == ""


def test_unused_codes_flagged_on_datacenter_parts():
    assert xid.lookup(57).unused_on_datacenter and "frame-buffer" in xid.lookup(57).description
    assert not xid.lookup(79).unused_on_datacenter


@pytest.mark.parametrize("bad", [999, 0, -3, "abc", None, 1.5e12])
def test_unknown_code_gives_explicit_record(bad):
    r = xid.lookup(bad)
    assert r.known is False and r.mnemonic == "UNKNOWN" and r.category == "unknown"
    assert r.immediate_action == "CONTACT_SUPPORT"


def test_lookup_accepts_string_codes():
    assert xid.lookup("79").mnemonic == xid.lookup(79).mnemonic


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("0000:3b:00", "0000:3b:00.0"),
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("PCI:0004:01:00", "0004:01:00.0"),
        ("0000:10:1c", "0000:10:1c.0"),
        ("3b:00.0", "0000:3b:00.0"),
        ("garbage", None),
        (None, None),
    ],
)
def test_normalise_pci_bus_id(raw, expected):
    assert normalise_pci_bus_id(raw) == expected


def test_dmesg_plain_uptime_and_unknown_pid():
    df = xid.parse_kernel_log(LEARN / "dmesg_xid.txt")
    assert list(df["xid"]) == [79, 79, 31, 109]
    assert df["timestamp"].isna().all()
    assert df["uptime_s"].tolist() == [4254.19786, 155044.07859, 130.45625, 1720.33696]
    first = df.iloc[0]
    assert first["pci_bus_id"] == "0000:5d:00.0" and pd.isna(first["pid"]) and pd.isna(first["process"])
    assert first["message"] == "GPU has fallen off the bus."
    mmu = df.iloc[2]  # line with the [ T1946] thread tag
    assert (mmu["pid"], mmu["process"], mmu["pci_bus_id"]) == (1942, "llama-bench", "0000:2b:00.0")
    assert mmu["message"].startswith("channel 0x00000002, intr 00000000. MMU Fault")


def test_dmesg_T_timestamps_and_xid154_recovery_action():
    df = xid.parse_kernel_log((FIX / "dmesg_T.txt").read_text())
    assert list(df["xid"]) == [79, 154, 48, 63]
    assert df["timestamp"].iloc[0] == pd.Timestamp("2026-09-14 04:48:45", tz="UTC")
    assert df.loc[df["xid"] == 154, "recovery_action"].iloc[0] == 2
    assert df.loc[df["xid"] == 48, "message"].iloc[0].startswith("An uncorrectable double bit error (DBE)")
    assert df.loc[df["xid"] == 63, "pid"].iloc[0] == 1896


def test_journalctl_short_nvlink_detail_words_and_year():
    df = xid.parse_kernel_log(FIX / "journalctl_k.txt", year=2025)
    assert list(df["xid"]) == [149, 154, 74, 38]
    assert (df["host"] == "gpu-node-7").all()
    assert df["timestamp"].iloc[0] == pd.Timestamp("2025-09-19 10:30:06", tz="UTC")
    assert df["timestamp"].iloc[3] == pd.Timestamp("2025-09-09 08:01:02", tz="UTC")  # "Sep  9" double space
    nv5 = df.iloc[0]
    assert nv5["pci_bus_id"] == "0018:01:00.0" and nv5["link"] == 7
    assert nv5["detail_words"] == (0x02500011, 0, 0, 0)
    assert df.iloc[1]["recovery_action"] == 4
    assert df.iloc[2]["link"] == 1 and df.iloc[2]["detail_words"][0] == 0x10000
    assert df.iloc[3]["pid"] == 1659 and df.iloc[3]["message"] == ""


def test_syslog_iso_with_offset_and_no_pci_prefix():
    df = xid.parse_kernel_log(FIX / "syslog_iso.txt")
    assert list(df["xid"]) == [13, 13, 43, 119, 14]
    assert df["uptime_s"].iloc[0] == pytest.approx(5512.301122)
    assert df["timestamp"].iloc[3] == pd.Timestamp("2025-03-02 14:10:00", tz="UTC")  # 15:10 +0100
    assert df["pci_bus_id"].iloc[3] == "0004:01:00.0"
    assert df["pci_bus_id"].iloc[4] == "0000:03:00.0"  # "Xid (0000:03:00)" without PCI:
    assert df["process"].iloc[0] == "python3"


def test_kmsg_records():
    df = xid.parse_kernel_log(FIX / "kmsg.txt")
    assert list(df["xid"]) == [94, 95]
    assert df["uptime_s"].tolist() == [5512.301122, 5512.401122]
    assert df["message"].iloc[1].startswith("Uncontained: LTC TAG")


def test_truncated_lines_are_skipped_not_fatal():
    df = xid.parse_kernel_log(FIX / "truncated.txt")
    # line 2 is cut inside the PCI id: dropped (no code); line 3 is cut after its code (no comma): kept, and
    # its message says the line was cut; the last line (no newline) has its code and pid complete and is kept
    assert list(df["xid"]) == [79, 7, 31]
    assert "line cut after the XID code" in df["message"].iloc[1]


def test_non_xid_and_empty_inputs():
    assert len(xid.parse_kernel_log("")) == 0
    assert len(xid.parse_kernel_log(None)) == 0
    assert len(xid.parse_kernel_log("NVRM: Xid error: xyz, invalid data\nfoo\n")) == 0
    assert list(xid.parse_kernel_log("")) == xid.EVENT_COLUMNS


def test_xid_without_pci_parenthesis():
    df = xid.parse_kernel_log("NVRM: Xid 154, GPU recovery action changed to 0x2 (Node Reboot Required)\n")
    assert df["xid"].tolist() == [154] and df["recovery_action"].tolist() == [2] and pd.isna(df["pci_bus_id"].iloc[0])


def test_streaming_from_open_file_and_generator(tmp_path):
    p = tmp_path / "big.log"
    line = "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, x\n"
    with open(p, "w") as fh:
        for i in range(20000):
            fh.write("[ 0.1] unrelated kernel noise line\n" if i % 2 else line)
    with open(p) as fh:
        df = xid.parse_kernel_log(fh)
    assert len(df) == 10000
    assert sum(1 for _ in xid.iter_kernel_log(iter([line, "noise\n", line]))) == 2


def test_annotate_adds_catalog_columns():
    df = xid.annotate(xid.parse_kernel_log(FIX / "dmesg_T.txt"))
    assert df.loc[df["xid"] == 79, "immediate_action"].iloc[0] == "RESTART_BM"
    assert df.loc[df["xid"] == 63, "fatal"].iloc[0] == False  # noqa: E712


@settings(max_examples=120, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text):
    df = xid.parse_kernel_log(text)
    assert list(df.columns) == xid.EVENT_COLUMNS


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="NVRM: Xid(PCI0123456789abcdef:.,)pid=name<unknown>' \n[]T-", max_size=200))
def test_parser_never_raises_on_xid_like_text(text):
    df = xid.parse_kernel_log("NVRM: Xid (PCI:" + text)
    assert (df["xid"] >= 0).all()
