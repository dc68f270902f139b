"""GPU cost analysis: idle and zombie money, savings per action (the report frames are gpulib.cost.report_frames).

Flow (docs/architecture.md, "The flow")::

    rep = analyze_cost(nodes, pods, gr_engine_active=act, fb_used=fb, gpu_util=util, window="7d")
    rep.findings              # Findings with the action and estimated monthly saving in .data
    executive_summary(rep)    # dict for the report's headline
    namespace_allocation(rep), top_idle_workloads(rep), savings_waterfall(rep),
    node_time_matrix(rep.samples)   # tidy frames for the charts

Prices are :mod:`gpulib.cost.prices` (``price_file=`` / ``price_overrides=`` override the shipped table);
the candidate actions (:func:`savings_actions`, each valued alone) become the plan that keeps the
non-overlapping ones in :mod:`gpulib.cost.plan`, the findings are :mod:`gpulib.cost.findings`; the result is a
:class:`gpulib.cost.model.CostReport`. Policy numbers (hours per month, right-size
target, consolidation limits) live in ``gpulib/data/cost/cost_policy.csv``; idle/zombie thresholds in
``thresholds.csv`` (the one idle/zombie rule is :mod:`gpulib.cost.usage`).

Monthly figures extrapolate the window: ``window cost x hours_per_month / window hours``.
"""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from gpulib.core.knowledge import load_table
from gpulib.core.timeutil import format_duration
from gpulib.cost.findings import cost_findings
from gpulib.cost.hygiene import mark_unrequested
from gpulib.cost.model import CostReport
from gpulib.cost.plan import plan_actions
from gpulib.cost.prices import (
    canonical_models,
    cost_policy,
    cost_policy_list,
    default_provider,
    gpu_specs,
    load_prices,
    mig_slices_of,
    price_table,
)
from gpulib.cost.report_frames import (
    _pods_of,
    executive_summary,
    gpu_utilization,
    idle_zombie_table,
    namespace_allocation,
    savings_waterfall,
    top_idle_workloads,
)
from gpulib.cost.totals import UsageTotals, totals_from_samples
from gpulib.cost.usage import (
    Thresholds,
    attach_workloads,
    mig_share,
    prepare_samples,
    select_activity,
    window_hours,
)
from gpulib.kube.requests import non_gpu_pods, request_limit_issues

__all__ = [
    "analyze_cost",
    "executive_summary",
    "namespace_allocation",
    "top_idle_workloads",
    "idle_zombie_table",
    "savings_waterfall",
    "gpu_utilization",
    "savings_actions",
    "workload_usage",
    "node_inventory",
    "non_gpu_pods_on_gpu_nodes",
]


# ----------------------------------------------------------------------------------------------
# nodes and pods (small frames: per-row Python is fine here, never per sample)
# ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=1024)
def _mig_profile_share(profile: str) -> float:
    """:func:`mig_share` of one profile name, cached (called per pod and per node)."""
    return float(mig_share(pd.Series([profile])).iloc[0])


def _mig_equivalents(d: Any) -> float:
    """Sum of GPU shares of a {'nvidia.com/mig-3g.40gb': 2, ...} dict."""
    if not isinstance(d, Mapping) or not d:
        return 0.0
    return float(sum(_mig_profile_share(str(k).split("mig-")[-1]) * float(v or 0) for k, v in d.items()))


def _truthy(col: pd.Series) -> pd.Series:
    return col.map(lambda v: str(v).strip().lower() in ("true", "1", "yes", "spot")).astype(bool)


