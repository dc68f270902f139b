"""The report's frames from a :class:`gpulib.cost.model.CostReport` (:func:`gpulib.cost.analysis.analyze_cost`): the
executive summary, namespace allocation, top idle workloads, the idle/zombie table, the savings waterfall and
utilisation per GPU, node or namespace."""

from __future__ import annotations

from typing import Any

import pandas as pd

from gpulib.core.knowledge import settings
from gpulib.cost.model import ACTIONS, CostReport
from gpulib.cost.usage import attach_workloads, rollup


def _pods_of(rep: CostReport) -> pd.DataFrame:
    u = rep.usage[rep.usage["pod"] != ""]
    return u[["namespace", "pod", "workload", "owner_kind"]].drop_duplicates(["namespace", "pod"])


def executive_summary(rep: CostReport, top_n: int | None = None) -> dict[str, Any]:
    """Headline numbers: allocated %, active %, idle GPU-hours and money, top actions by saving
    (``top_n`` of them; default ``top_actions`` of ``gpulib/data/cost/report_policy.csv``)."""
    top_n = int(settings("report_policy")["top_actions"]) if top_n is None else int(top_n)
    u = rep.usage
    gh = float(u["gpu_hours"].sum())
    alloc = float(u["allocated_gpu_hours"].sum())
    active = float(u["active_gpu_hours"].sum())
    idle_h = float(u["idle_allocated_gpu_hours"].sum())
    unalloc_h = float(u["unallocated_gpu_hours"].sum())
    inv = rep.nodes
    cap_now = float(inv["gpu_equiv_allocatable"].sum())
    a = rep.actions
    top = a.head(top_n)
    return {
        "window_hours": rep.window_hours,
        "activity_metric": rep.activity_field,
        "currency": rep.currency,
        "price_provider": rep.provider,
        "gpu_hours": gh,
        "allocated_pct": 100.0 * alloc / gh if gh else float("nan"),
        "allocated_pct_now": 100.0
        * float(inv["gpu_equiv_requested"].clip(upper=inv["gpu_equiv_allocatable"]).sum())
        / cap_now
        if cap_now
        else float("nan"),
        "active_pct": 100.0 * active / alloc if alloc else float("nan"),
        # mean activity of the allocated time (activity-weighted): how busy the allocated GPUs were
        "busy_pct": 100.0 * float(u["busy_gpu_hours"].sum()) / alloc if alloc else float("nan"),
        "active_gpu_hours": active,
        "allocated_gpu_hours": alloc,
        "idle_gpu_hours": idle_h,
        "idle_cost": float(u["idle_cost"].sum(skipna=True)),
        "unallocated_gpu_hours": unalloc_h,
        "unallocated_cost": float(u["unallocated_cost"].sum(skipna=True)),
        "window_cost": float(u["cost"].sum(skipna=True)),
        "monthly_cost": float(u["cost"].sum(skipna=True)) * rep.month_factor,
        "potential_monthly_saving": float(a["monthly_saving"].sum()) if len(a) else 0.0,
        "spot_share_pct": 100.0 * float(u.loc[u["spot"], "gpu_hours"].sum()) / gh if gh else float("nan"),
        "actions": int(len(a)),
        "zombie_pods": int(rep.zombies[["namespace", "pod"]].drop_duplicates().shape[0]) if len(rep.zombies) else 0,
        "thresholds": {k: getattr(rep.thresholds, k) for k in rep.thresholds.__dataclass_fields__},
        "top_actions": [
            {
                "action": r.action,
                "label": ACTIONS[r.action],
                "target": f"{r.namespace}/{r.pod or r.workload}" if r.namespace else f"node {r.node}",
                "monthly_saving": round(float(r.monthly_saving), 2),
                "detail": r.detail,
                "confidence": float(r.confidence),
                "signal": r.signal,
            }
            for r in top.itertuples()
        ],
    }


def namespace_allocation(rep: CostReport) -> pd.DataFrame:
    """Allocation vs activity per namespace: allocated/active/idle GPU-hours, active %, cost (grouped bar chart)."""
    out = rollup(rep.usage, "namespace")
    return (
        out[
            [
                "namespace",
                "allocated_gpu_hours",
                "active_gpu_hours",
                "idle_allocated_gpu_hours",
                "active_pct",
                "allocated_cost",
                "idle_cost",
            ]
        ]
        .sort_values("allocated_gpu_hours", ascending=False, kind="stable")
        .reset_index(drop=True)
    )


def top_idle_workloads(rep: CostReport, n: int = 10) -> pd.DataFrame:
    """Workloads ranked by idle allocated cost, with a zombie flag and zombie hours (table)."""
    out = rollup(rep.usage, "workload")
    z = rep.zombies
    if len(z):
        zw = (
            attach_workloads(z.assign(container=""), _pods_of(rep))
            .groupby(["namespace", "workload"])["duration_s"]
            .sum()
            / 3600
        )
        key = pd.MultiIndex.from_frame(out[["namespace", "workload"]])
        out["zombie_hours"] = zw.reindex(key).fillna(0.0).to_numpy()
    else:
        out["zombie_hours"] = 0.0
    out["zombie"] = out["zombie_hours"] > 0
    cols = [
        "namespace",
        "workload",
        "owner_kind",
        "allocated_gpu_hours",
        "idle_allocated_gpu_hours",
        "active_pct",
        "fb_used_max_mib",
        "idle_cost",
        "zombie",
        "zombie_hours",
    ]
    out = out[cols].sort_values(["idle_cost", "idle_allocated_gpu_hours"], ascending=False, kind="stable")
    return out[out["idle_allocated_gpu_hours"] > 0].head(n).reset_index(drop=True)


def idle_zombie_table(rep: CostReport, n: int | None = None) -> pd.DataFrame:
    """:func:`top_idle_workloads` top ``n`` by idle cost (default ``idle_table_rows`` of
    ``gpulib/data/cost/report_policy.csv``), plus every zombie workload below the cut."""
    n = int(settings("report_policy")["idle_table_rows"]) if n is None else n
    full = top_idle_workloads(rep, n=10**9)
    keep = (full.index < n) | full["zombie"]
    return full[keep].reset_index(drop=True)


def savings_waterfall(rep: CostReport) -> pd.DataFrame:
    """Rows for a plotly Waterfall: current monthly spend, one negative step per action, remaining spend.

    Columns: ``step`` (label), ``action``, ``value`` (currency/month; negative for savings), ``measure``
    (``absolute`` | ``relative`` | ``total``).
    """
    current = float(rep.usage["cost"].sum(skipna=True)) * rep.month_factor
    a = rep.actions
    by = a.groupby("action")["monthly_saving"].sum() if len(a) else pd.Series(dtype=float)
    rows = [{"step": "Current monthly GPU spend", "action": "", "value": current, "measure": "absolute"}]
    for act in ACTIONS:
        if by.get(act, 0.0) > 0:
            rows.append({"step": ACTIONS[act], "action": act, "value": -float(by[act]), "measure": "relative"})
    rows.append({"step": "After actions", "action": "", "value": current - float(by.sum()), "measure": "total"})
    return pd.DataFrame(rows)


def gpu_utilization(rep: CostReport, level: str = "gpu") -> pd.DataFrame:
    """Utilisation and cost rolled up to gpu / node / namespace / workload / pod (see utilization.rollup)."""
    return rollup(rep.usage, level)
