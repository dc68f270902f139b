"""Findings of a cost analysis: one :class:`~gpulib.core.findings.Finding` per savings action, plus request/limit
hygiene, GPUs used without a request, non-GPU pods on GPU nodes, the spot share, unallocated GPU time and unpriced
models.

Input is a :class:`gpulib.cost.model.CostReport`; one finding per chosen action is
:func:`gpulib.cost.action_findings.action_finding`. SOP text, commands and escalation come from
``gpulib/data/cost/cost_sop.csv`` (:func:`gpulib.core.sop.sop`); the pods themselves come from the one rule of each
check (:mod:`gpulib.cost.hygiene`, :func:`gpulib.kube.requests.non_gpu_pods`); money is formatted by
:func:`gpulib.core.money.money`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.core.money import money
from gpulib.core.sop import sop
from gpulib.cost.action_findings import action_finding
from gpulib.cost.hygiene import has_gpu_taint, unrequested_gpu_pods
from gpulib.cost.model import CostReport
from gpulib.cost.prices import cost_policy
from gpulib.kube.labels import GPU_RESOURCE
from gpulib.kube.requests import request_limit_findings

__all__ = ["cost_findings", "unrequested_findings", "non_gpu_pod_findings"]

#: the cost domain's SOP table (gpulib/data/cost/cost_sop.csv)
_TABLE = "cost_sop"


def cost_findings(rep: CostReport) -> list[Finding]:
    """Findings: one per savings action, plus request/limit hygiene, non-GPU pods, spot share, unpriced models."""
    out = [action_finding(r, rep) for r in rep.actions.to_dict("records")]
    cur = rep.currency
    price_by_node = dict(zip(rep.nodes["node"].astype(str), rep.nodes["price_per_gpu_hour"]))
    rl = rep.request_limit
    ev: dict[tuple[str, str], list[str]] = {}
    extra: dict[tuple[str, str], dict] = {}
    for (ns, pod), grp in rl.groupby(["namespace", "pod"], sort=False):
        whole = grp[grp["resource"] == GPU_RESOURCE]
        gpus = float(
            pd.to_numeric(whole["request"].where(whole["request"].notna(), whole["limit"]), errors="coerce")
            .fillna(0.0)
            .sum()
        )
        monthly = gpus * float(price_by_node.get(str(grp["node"].iloc[0]), np.nan)) * cost_policy("hours_per_month")
        ev[(ns, pod)] = [f"GPUs held cost {money(monthly, cur) if monthly == monthly else 'unpriced'}/month"]
        extra[(ns, pod)] = {
            "monthly_saving": 0.0,
            "monthly_cost": None if monthly != monthly else round(monthly, 2),
            "currency": cur,
        }
    out += request_limit_findings(rl, evidence=ev, data=extra, runbook="gpu_utilization_report")
    out.extend(non_gpu_pod_findings(rep, rep.cluster_nodes, rep.cluster_pods))
    out.extend(unrequested_findings(rep, rep.cluster_pods))
    u = rep.usage
    out.extend(_unallocated_findings(rep))
    total = float(u["gpu_hours"].sum())
    if total > 0:
        spot_h = float(u.loc[u["spot"], "gpu_hours"].sum())
        out.append(
            Finding(
                severity=Severity.INFO,
                title=f"Spot share {100 * spot_h / total:.0f} % of GPU-hours",
                summary="Share of the window's GPU-hours on spot/preemptible nodes versus on-demand.",
                evidence=[f"spot {spot_h:.1f} GPU-h, on-demand {total - spot_h:.1f} GPU-h"],
                category="cost",
                data={
                    "action": "",
                    "monthly_saving": 0.0,
                    "currency": cur,
                    "spot_gpu_hours": spot_h,
                    "on_demand_gpu_hours": total - spot_h,
                },
            )
        )
    unpriced = u[u["price_per_gpu_hour"].isna()]
    if len(unpriced):
        models = sorted(set(unpriced["model"].astype(str)) | set(unpriced["model_key"].dropna().astype(str)))
        t = sop(
            _TABLE,
            "unpriced_models",
            gpu_hours=unpriced["gpu_hours"].sum(),
            provider=rep.provider,
            currency=cur,
            models=models,
        )
        out.append(
            Finding(
                severity=Severity.INFO,
                title="GPU models without a price",
                summary=t.summary,
                sop_step=t.sop_step,
                commands=t.commands,
                evidence=[f"models {models}"],
                confidence=1.0,
                category="cost",
                data={"action": "", "monthly_saving": 0.0, "currency": cur, "models": models},
            )
        )
    return sort_findings(out)


def _unallocated_findings(rep: CostReport) -> list[Finding]:
    """One INFO finding for GPU time no pod held on partly used nodes (never-used nodes get scale_down)."""
    u = rep.usage
    n = u.groupby("node", sort=True)[["allocated_gpu_hours", "unallocated_gpu_hours", "unallocated_cost"]].sum()
    part = n[(n["allocated_gpu_hours"] > 0) & (n["unallocated_gpu_hours"] > 0)].sort_values(
        "unallocated_gpu_hours", ascending=False, kind="stable"
    )
    if part.empty:
        return []
    cur, m = rep.currency, rep.month_factor
    monthly = float(part["unallocated_cost"].sum(skipna=True)) * m
    t = sop(_TABLE, "unallocated_gpus", gpu_hours=part["unallocated_gpu_hours"].sum(), monthly=money(monthly, cur))
    return [
        Finding(
            severity=Severity.INFO,
            title=f"Unallocated GPUs on {len(part)} partly used node(s)",
            summary=t.summary,
            sop_step=t.sop_step,
            commands=t.commands,
            evidence=[
                f"{node}: {h:.1f} unallocated GPU-h" for node, h in part["unallocated_gpu_hours"].head(10).items()
            ],
            category="cost",
            data={
                "action": "bin_pack",
                "monthly_saving": 0.0,
                "monthly_cost": round(monthly, 2),
                "currency": cur,
                "nodes": list(part.index),
            },
        )
    ]


def unrequested_findings(rep: CostReport, pods: pd.DataFrame | None) -> list[Finding]:
    """One WARNING per pod whose DCGM series show GPU use although it requested no GPU."""
    un = unrequested_gpu_pods(pods)
    if un.empty:
        return []
    u = rep.usage
    out = []
    for r in un.itertuples():
        mine = u[(u["namespace"] == r.namespace) & (u["pod"] == r.pod)]
        if mine.empty:
            continue
        hours = float(mine["gpu_hours"].sum())
        act = float((mine["activity_mean"] * mine["gpu_hours"]).sum() / hours) if hours else float("nan")
        gpus = ", ".join(sorted({f"{n}/GPU {g}" for n, g in zip(mine["node"], mine["gpu"])}))
        t = sop(_TABLE, "unrequested_gpu", ns=r.namespace, pod=r.pod)
        out.append(
            Finding(
                severity=Severity.WARNING,
                title=f"Pod {r.namespace}/{r.pod} uses a GPU it never requested",
                summary=f"DCGM attributes {hours:.1f} GPU-h on {gpus} to this pod, but it requests no nvidia.com/gpu: "
                "the scheduler counts that GPU as free and may place another pod on it.",
                sop_step=t.sop_step,
                commands=t.commands,
                evidence=[
                    f"gpu_request 0, no MIG request; DCGM series on {gpus}",
                    f"{hours:.1f} GPU-h used, mean activity {act:.1%}" if act == act else f"{hours:.1f} GPU-h used",
                ],
                category="cost",
                node=str(r.node) or None,
                runbook="gpu_utilization_report",
                data={
                    "action": "unrequested_gpu",
                    "monthly_saving": 0.0,
                    "currency": rep.currency,
                    "namespace": r.namespace,
                    "pod": r.pod,
                    "workload": r.workload,
                    "gpu_hours": round(hours, 3),
                },
            )
        )
    return out


def non_gpu_pod_findings(rep: CostReport, nodes: pd.DataFrame, pods: pd.DataFrame | None) -> list[Finding]:
    """INFO per GPU node with pods that request no GPU and do not use one; the taint command only where missing."""
    ng = rep.non_gpu_pods
    if ng is None or ng.empty:
        return []
    un = unrequested_gpu_pods(pods)
    users = set(zip(rep.usage.loc[rep.usage["pod"] != "", "namespace"], rep.usage.loc[rep.usage["pod"] != "", "pod"]))
    using = {k for k in zip(un["namespace"], un["pod"]) if k in users}
    ng = ng[[(a, b) not in using for a, b in zip(ng["namespace"], ng["pod"])]]
    taints = dict(zip(nodes["node"].astype(str), nodes["taints"]))
    out = []
    for node, grp in ng.groupby("node", sort=True):
        tainted = has_gpu_taint(taints.get(str(node)))
        kind = "non_gpu_pod_tolerates" if tainted else "non_gpu_pod_untainted"
        # one toleration fix per pod where the node is tainted, else the node's taint command
        rows = (
            [sop(_TABLE, kind, ns=ns, pod=p) for ns, p in zip(grp["namespace"], grp["pod"])]
            if tainted
            else [sop(_TABLE, kind, node=node)]
        )
        t, commands = rows[0], sum((x.commands for x in rows), [])
        out.append(
            Finding(
                severity=Severity.INFO,
                title=f"{len(grp)} non-GPU pod(s) on GPU node {node}",
                summary="Pods without GPU requests take CPU/memory on an expensive GPU node and can block GPU pods"
                + (" (the node has the nvidia.com/gpu taint: these pods tolerate it)." if tainted else "."),
                sop_step=t.sop_step,
                commands=commands,
                evidence=[
                    f"{ns}/{p} ({k or 'bare pod'})" for ns, p, k in zip(grp["namespace"], grp["pod"], grp["owner_kind"])
                ][:10]
                + [f"node taint nvidia.com/gpu: {'present' if tainted else 'missing'}"],
                category="cost",
                node=str(node),
                data={
                    "action": "taint" if not tainted else "toleration",
                    "monthly_saving": 0.0,
                    "currency": rep.currency,
                    "pods": [f"{a}/{b}" for a, b in zip(grp["namespace"], grp["pod"])],
                },
            )
        )
    return out
