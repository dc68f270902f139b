"""GPU cost analytics: idle and zombie money, savings per action, executive summary, chart frames.

Flow (docs/architecture.md, "The flow")::

    rep = analyze_cost(nodes, pods, gr_engine_active=act, fb_used=fb, gpu_util=util, window="7d")
    rep.findings              # Findings with the action and estimated monthly saving in .data
    executive_summary(rep)    # dict for the report's headline
    namespace_allocation(rep), top_idle_workloads(rep), savings_waterfall(rep),
    node_time_matrix(rep.samples)   # tidy frames for the charts

Prices come from ``gpulib/data/cost/gpu_prices.csv`` (model x provider x on_demand/spot, $/GPU-hour,
with date and source in each row) and are defaults a user overrides with ``price_file=`` (a CSV
with the same columns) or ``price_overrides={"H100-80GB": 3.9}`` / ``{"H100-80GB": {"spot": 1.2}}``.
Policy numbers (hours per month, right-size target, consolidation limits) live in
``gpulib/data/cost/cost_policy.csv``; idle/zombie thresholds in ``thresholds.csv``.

Monthly figures extrapolate the window: ``window cost x hours_per_month / window hours``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter, PriceFileError
from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.core.knowledge import load_table
from gpulib.core.timeutil import format_duration
from gpulib.cost.action_findings import action_finding
from gpulib.cost.hygiene import mark_unrequested, non_gpu_pod_findings, unrequested_findings
from gpulib.cost.plan import plan_actions
from gpulib.cost.usage import (
    GR_ENGINE_ACTIVE,
    Thresholds,
    attach_workloads,
    mig_share,
    node_time_matrix,
    prepare_samples,
    rollup,
    select_activity,
    series_usage,
    window_hours,
    zombie_runs,
)

__all__ = [
    "PRICE_COLUMNS", "PriceFileError", "CostReport", "canonical_model", "canonical_models", "load_prices",
    "price_table", "cost_policy", "analyze_cost", "executive_summary", "namespace_allocation",
    "top_idle_workloads", "savings_waterfall", "node_time_matrix", "ACTIONS", "gpu_utilization",
    "savings_actions", "cost_findings", "workload_usage", "node_inventory", "request_limit_issues",
    "non_gpu_pods_on_gpu_nodes", "gpu_specs",
]

#: columns a price file must have (extra columns are kept).
PRICE_COLUMNS = ["model", "provider", "pricing", "price_per_gpu_hour", "currency", "as_of", "source"]
PRICINGS = ("on_demand", "spot")

#: action -> (label for charts, verb for the SOP step)
ACTIONS = {
    "reclaim": "Reclaim idle / zombie GPUs",
    "rightsize": "Right-size multi-GPU workloads",
    "spot": "Move batch work to spot (with checkpointing)",
    "consolidate": "Consolidate with MIG / time-slicing",
    "quantise": "Quantise inference models",
    "scale_down": "Remove never-allocated GPU nodes",
}


# ----------------------------------------------------------------------------------------------
# knowledge: models, prices, policy
# ----------------------------------------------------------------------------------------------
_MIG_SUFFIX = re.compile(r"\s+MIG\s+\d+C?\.?\d*G?\.?\S*$")


def _normalise_name(name: str) -> str:
    s = str(name).upper().replace("-", " ").replace("_", " ")
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s+SHARED$", "", s)
    s = re.sub(r"\s+MIG\s+\S+$", "", s)  # GFD single strategy: ...-MIG-1g.5gb
    s = re.sub(r"^(NVIDIA|TESLA)\s+", "", s)
    return s


@lru_cache(maxsize=1)
def _spec_index() -> dict[str, str]:
    specs = load_table("gpu_specs")
    index = {_normalise_name(n): m for n, m in zip(specs["name"], specs["model"])}
    index.update({_normalise_name(m): m for m in specs["model"]})
    return index


def canonical_model(name: str | None) -> str | None:
    """Map a dcgm-exporter ``modelName`` or GFD ``nvidia.com/gpu.product`` to the price/spec key.

    ``"NVIDIA H100 80GB HBM3"``, ``"NVIDIA-H100-80GB-HBM3"``, ``"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"``,
    ``"NVIDIA-A100-SXM4-80GB-SHARED"`` all resolve; unknown names return ``None``.
    """
    if name is None or (isinstance(name, float) and math.isnan(name)) or str(name).strip() == "":
        return None
    return _spec_index().get(_normalise_name(name))


def canonical_models(names: pd.Series) -> pd.Series:
    """Vectorised :func:`canonical_model` (maps each distinct name once)."""
    names = names.astype("string").fillna("")
    uniq = pd.unique(names)
    return names.map({u: canonical_model(u) for u in uniq}).astype("string")


def gpu_specs() -> pd.DataFrame:
    """One row per canonical model: memory_gb, tdp_w (first listed form factor), mig_compute_slices."""
    return load_table("gpu_specs").drop_duplicates("model").set_index("model")


@lru_cache(maxsize=1)
def _policy() -> dict[str, str]:
    t = load_table("cost_policy")
    return dict(zip(t["key"], t["value"].astype(str)))


def cost_policy(key: str) -> float:
    """A numeric policy value from ``gpulib/data/cost/cost_policy.csv``."""
    p = _policy()
    if key not in p:
        raise GpulibError(f"no cost policy named {key!r}; known: {', '.join(sorted(p))}")
    return float(p[key])


def _policy_list(key: str) -> list[str]:
    return [x.strip() for x in _policy()[key].split(";") if x.strip()]


def load_prices(path: str | Path | None = None) -> pd.DataFrame:
    """The price table: the shipped defaults, or a user CSV with :data:`PRICE_COLUMNS`.

    Raises :class:`PriceFileError` naming the file and the bad column/row.
    """
    if path is None:
        df = load_table("gpu_prices")
        where = "gpulib/data/cost/gpu_prices.csv"
    else:
        p = Path(path)
        if not p.is_file():
            raise PriceFileError(f"price file {str(p)!r} does not exist")
        try:
            df = pd.read_csv(p)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise PriceFileError(f"price file {str(p)!r} is not a readable CSV: {exc}") from exc
        where = str(p)
    missing = [c for c in PRICE_COLUMNS if c not in df.columns]
    if missing:
        raise PriceFileError(f"price file {where!r} lacks column(s) {missing}")
    df = df.copy()
    price = pd.to_numeric(df["price_per_gpu_hour"], errors="coerce")
    bad = price.isna() | (price < 0)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise PriceFileError(f"price file {where!r} row {i + 2}: price_per_gpu_hour="
                             f"{df['price_per_gpu_hour'].iloc[i]!r} is not a non-negative number")
    pricing = df["pricing"].astype("string").str.strip().str.lower().str.replace("-", "_")
    badp = ~pricing.isin(PRICINGS)
    if badp.any():
        i = int(np.flatnonzero(badp.to_numpy())[0])
        raise PriceFileError(f"price file {where!r} row {i + 2}: pricing={df['pricing'].iloc[i]!r} "
                             f"is not one of {list(PRICINGS)}")
    nosrc = df["source"].astype("string").fillna("").str.strip() == ""
    if nosrc.any():
        raise PriceFileError(f"price file {where!r} row {int(np.flatnonzero(nosrc.to_numpy())[0]) + 2} has no source")
    df["price_per_gpu_hour"] = price.astype(float)
    df["pricing"] = pricing
    df["provider"] = df["provider"].astype("string").str.strip().str.lower()
    df["currency"] = df["currency"].astype("string").str.strip().str.upper()
    df["model"] = df["model"].astype("string").str.strip()
    return df


def price_table(prices: pd.DataFrame | None = None, *, provider: str | None = None, currency: str = "USD",
                overrides: Mapping[str, float | Mapping[str, float]] | None = None) -> pd.DataFrame:
    """Per-model ``on_demand`` and ``spot`` $/GPU-hour for one provider and currency.

    Index: canonical model. Spot falls back to NaN (no spot saving computed) when absent.
    ``overrides``: ``{"H100-80GB": 3.9}`` sets on-demand; ``{"H100-80GB": {"spot": 1.2}}`` either.
    """
    prices = load_prices() if prices is None else prices
    provider = (provider or _policy()["default_pricing_provider"]).lower()
    currency = currency.upper()
    sel = prices[(prices["provider"] == provider) & (prices["currency"] == currency)]
    if sel.empty and not overrides:
        have = sorted({f"{p}/{c}" for p, c in zip(prices["provider"], prices["currency"])})
        raise InvalidParameter(f"no prices for provider={provider!r} currency={currency!r}; the table has {have}",
                               hint="pass price_file= with rows for that provider/currency, or price_overrides=")
    table = sel.pivot_table(index="model", columns="pricing", values="price_per_gpu_hour", aggfunc="min")
    table = table.reindex(columns=list(PRICINGS)).astype(float)
    for model, value in (overrides or {}).items():
        key = canonical_model(model) or str(model)
        vals = value if isinstance(value, Mapping) else {"on_demand": value}
        for pricing, v in vals.items():
            if pricing not in PRICINGS:
                raise InvalidParameter(f"price_overrides[{model!r}] has pricing {pricing!r}; use on_demand or spot")
            try:
                fv = float(v)
            except (TypeError, ValueError) as exc:
                raise InvalidParameter(f"price_overrides[{model!r}][{pricing!r}]={v!r} is not a number") from exc
            if not fv >= 0:
                raise InvalidParameter(f"price_overrides[{model!r}][{pricing!r}]={v!r} must be >= 0")
            table.loc[key, pricing] = fv
    table.index.name = "model"
    return table


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
    return n[["node", "gpu_product", "model_key", "spot", "replicas", "gpu_equiv_allocatable",
              "gpu_equiv_requested", "gpu_equiv_unallocated", "price_per_gpu_hour"]].reset_index(drop=True)


def request_limit_issues(pods: pd.DataFrame) -> pd.DataFrame:
    """Pods asking for GPUs whose limit is missing or differs from the request (full GPUs and MIG)."""
    if pods is None or len(pods) == 0:
        return pd.DataFrame(columns=["namespace", "pod", "node", "workload", "gpu_request", "gpu_limit", "problem"])
    req = pd.to_numeric(pods["gpu_request"], errors="coerce").fillna(0.0)
    lim = pd.to_numeric(pods["gpu_limit"], errors="coerce")
    no_limit = (req > 0) & (lim.isna() | (lim == 0))
    differs = (req > 0) & lim.notna() & (lim > 0) & (lim != req)
    mig_req = pods["mig_requests"].map(lambda d: dict(d) if isinstance(d, Mapping) else {})
    mig_lim = pods["mig_limits"].map(lambda d: dict(d) if isinstance(d, Mapping) else {})
    mig_bad = pd.Series([bool(r) and r != {k: v for k, v in l.items() if k in r or v}
                         for r, l in zip(mig_req, mig_lim)], index=pods.index)
    problem = np.select([no_limit, differs, mig_bad],
                        ["GPU request without a limit", "GPU request != limit", "MIG request != limit"], "")
    out = pods.assign(gpu_request=req, gpu_limit=lim, problem=problem)
    out = out[out["problem"] != ""]
    return out[["namespace", "pod", "node", "workload", "gpu_request", "gpu_limit", "problem"]].reset_index(drop=True)


def non_gpu_pods_on_gpu_nodes(pods: pd.DataFrame, gpu_nodes: pd.Series) -> pd.DataFrame:
    """Running pods without GPU/MIG requests on GPU nodes (DaemonSets and system namespaces exempt)."""
    if pods is None or len(pods) == 0:
        return pd.DataFrame(columns=["node", "namespace", "pod", "owner_kind"])
    req = pd.to_numeric(pods["gpu_request"], errors="coerce").fillna(0.0)
    mig = pods["mig_requests"].map(_mig_equivalents)
    on_gpu = pods["node"].astype("string").fillna("").isin(set(gpu_nodes.astype(str)))
    exempt = (pods["owner_kind"].astype("string").fillna("") == "DaemonSet") | \
        pods["namespace"].astype("string").fillna("").isin(_policy_list("system_namespaces"))
    running = pods["phase"].astype("string").fillna("") == "Running"
    sel = pods[on_gpu & running & (req == 0) & (mig == 0) & ~exempt]
    return sel[["node", "namespace", "pod", "owner_kind"]].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# the analysis
# ----------------------------------------------------------------------------------------------
@dataclass
class CostReport:
    """Everything the report needs. Frames are tidy; money is in ``currency`` per window unless *monthly*."""

    window_hours: float
    activity_field: str
    currency: str
    provider: str
    month_factor: float
    thresholds: Thresholds
    prices: pd.DataFrame
    samples: pd.DataFrame
    usage: pd.DataFrame
    zombies: pd.DataFrame
    nodes: pd.DataFrame
    request_limit: pd.DataFrame
    non_gpu_pods: pd.DataFrame
    actions: pd.DataFrame
    findings: list[Finding] = field(default_factory=list)
    #: candidate actions left out of the plan, each with its reason (gpulib.cost.plan)
    skipped: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: per serving workload: the vLLM live-check verdict (gpulib.vllm.serving_signals), or None
    serving: pd.DataFrame | None = None
    #: the nodes / pods frames analysed (taints, requests: the hygiene findings read them)
    cluster_nodes: pd.DataFrame | None = None
    cluster_pods: pd.DataFrame | None = None


def analyze_cost(nodes: pd.DataFrame, pods: pd.DataFrame, gr_engine_active: pd.DataFrame | None = None,
                 fb_used: pd.DataFrame | None = None, *, gpu_util: pd.DataFrame | None = None,
                 window: str | timedelta | None = None, price_file: str | Path | None = None,
                 prices: pd.DataFrame | None = None, provider: str | None = None, currency: str = "USD",
                 price_overrides: Mapping[str, Any] | None = None,
                 thresholds: Mapping[str, float] | None = None, namespaces: list[str] | None = None,
                 serving: pd.DataFrame | None = None) -> CostReport:
    """Run the whole cost analysis over one window.

    ``gr_engine_active`` / ``gpu_util``: SERIES_COLUMNS frames (GR_ENGINE_ACTIVE preferred, see
    :func:`gpulib.cost.usage.select_activity`); ``fb_used``: FB_USED series (MiB); ``nodes`` /
    ``pods``: NODE_COLUMNS / POD_COLUMNS. ``namespaces`` restricts pods and series to those namespaces
    (unallocated GPU time is kept). ``serving``: :func:`gpulib.vllm.serving_signals` rows; a
    serving workload they call overloaded is never shrunk. Returns a :class:`CostReport` with findings.
    """
    th = Thresholds.from_table(**dict(thresholds or {}))
    table = price_table(prices if prices is not None else load_prices(price_file), provider=provider,
                        currency=currency, overrides=price_overrides)
    act, field_used = select_activity(gr_engine_active, gpu_util)
    if namespaces:
        keep = act["namespace"].astype("string").fillna("").isin(list(namespaces) + [""])
        act = act[keep]
        pods = pods[pods["namespace"].astype(str).isin(namespaces)] if pods is not None else pods
    model_keys = canonical_models(pd.Series(pd.unique(act["model"].astype("string").fillna(""))))
    raw_models = pd.unique(act["model"].astype("string").fillna(""))
    specs = gpu_specs()
    slices = {raw: float(specs["mig_compute_slices"].get(key, np.nan)) for raw, key in zip(raw_models, model_keys)
              if key is not None and key is not pd.NA and pd.notna(specs["mig_compute_slices"].get(key, np.nan))}
    samples = mark_unrequested(prepare_samples(act, fb_used, nodes=nodes, window=window,
                                               compute_slices=slices or None), pods)
    wh = window_hours(window, samples)
    inv = node_inventory(nodes, pods, table)
    usage = _price_usage(attach_workloads(series_usage(samples, th), pods), inv, nodes, table)
    zombies = zombie_runs(samples, th)
    if len(zombies):
        price = usage.drop_duplicates(["node", "gpu", "gpu_i_id", "pod"]).set_index(
            ["node", "gpu", "gpu_i_id", "pod"])["price_per_gpu_hour"]
        key = pd.MultiIndex.from_frame(zombies[["node", "gpu", "gpu_i_id", "pod"]])
        zombies["price_per_gpu_hour"] = price.reindex(key).to_numpy()
        zombies["cost"] = zombies["gpu_hours"] * zombies["price_per_gpu_hour"]
    else:
        zombies["price_per_gpu_hour"] = pd.Series(dtype=float)
        zombies["cost"] = pd.Series(dtype=float)
    month = cost_policy("hours_per_month") / wh
    rep = CostReport(window_hours=wh, activity_field=field_used, currency=currency.upper(),
                     provider=(provider or _policy()["default_pricing_provider"]).lower(), month_factor=month,
                     thresholds=th, prices=table, samples=samples, usage=usage, zombies=zombies, nodes=inv,
                     request_limit=request_limit_issues(pods), non_gpu_pods=non_gpu_pods_on_gpu_nodes(pods, inv["node"]),
                     actions=pd.DataFrame(), serving=serving, cluster_nodes=nodes, cluster_pods=pods)
    rep.actions, rep.skipped = plan_actions(rep, savings_actions(rep), serving)
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
    for hours, money in (("gpu_hours", "cost"), ("allocated_gpu_hours", "allocated_cost"),
                         ("idle_allocated_gpu_hours", "idle_cost"), ("unallocated_gpu_hours", "unallocated_cost")):
        u[money] = u[hours] * u["price_per_gpu_hour"]
    return u


# ----------------------------------------------------------------------------------------------
# savings per action (vectorised over workloads)
# ----------------------------------------------------------------------------------------------
_ACTION_COLS = ["action", "namespace", "workload", "owner_kind", "node", "pod", "gpus", "monthly_cost",
                "monthly_saving", "confidence", "detail"]


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
    w = g[["allocated_gpu_hours", "active_gpu_hours", "busy_gpu_hours", "idle_allocated_gpu_hours", "allocated_cost", "idle_cost",
           "od_hours", "spot_gap_cost", "od_alloc_cost"]].sum()
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


def savings_actions(rep: CostReport) -> pd.DataFrame:
    """One row per (action, target) with the estimated monthly saving in ``rep.currency``.

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
        zp = z.groupby(["namespace", "pod"], sort=True).agg(
            node=("node", "first"), gpu=("gpu", "first"), gpu_hours=("gpu_hours", "sum"), cost=("cost", "sum"),
            duration_s=("duration_s", "max"), fb=("fb_used_mean_mib", "mean"), act=("activity_max", "max")).reset_index()
        zp = attach_workloads(zp.assign(container=""), _pods_of(rep))
        zsave = zp.groupby(["namespace", "workload"])["cost"].sum() * m
        parts.append(pd.DataFrame({
            "action": "reclaim", "namespace": zp["namespace"], "workload": zp["workload"],
            "owner_kind": zp["owner_kind"], "node": zp["node"], "pod": zp["pod"], "gpus": zp["gpu_hours"] / rep.window_hours,
            "monthly_cost": zp["cost"] * m, "monthly_saving": zp["cost"] * m, "confidence": 0.9,
            "detail": [f"zombie: FB_USED {fb / 1024:.1f} GiB held, activity max {a:.1%} for {format_duration(d)} (GPU {g})"
                       for fb, a, d, g in zip(zp["fb"], zp["act"], zp["duration_s"].clip(upper=rep.window_hours * 3600), zp["gpu"])]}))

    w = workload_usage(rep)
    if len(w):
        th = rep.thresholds
        idle = w["active_ratio"] < th.idle_activity_max
        already = pd.MultiIndex.from_frame(w[["namespace", "workload"]]).map(
            lambda k: float(zsave.get(k, 0.0))).to_numpy() if len(zsave) else 0.0
        rec = (w["idle_cost"] * m - already).clip(lower=0.0)
        sel = idle & (rec > 0)
        parts.append(_rows(w[sel], "reclaim", rec[sel], m, 0.8,
                           [f"active {a:.1%} of {h:.1f} allocated GPU-h; {i:.1f} GPU-h idle"
                            for a, h, i in zip(w.loc[sel, "active_ratio"], w.loc[sel, "allocated_gpu_hours"],
                                               w.loc[sel, "idle_allocated_gpu_hours"])]))

        target = cost_policy("rightsize_target_activity")
        needed = np.ceil(w["busy_gpu_hours"] / rep.window_hours / target).clip(lower=1)
        surplus = (np.floor(w["gpus"] + 1e-9) - needed).clip(lower=0)
        rs = ~idle & (surplus >= 1) & (w["gpus"] >= 2)
        parts.append(_rows(w[rs], "rightsize", surplus[rs] * w.loc[rs, "price"] * hpm, m, 0.7,
                           [f"{g:.1f} GPUs at {a:.0%} mean activity; {n:.0f} GPUs reach the {target:.0%} target"
                            for g, a, n in zip(w.loc[rs, "gpus"], w.loc[rs, "active_ratio"], needed[rs])]))

        batch = w["owner_kind"].isin(_policy_list("batch_owner_kinds"))
        sp = ~idle & batch & (w["spot_gap_cost"] > 0)
        parts.append(_rows(w[sp], "spot", w.loc[sp, "spot_gap_cost"] * m, m, 0.6,
                           [f"{h:.1f} on-demand GPU-h of {k} work; spot saves {s:.0%} per GPU-h"
                            for h, k, s in zip(w.loc[sp, "od_hours"], w.loc[sp, "owner_kind"],
                                               w.loc[sp, "spot_gap_cost"] / w.loc[sp, "od_alloc_cost"])]))

        infer = w["owner_kind"].isin(_policy_list("inference_owner_kinds"))
        target_share, how = _consolidation_target(w)
        cons = ~idle & infer & ~w["any_mig"] & (w["max_share"] >= 1.0) & target_share.notna() & (target_share < 1.0)
        parts.append(_rows(w[cons], "consolidate", w.loc[cons, "allocated_cost"] * (1 - target_share[cons]) * m, m, 0.6,
                           [f"p95 activity {a:.0%}, peak FB_USED {fb / 1024:.1f} GiB ({f:.0%} of GPU): {h}"
                            for a, fb, f, h in zip(w.loc[cons, "activity_p95"], w.loc[cons, "fb_used_max_mib"],
                                                   w.loc[cons, "fb_frac_max"], how[cons])]))

        red = cost_policy("quantise_gpu_reduction")
        freed = np.floor(w["gpus"] * red + 1e-9)
        q = (~idle & infer & ~rs & (w["gpus"] >= 2) & (freed >= 1)
             & (w["fb_frac_min_of_max"] >= cost_policy("quantise_fb_min_fraction"))
             & (w["active_ratio"] < target))
        parts.append(_rows(w[q], "quantise", freed[q] * w.loc[q, "price"] * hpm, m, 0.5,
                           [f"{g:.1f} GPUs each >= {f:.0%} memory-full at {a:.0%} activity; 8-bit weights free ~{n:.0f} GPUs"
                            for g, f, a, n in zip(w.loc[q, "gpus"], w.loc[q, "fb_frac_min_of_max"],
                                                  w.loc[q, "active_ratio"], freed[q])]))

    n = rep.usage.groupby("node", sort=True).agg(
        alloc=("allocated_gpu_hours", "sum"), unalloc_cost=("unallocated_cost", "sum"),
        gpu_hours=("gpu_hours", "sum"))
    empty_nodes = n[(n["alloc"] == 0) & (n["unalloc_cost"] > 0)]
    if len(empty_nodes):
        parts.append(pd.DataFrame({
            "action": "scale_down", "namespace": "", "workload": "", "owner_kind": "", "node": empty_nodes.index,
            "pod": "", "gpus": empty_nodes["gpu_hours"] / rep.window_hours,
            "monthly_cost": empty_nodes["unalloc_cost"] * m, "monthly_saving": empty_nodes["unalloc_cost"] * m,
            "confidence": 0.8,
            "detail": [f"no pod held a GPU for {format_duration(rep.window_hours * 3600)}" for _ in range(len(empty_nodes))]}))

    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=_ACTION_COLS)
    out = pd.concat(parts, ignore_index=True)[_ACTION_COLS]
    out["monthly_saving"] = out["monthly_saving"].astype(float).fillna(0.0)
    return out.sort_values(["monthly_saving", "action", "namespace", "workload"], ascending=[False, True, True, True],
                           kind="stable").reset_index(drop=True)