def node_inventory(nodes: pd.DataFrame, pods: pd.DataFrame | None, prices: pd.DataFrame) -> pd.DataFrame:
    """Per GPU node now: allocatable vs requested GPU-equivalents, spot flag, model key and price.

    MIG resources count by compute share (``3g`` = 3/7); time-sliced requests by 1/replicas.
    """
    n = nodes.copy()
    n["model_key"] = canonical_models(n["gpu_product"])
    n["spot"] = _truthy(n["spot"])
    reps = pd.to_numeric(n["gpu_replicas"], errors="coerce").fillna(1.0).clip(lower=1.0)
    shared = n["sharing_strategy"].astype("string").fillna("").str.lower().isin(["time-slicing", "mps"])
    reps = reps.where(shared, 1.0)
    n["replicas"] = reps
    alloc = pd.to_numeric(n["gpu_allocatable"], errors="coerce").fillna(0.0)
    if "dra_gpus" in n:  # GPUs a DRA driver advertises in ResourceSlices (gpulib.kube.dra.attach_nodes)
        alloc = alloc + pd.to_numeric(n["dra_gpus"], errors="coerce").fillna(0.0)
    n["gpu_equiv_allocatable"] = alloc / reps + n["mig_allocatable"].map(_mig_equivalents)
    n = n[n["gpu_equiv_allocatable"] > 0]
    req = pd.Series(0.0, index=n["node"].astype(str))
    if pods is not None and len(pods):
        p = pods[pods["phase"].astype("string").fillna("").isin(["Running", "Pending"])]
        p = p[p["node"].astype("string").fillna("").isin(req.index)]
        g = pd.to_numeric(p["gpu_request"], errors="coerce").fillna(0.0)
        g = g / p["node"].astype(str).map(dict(zip(n["node"].astype(str), reps))).astype(float).fillna(1.0)
        g = g + p["mig_requests"].map(_mig_equivalents)
        req = req.add(g.groupby(p["node"].astype(str)).sum(), fill_value=0.0)
    n["gpu_equiv_requested"] = n["node"].astype(str).map(req).fillna(0.0).to_numpy()
    n["gpu_equiv_unallocated"] = (n["gpu_equiv_allocatable"] - n["gpu_equiv_requested"]).clip(lower=0.0)
    od = n["model_key"].map(prices["on_demand"]).astype(float)
    sp = n["model_key"].map(prices["spot"]).astype(float)
    n["price_per_gpu_hour"] = sp.where(n["spot"] & sp.notna(), od)
    return n[
        [
            "node",
            "gpu_product",
            "model_key",
            "spot",
            "replicas",
            "gpu_equiv_allocatable",
            "gpu_equiv_requested",
            "gpu_equiv_unallocated",
            "price_per_gpu_hour",
        ]
    ].reset_index(drop=True)


def non_gpu_pods_on_gpu_nodes(pods: pd.DataFrame, gpu_nodes: pd.Series) -> pd.DataFrame:
    """Pods without GPU/MIG requests on GPU nodes (the rule: :func:`gpulib.kube.requests.non_gpu_pods`)."""
    return non_gpu_pods(pods, gpu_nodes.astype(str))


