"""XID / ECC triage results -> Findings: the SOP step, commands and escalation of each finding are the row of
``gpulib/data/xid/xid_sop.csv`` its rule or bucket names (:func:`gpulib.xid.sops.sop`), with the node, the GPU
and the pods on it filled in (:func:`gpulib.xid.sops.fill_commands`).

The rules themselves are :mod:`gpulib.xid.triage` (one :class:`~gpulib.xid.triage.CaseResult` per GPU); the
``dcgmi diag`` results are :mod:`gpulib.xid.diag`.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.xid.catalog import lookup
from gpulib.xid.pod_health import with_device_health
from gpulib.xid.sops import fill_commands, impact_evidence, sop
from gpulib.xid.triage import CaseResult, RuleHit, node_gpu_ids, state_severity, triage_cases

#: the xid_sop.csv row whose SOP step replaces RESET_GPU's when application-class XIDs came from several
#: processes on one GPU (:attr:`gpulib.xid.triage.XidVerdict.processes`)
SEVERAL_PROCESSES = "APP_XID_SEVERAL_PROCESSES"
#: title of a memory or thermal rule's finding (``<title> on <node> GPU <gpu>``), by its xid_sop.csv key
RULE_TITLES = {
    "ROW_REMAP_FAILURE": "Row-remap failure (RMA)",
    "DBE_ERRORS": "Uncorrectable ECC (DBE) errors",
    "ROW_REMAP_PENDING": "Row remap pending",
    "RETIRED_PAGES_PENDING": "Page retirement pending",
    "SBE_RATE": "Correctable ECC errors climbing",
    "THERMAL": "GPU hot / thermally throttled",
    "POWER": "Clocks limited by power",
}
#: XID buckets whose SOP ends in "reset or reboot, then dcgmi diag -r 3, then uncordon" (xid_sop.csv)
CLEARED_BY_DIAG = {"RESET_GPU", "RESTART_BM"}


def xid_finding(node: str, r: CaseResult) -> Finding:
    """The finding of a GPU's XIDs: the SOP of its bucket; a hardware suspect from several processes keeps
    RESET_GPU's commands with the step and grading of the ``APP_XID_SEVERAL_PROCESSES`` row."""
    v, case, impact = r.xid, r.case, r.impact
    flow = v.flow
    key = flow.sop_key if flow is not None else v.nvidia_bucket  # XID 13/31: the branch's row (xid13/xid31.py)
    row = sop(key)
    escalation = row["escalation"]
    verdict, severity = row["verdict"], state_severity(rule=key)  # the one severity of this GPU state
    if v.processes:
        several = sop(SEVERAL_PROCESSES)
        verdict, severity = several["verdict"], Severity(several["severity"])
        row = dict(sop(v.bucket), sop_step=several["sop_step"])
    evidence = v.evidence + case.evidence + impact_evidence(impact)
    gpu_txt = f"GPU {case.gpu}" if case.gpu not in (None, "") else f"GPU {case.pci_bus_id or '?'}"
    title = f"XID {', '.join(map(str, v.codes))} on {node} {gpu_txt}: {verdict} ({v.bucket})"
    return Finding(
        severity=severity,
        title=title,
        category=verdict,
        node=node,
        gpu=case.gpu,
        summary=lookup(v.headline).description,
        sop_step=row["sop_step"],
        commands=fill_commands(row["commands"], node, case.gpu, impact),
        evidence=evidence,
        escalation=escalation,
        runbook="xid_ecc_triage",
        confidence=0.9 if v.gauge_only else 1.0,
        data={
            "xids": v.codes,
            "bucket": v.bucket,
            "verdict": verdict,
            "uuid": case.uuid,
            "pci_bus_id": case.pci_bus_id,
            "pods": impact.to_dict("records"),
            **({"xid13": v.xid13.key} if v.xid13 is not None else {}),
            **({"xid31": v.xid31.key} if v.xid31 is not None else {}),
        },
    )