def _pods_of(rep: CostReport) -> pd.DataFrame:
    u = rep.usage[rep.usage["pod"] != ""]
    return u[["namespace", "pod", "workload", "owner_kind"]].drop_duplicates(["namespace", "pod"])


def _rows(w: pd.DataFrame, action: str, saving: pd.Series, m: float, confidence: float, detail: list[str]) -> pd.DataFrame:
    return pd.DataFrame({
        "action": action, "namespace": w["namespace"].to_numpy(), "workload": w["workload"].to_numpy(),
        "owner_kind": w["owner_kind"].to_numpy(), "node": w["node"].to_numpy(), "pod": "",
        "gpus": w["gpus"].to_numpy(), "monthly_cost": (w["allocated_cost"] * m).to_numpy(),
        "monthly_saving": np.asarray(saving, dtype=float), "confidence": confidence, "detail": detail})


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
    for cls, cs, ms, mt in zip(geo["slice_class"], geo["compute_slices"], geo["memory_slots"], geo["memory_slots_total"]):
        fits = ok & slices.notna() & share.isna() & (ms / mt >= need_mem) & (cs / slices >= w["activity_p95"]) \
            & (cs < slices)
        share = share.mask(fits, cs / slices)
        how = how.mask(fits, f"one {cls} MIG instance")
    ts = ok & slices.isna()
    reps = np.floor(1.0 / np.maximum(w["activity_p95"], need_mem).clip(lower=1e-9)).clip(
        upper=cost_policy("timeslice_max_replicas"))
    tsok = ts & (reps >= 2)
    share = share.mask(tsok, 1.0 / reps)
    how = how.mask(tsok, [f"time-slicing with {int(r)} replicas" for r in reps.where(tsok, 0)])
    return share, how


