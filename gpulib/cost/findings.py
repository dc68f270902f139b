"""Savings findings: one :class:`~gpulib.core.findings.Finding` per savings action of a cost analysis, plus
request/limit hygiene, non-GPU pods on GPU nodes, the spot share, unallocated GPU time and unpriced models.

Input is a :class:`gpulib.cost.analysis.CostReport`; the SOP text per action is in :data:`_SOP`; money is
formatted by :func:`gpulib.core.money.money`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.core.money import money
from gpulib.core.timeutil import format_duration
from gpulib.cost.prices import cost_policy
from gpulib.cost.usage import GR_ENGINE_ACTIVE
from gpulib.kube.labels import GPU_RESOURCE
from gpulib.kube.requests import request_limit_findings

if TYPE_CHECKING:
    from gpulib.cost.analysis import CostReport

__all__ = ["ACTIONS", "cost_findings"]

#: action -> (label for charts, verb for the SOP step)
ACTIONS = {
    "reclaim": "Reclaim idle / zombie GPUs",
    "rightsize": "Right-size multi-GPU workloads",
    "spot": "Move batch work to spot (with checkpointing)",
    "consolidate": "Consolidate with MIG / time-slicing",
    "quantise": "Quantise inference models",
    "scale_down": "Remove never-allocated GPU nodes",
}


_SOP = {
    "reclaim": ("Confirm with the owner, then free the GPU: delete the stuck pod or scale the idle workload to zero "
                "(an idle-culler such as gpu-pruner can automate it).",
                ["kubectl -n {ns} describe pod {pod}", "kubectl -n {ns} logs {pod} --tail=100",
                 "kubectl -n {ns} delete pod {pod}"],
                ["kubectl -n {ns} get pods -l app={wl} -o wide", "kubectl -n {ns} scale {kind_l}/{wl} --replicas=0"]),
    "rightsize": ("Lower the workload's GPU count (replicas or nvidia.com/gpu per pod) to the number its activity needs.",
                  [], ["kubectl -n {ns} get {kind_l}/{wl} -o yaml | grep -n nvidia.com/gpu",
                       "kubectl -n {ns} scale {kind_l}/{wl} --replicas=<n>"]),
    "spot": ("Run this batch work on spot GPU nodes with checkpointing (save state every N minutes, resume on restart) "
             "and a toleration for the spot taint.", [],
             ["kubectl -n {ns} get {kind_l}/{wl} -o yaml", "kubectl get nodes -l nvidia.com/gpu.present=true -L node.kubernetes.io/instance-type"]),
    "consolidate": ("Move this low-activity inference workload onto a MIG instance or a time-sliced GPU share "
                    "(label a node with nvidia.com/mig.config or configure time-slicing in the device plugin ConfigMap).",
                    [], ["kubectl -n {ns} get {kind_l}/{wl} -o yaml",
                         "kubectl label node <node> nvidia.com/mig.config=all-balanced --overwrite"]),
    "quantise": ("Serve an 8-bit (FP8/INT8) quantised model so the weights need half the GPU memory, then halve the GPU count "
                 "after an accuracy check.", [], ["kubectl -n {ns} get {kind_l}/{wl} -o yaml"]),
    "scale_down": ("No pod used these GPUs over the window: cordon and drain the node, then remove it from the node group.",
                   [], ["kubectl cordon {node}", "kubectl drain {node} --ignore-daemonsets --delete-emptydir-data"]),
}


def _action_finding(row: pd.Series, rep: CostReport) -> Finding:
    cur = rep.currency
    action = row["action"]
    is_zombie = action == "reclaim" and row["pod"] != ""
    ns, wl, pod, kind = row["namespace"], row["workload"], row["pod"], str(row["owner_kind"] or "deployment")
    sop, pod_cmds, wl_cmds = _SOP[action]
    fmt = dict(ns=ns, wl=wl, pod=pod, kind_l=kind.lower(), node=row["node"])
    cmds = [c.format(**fmt) for c in (pod_cmds if is_zombie else wl_cmds)]
    if is_zombie:
        title = f"Zombie pod {ns}/{pod} holds GPU memory while idle"
        sev = Severity.WARNING
    elif action == "reclaim":
        title = f"Idle allocated GPUs: {ns}/{wl}"
        sev = Severity.WARNING
    elif action == "scale_down":
        title = f"GPU node {row['node']} was never allocated"
        sev = Severity.INFO
    else:
        title = f"{ACTIONS[action]}: {ns}/{wl}"
        sev = Severity.INFO
    saving = float(row["monthly_saving"])
    evidence = [row["detail"], f"{row['gpus']:.2f} GPU-equivalents, {money(float(row['monthly_cost']), cur)}/month",
                f"estimated saving {money(saving, cur)}/month ({ACTIONS[action].lower()})",
                f"activity metric {rep.activity_field}"]
    summary = (f"{ACTIONS[action]} saves about {money(saving, cur)} per month "
               f"(window {format_duration(rep.window_hours * 3600)} extrapolated to a month).")
    return Finding(
        severity=sev, title=title, summary=summary, sop_step=sop, commands=cmds, evidence=evidence,
        escalation="If the owner disputes the figures, share this report's per-workload table with the namespace owner.",
        confidence=float(row["confidence"]) * (1.0 if rep.activity_field == GR_ENGINE_ACTIVE else 0.8),
        category="cost", node=row["node"] or None, runbook="gpu_utilization_report",
        data={"action": action, "monthly_saving": round(saving, 2), "monthly_cost": round(float(row["monthly_cost"]), 2),
              "currency": cur, "namespace": ns, "workload": wl, "pod": pod, "gpus": round(float(row["gpus"]), 3)})


def cost_findings(rep: CostReport) -> list[Finding]:
    """Findings: one per savings action, plus request/limit hygiene, non-GPU pods, spot share, unpriced models."""
    out = [_action_finding(r, rep) for _, r in rep.actions.iterrows()]
    cur, m = rep.currency, rep.month_factor
    price_by_node = dict(zip(rep.nodes["node"].astype(str), rep.nodes["price_per_gpu_hour"]))
    rl = rep.request_limit
    ev: dict[tuple[str, str], list[str]] = {}
    extra: dict[tuple[str, str], dict] = {}
    for (ns, pod), grp in rl.groupby(["namespace", "pod"], sort=False):
        whole = grp[grp["resource"] == GPU_RESOURCE]
        gpus = float(pd.to_numeric(whole["request"].where(whole["request"].notna(), whole["limit"]),
                                   errors="coerce").fillna(0.0).sum())
        monthly = gpus * float(price_by_node.get(str(grp["node"].iloc[0]), np.nan)) * cost_policy("hours_per_month")
        ev[(ns, pod)] = [f"GPUs held cost {money(monthly, cur) if monthly == monthly else 'unpriced'}/month"]
        extra[(ns, pod)] = {"monthly_saving": 0.0, "monthly_cost": None if monthly != monthly else round(monthly, 2),
                            "currency": cur}
    out += request_limit_findings(rl, evidence=ev, data=extra, runbook="gpu_utilization_report")
    for node, grp in rep.non_gpu_pods.groupby("node", sort=True):
        out.append(Finding(
            severity=Severity.INFO, title=f"{len(grp)} non-GPU pod(s) on GPU node {node}",
            summary="Pods without GPU requests take CPU/memory on an expensive GPU node and can block GPU pods.",
            sop_step="Taint GPU nodes so only pods that tolerate the taint (GPU pods) land there.",
            commands=[f"kubectl taint nodes {node} nvidia.com/gpu=present:NoSchedule"],
            evidence=[f"{ns}/{p} ({k or 'bare pod'})" for ns, p, k in zip(grp["namespace"], grp["pod"], grp["owner_kind"])][:10],
            category="cost", node=str(node), data={"action": "taint", "monthly_saving": 0.0, "currency": cur,
                                                   "pods": [f"{a}/{b}" for a, b in zip(grp["namespace"], grp["pod"])]}))
    u = rep.usage
    out.extend(_unallocated_findings(rep))
    total = float(u["gpu_hours"].sum())
    if total > 0:
        spot_h = float(u.loc[u["spot"], "gpu_hours"].sum())
        out.append(Finding(
            severity=Severity.INFO, title=f"Spot share {100 * spot_h / total:.0f} % of GPU-hours",
            summary="Share of the window's GPU-hours on spot/preemptible nodes versus on-demand.",
            evidence=[f"spot {spot_h:.1f} GPU-h, on-demand {total - spot_h:.1f} GPU-h"], category="cost",
            data={"action": "", "monthly_saving": 0.0, "currency": cur, "spot_gpu_hours": spot_h,
                  "on_demand_gpu_hours": total - spot_h}))
    unpriced = u[u["price_per_gpu_hour"].isna()]
    if len(unpriced):
        models = sorted(set(unpriced["model"].astype(str)) | set(unpriced["model_key"].dropna().astype(str)))
        out.append(Finding(
            severity=Severity.INFO, title="GPU models without a price",
            summary=f"{unpriced['gpu_hours'].sum():.1f} GPU-h are not costed: no {rep.provider}/{cur} price for {models}.",
            sop_step="Add rows for these models to a price file (same columns as gpulib/data/cost/gpu_prices.csv) and pass price_file=.",
            evidence=[f"models {models}"], confidence=1.0, category="cost",
            data={"action": "", "monthly_saving": 0.0, "currency": cur, "models": models}))
    return sort_findings(out)


def _unallocated_findings(rep: CostReport) -> list[Finding]:
    """One INFO finding for GPU time no pod held on partly used nodes (never-used nodes get scale_down)."""
    u = rep.usage
    n = u.groupby("node", sort=True)[["allocated_gpu_hours", "unallocated_gpu_hours", "unallocated_cost"]].sum()
    part = n[(n["allocated_gpu_hours"] > 0) & (n["unallocated_gpu_hours"] > 0)].sort_values(
        "unallocated_gpu_hours", ascending=False, kind="stable")
    if part.empty:
        return []
    cur, m = rep.currency, rep.month_factor
    monthly = float(part["unallocated_cost"].sum(skipna=True)) * m
    return [Finding(
        severity=Severity.INFO, title=f"Unallocated GPUs on {len(part)} partly used node(s)",
        summary=f"{part['unallocated_gpu_hours'].sum():.1f} GPU-h had no pod ({money(monthly, cur)}/month): "
                "bin-pack GPU pods so whole nodes empty out and the autoscaler can remove them.",
        sop_step="Check which pending or small pods could fill these GPUs; consider a bin-packing scheduler profile "
                 "(MostAllocated scoring) for GPU nodes.",
        commands=["kubectl describe nodes -l nvidia.com/gpu.present=true | grep -A8 'Allocated resources'"],
        evidence=[f"{node}: {h:.1f} unallocated GPU-h" for node, h in part["unallocated_gpu_hours"].head(10).items()],
        category="cost", data={"action": "bin_pack", "monthly_saving": 0.0, "monthly_cost": round(monthly, 2),
                               "currency": cur, "nodes": list(part.index)})]


