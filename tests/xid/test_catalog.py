"""Knowledge rows checked against NVIDIA's own sources. Every expected value below is written from the
primary source named next to it, never read back from the CSV under test.

* NVIDIA's XID catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), machine copy
  leptonai/gpud components/accelerator/nvidia/xid/catalog_generated.go @4a8de33a (sheets "Catalog" and
  "XID 144-150 Decode").
* DCGM's health watch: NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp BuildXidMappings() @72fa3fea.
* NCCL's IB completion warning: NVIDIA/nccl src/transport/net_ib.cc @v2.19.4-1 ("with error %d"),
  @v2.20.3-1 ("with status=%d"), src/transport/net_ib/p2p.cc @v2.29.2-1 ("with status=%s(%d)").
* NVLink generations: stas00/ml-engineering network/README.md @744d01e1 (NVLink 2: 6 links, 150 GB/s
  unidirectional, V100).
"""

import re

import pandas as pd
import pytest

import gpulib.xid.findings as xid_findings
import gpulib.xid.sops as sops
from gpulib.core.findings import Severity
from gpulib.core.knowledge import load_table
from gpulib.xid.catalog import lookup
from gpulib.xid.kernel_log import parse_kernel_log

# ---------------------------------------------------------------- NVIDIA catalog rows (gpud copy)
#: code -> (immediate, investigatory) from catalog_generated.go
NVIDIA_BUCKETS = {
    108: ("IGNORE", "XID_137_FLOW"),
    160: ("IGNORE", "INVESTIGATE_SW"),
    161: ("IGNORE", "INVESTIGATE_SW"),
    79: ("RESTART_BM", "CONTACT_SUPPORT"),
    13: ("RESTART_APP", "WORKFLOW_XID_13"),
    159: ("CHECK_UVM", "SYMPATHETIC_REPORT_SOLO"),
}


@pytest.mark.parametrize("code", sorted(NVIDIA_BUCKETS))
def test_buckets_follow_nvidia_catalog(code):
    rec = lookup(code)
    assert (rec.immediate_action, rec.investigatory_action) == NVIDIA_BUCKETS[code]


def test_xid_108_applies_to_datacenter_gpus_and_is_not_fatal():
    rec = lookup(108)
    assert rec.unused_on_datacenter is False  # NVIDIA's catalog: applies to A100/H100/B100/GB200
    assert rec.fatal is False  # immediate bucket IGNORE
    from gpulib.xid import critical_xids

    assert 108 not in critical_xids()


def test_no_code_is_ignore_and_fatal_at_once():
    cat = load_table("xid_catalog")
    both = cat[(cat["immediate_action"] == "IGNORE") & (cat["fatal"] == "yes")]
    assert both["code"].tolist() == []


# 160 and 108 are IGNORE in NVIDIA's catalog: xid_ecc_triage grades that bucket info (xid_sop.csv IGNORE), and one GPU
# state has one severity in every runbook, so fleet_overview no longer calls them warning
@pytest.mark.parametrize("code,severity", [(160, Severity.INFO), (108, Severity.INFO), (79, Severity.CRITICAL)])
def test_fleet_overview_xid_severity(code, severity):
    import gpulib.fleet.findings as fleet_findings

    class Frames:  # the one field the fleet's XID rule reads
        window = "6h"

        def get(self, field):
            return pd.DataFrame([{"node": "n", "gpu": "0", "value": float(code), "pod": "", "namespace": ""}])

    (f,) = fleet_findings.xid_findings(Frames())
    assert f.severity is severity