# ----------------------------------------------------------------------------------------------
# findings
# ----------------------------------------------------------------------------------------------
def _money(x: float, cur: str) -> str:
    return f"{x:,.0f} {cur}" if abs(x) >= 100 else f"{x:,.2f} {cur}"


def cost_findings(rep: CostReport) -> list[Finding]:
    """Findings: one per savings action, plus request/limit hygiene, non-GPU pods, spot share, unpriced models."""
    out = [action_finding(r, rep) for _, r in rep.actions.iterrows()]
    cur, m = rep.currency, rep.month_factor
    price_by_node = dict(zip(rep.nodes["node"].astype(str), rep.nodes["price_per_gpu_hour"]))
    for _, r in rep.request_limit.iterrows():
        monthly = float(r["gpu_request"]) * float(price_by_node.get(str(r["node"]), np.nan)) * cost_policy("hours_per_month")
        out.append(Finding(
            severity=Severity.WARNING, title=f"{r['problem']}: {r['namespace']}/{r['pod']}",
            summary="Extended resources such as nvidia.com/gpu cannot be overcommitted: set limits equal to requests "
                    "(or only limits) so the scheduler and quota account the GPU correctly.",
            sop_step="Set resources.limits['nvidia.com/gpu'] equal to the request in the owning workload's pod template.",
            commands=[f"kubectl -n {r['namespace']} get pod {r['pod']} -o jsonpath='{{.spec.containers[*].resources}}'"],
            evidence=[f"request {r['gpu_request']:g} GPU, limit {'none' if pd.isna(r['gpu_limit']) else format(r['gpu_limit'], 'g')}",
                      f"GPUs held cost {_money(monthly, cur) if monthly == monthly else 'unpriced'}/month"],
            category="cost", node=str(r["node"]) or None,
            data={"action": "fix_limits", "monthly_saving": 0.0, "monthly_cost": None if monthly != monthly else round(monthly, 2),
                  "currency": cur, "namespace": r["namespace"], "pod": r["pod"], "workload": r["workload"]}))
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
        summary=f"{part['unallocated_gpu_hours'].sum():.1f} GPU-h had no pod ({_money(monthly, cur)}/month): "
                "bin-pack GPU pods so whole nodes empty out and the autoscaler can remove them.",
        sop_step="Check which pending or small pods could fill these GPUs; consider a bin-packing scheduler profile "
                 "(MostAllocated scoring) for GPU nodes.",
        commands=["kubectl describe nodes -l nvidia.com/gpu.present=true | grep -A8 'Allocated resources'"],
        evidence=[f"{node}: {h:.1f} unallocated GPU-h" for node, h in part["unallocated_gpu_hours"].head(10).items()],
        category="cost", data={"action": "bin_pack", "monthly_saving": 0.0, "monthly_cost": round(monthly, 2),
                               "currency": cur, "nodes": list(part.index)})]


