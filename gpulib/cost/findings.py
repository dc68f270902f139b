"""Savings findings: one :class:`~gpulib.core.findings.Finding` per savings action of a cost analysis, plus
request/limit hygiene, non-GPU pods on GPU nodes, the spot share, unallocated GPU time and unpriced models.

Input is a :class:`gpulib.cost.analysis.CostReport`; one finding per chosen action is
:func:`gpulib.cost.action_findings.action_finding` (SOP text from ``gpulib/data/cost/cost_sop.csv``), the
non-GPU-pod and unrequested-GPU findings are :mod:`gpulib.cost.hygiene` (the non-GPU pods themselves come
from the one rule, :func:`gpulib.kube.requests.non_gpu_pods`); money is formatted by
:func:`gpulib.core.money.money`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.core.money import money
from gpulib.cost.action_findings import action_finding
from gpulib.cost.hygiene import non_gpu_pod_findings, unrequested_findings
from gpulib.cost.prices import cost_policy
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


def cost_findings(rep: CostReport) -> list[Finding]:
    """Findings: one per savings action, plus request/limit hygiene, non-GPU pods, spot share, unpriced models."""
    out = [action_finding(r, rep) for _, r in rep.actions.iterrows()]
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
    out.extend(non_gpu_pod_findings(rep, rep.cluster_nodes, rep.cluster_pods))
    out.extend(unrequested_findings(rep, rep.cluster_pods))
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