# ----------------------------------------------------------------------------------------------
# the analysis
# ----------------------------------------------------------------------------------------------
def analyze_cost(
    nodes: pd.DataFrame,
    pods: pd.DataFrame,
    gr_engine_active: pd.DataFrame | None = None,
    fb_used: pd.DataFrame | None = None,
    *,
    gpu_util: pd.DataFrame | None = None,
    window: str | timedelta | None = None,
    price_file: str | Path | None = None,
    prices: pd.DataFrame | None = None,
    provider: str | None = None,
    currency: str = "USD",
    price_overrides: Mapping[str, Any] | None = None,
    thresholds: Mapping[str, float] | None = None,
    namespaces: list[str] | None = None,
    serving: pd.DataFrame | None = None,
    totals: UsageTotals | None = None,
) -> CostReport:
    """Run the whole cost analysis over one window.

    ``gr_engine_active`` / ``gpu_util``: SERIES_COLUMNS frames (GR_ENGINE_ACTIVE preferred, see
    :func:`gpulib.cost.usage.select_activity`); ``fb_used``: FB_USED series (MiB); ``nodes`` /
    ``pods``: NODE_COLUMNS / POD_COLUMNS. ``namespaces`` restricts pods and series to those namespaces
    (unallocated GPU time is kept). ``serving``: :func:`gpulib.vllm.serving_signals` rows; a
    serving workload they call overloaded is never shrunk. ``totals``: the window's totals as Prometheus added
    them up (:func:`gpulib.cost.totals.load_totals`), used instead of the series frames. Returns a
    :class:`CostReport` with findings.
    """
    th = Thresholds.from_table(**dict(thresholds or {}))
    table = price_table(
        prices if prices is not None else load_prices(price_file),
        provider=provider,
        currency=currency,
        overrides=price_overrides,
    )
    if totals is None:
        act, field_used = select_activity(gr_engine_active, gpu_util)
        if namespaces:
            act = act[act["namespace"].astype("string").fillna("").isin(list(namespaces) + [""])]
        samples = mark_unrequested(
            prepare_samples(act, fb_used, nodes=nodes, window=window, compute_slices=mig_slices_of(act["model"])),
            pods,
        )
        totals = totals_from_samples(samples, field_used, th)
    elif namespaces:
        totals = totals.within(list(namespaces) + [""])
    if namespaces:
        pods = pods[pods["namespace"].astype(str).isin(namespaces)] if pods is not None else pods
    samples, field_used = totals.samples, totals.activity_field
    wh = window_hours(window, samples)
    inv = node_inventory(nodes, pods, table)
    usage = _price_usage(attach_workloads(totals.usage, pods), inv, nodes, table)
    zombies = totals.zombies.copy()
    if len(zombies):
        price = usage.drop_duplicates(["node", "gpu", "gpu_i_id", "pod"]).set_index(["node", "gpu", "gpu_i_id", "pod"])[
            "price_per_gpu_hour"
        ]
        key = pd.MultiIndex.from_frame(zombies[["node", "gpu", "gpu_i_id", "pod"]])
        zombies["price_per_gpu_hour"] = price.reindex(key).to_numpy()
        zombies["cost"] = zombies["gpu_hours"] * zombies["price_per_gpu_hour"]
    else:
        zombies["price_per_gpu_hour"] = pd.Series(dtype=float)
        zombies["cost"] = pd.Series(dtype=float)
    month = cost_policy("hours_per_month") / wh
    rep = CostReport(
        window_hours=wh,
        activity_field=field_used,
        currency=currency.upper(),
        provider=(provider or default_provider()).lower(),
        month_factor=month,
        thresholds=th,
        prices=table,
        samples=samples,
        usage=usage,
        end=totals.end,
        step_s=totals.step_s,
        zombies=zombies,
        nodes=inv,
        request_limit=request_limit_issues(pods),
        non_gpu_pods=non_gpu_pods_on_gpu_nodes(pods, inv["node"]),
        actions=pd.DataFrame(),
        serving=serving,
        cluster_nodes=nodes,
        cluster_pods=pods,
    )
    w = workload_usage(rep)
    rep.actions, rep.skipped = plan_actions(rep, savings_actions(rep, workloads=w), serving, workloads=w)
    rep.findings = cost_findings(rep)
    return rep


