"""gpulib.xid.kernel_log against the peers' own test cases where the two disagreed, each case named with the file
and commit it comes from, and the decision on an XID code no catalog knows.

Sources (open at these commits):
  GPUd:       leptonai/gpud: components/accelerator/nvidia/xid/kmsg_test.go @4a8de33a (TestMatch,
              TestMatchReturnsNilWhenXidDetailMissing) and kmsg.go (RegexNVRMFallenOffBusSingleLine, normalizePCIBDF)
  NVSentinel: NVIDIA/NVSentinel: health-monitors/syslog-health-monitor/pkg/gpufallen/gpufallen_handler_test.go
              @1275b0c3 (TestParseGPUFallenError) and pkg/xid/parser/csv_test.go @3e97fd00 (TestCSVParser_Parse)
"""

from __future__ import annotations

from gpulib.xid import lookup
from gpulib.xid.kernel_log import parse_kernel_log


def test_gpud_single_line_fallen_off_the_bus_without_a_pci_domain():
    """GPUd TestMatch "single-line fallen-off-bus fallback normalizes missing PCI domain": the line
    ``NVRM: GPU 18:00.0: GPU has fallen off the bus.`` is XID 79 of PCI:0000:18:00 (normalizePCIBDF adds 0000)."""
    df = parse_kernel_log("NVRM: GPU 18:00.0: GPU has fallen off the bus.")
    assert list(df["xid"]) == [79] and list(df["pci_bus_id"]) == ["0000:18:00.0"]


def test_gpud_single_line_with_a_domain_still_matches():
    """GPUd TestMatch "single-line fallen-off-bus fallback without explicit Xid" (the case that already agreed)."""
    df = parse_kernel_log("NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.")
    assert list(df["xid"]) == [79] and list(df["pci_bus_id"]) == ["0000:29:00.0"]


def test_nvsentinel_xid_line_inside_a_multi_line_fallen_message_is_that_xid():
    """NVSentinel TestParseGPUFallenError "GPU Fallen Error with Xid in middle - Should NOT match": the Xid line
    printed between the lines of the driver's fallen-off-the-bus message is the event (XID 79 of 0000:b3:00.0), not
    a second, inferred 79; and it is a whole line (the message continues on the next line), not one cut after its
    code."""
    text = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: Xid (PCI:0000:b3:00.0): 79\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
    )
    df = parse_kernel_log(text)
    assert list(df["xid"]) == [79] and list(df["pci_bus_id"]) == ["0000:b3:00.0"]
    row = df.iloc[0]
    assert "NVRM: Xid (PCI:0000:b3:00.0): 79" in row["raw"]
    assert "cut" not in row["message"] and "fallen off the bus" in row["message"]


def test_nvsentinel_xid_following_the_fallen_message_is_one_event():
    """NVSentinel "GPU Fallen Error with XID following - Should NOT match" (already agreed): one XID 79, the Xid
    line."""
    text = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "NVRM: Xid (PCI:0000:b3:00.0): 79, pid=12345, GPU has fallen off the bus.\n"
    )
    df = parse_kernel_log(text)
    assert list(df["xid"]) == [79] and df.iloc[0]["message"] == "GPU has fallen off the bus."


def test_a_cut_xid_79_line_outside_a_fallen_message_still_says_it_was_cut():
    df = parse_kernel_log("NVRM: Xid (PCI:0000:b3:00): 79")
    assert list(df["xid"]) == [79] and "cut" in df.iloc[0]["message"]


def test_nvsentinel_xid_154_with_out_of_order_parentheses_is_parsed():
    """NVSentinel TestCSVParser_Parse "XID 154 with out-of-order parens does not panic": ``NVRM: Xid
    (PCI:0000:01:00): 154 (`` parses as XID 154 of PCI 0000:01:00 (its action falls back to CONTACT_SUPPORT there);
    the recovery action cannot be read from it."""
    df = parse_kernel_log("NVRM: Xid (PCI:0000:01:00): 154 (")
    assert list(df["xid"]) == [154] and list(df["pci_bus_id"]) == ["0000:01:00.0"]
    assert df["recovery_action"].isna().all()


def test_code_99999_is_kept_as_an_unknown_xid():
    """Decision: keep it. GPUd's Match drops a code its catalog lacks (TestMatchReturnsNilWhenXidDetailMissing:
    ``NVRM: Xid (PCI:0000:05:00): 99999, unknown error`` -> nil); NVSentinel's CSV parser keeps an unknown code and
    sends it to CONTACT_SUPPORT ("Unknown XID defaults to CONTACT_SUPPORT", XID 999). We keep it: the driver printed
    an Xid for this GPU, the catalog shipped here stops at 172 and a newer driver may define more, and a parser that
    drops it would report a clean log for a GPU that reported a fault. The triage then names the code unknown and
    sends it to NVIDIA support (gpulib.xid.lookup)."""
    df = parse_kernel_log("NVRM: Xid (PCI:0000:05:00): 99999, unknown error")
    assert list(df["xid"]) == [99999] and df.iloc[0]["message"] == "unknown error"
    rec = lookup(99999)
    assert not rec.known and rec.immediate_action == "CONTACT_SUPPORT"