# ---------------------------------------------------------------- DCGM BuildXidMappings()
DCGM = {  # code -> (subsystem, result)
    48: ("devastating", "FAIL"),
    74: ("devastating", "FAIL"),
    79: ("devastating", "FAIL"),
    94: ("devastating", "WARN"),
    95: ("devastating", "FAIL"),
    119: ("devastating", "FAIL"),
    120: ("devastating", "FAIL"),
    140: ("devastating", "FAIL"),
    31: ("memory", "WARN"),
    32: ("memory", "WARN"),
    43: ("memory", "WARN"),
    63: ("memory", "WARN"),
    64: ("memory", "FAIL"),
    38: ("pcie", "WARN"),
    39: ("pcie", "WARN"),
    42: ("pcie", "WARN"),
    60: ("thermal", "WARN"),
    61: ("thermal", "WARN"),
    62: ("thermal", "WARN"),
    54: ("power", "WARN"),
    56: ("power", "WARN"),
    57: ("power", "WARN"),
    58: ("power", "WARN"),
    78: ("power", "WARN"),
    67: ("nvlink", "WARN"),
    73: ("nvlink", "WARN"),
    121: ("nvlink", "WARN"),
    137: ("nvlink", "WARN"),
    93: ("inforom", "WARN"),
}


@pytest.mark.parametrize("code", sorted(DCGM))
def test_dcgm_subsystem_and_severity_from_build_xid_mappings(code):
    rec = lookup(code)
    assert (rec.dcgm_subsystem, rec.dcgm_severity) == DCGM[code]


def test_codes_dcgm_does_not_map_have_no_dcgm_severity():
    cat = load_table("xid_catalog").fillna("")
    extra = cat[(cat["dcgm_severity"] != "") & ~cat["code"].isin(list(DCGM))]
    assert extra["code"].tolist() == []


# ---------------------------------------------------------------- SOP wording
def test_check_uvm_resets_only_when_uvm_or_vgpu_is_in_use():
    row = sops.sop("CHECK_UVM")
    assert "RESET_GPU if UVM/vGPU is in use, else ignore" in row["sop_step"]
    assert not any("delete pod" in c for c in row["commands"])


def test_xid_13_same_unit_branch_runs_the_dcgm_eud_first():
    row = sops.sop("WORKFLOW_XID_13_SAME_UNIT")  # repeats on one GPC/TPC (tests/xid/test_xid13_workflow.py)
    assert "EUD" in row["sop_step"]
    cmds = row["commands"]
    eud = next(i for i, c in enumerate(cmds) if c.startswith("@node dcgmi diag -r eud -i {gpu}"))
    # nothing gives the GPU back to the workload before the EUD has run
    assert all("{resume_workload}" not in c and "{restart_workload}" not in c for c in cmds[:eud])


def test_every_sop_and_catalog_row_cites_a_source_readers_can_open():
    for table in ("xid_sop", "xid_catalog", "nccl_signatures", "nccl_link_bandwidth", "xid_nvlink5_decode"):
        src = load_table(table)["source"].fillna("")
        assert (src != "").all(), table
        # (that each source opens is tests/project/test_repo_rules.py's check)


# ---------------------------------------------------------------- NVLink5 XIDs 144-150
@pytest.mark.parametrize(
    "xid,intrinfo,status,bucket,severity",
    [
        (149, 0x02500011, 0x0, "RESET_GPU", "Link Fatal"),  # NETIR_LINK_EVT/NETIR_LINK_DOWN subcode 0b100101
        (144, 0x00000001, 0x4, "IGNORE", "Non-fatal"),  # SAW_MVB status 0x4
        (144, 0x00000001, 0x2, "RESET_GPU", "Fatal"),  # SAW_MVB status 0x2
        (150, 0x00000000, 0x0, "RESET_GPU", "Fatal"),  # MSE_WATCHDOG
        (145, 0x00000004, 0x1, "XID_154_EVAL", "Non-fatal"),  # RLW_REMAP V2 pattern ...0000100
    ],
)
def test_nvlink5_decode(xid, intrinfo, status, bucket, severity):
    from gpulib.xid.nvlink5 import decode

    rule = decode(xid, intrinfo, status)
    assert rule is not None and rule["resolution"] == bucket and rule["severity"] == severity


