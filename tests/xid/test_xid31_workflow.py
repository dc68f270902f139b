"""XID 31 follows NVIDIA's WORKFLOW_XID_31 as NVSentinel implements it.

NVIDIA/NVSentinel: docs/configuration/health-events-analyzer.md @184a613a ("XID 31 and XID 13 Rules") and
distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml @09dfc8f9 (rules RepeatedXID31OnSameGPU,
RepeatedXID31OnDifferentGPU, XIDErrorSoloNoBurst):
  * XID 31 two or more times on the same GPU within 24 h (events less than 3 min apart are one burst) -> RUN_DCGMEUD,
    message "if DCGM EUD tests pass, run field diagnostics"
  * on different GPUs, or once -> NONE: "App passing bad data or using incorrect GPU methods; check error PID"
The lines are shaped like the XID 31 line of gpulib/data/learn/dmesg_xid.txt (line 8, a public paste).
"""

from __future__ import annotations

from gpulib.xid import findings as triage
from gpulib.xid.kernel_log import parse_kernel_log

_TAKES_THE_GPU = ("kubectl cordon", "kubectl drain", "nvidia-smi -r")


def _eud(cmd: str) -> bool:
    """The EUD line, run on the node through kubectl debug (gpulib/core/nodecmd.py) rather than '# on NODE'."""
    return cmd.startswith("kubectl debug node/") and "dcgmi diag -r eud -i" in cmd


def _line(ts: str, pid: int = 1942, pci: str = "0000:2b:00") -> str:
    return (
        f"{ts} node-a kernel: NVRM: Xid (PCI:{pci}): 31, pid={pid}, name=llama-bench, channel 0x00000002, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC6 GPCCLIENT_T1_13 faulted @ 0x6f6f_320c2000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
    )


def _findings(*lines: str):
    return [f for f in triage.triage_node("node-a", xid_events=parse_kernel_log("".join(lines))) if "xids" in f.data]


def _one(*lines: str):
    (f,) = _findings(*lines)
    return f


def test_xid31_twice_on_one_gpu_within_24h_runs_the_eud_then_field_diagnostics():
    f = _one(_line("2026-11-30T10:00:00Z", pid=1942), _line("2026-11-30T16:00:00Z", pid=2077))
    assert f.data["xid31"] == "same_gpu" and f.data["bucket"] == "WORKFLOW_XID_31"
    assert any(_eud(c) for c in f.commands), f.commands
    assert "field diagnostic" in f.sop_step + f.escalation
    assert any("2 burst" in e for e in f.evidence), f.evidence


def test_xid31_once_is_the_application_with_its_pid():
    f = _one(_line("2026-11-30T10:00:00Z", pid=1942))
    assert f.data["xid31"] == "solo" and f.category == "application"
    assert not any("dcgmi diag -r eud" in c for c in f.commands)
    assert not [c for c in f.commands if any(t in c for t in _TAKES_THE_GPU)], f.commands
    assert any("pid 1942 (llama-bench)" in e for e in f.evidence), f.evidence


def test_xid31_lines_less_than_3_minutes_apart_are_one_burst():
    f = _one(_line("2026-11-30T10:00:00Z"), _line("2026-11-30T10:02:00Z"), _line("2026-11-30T10:04:30Z"))
    assert f.data["xid31"] == "solo"


def test_xid31_a_day_apart_is_not_a_repeat():
    f = _one(_line("2026-11-28T10:00:00Z"), _line("2026-11-30T10:00:00Z"))
    assert f.data["xid31"] == "solo"


def test_xid31_once_on_each_of_two_gpus_is_no_action_on_either():
    fs = _findings(_line("2026-11-30T10:00:00Z", pci="0000:2b:00"), _line("2026-11-30T11:00:00Z", pci="0000:3b:00"))
    assert len(fs) == 2
    for f in fs:
        assert f.data["xid31"] == "solo" and f.category == "application"
        assert not any("dcgmi diag" in c for c in f.commands)


def test_repeated_xid31_leads_over_a_solo_xid13_on_the_same_gpu():
    """Both workflows are read; the branch that suspects the GPU (the EUD) is the one the finding follows."""
    xid13 = (
        "2026-11-30T10:00:00Z node-a kernel: NVRM: Xid (PCI:0000:2b:00): 13, pid=1942, name=llama-bench, "
        "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address\n"
    )
    f = _one(xid13, _line("2026-11-30T10:00:01Z"), _line("2026-11-30T15:00:00Z"))
    assert f.data["xids"] == [13, 31] and f.data["bucket"] == "WORKFLOW_XID_31" and f.data["xid31"] == "same_gpu"
    assert f.data["xid13"] == "solo"
    assert any(_eud(c) for c in f.commands)
