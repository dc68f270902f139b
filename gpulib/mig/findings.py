"""MIG results -> findings: layout problems (invalid placements, stranded slots), the plan and the sizing from
observed usage, and the guided MIG-change SOP, which first names the clients outside Kubernetes that hold the GPU.

SOP text, commands and escalation come from ``gpulib/data/mig/mig_sop.csv`` (:func:`gpulib.core.sop.sop`).
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import overhead, threshold
from gpulib.core.money import money
from gpulib.core.sop import sop
from gpulib.mig.geometry import place, stranded_slots

__all__ = ["layout_findings", "plan_findings", "sizing_findings", "outside_kubernetes_clients", "mig_change_sop"]

#: the MIG domain's SOP table (gpulib/data/mig/mig_sop.csv)
_TABLE = "mig_sop"


def layout_findings(
    gpu_model: str,
    profiles_wanted: Sequence[str | int] | dict,
    *,
    node: str | None = None,
    gpu: str | None = None,
    catalog: pd.DataFrame | None = None,
) -> list[Finding]:
    """Findings for a proposed per-GPU layout: OK with the start slots, or CRITICAL with the reason."""
    p = place(gpu_model, profiles_wanted, catalog)
    if p.fits:
        ev = [f"{i.profile} at slot {i.start} (size {i.size}, {i.memory_gib:g} GiB)" for i in p.instances]
        ev.append(f"free memory slots: {p.free_slots or 'none'}; stranded: {stranded_slots(p, catalog)}")
        t = sop(_TABLE, "layout_fits")
        return [
            Finding(
                Severity.OK,
                f"MIG layout fits on {p.gpu_model}",
                summary=", ".join(p.requested),
                sop_step=t.sop_step,
                commands=p.nvidia_smi_commands(gpu or 0),
                evidence=ev,
                category="mig",
                node=node,
                gpu=gpu,
                data={"placement": p.starts},
            )
        ]
    t = sop(_TABLE, "layout_does_not_fit")
    return [
        Finding(
            Severity.CRITICAL,
            f"MIG layout does not fit on {p.gpu_model}",
            summary=p.reason,
            sop_step=t.sop_step,
            commands=t.commands,
            evidence=[p.reason],
            category="mig",
            node=node,
            gpu=gpu,
        )
    ]


# --------------------------------------------------------------------------------------------------
# the plan and the sizing from observed usage
# --------------------------------------------------------------------------------------------------
def plan_findings(plan) -> list[Finding]:
    """A :class:`gpulib.mig.plan.Plan` as findings: GPUs used against one whole GPU per replica (OK, or WARNING when
    replicas are left unplaced), the label commands, and one WARNING naming the replicas that could not be placed."""
    ev = [
        f"GPUs used {plan.gpus_used} vs {plan.baseline_gpus} with one whole GPU per replica (saved {plan.gpus_saved})",
        f"solver {plan.solver}: {plan.status}, gap {plan.mip_gap:.2%}",
    ]
    if plan.prices:
        per_gpu = [plan.prices.get(g.model, 0.0) for g in plan.gpus]
        ev.append(f"cost of the MIG GPUs: {money(sum(per_gpu), 'USD')}/h")
    sev = Severity.OK if not plan.unplaced else Severity.WARNING
    t = sop(_TABLE, "plan_ready")
    fs = [
        Finding(
            sev,
            f"MIG plan: {plan.gpus_used} GPU(s) instead of {plan.baseline_gpus}",
            summary=t.summary,
            sop_step=t.sop_step,
            commands=plan.label_commands(),
            evidence=ev,
            category="mig",
            confidence=1.0 if plan.optimal else 0.8,
            data={"gpus_saved": plan.gpus_saved},
        )
    ]
    if plan.unplaced:
        t = sop(_TABLE, "replicas_unplaced")
        fs.append(
            Finding(
                Severity.WARNING,
                f"{len(plan.unplaced)} workload replica(s) could not be placed",
                summary=t.summary,
                evidence=plan.unplaced[:20],
                sop_step=t.sop_step,
                category="mig",
            )
        )
    return fs


def sizing_findings(
    fb_summary: pd.DataFrame | None, sizing: pd.DataFrame, *, headroom: float | None = None
) -> list[Finding]:
    """One finding per pod of :func:`gpulib.mig.sizing.size_from_usage`'s ``sizing`` (measured on ``fb_summary``,
    the FB_USED SUMMARY frame it read): memory looks pre-allocated (WARNING: size from the model), fits a MIG
    profile, or keeps a whole GPU; one INFO finding when there was no FB_USED data at all. ``headroom`` is the one
    the sizing used (default ``sizing_headroom`` of ``model_memory_overheads.csv``)."""
    headroom = overhead("sizing_headroom") if headroom is None else float(headroom)
    if fb_summary is None or fb_summary.empty:
        t = sop(_TABLE, "no_fb_used")
        return [Finding(Severity.INFO, "No FB_USED data to size from", category="mig", sop_step=t.sop_step)]
    busy = overhead("compute_busy_ratio")
    out = []
    for r in sizing.itertuples():
        ns, pod, a95, cur_gib = r.namespace, r.pod, float(r.activity_p95), r.device_gib
        cur_gib = 0 if cur_gib is None or pd.isna(cur_gib) else cur_gib
        ev = [
            f"FB_USED p95 {r.fb_p95_gib:.1f} GiB, max {r.fb_max_gib:.1f} GiB of {cur_gib:.1f} GiB",
            f"need with {headroom:.0%} headroom: {r.need_gib:.1f} GiB",
        ]
        if not math.isnan(a95):
            ev.append(
                f"activity p95 {a95:.0%} of {r.device_compute_slices} compute slices -> {r.compute_slices} slice(s)"
                + (" (busy: give it more compute)" if a95 > busy else "")
            )
        if r.preallocated:
            t = sop(_TABLE, "preallocated")
            out.append(
                Finding(
                    Severity.WARNING,
                    f"{ns}/{pod}: memory looks pre-allocated; size from the model, not FB_USED",
                    summary=t.summary,
                    sop_step=t.sop_step,
                    evidence=ev,
                    category="mig",
                    confidence=0.7,
                    node=r.node,
                )
            )
        elif isinstance(r.profile, str) and r.profile:  # a frame holds a missing profile as None or NaN
            t = sop(_TABLE, "fits_profile", memory_gib=r.profile_memory_gib, need_gib=r.need_gib)
            out.append(
                Finding(
                    Severity.INFO,
                    f"{ns}/{pod}: fits MIG {r.profile} on {r.target_model}",
                    summary=t.summary,
                    evidence=ev,
                    category="mig",
                    node=r.node,
                    sop_step=t.sop_step,
                )
            )
        else:
            out.append(
                Finding(
                    Severity.INFO,
                    f"{ns}/{pod}: keep a whole GPU",
                    summary="no MIG profile is large enough or the GPU is not MIG-capable",
                    evidence=ev,
                    category="mig",
                    node=r.node,
                )
            )
    return out


# --------------------------------------------------------------------------------------------------
# guided MIG change (SOP)
# --------------------------------------------------------------------------------------------------
def outside_kubernetes_clients(fb_used: pd.DataFrame | None, node: str) -> list[str]:
    """GPUs / MIG instances of ``node`` whose memory is held (FB_USED above ``zombie_fb_used_min_mib``) with no
    pod attributed by dcgm-exporter: processes outside Kubernetes (or pods the exporter cannot map). ``fb_used``
    is a SUMMARY frame (e.g. ``stat="max"``); returns evidence strings."""
    if fb_used is None or fb_used.empty:
        return []
    held = threshold("zombie_fb_used_min_mib")
    df = fb_used[
        (fb_used["node"] == node)
        & (fb_used["pod"].fillna("").astype(str) == "")
        & (pd.to_numeric(fb_used["value"], errors="coerce") > held)
    ]
    return [
        f"GPU {r.gpu}{' ' + str(r.gpu_i_profile) if str(r.gpu_i_profile or '') not in ('', 'nan') else ''}: "
        f"{float(r.value):.0f} MiB used, no pod"
        for r in df.itertuples()
    ]


def mig_change_sop(
    node: str,
    config_name: str,
    *,
    pods: pd.DataFrame | None = None,
    nodes: pd.DataFrame | None = None,
    fb_used: pd.DataFrame | None = None,
    namespace_operator: str = "gpu-operator",
) -> list[Finding]:
    """The guided MIG change for one node as Findings: pre-checks from live data (GPU pods still on the node,
    GPU memory held outside Kubernetes, current ``mig.config.state``), then cordon -> wait for GPU pods ->
    label ``nvidia.com/mig.config`` -> watch ``nvidia.com/mig.config.state`` -> check allocatable
    ``nvidia.com/mig-*`` -> uncordon.

    ``pods``/``nodes`` follow ``gpulib.core.schema.POD_COLUMNS``/``NODE_COLUMNS``, ``fb_used`` is a FB_USED SUMMARY
    frame (max over the window); omit them to get the SOP alone.
    """
    out: list[Finding] = []
    gpu_pods = []
    if pods is not None and not pods.empty:
        on = pods[(pods["node"] == node) & pods["phase"].isin(["Running", "Pending"])]
        for r in on.itertuples():
            mig = getattr(r, "mig_requests", None) or {}
            if (pd.notna(r.gpu_request) and float(r.gpu_request or 0) > 0) or (
                isinstance(mig, dict) and any(mig.values())
            ):
                gpu_pods.append(f"{r.namespace}/{r.pod}")
    if gpu_pods:
        t = sop(_TABLE, "gpu_pods_running", node=node)
        out.append(
            Finding(
                Severity.WARNING,
                f"{len(gpu_pods)} GPU pod(s) still running on {node}",
                summary=t.summary,
                sop_step=t.sop_step,
                commands=t.commands,
                evidence=gpu_pods[:20],
                category="mig",
                node=node,
            )
        )
    outside = outside_kubernetes_clients(fb_used, node)
    if outside:
        t = sop(_TABLE, "memory_outside_kubernetes")
        out.append(
            Finding(
                Severity.WARNING,
                f"GPU memory held outside Kubernetes on {node}",
                summary=t.summary,
                sop_step=t.sop_step,
                commands=t.commands,
                evidence=outside[:20],
                category="mig",
                node=node,
            )
        )
    state = None
    if nodes is not None and not nodes.empty and node in set(nodes["node"]):
        row = nodes[nodes["node"] == node].iloc[0]
        state = row.get("mig_config_state") or None
        if str(row.get("mig_config") or "") == config_name and state == "success":
            out.append(
                Finding(
                    Severity.OK,
                    f"{node} already runs MIG config {config_name}",
                    evidence=[f"nvidia.com/mig.config={config_name}", "nvidia.com/mig.config.state=success"],
                    category="mig",
                    node=node,
                )
            )
            return out
        if state == "failed":
            t = sop(_TABLE, "previous_change_failed", node=node, namespace=namespace_operator)
            out.append(
                Finding(
                    Severity.CRITICAL,
                    f"previous MIG reconfiguration failed on {node}",
                    summary=t.summary,
                    sop_step=t.sop_step,
                    commands=t.commands,
                    evidence=["nvidia.com/mig.config.state=failed"],
                    category="mig",
                    node=node,
                )
            )
    t = sop(_TABLE, "guided_change", node=node, config=config_name)
    out.append(
        Finding(
            Severity.INFO,
            f"Guided MIG change on {node} to config {config_name}",
            summary=t.summary,
            sop_step=t.sop_step,
            commands=t.commands,
            evidence=[f"current mig.config.state: {state or 'unknown'}"],
            escalation=t.escalation,
            category="mig",
            node=node,
            data={"config": config_name},
        )
    )
    return out
