"""XID 13 follows NVIDIA's WORKFLOW_XID_13 as NVSentinel implements it: the triage counts repeats and reads the
GPC/TPC from the Xid line.

NVIDIA/NVSentinel: docs/configuration/health-events-analyzer.md @184a613a ("XID 31 and XID 13 Rules") and
distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml @09dfc8f9 (rules XIDErrorSoloNoBurst,
RepeatedXID13OnSameGPCAndTPC, RepeatedXID13OnDifferentGPCAndTPC):
  * once (one burst; XID 13 events less than 15 s apart are one burst) -> no action on the GPU (RecommendedAction NONE,
    "check error PID")
  * two or more bursts on the same GPC and TPC within 24 h -> RUN_DCGMEUD, then field diagnostics if it passes
  * two or more different GPC/TPC combinations within 24 h -> NONE: the application
GPC/TPC/SM come from the line, ``Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0)``
(health-monitors/syslog-health-monitor/pkg/xid/parser/csv_test.go @3e97fd00, "Parse metadata from XID-13").
"""

from __future__ import annotations

import pandas as pd

from gpulib.xid import findings as triage
from gpulib.xid.kernel_log import parse_kernel_log
from gpulib.xid.xid13 import location, workflow

PCI = "0000:b5:00"


def _eud(cmd: str) -> bool:
    """The EUD line, run on the node through kubectl debug (gpulib/core/nodecmd.py) rather than '# on NODE'."""
    return cmd.startswith("kubectl debug node/") and "dcgmi diag -r eud -i" in cmd


def _line(ts: str, gpc: int | None, tpc: int | None, sm: int = 0, pid: int = 4242) -> str:
    where = (
        f"Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM {sm}): Out Of Range Address"
        if gpc is not None
        else "Graphics Exception: ESR 0x50df30=0x107000e 0x50df34=0x20"
    )
    return f"{ts} node-a kernel: NVRM: Xid (PCI:{PCI}): 13, pid={pid}, name=python3, {where}\n"


def _triage(*lines: str):
    ev = parse_kernel_log("".join(lines))
    fs = triage.triage_node("node-a", xid_events=ev)
    return next(f for f in fs if 13 in f.data.get("xids", []))


def test_gpc_tpc_sm_are_read_from_the_xid_line():
    assert location("Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address") == (1, 3, 0)
    assert location("Graphics Exception: ESR 0x50df30=0x107000e 0x50df34=0x20 0x50df28=0xf81eb60") is None


def test_once_is_the_application_and_no_diagnostic():
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3))
    assert f.data["xid13"] == "solo" and f.category == "application"
    assert not any("dcgmi diag" in c for c in f.commands) and not any("drain" in c for c in f.commands)


def test_lines_of_one_burst_are_one_occurrence():
    """Two XID 13 lines 5 s apart on the same unit are one burst (15-s window): still 'once'."""
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3), _line("2026-11-30T10:00:05Z", 1, 3, sm=1))
    assert f.data["xid13"] == "solo"


def test_repeats_on_the_same_gpc_tpc_run_the_eud_then_field_diagnostics():
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3, sm=0), _line("2026-11-30T11:00:00Z", 1, 3, sm=1))
    assert f.data["xid13"] == "same_unit" and f.category == "hardware"
    assert any(_eud(c) for c in f.commands)
    assert "field diagnostic" in f.sop_step + f.escalation
    assert any("GPC 1, TPC 3" in e and "2 bursts" in e for e in f.evidence), f.evidence


def test_repeats_on_different_gpc_tpc_are_the_application():
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3), _line("2026-11-30T11:00:00Z", 4, 0))
    assert f.data["xid13"] == "different_units" and f.category == "application"
    assert not any("dcgmi diag -r eud" in c for c in f.commands)
    assert "pid" in f.sop_step


def test_only_the_last_24_hours_count():
    f = _triage(_line("2026-11-28T10:00:00Z", 1, 3), _line("2026-11-30T10:00:00Z", 1, 3))
    assert f.data["xid13"] == "solo"


def test_repeats_without_a_unit_in_the_line_say_so():
    f = _triage(_line("2026-11-30T10:00:00Z", None, None), _line("2026-11-30T11:00:00Z", None, None))
    assert f.data["xid13"] == "repeated_unknown_unit" and f.category == "application"
    assert "GPC/TPC" in f.sop_step