def test_nvlink5_xid_bucket_follows_the_decode():
    log = (
        "Sep 19 10:30:06 n kernel: NVRM: Xid (PCI:0018:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link -1 "
        "(0x00000001 0x00000004 0x00000000 0x00000000)\n"
    )
    ev = parse_kernel_log(log, year=2025)
    fs = xid_findings.triage_node("n", xid_events=ev)
    top = fs[0]
    assert top.data["bucket"] == "IGNORE" and top.severity is Severity.INFO
    fatal = log.replace("0x00000004 0x00000000", "0x00000002 0x00000000")
    top = xid_findings.triage_node("n", xid_events=parse_kernel_log(fatal, year=2025))[0]
    assert top.data["bucket"] == "RESET_GPU" and top.severity is Severity.CRITICAL


# ---------------------------------------------------------------- NCCL signatures and bands
@pytest.mark.parametrize(
    "line",
    [
        # NCCL <= 2.19 (net_ib.cc "with error %d, opcode %d, len %d, vendor err %d (%s)")
        (
            "node-1:81:95 [0] transport/net_ib.cc:1333 NCCL WARN NET/IB : Got completion from peer "
            "10.0.0.2<43210> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
        ),
        # NCCL 2.20-2.28 ("with status=%d opcode=%d len=%u vendor err %u (%s)")
        (
            "node-1:81:95 [0] transport/net_ib.cc:2470 NCCL WARN NET/IB: Got completion from peer "
            "10.0.0.2<43210> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0"
        ),
        # NCCL >= 2.29 (p2p.cc "with status=%s(%d) opcode=%s(%d) vendor_err=%u")
        (
            "node-1:81:95 [0] transport/net_ib/p2p.cc:550 NCCL WARN NET/IB: Got completion from peer "
            "10.0.0.2<43210> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 (Send) "
            "hca mlx5_0"
        ),
    ],
)
def test_ib_retry_exceeded_in_every_nccl_format(line):
    from gpulib.nccl import diagnose_log

    fs = diagnose_log(line + "\n")
    assert any("retry counter exceeded" in f.title for f in fs)


def test_ib_other_status_is_not_retry_exceeded():
    from gpulib.nccl import diagnose_log

    line = (
        "NCCL WARN NET/IB: Got completion from peer 10.0.0.2<43210> with status=IBV_WC_LOC_PROT_ERR(4) "
        "opcode=IBV_WC_SEND(0) vendor_err=0 (Send) hca mlx5_0"
    )
    assert not any("retry counter exceeded" in f.title for f in diagnose_log(line + "\n"))
    assert not any(
        "retry counter exceeded" in f.title
        for f in diagnose_log(
            "NET/IB : Got completion from peer 10.0.0.2<1> with error 120, opcode 0, len 0, vendor err 0\n"
        )
    )


def test_v100_nvlink2_band():
    from gpulib.nccl import expected_busbw

    links = load_table("nccl_link_bandwidth").set_index("link")
    assert links.loc["NVLink2", "gbps_uni_per_gpu"] == 150 and links.loc["NVLink2", "links_per_gpu"] == 6
    band = expected_busbw("all_reduce", gpu_model="Tesla V100-SXM2-32GB", gpus_per_node=8, interconnect="NVLink")
    assert band is not None and band.high <= 150 and band.inferred


#: GPUd commits verified to exist in leptonai/gpud's main with components/accelerator/nvidia/xid/catalog_generated.go
#: (git cat-file / ls-tree on a clone): b9842de2 generated the file (2025-11-12, "Generated at 2025-10-29"),
#: 4a8de33a (2026-08-22) holds the same blob. 73e270e3 is in no ref of GPUd.
GPUD_COMMITS = {"b9842de2", "4a8de33a"}


def test_catalog_rows_cite_a_gpud_commit_that_exists():
    cat = load_table("xid_catalog")
    cite = re.compile(r"leptonai/gpud: components/accelerator/nvidia/xid/catalog_generated\.go @([0-9a-f]{7,40})")
    cited = {m for s in cat["source"] for m in cite.findall(s)}
    assert cited, "the catalog cites GPUd's machine copy"
    assert {c[:8] for c in cited} <= GPUD_COMMITS, cited
