"""Fleet overview results -> Findings: the GPUs and pods the rules of :mod:`gpulib.fleet.health` pick out, each with
the SOP step, commands and escalation of its row of ``gpulib/data/fleet/fleet_sop.csv``
(:func:`gpulib.core.sop.sop`); idle and zombie pods get the utilization report's SOP (``cost_sop.csv`` through
:func:`gpulib.cost.verdict_sop`), so both give a pod the same verdict and step.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import sop
from gpulib.core.timeutil import format_duration
from gpulib.core.validate import shell_quote
from gpulib.cost import verdict_sop
from gpulib.fleet.health import (
    NVLINK_MB_PER_GB,
    HealthFrames,
    IdleInputs,
    dbe_gpus,
    hot_gpus,
    idle_pods,
    nvlink_laggards,
    remap_failures,
    stale_gpus,
    unrequested_pods,
    xid_gpus,
)
from gpulib.xid import lookup, state_severity


def xid_findings(hf: HealthFrames) -> list[Finding]:
    """One finding per GPU whose XID gauge holds a code, graded as every runbook grades that XID
    (:func:`gpulib.xid.state_severity`: the severity of the SOP row of its NVIDIA bucket)."""
    rows = xid_gpus(hf)
    if rows is None:
        return []
    out = []
    for r in rows.itertuples():
        rec = lookup(int(r.value))
        sev = state_severity(xid=int(r.value))
        s = sop("fleet_sop", "xid_seen", node=r.node, gpu=r.gpu)
        out.append(
            Finding(
                sev,
                f"XID {int(r.value)} ({rec.mnemonic}) on {r.node} GPU {r.gpu}",
                node=r.node,
                gpu=str(r.gpu),
                category="xid",
                runbook="xid_ecc_triage",
                confidence=0.9,
                summary=(
                    f"Last XID reported by DCGM is {int(r.value)}: {rec.category}; NVIDIA's immediate action: "
                    f"{rec.immediate_action}."
                ),
                evidence=[
                    f"DCGM_FI_DEV_XID_ERRORS last value {int(r.value)} in the last {hf.window} "
                    "(a sticky gauge: it holds the last XID until the driver or DCGM restarts)"
                ]
                + ([f"pod {r.namespace}/{r.pod} on this GPU"] if r.pod else []),
                sop_step=s.sop_step,
                commands=s.commands,
            )
        )
    return out


def memory_findings(hf: HealthFrames) -> list[Finding]:
    """Row-remap failures (an RMA condition), then uncorrectable ECC errors on the other GPUs."""
    out = []
    failed = remap_failures(hf)
    if failed is not None:
        for r in failed.itertuples():
            s = sop("fleet_sop", "row_remap_failure", node=r.node, gpu=r.gpu, gpu_word=shell_quote(r.gpu))
            out.append(
                Finding(
                    state_severity(rule="ROW_REMAP_FAILURE"),
                    f"Row-remap failure on {r.node} GPU {r.gpu}",
                    node=r.node,
                    gpu=str(r.gpu),
                    category="memory",
                    runbook="xid_ecc_triage",
                    summary="The GPU could not remap a failing HBM row: NVIDIA treats this as an RMA condition.",
                    evidence=[f"DCGM_FI_DEV_ROW_REMAP_FAILURE = {int(r.value)} in the last {hf.window}"],
                    sop_step=s.sop_step,
                    commands=s.commands,
                    escalation=s.escalation,
                )
            )
    dbe = dbe_gpus(hf)
    if dbe is not None:
        for r in dbe.itertuples():
            s = sop("fleet_sop", "dbe_errors", node=r.node, gpu=r.gpu)
            out.append(
                Finding(
                    state_severity(rule="DBE_ERRORS"),
                    f"Uncorrectable (DBE) ECC errors on {r.node} GPU {r.gpu}",
                    node=r.node,
                    gpu=str(r.gpu),
                    category="memory",
                    runbook="xid_ecc_triage",
                    evidence=[f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL +{r.value:.0f} in the last {hf.window}"],
                    sop_step=s.sop_step,
                    commands=s.commands,
                )
            )
    return out


def thermal_findings(hf: HealthFrames) -> list[Finding]:
    """GPUs running hot (:func:`gpulib.fleet.health.hot_gpus`)."""
    out = []
    for h in hot_gpus(hf):
        ev = [
            f"GPU temperature reached {h.temp_c:.0f} °C in the last {hf.window} (warn {h.warn_c:.0f} °C, "
            f"HW slowdown {h.crit_c:.0f} °C)"
        ]
        if h.min_sm_clock is not None:
            ev.append(f"lowest SM clock {h.min_sm_clock:.0f} MHz over the window")
        s = sop("fleet_sop", "gpu_hot", node=h.node, gpu=h.gpu)
        out.append(
            Finding(
                h.severity,
                f"GPU running hot on {h.node} GPU {h.gpu}",
                node=h.node,
                gpu=str(h.gpu),
                category="thermal",
                runbook="xid_ecc_triage",
                evidence=ev,
                confidence=0.9,
                summary="High temperature cuts clocks (thermal slowdown) and slows every job on the GPU.",
                sop_step=s.sop_step,
                commands=s.commands,
                escalation=s.escalation,
            )
        )
    return out


def nvlink_findings(hf: HealthFrames) -> list[Finding]:
    """GPUs of a multi-GPU job moving far less NVLink traffic than its other GPUs
    (:func:`gpulib.fleet.health.nvlink_laggards`)."""
    out = []
    for n in nvlink_laggards(hf):
        s = sop("fleet_sop", "nvlink_below_peers", node=n.node, gpu=n.gpu)
        out.append(
            Finding(
                Severity.WARNING,
                f"NVLink traffic far below peers on {n.node} GPU {n.gpu}",
                node=n.node,
                gpu=str(n.gpu),
                category="nvlink",
                runbook="nccl_check",
                confidence=0.7,
                summary=f"GPU {n.gpu} moves much less NVLink traffic than the other GPUs of {n.namespace}/{n.pod}: "
                "a degraded or down link is likely, and every collective of the job runs at its pace.",
                evidence=[
                    f"mean NVLink bandwidth {n.mb_s / NVLINK_MB_PER_GB:.3g} GB/s vs the job's median "
                    f"{n.median_mb_s / NVLINK_MB_PER_GB:.3g} GB/s ({n.mb_s / n.median_mb_s:.0%}) over {hf.window}"
                ],
                sop_step=s.sop_step,
                commands=s.commands,
                escalation=s.escalation,
            )
        )
    return out


def health_findings(hf: HealthFrames) -> list[Finding]:
    """XID, memory, thermal and NVLink findings of the health summaries, in that order."""
    return xid_findings(hf) + memory_findings(hf) + thermal_findings(hf) + nvlink_findings(hf)


def stale_telemetry(
    series: pd.DataFrame, end: pd.Timestamp, tolerance: str = "5m", last_seen: pd.DataFrame | None = None
) -> list[Finding]:
    """GPUs whose series stopped before the window end (:func:`gpulib.fleet.health.stale_gpus`)."""
    out = []
    for node, gpu, ts in stale_gpus(series, end, tolerance, last_seen):
        s = sop("fleet_sop", "telemetry_stopped", node=node, gpu=gpu, node_selector=f"spec.nodeName={node}")
        out.append(
            Finding(
                Severity.CRITICAL,
                f"Telemetry stopped for {node} GPU {gpu}",
                node=node,
                gpu=str(gpu),
                category="telemetry",
                runbook="xid_ecc_triage",
                confidence=0.8,
                summary=(
                    "DCGM stopped reporting this GPU: it may have fallen off the bus (XID 79) or the exporter lost it."
                ),
                evidence=[
                    f"last sample {ts:%Y-%m-%d %H:%M} UTC, "
                    f"{format_duration((pd.Timestamp(end) - ts).total_seconds())} before the window end"
                ],
                sop_step=s.sop_step,
                commands=s.commands,
            )
        )
    return out


def idle_findings(idle: IdleInputs) -> list[Finding]:
    """Allocated pods that the one idle/zombie rule (:func:`gpulib.cost.classify_idle`) calls zombie or idle, on
    the samples the utilization report uses, with the report's SOP (``cost_sop.csv``) and the report command."""
    th, window, metric = idle.thresholds, idle.window, idle.metric
    has_fb = bool(idle.samples["fb_used_mib"].notna().any())
    report = sop("fleet_sop", "idle_report").commands
    out = []
    for p in idle_pods(idle):
        r = p.verdict
        zombie = r.state == "zombie"
        ns, pod = r.namespace, r.pod
        held = 0.0 if pd.isna(r.fb_used_max_mib) else float(r.fb_used_max_mib)
        # zombie (stuck) and idle allocated (reserved, unused) get the report's SOPs (gpulib/data/cost/cost_sop.csv)
        kind, step, commands = verdict_sop(r.state, ns, pod, p.workload, p.owner_kind, low_load=p.lightly_used)
        evidence = [
            f"mean activity {100 * r.activity_mean:.1f} % over {window} "
            f"(idle below {100 * th.idle_activity_max:.0f} %), "
            f"peak {100 * r.activity_max:.1f} % on {', '.join(r.devices)}",
            f"max memory held {held / 1024:.1f} GiB" if has_fb else "FB_USED not exported: zombie check skipped",
        ]
        if p.lightly_used:
            evidence.append(
                "served work in the window (peak at or above the idle threshold)"
                if not p.busy_sibling
                else f"other replicas of {p.owner_kind or 'its owner'} {p.workload} are busy"
            )
        if zombie:
            evidence.append(
                f"held >= {th.zombie_fb_used_min_mib:,.0f} MiB with activity below {th.zombie_activity_max:.0%} "
                f"for {format_duration(r.zombie_s)} (zombie from {format_duration(th.zombie_min_duration_s)}; "
                "gpulib/data/core/thresholds.csv)"
            )
        out.append(
            Finding(
                Severity.WARNING if zombie else Severity.INFO,
                f"{'Zombie' if zombie else 'Lightly used' if p.lightly_used else 'Idle'} GPU workload {ns}/{pod}",
                node=r.node,
                category="cost",
                runbook="gpu_utilization_report",
                confidence=0.8 if metric != "DCGM_FI_DEV_GPU_UTIL" else 0.6,
                summary=(
                    "Holds GPU memory while doing no work."
                    if zombie
                    else "Low load on its GPU(s): a right-sizing question, not a reservation to release."
                    if p.lightly_used
                    else "Allocated GPU(s) almost unused."
                )
                + f" Activity from {metric.replace('DCGM_FI_', '')}.",
                evidence=evidence,
                sop_step=step,
                commands=[*commands, *report],
                data={
                    "pod": f"{ns}/{pod}",
                    "state": r.state,
                    "sop_kind": kind,
                    "impact": round(held / 1024, 1),
                    "impact_unit": "GiB held",
                },
            )
        )
    return out


def unrequested_gpu_use(act: pd.DataFrame, pods: pd.DataFrame) -> list[Finding]:
    """Pods that DCGM sees on a GPU but that request no nvidia.com/gpu or MIG resource."""
    out = []
    for r in unrequested_pods(act, pods):
        s = sop("fleet_sop", "gpu_not_requested", namespace=r.namespace, pod=r.pod)
        out.append(
            Finding(
                Severity.WARNING,
                f"{r.namespace}/{r.pod} uses a GPU it never requested",
                node=r.node,
                gpu=str(r.gpu),
                category="scheduling",
                runbook="operator_install",
                summary="The pod bypasses the device plugin (e.g. NVIDIA_VISIBLE_DEVICES=all): the scheduler may place "
                "another pod on the same GPU and neither gets isolation.",
                evidence=[
                    f"DCGM attributes GPU {r.gpu} on {r.node} to this pod; its containers have no nvidia.com/gpu limit"
                ],
                sop_step=s.sop_step,
                commands=s.commands,
                data={"pod": f"{r.namespace}/{r.pod}"},
            )
        )
    return out