def test_same_unit_from_different_processes_still_runs_the_eud():
    """The different-processes guard (RESET_GPU + dcgmi diag -r 3) does not replace the EUD the workflow asks for."""
    f = _triage(_line("2026-11-30T10:00:00Z", 2, 1, pid=11), _line("2026-11-30T11:00:00Z", 2, 1, pid=22))
    assert f.data["xid13"] == "same_unit" and any(_eud(c) for c in f.commands)


def test_workflow_reads_uptime_when_the_log_has_no_dates():
    ev = parse_kernel_log(
        "[ 100.0] NVRM: Xid (PCI:0000:b5:00): 13, pid=1, name=x, "
        "Graphics SM Warp Exception on (GPC 0, TPC 2, SM 0): x\n"
        "[ 5000.0] NVRM: Xid (PCI:0000:b5:00): 13, pid=1, name=x, "
        "Graphics SM Warp Exception on (GPC 0, TPC 2, SM 1): x\n"
    )
    assert workflow(ev).key == "same_unit"
    assert workflow(pd.DataFrame(columns=ev.columns)).key == "none"


# A restarted job always has a new pid, so XID 13 repeats from different processes are the normal case of an
# application bug. NVIDIA/NVSentinel: distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml
# @09dfc8f9, rule RepeatedXID13OnDifferentGPCAndTPC: recommended_action "NONE", message "App passing bad data or
# using incorrect GPU methods; check error PID to identify source of the problem". No cordon, drain or reset.
_TAKES_THE_GPU = ("kubectl cordon", "kubectl drain", "nvidia-smi -r", "dcgmi diag -r 3")


def test_different_units_from_two_processes_are_the_application_not_a_reset():
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3, pid=3141), _line("2026-11-30T11:00:00Z", 4, 0, pid=5926))
    assert f.data["xid13"] == "different_units"
    assert f.data["bucket"] == "WORKFLOW_XID_13" and f.category == "application"
    assert not [c for c in f.commands if any(t in c for t in _TAKES_THE_GPU)], f.commands
    assert "pid" in f.sop_step


def test_the_pids_of_the_xid13_lines_are_in_the_evidence():
    """'check error PID': the finding names the processes the Xid lines name."""
    f = _triage(_line("2026-11-30T10:00:00Z", 1, 3, pid=3141), _line("2026-11-30T11:00:00Z", 4, 0, pid=5926))
    assert any("pid 3141 (python3)" in e and "pid 5926 (python3)" in e for e in f.evidence), f.evidence


def test_repeats_without_a_unit_from_two_processes_are_not_a_reset():
    f = _triage(
        _line("2026-11-30T10:00:00Z", None, None, pid=3141), _line("2026-11-30T11:00:00Z", None, None, pid=5926)
    )
    assert f.data["xid13"] == "repeated_unknown_unit" and f.category == "application"
    assert not [c for c in f.commands if any(t in c for t in _TAKES_THE_GPU)], f.commands


def test_one_burst_from_two_processes_is_solo_not_a_reset():
    """Real bursts mix a line with the pid and lines with pid='<unknown>' (the Graphics SM lines), a few ms apart."""
    text = (
        "2026-11-30T10:00:00Z node-a kernel: NVRM: Xid (PCI:0000:b5:00): 13, pid='<unknown>', name=<unknown>, "
        "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address\n"
        "2026-11-30T10:00:00Z node-a kernel: NVRM: Xid (PCI:0000:b5:00): 13, pid=2519562, name=python3, "
        "Graphics Exception: ChID 000c, Class 0000cbc0, Offset 00000000, Data 00000000\n"
        "2026-11-30T10:00:01Z node-a kernel: NVRM: Xid (PCI:0000:b5:00): 13, pid=2519577, name=python3, "
        "Graphics Exception: ChID 000d, Class 0000cbc0, Offset 00000000, Data 00000000\n"
    )
    f = _triage(text)
    assert f.data["xid13"] == "solo" and f.category == "application"
    assert not [c for c in f.commands if any(t in c for t in _TAKES_THE_GPU)], f.commands
