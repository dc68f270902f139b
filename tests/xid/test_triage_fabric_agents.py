"""xid_ecc_triage reads the GPU's NVLink fabric verdict (nvidia-smi -q Fabric) and other agents' node conditions:
an unhealthy fabric is a finding, never OK; an agent's XID and ours are one finding; a known false positive carries
no drain, reset or RMA step. Inputs: the published GB200 Fabric block of tests/fixtures/fabric and the condition
message forms of the NVSentinel reports cited in gpulib/data/kube/agent_false_positives.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import gpulib.xid.steps as xs
from gpulib.core.findings import Severity
from gpulib.core.schema import POD_COLUMNS, empty
from gpulib.nvidia.smi import parse_query
from gpulib.xid.kernel_log import parse_kernel_log

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"


def _inp(**kw):
    base = dict(node="gb200-r1-n1", gpu="0", window="6h", pods=empty(POD_COLUMNS))
    base.update(kw)
    return xs.TriageInputs(**base)


def test_unhealthy_fabric_is_a_triage_finding_not_ok():
    smi = parse_query((FIX / "gb200_completed_unhealthy.txt").read_text())
    fs = xs.findings(_inp(smi=smi))
    top = fs[0]
    assert top.severity == Severity.CRITICAL and top.category == "nvlink_domain"
    assert "Health Summary Unhealthy" in top.title
    assert not any(f.severity == Severity.OK for f in fs)


def test_hgx_fabric_reading_alone_is_ok():
    smi = parse_query(
        (Path(__file__).resolve().parents[2] / "gpulib/data/captures/2xh200_580.159.04_smi_q.txt").read_text()
    )
    fs = xs.findings(_inp(node="h200", smi=smi))
    assert [f.severity for f in fs] == [Severity.OK]


def test_nvsentinel_xid_and_the_kernel_log_xid_are_one_finding():
    log = "[Mon Sep  1 10:41:58 2026] NVRM: Xid (PCI:0000:08:00): 79, pid=0, GPU has fallen off the bus.\n"
    msg = "ErrorCode:79 GPU:0 XID 79 GPU has fallen off the bus Recommended Action=RESTART_BM;"
    node = {
        "metadata": {"name": "gb200-r1-n1"},
        "status": {
            "conditions": [
                {
                    "type": "SysLogsXIDError",
                    "status": "True",
                    "message": msg,
                    "lastTransitionTime": "2026-09-01T10:42:00Z",
                }
            ]
        },
    }
    from gpulib.kube import agents

    rows = agents.agent_conditions({"items": [node]})
    fs = xs.findings(_inp(gpu=None, kernel_log=log, xid_events=parse_kernel_log(log), agents=rows))
    xid = [f for f in fs if "79" in f.title]
    assert len(xid) == 1, [f.title for f in fs]
    assert any("flagged by NVSentinel at 10:42 UTC, SysLogsXIDError, RESTART_BM" in e for e in xid[0].evidence)


def test_imex_false_positive_in_triage_has_no_disruptive_step():
    msg = (
        "ErrorCode:DCGM_FR_IMEX_UNHEALTHY GPU:0 IMEX daemon status is -3 (not READY) "
        "Recommended Action=CONTACT_SUPPORT;"
    )
    node = {
        "metadata": {"name": "p5-0", "labels": {}},
        "status": {
            "conditions": [
                {
                    "type": "GpuNvlinkWatch",
                    "status": "True",
                    "message": msg,
                    "lastTransitionTime": "2026-09-01T10:42:00Z",
                }
            ]
        },
    }
    from gpulib.kube import agents

    smi = parse_query(
        (Path(__file__).resolve().parents[2] / "gpulib/data/captures/2xh200_580.159.04_smi_q.txt").read_text()
    )
    fs = xs.findings(_inp(node="p5-0", smi=smi, agents=agents.agent_conditions({"items": [node]})))
    assert all(f.severity == Severity.OK for f in fs)
    text = " ".join(c for f in fs for c in f.commands).lower()
    assert not any(w in text for w in ("drain", "cordon", "nvidia-smi -r", "reboot", "rma"))
    assert any(f.title.startswith("Not a fault") for f in fs)
    assert pd.notna(fs[0].severity)