def _price_usage(usage: pd.DataFrame, inv: pd.DataFrame, nodes: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Add model_key, spot, gpu_memory_mib, price_per_gpu_hour and the cost columns to series usage."""
    u = usage.copy()
    key = canonical_models(u["model"])
    node_key = u["node"].map(dict(zip(inv["node"].astype(str), inv["model_key"])))
    u["model_key"] = key.fillna(node_key.astype("string"))
    spot = dict(zip(nodes["node"].astype(str), _truthy(nodes["spot"])))
    u["spot"] = u["node"].map(spot).fillna(False).astype(bool)
    mem = dict(zip(nodes["node"].astype(str), pd.to_numeric(nodes["gpu_memory_mib"], errors="coerce")))
    spec_mem = gpu_specs()["memory_gb"].astype(float) * 1024.0
    u["gpu_memory_mib"] = u["node"].map(mem).astype(float).fillna(u["model_key"].map(spec_mem).astype(float))
    od = u["model_key"].map(table["on_demand"]).astype(float)
    sp = u["model_key"].map(table["spot"]).astype(float)
    u["on_demand_price"] = od
    u["spot_price"] = sp
    u["price_per_gpu_hour"] = sp.where(u["spot"] & sp.notna(), od)
    for hours, money in (
        ("gpu_hours", "cost"),
        ("allocated_gpu_hours", "allocated_cost"),
        ("idle_allocated_gpu_hours", "idle_cost"),
        ("unallocated_gpu_hours", "unallocated_cost"),
    ):
        u[money] = u[hours] * u["price_per_gpu_hour"]
    return u


# ----------------------------------------------------------------------------------------------
# savings per action (vectorised over workloads)
# ----------------------------------------------------------------------------------------------
_ACTION_COLS = [
    "action",
    "namespace",
    "workload",
    "owner_kind",
    "node",
    "pod",
    "gpus",
    "monthly_cost",
    "monthly_saving",
    "confidence",
    "detail",
]


def workload_usage(rep: CostReport) -> pd.DataFrame:
    """Per workload: GPU-hours, cost, activity, memory, GPU equivalents (time-averaged), spot share."""
    u = rep.usage[rep.usage["pod"] != ""].copy()
    if u.empty:
        return pd.DataFrame()
    u["fb_frac_max"] = u["fb_used_max_mib"] / u["gpu_memory_mib"]
    u["od_hours"] = u["allocated_gpu_hours"].where(~u["spot"], 0.0)
    u["spot_gap_cost"] = u["od_hours"] * (u["on_demand_price"] - u["spot_price"])
    u["is_mig"] = u["gpu_i_profile"] != ""
    u["od_alloc_cost"] = u["allocated_gpu_hours"] * u["on_demand_price"]
    keys = ["namespace", "workload", "owner_kind"]
    g = u.groupby(keys, sort=True, dropna=False)
    w = g[
        [
            "allocated_gpu_hours",
            "active_gpu_hours",
            "busy_gpu_hours",
            "idle_allocated_gpu_hours",
            "allocated_cost",
            "idle_cost",
            "od_hours",
            "spot_gap_cost",
            "od_alloc_cost",
        ]
    ].sum()
    w["fb_used_max_mib"] = g["fb_used_max_mib"].max()
    w["fb_frac_max"] = g["fb_frac_max"].max()
    w["fb_frac_min_of_max"] = g["fb_frac_max"].min()
    w["activity_p95"] = g["activity_p95"].max()
    w["any_mig"] = g["is_mig"].any()
    w["max_share"] = g["share"].max()
    w["model_key"] = g["model_key"].first()
    w["node"] = g["node"].first()
    w["pods"] = g["pod"].nunique()
    w["gpus"] = w["allocated_gpu_hours"] / rep.window_hours
    # mean activity of the allocated time (activity-weighted): what sizing decisions use
    w["active_ratio"] = (w["busy_gpu_hours"] / w["allocated_gpu_hours"]).where(w["allocated_gpu_hours"] > 0)
    w["price"] = (w["allocated_cost"] / w["allocated_gpu_hours"]).where(w["allocated_gpu_hours"] > 0)
    w["od_price"] = (w["od_alloc_cost"] / w["allocated_gpu_hours"]).where(w["allocated_gpu_hours"] > 0)
    return w.reset_index()


def savings_actions(rep: CostReport, *, workloads: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (action, target) with the estimated monthly saving in ``rep.currency``; ``workloads``:
    :func:`workload_usage` of ``rep`` when the caller has it already.

    * reclaim: zombie pods (their zombie GPU-hours) and workloads idle over the whole window
      (idle allocated GPU-hours minus what the zombie rows already count);
    * rightsize: multi-GPU workloads whose total activity needs fewer GPUs at the target activity;
    * spot: batch/training owner kinds on on-demand nodes: (on-demand - spot) x GPU-hours;
    * consolidate: single-GPU inference pods with low p95 activity and small peak memory -> the
      smallest MIG instance (or time-slice share) that fits;
    * quantise: memory-bound multi-GPU inference workloads: GPUs freed by 8-bit weights;
    * scale_down: GPU nodes with no allocated GPU time over the window.
    """
    m = rep.month_factor
    hpm = cost_policy("hours_per_month")
    parts: list[pd.DataFrame] = []

    z = rep.zombies
    zsave = pd.Series(dtype=float)
    if len(z):
        zp = (
            z.groupby(["namespace", "pod"], sort=True)
            .agg(
                node=("node", "first"),
                gpu=("gpu", "first"),
                gpu_hours=("gpu_hours", "sum"),
                cost=("cost", "sum"),
                duration_s=("duration_s", "max"),
                fb=("fb_used_mean_mib", "mean"),
                act=("activity_max", "max"),
            )
            .reset_index()
        )
        zp = attach_workloads(zp.assign(container=""), _pods_of(rep))
        zsave = zp.groupby(["namespace", "workload"])["cost"].sum() * m
        parts.append(
            pd.DataFrame(
                {
                    "action": "reclaim",
                    "namespace": zp["namespace"],
                    "workload": zp["workload"],
                    "owner_kind": zp["owner_kind"],
                    "node": zp["node"],
                    "pod": zp["pod"],
                    "gpus": zp["gpu_hours"] / rep.window_hours,
                    "monthly_cost": zp["cost"] * m,
                    "monthly_saving": zp["cost"] * m,
                    "confidence": 0.9,
                    "detail": [
                        (
                            f"zombie: FB_USED {fb / 1024:.1f} GiB held, activity max {a:.1%} for "
                            f"{format_duration(d)} (GPU {g})"
                        )
                        for fb, a, d, g in zip(
                            zp["fb"], zp["act"], zp["duration_s"].clip(upper=rep.window_hours * 3600), zp["gpu"]
                        )
                    ],
                }
            )
        )

    w = workload_usage(rep) if workloads is None else workloads
    if len(w):
        th = rep.thresholds
        idle = w["active_ratio"] < th.idle_activity_max
        already = (
            pd.MultiIndex.from_frame(w[["namespace", "workload"]]).map(lambda k: float(zsave.get(k, 0.0))).to_numpy()
            if len(zsave)
            else 0.0
        )
        rec = (w["idle_cost"] * m - already).clip(lower=0.0)
        sel = idle & (rec > 0)
        parts.append(
            _rows(
                w[sel],
                "reclaim",
                rec[sel],
                m,
                0.8,
                [
                    f"active {a:.1%} of {h:.1f} allocated GPU-h; {i:.1f} GPU-h idle"
                    for a, h, i in zip(
                        w.loc[sel, "active_ratio"],
                        w.loc[sel, "allocated_gpu_hours"],
                        w.loc[sel, "idle_allocated_gpu_hours"],
                    )
                ],
            )
        )

        target = cost_policy("rightsize_target_activity")
        needed = np.ceil(w["busy_gpu_hours"] / rep.window_hours / target).clip(lower=1)
        surplus = (np.floor(w["gpus"] + 1e-9) - needed).clip(lower=0)
        rs = ~idle & (surplus >= 1) & (w["gpus"] >= 2)
        parts.append(
            _rows(
                w[rs],
                "rightsize",
                surplus[rs] * w.loc[rs, "price"] * hpm,
                m,
                0.7,
                [
                    f"{g:.1f} GPUs at {a:.0%} mean activity; {n:.0f} GPUs reach the {target:.0%} target"
                    for g, a, n in zip(w.loc[rs, "gpus"], w.loc[rs, "active_ratio"], needed[rs])
                ],
            )
        )

        batch = w["owner_kind"].isin(cost_policy_list("batch_owner_kinds"))
        sp = ~idle & batch & (w["spot_gap_cost"] > 0)
        parts.append(
            _rows(
                w[sp],
                "spot",
                w.loc[sp, "spot_gap_cost"] * m,
                m,
                0.6,
                [
                    f"{h:.1f} on-demand GPU-h of {k} work; spot saves {s:.0%} per GPU-h"
                    for h, k, s in zip(
                        w.loc[sp, "od_hours"],
                        w.loc[sp, "owner_kind"],
                        w.loc[sp, "spot_gap_cost"] / w.loc[sp, "od_alloc_cost"],
                    )
                ],
            )
        )

        infer = w["owner_kind"].isin(cost_policy_list("inference_owner_kinds"))
        target_share, how = _consolidation_target(w)
        cons = ~idle & infer & ~w["any_mig"] & (w["max_share"] >= 1.0) & target_share.notna() & (target_share < 1.0)
        parts.append(
            _rows(
                w[cons],
                "consolidate",
                w.loc[cons, "allocated_cost"] * (1 - target_share[cons]) * m,
                m,
                0.6,
                [
                    f"p95 activity {a:.0%}, peak FB_USED {fb / 1024:.1f} GiB ({f:.0%} of GPU): {h}"
                    for a, fb, f, h in zip(
                        w.loc[cons, "activity_p95"],
                        w.loc[cons, "fb_used_max_mib"],
                        w.loc[cons, "fb_frac_max"],
                        how[cons],
                    )
                ],
            )
        )

        red = cost_policy("quantise_gpu_reduction")
        freed = np.floor(w["gpus"] * red + 1e-9)
        q = (
            ~idle
            & infer
            & ~rs
            & (w["gpus"] >= 2)
            & (freed >= 1)
            & (w["fb_frac_min_of_max"] >= cost_policy("quantise_fb_min_fraction"))
            & (w["active_ratio"] < target)
        )
        parts.append(
            _rows(
                w[q],
                "quantise",
                freed[q] * w.loc[q, "price"] * hpm,
                m,
                0.5,
                [
                    f"{g:.1f} GPUs each >= {f:.0%} memory-full at {a:.0%} activity; 8-bit weights free ~{n:.0f} GPUs"
                    for g, f, a, n in zip(
                        w.loc[q, "gpus"], w.loc[q, "fb_frac_min_of_max"], w.loc[q, "active_ratio"], freed[q]
                    )
                ],
            )
        )

    n = rep.usage.groupby("node", sort=True).agg(
        alloc=("allocated_gpu_hours", "sum"), unalloc_cost=("unallocated_cost", "sum"), gpu_hours=("gpu_hours", "sum")
    )
    empty_nodes = n[(n["alloc"] == 0) & (n["unalloc_cost"] > 0)]
    if len(empty_nodes):
        parts.append(
            pd.DataFrame(
                {
                    "action": "scale_down",
                    "namespace": "",
                    "workload": "",
                    "owner_kind": "",
                    "node": empty_nodes.index,
                    "pod": "",
                    "gpus": empty_nodes["gpu_hours"] / rep.window_hours,
                    "monthly_cost": empty_nodes["unalloc_cost"] * m,
                    "monthly_saving": empty_nodes["unalloc_cost"] * m,
                    "confidence": 0.8,
                    "detail": [
                        f"no pod held a GPU for {format_duration(rep.window_hours * 3600)}"
                        for _ in range(len(empty_nodes))
                    ],
                }
            )
        )

    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=_ACTION_COLS)
    out = pd.concat(parts, ignore_index=True)[_ACTION_COLS]
    out["monthly_saving"] = out["monthly_saving"].astype(float).fillna(0.0)
    return out.sort_values(
        ["monthly_saving", "action", "namespace", "workload"], ascending=[False, True, True, True], kind="stable"
    ).reset_index(drop=True)