# ----------------------------------------------------------------------------------------------
# report frames
# ----------------------------------------------------------------------------------------------
def executive_summary(rep: CostReport, top_n: int = 5) -> dict[str, Any]:
    """Headline numbers: allocated %, active %, idle GPU-hours and money, top actions by saving."""
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
        "allocated_pct_now": 100.0 * float(inv["gpu_equiv_requested"].clip(upper=inv["gpu_equiv_allocatable"]).sum()) / cap_now
        if cap_now else float("nan"),
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
            {"action": r.action, "label": ACTIONS[r.action], "target": f"{r.namespace}/{r.pod or r.workload}" if r.namespace
             else f"node {r.node}", "monthly_saving": round(float(r.monthly_saving), 2), "detail": r.detail,
             "confidence": float(r.confidence), "signal": r.signal}
            for r in top.itertuples()],
    }


def namespace_allocation(rep: CostReport) -> pd.DataFrame:
    """Allocation vs activity per namespace: allocated/active/idle GPU-hours, active %, cost (grouped bar chart)."""
    out = rollup(rep.usage, "namespace")
    return out[["namespace", "allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours", "active_pct",
                "allocated_cost", "idle_cost"]].sort_values("allocated_gpu_hours", ascending=False, kind="stable") \
        .reset_index(drop=True)


def top_idle_workloads(rep: CostReport, n: int = 10) -> pd.DataFrame:
    """Workloads ranked by idle allocated cost, with a zombie flag and zombie hours (table)."""
    out = rollup(rep.usage, "workload")
    z = rep.zombies
    if len(z):
        zw = attach_workloads(z.assign(container=""), _pods_of(rep)).groupby(["namespace", "workload"])["duration_s"].sum() / 3600
        key = pd.MultiIndex.from_frame(out[["namespace", "workload"]])
        out["zombie_hours"] = zw.reindex(key).fillna(0.0).to_numpy()
    else:
        out["zombie_hours"] = 0.0
    out["zombie"] = out["zombie_hours"] > 0
    cols = ["namespace", "workload", "owner_kind", "allocated_gpu_hours", "idle_allocated_gpu_hours", "active_pct",
            "fb_used_max_mib", "idle_cost", "zombie", "zombie_hours"]
    out = out[cols].sort_values(["idle_cost", "idle_allocated_gpu_hours"], ascending=False, kind="stable")
    return out[out["idle_allocated_gpu_hours"] > 0].head(n).reset_index(drop=True)


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