def rule_finding(hit: RuleHit, node: str, r: CaseResult) -> Finding:
    """The finding of a memory or thermal rule: its xid_sop.csv row, graded by the rule where it says so."""
    case, impact = r.case, r.impact
    row = sop(hit.key)
    return Finding(
        severity=hit.severity or Severity(row["severity"]),
        title=f"{RULE_TITLES[hit.key]} on {node} GPU {case.gpu}",
        category=row["verdict"],
        node=node,
        gpu=case.gpu,
        sop_step=row["sop_step"],
        commands=fill_commands(row["commands"], node, case.gpu, impact),
        evidence=hit.evidence + impact_evidence(impact),
        escalation=row["escalation"],
        runbook="xid_ecc_triage",
        data={"rule": hit.key, "uuid": case.uuid, "pci_bus_id": case.pci_bus_id, "pods": impact.to_dict("records")},
    )


def triage_node(
    node: str,
    *,
    gpu: str | None = None,
    window: str = "",
    xid_events: pd.DataFrame | None = None,
    smi: pd.DataFrame | None = None,
    dcgm: dict[str, pd.DataFrame] | None = None,
    pods: pd.DataFrame | None = None,
) -> list[Finding]:
    """Triage one node (optionally one GPU) into Findings, most severe first: per GPU the XID finding, then the
    memory and thermal ones (:func:`gpulib.xid.triage.triage_cases` documents the inputs); one OK finding naming
    the inputs checked when nothing fired."""
    findings: list[Finding] = []
    for r in triage_cases(node, gpu=gpu, window=window, xid_events=xid_events, smi=smi, dcgm=dcgm, pods=pods):
        findings += ([xid_finding(node, r)] if r.xid else []) + [rule_finding(h, node, r) for h in r.memory + r.thermal]
    ids = node_gpu_ids(node, smi, *(dcgm or {}).values())  # kubelet's not-Healthy devices (KEP-4680): never OK
    findings = with_device_health(findings, node, gpu, pods, ids)
    if not findings:
        read = {k: v for k, v in (dcgm or {}).items() if v is not None}
        checked = ", ".join(k for k, v in (("kernel log", xid_events), ("nvidia-smi", smi)) if v is not None)
        findings.append(
            Finding(
                severity=Severity.OK,
                title=f"No XID, ECC or thermal problem found on {node}",
                node=node,
                gpu=gpu,
                category="ok",
                runbook="xid_ecc_triage",
                evidence=[
                    f"inputs checked: {checked or 'none'}"
                    + (f"; DCGM fields: {', '.join(sorted(read))}" if read else "")
                ],
            )
        )
    return sort_findings(findings)


def cleared(f: Finding) -> Finding:
    """An XID finding whose SOP step (reset/reboot, then a passing diagnostic) is done: kept as INFO history."""
    if f.data.get("bucket") not in CLEARED_BY_DIAG or f.severity not in (Severity.CRITICAL, Severity.WARNING):
        return f
    return replace(
        f,
        severity=Severity.INFO,
        title=f"{f.title} (reset done, dcgmi diag passed afterwards)",
        summary=(f.summary + " " if f.summary else "") + "after_reset=true and every diagnostic test passed: "
        "the SOP's reset/reboot step is complete.",
    )


def combine(triaged: list[Finding], diagnosed: list[Finding], node: str, gpu: str | None) -> list[Finding]:
    """The findings of one triage run: the triage's and the diagnostic's (a passing diagnostic after the reset
    clears the XID findings it completes), restricted to ``gpu``; one OK finding when nothing is left."""
    fs = triaged
    if any(d.data.get("rule") == "DIAG_RETURN_TO_SERVICE" for d in diagnosed):
        fs = [cleared(f) for f in fs]
    if diagnosed:
        fs = [f for f in fs if f.category != "ok"] + diagnosed
    if gpu is not None:  # triage keeps cases it cannot pin to an index; show only this GPU's
        fs = [f for f in fs if f.gpu in (None, "", gpu)]
    if not fs:
        fs = [
            Finding(
                Severity.OK,
                f"No XID, ECC or thermal problem found on {node} GPU {gpu}",
                node=node,
                gpu=gpu,
                category="ok",
                runbook="xid_ecc_triage",
            )
        ]
    return sort_findings(fs)