def _rows(
    w: pd.DataFrame, action: str, saving: pd.Series, m: float, confidence: float, detail: list[str]
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "action": action,
            "namespace": w["namespace"].to_numpy(),
            "workload": w["workload"].to_numpy(),
            "owner_kind": w["owner_kind"].to_numpy(),
            "node": w["node"].to_numpy(),
            "pod": "",
            "gpus": w["gpus"].to_numpy(),
            "monthly_cost": (w["allocated_cost"] * m).to_numpy(),
            "monthly_saving": np.asarray(saving, dtype=float),
            "confidence": confidence,
            "detail": detail,
        }
    )


def _consolidation_target(w: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Share of a GPU each candidate needs after consolidation and how (MIG profile class or time-slicing)."""
    act_max = cost_policy("consolidate_activity_max")
    fb_max = cost_policy("consolidate_fb_max_fraction")
    headroom = cost_policy("consolidate_fb_headroom")
    need_mem = w["fb_frac_max"] * headroom
    ok = (w["activity_p95"] < act_max) & (w["fb_frac_max"] <= fb_max) & w["fb_frac_max"].notna()
    slices = w["model_key"].map(gpu_specs()["mig_compute_slices"]).astype(float)
    geo = load_table("mig_slice_geometry").sort_values("compute_slices")
    share = pd.Series(np.nan, index=w.index)
    how = pd.Series("", index=w.index, dtype=object)
    for cls, cs, ms, mt in zip(
        geo["slice_class"], geo["compute_slices"], geo["memory_slots"], geo["memory_slots_total"]
    ):
        fits = (
            ok
            & slices.notna()
            & share.isna()
            & (ms / mt >= need_mem)
            & (cs / slices >= w["activity_p95"])
            & (cs < slices)
        )
        share = share.mask(fits, cs / slices)
        how = how.mask(fits, f"one {cls} MIG instance")
    ts = ok & slices.isna()
    reps = np.floor(1.0 / np.maximum(w["activity_p95"], need_mem).clip(lower=1e-9)).clip(
        upper=cost_policy("timeslice_max_replicas")
    )
    tsok = ts & (reps >= 2)
    share = share.mask(tsok, 1.0 / reps)
    how = how.mask(tsok, [f"time-slicing with {int(r)} replicas" for r in reps.where(tsok, 0)])
    return share, how
