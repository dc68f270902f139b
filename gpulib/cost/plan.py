"""The savings plan: from candidate actions to the non-overlapping set the report's headline adds up.

:func:`gpulib.cost.analysis.savings_actions` proposes every action that applies, each valued alone. On
one workload those overlap: right-sizing, consolidating and quantising all cut the GPUs it holds, and
moving it to spot lowers the price of whatever GPUs remain. :func:`plan_actions` turns candidates into a
plan (rules in ``gpulib/data/cost/savings_rules.csv``, method in ``docs/cost-method.md``):

* actions are grouped per workload (per node for ``scale_down``) and applied in the rules' ``order``;
  each saving is taken on what the previous ones left (a fraction of the workload's spend, applied to the
  remaining spend), so the savings of one workload never exceed its monthly spend;
* inside a ``best`` group the actions are alternatives: the largest is chosen, the others are listed as
  skipped with the saving they would have had alone; inside a ``sum`` group (reclaim: distinct pods and the
  idle rest of the workload) they add up, capped at the remaining spend;
* a shrinking action on a serving workload whose ``vllm:`` metrics say it is overloaded
  (:func:`gpulib.vllm.serving_signals`) is vetoed, and the report says which signal decided;
* a zombie that still holds its GPU at the window's end is worth the GPU's whole price from now on
  (share x price x hours per month), not the zombie hours it happened to have in the window: both figures
  are kept (``window_cost`` = so far, ``monthly_saving`` = from now on) and actions rank by the second.

Every chosen action carries ``monthly_saving`` (in the plan), ``saving_alone``, ``confidence`` and ``signal``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from gpulib.core.knowledge import load_table
from gpulib.core.money import money
from gpulib.cost.model import ACTIONS, CostReport
from gpulib.cost.prices import cost_policy

__all__ = ["PLAN_COLUMNS", "SKIPPED_COLUMNS", "savings_rules", "zombie_values", "plan_actions"]

PLAN_COLUMNS = [
    "action",
    "namespace",
    "workload",
    "owner_kind",
    "node",
    "pod",
    "gpus",
    "monthly_cost",
    "monthly_saving",
    "saving_alone",
    "window_cost",
    "confidence",
    "signal",
    "detail",
]
SKIPPED_COLUMNS = ["action", "namespace", "workload", "pod", "node", "saving_alone", "reason"]


@lru_cache(maxsize=1)
def _rules() -> pd.DataFrame:
    return load_table("savings_rules").set_index("action")


def savings_rules() -> pd.DataFrame:
    """``gpulib/data/cost/savings_rules.csv`` indexed by action: group, order, combine (best | sum), signal."""
    return _rules().copy()


def zombie_values(rep: CostReport) -> pd.DataFrame:
    """Per zombie pod: ``window_cost`` (its zombie GPU-hours x price, so far) and ``monthly_from_now``.

    A zombie run that reaches the window's end (its last sample within 1.5 steps of the newest sample)
    still holds its GPU share: freeing it saves share x price x hours per month. A run that ended
    earlier was freed already and saves nothing from now on.
    """
    z = rep.zombies
    cols = ["namespace", "pod", "window_cost", "gpus_held_now", "monthly_from_now"]
    if z is None or len(z) == 0:
        return pd.DataFrame(columns=cols)
    newest = rep.newest()
    step = rep.step_s if rep.step_s is not None else float(rep.samples["step_s"].median())
    held = z["end"] >= newest - pd.Timedelta(seconds=1.5 * step)
    last = z.sort_values("end").drop_duplicates(["node", "gpu", "gpu_i_id", "pod"], keep="last")
    last_held = last[held.reindex(last.index).to_numpy()]
    hpm = cost_policy("hours_per_month")
    so_far = z.groupby(["namespace", "pod"])["cost"].sum()
    share_now = last_held.groupby(["namespace", "pod"])["share"].apply(lambda x: float(pd.to_numeric(x).sum()))
    money_now = (pd.to_numeric(last_held["share"]) * last_held["price_per_gpu_hour"]).groupby(
        [last_held["namespace"], last_held["pod"]]
    ).sum() * hpm
    out = pd.DataFrame({"window_cost": so_far})
    out["gpus_held_now"] = share_now.reindex(out.index).fillna(0.0)
    out["monthly_from_now"] = money_now.reindex(out.index).fillna(0.0)
    return out.reset_index()[cols]


def _serving_lookup(serving: pd.DataFrame | None) -> dict[tuple[str, str], dict]:
    if serving is None or len(serving) == 0:
        return {}
    return {(str(r["namespace"]), str(r["workload"])): r for r in serving.to_dict("records")}


def _signals(a: pd.DataFrame, rules: pd.DataFrame, activity: str, serving: dict) -> list[str]:
    """The signal each candidate rests on: the rule's text (activity field, owner kind), and for a shrink the serving
    verdict of its workload, or that activity alone decided."""
    field = activity.replace("DCGM_FI_", "")
    text = rules["signal"].astype(str).to_dict()
    shrink = set(rules.index[rules["group"] == "shrink"])
    out: list[str] = []
    for action, kind, ns, wl in zip(a["action"], a["owner_kind"], a["namespace"], a["workload"]):
        base = text[action].format(activity=field, owner_kind=kind or "pod")
        if action not in shrink:
            out.append(base)
            continue
        sv = serving.get((str(ns), str(wl)))
        if sv is None or not sv.get("verdict"):
            out.append(base + " (no vllm: serving metrics: activity alone decided)")
        else:
            out.append(f"{sv['signal']}; {base}")
    return out


class _Skips:
    """Rows of ``skipped`` for row positions of one frame of candidates (its columns read once, as lists)."""

    def __init__(self, frame: pd.DataFrame, out: list[dict]):
        self._cols = {c: frame[c].tolist() for c in SKIPPED_COLUMNS[:-1]}
        self._out = out

    def add(self, i: int, reason: str) -> None:
        row = {c: v[i] for c, v in self._cols.items()}
        row["saving_alone"] = float(row["saving_alone"])
        row["reason"] = reason
        self._out.append(row)


def plan_actions(
    rep: CostReport, candidates: pd.DataFrame, serving: pd.DataFrame | None = None, *, workloads: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Choose the non-overlapping actions from ``candidates``; returns ``(plan, skipped)``.

    ``workloads``: the per-workload usage of ``rep`` (:func:`gpulib.cost.analysis.workload_usage`), whose monthly
    allocated cost caps what one workload's actions save together (a node's ``scale_down`` is capped by its own
    monthly cost).

    ``plan`` has :data:`PLAN_COLUMNS`, sorted by monthly saving; ``skipped`` has
    :data:`SKIPPED_COLUMNS` with the reason each candidate is not in the plan.
    """
    rules = _rules()
    if candidates is None or len(candidates) == 0:
        return pd.DataFrame(columns=PLAN_COLUMNS), pd.DataFrame(columns=SKIPPED_COLUMNS)
    a = candidates.copy()
    a["window_cost"] = np.nan
    # zombies: from-now value, both figures kept
    zv = zombie_values(rep)
    if len(zv):
        zk = zv.set_index(["namespace", "pod"])
        isz = (a["action"] == "reclaim") & (a["pod"] != "")
        key = pd.MultiIndex.from_frame(a.loc[isz, ["namespace", "pod"]])
        a.loc[isz, "window_cost"] = zk["window_cost"].reindex(key).to_numpy()
        a.loc[isz, "monthly_saving"] = zk["monthly_from_now"].reindex(key).fillna(0.0).to_numpy()
        # the target's figures are what it holds now: GPU share and its price per month
        a.loc[isz, "gpus"] = zk["gpus_held_now"].reindex(key).fillna(0.0).to_numpy()
        a.loc[isz, "monthly_cost"] = a.loc[isz, "monthly_saving"]
        a.loc[isz, "detail"] = [
            f"{d}; so far {money(wc, rep.currency)} in the window, {money(ms, rep.currency)}/month from now while held"
            for d, wc, ms in zip(a.loc[isz, "detail"], a.loc[isz, "window_cost"], a.loc[isz, "monthly_saving"])
        ]
    a["saving_alone"] = a["monthly_saving"].astype(float)
    serving_by = _serving_lookup(serving)
    a["signal"] = _signals(a, rules, rep.activity_field, serving_by)
    a["group"] = a["action"].map(rules["group"])
    a["order"] = a["action"].map(rules["order"]).astype(int)
    a["combine"] = a["action"].map(rules["combine"])

    skipped: list[dict] = []

    # serving veto
    veto = np.zeros(len(a), dtype=bool)
    if serving_by:
        vetoed = _Skips(a, skipped)
        for i, (group, ns, wl) in enumerate(zip(a["group"], a["namespace"], a["workload"])):
            sv = serving_by.get((str(ns), str(wl))) if group == "shrink" else None
            if sv is not None and bool(sv.get("overloaded")):
                veto[i] = True
                reason = f"vetoed: {sv['signal']} (shrinking an overloaded deployment would make it worse)"
                vetoed.add(i, reason)
    a = a[~veto]

    spend: dict = {}
    w = workloads
    if len(w):
        spend = (w.groupby(["namespace", "workload"])["allocated_cost"].sum() * rep.month_factor).to_dict()
    # one pass over plain lists: per workload (per node for scale_down), its groups in the rules' order
    ns_l = a["namespace"].tolist()
    key_wl = a["workload"].where(a["namespace"] != "", "node:" + a["node"].astype(str))
    keyless = (a["namespace"].isna() | key_wl.isna()).to_numpy()  # pandas' groupby leaves a NaN key out
    key_wl = key_wl.tolist()
    order_l = a["order"].tolist()
    combine_l = a["combine"].tolist()
    action_l = a["action"].tolist()
    alone = a["saving_alone"].to_numpy(dtype=float)
    cost_l = a["monthly_cost"].to_numpy(dtype=float)
    skips = _Skips(a, skipped)
    members: dict[tuple, list[int]] = {}
    for i, k in enumerate(zip(ns_l, key_wl)):
        if not keyless[i]:
            members.setdefault(k, []).append(i)
    chosen: list[int] = []
    chosen_saving: list[float] = []
    for (ns, wl), rows in members.items():
        costs = cost_l[rows]
        # pandas' max: NaN skipped, NaN when all are
        most = float(np.nanmax(costs)) if (costs == costs).any() else np.nan
        total = float(spend.get((ns, wl), np.nan)) if ns else most
        if not total == total:
            total = most
        remaining = total
        taken: list[str] = []
        by_order: dict[int, list[int]] = {}
        for i in rows:
            by_order.setdefault(order_l[i], []).append(i)
        for o in sorted(by_order):
            g = by_order[o]
            if remaining <= 0:
                reason = f"nothing left to save after {', '.join(taken) or 'the other actions'}"
                for i in g:
                    skips.add(i, reason)
                continue
            if combine_l[g[0]] == "sum":
                vals = alone[g]
                tot = float(np.where(vals == vals, vals, 0.0).sum())  # as pandas sums: NaN skipped
                scale = min(1.0, remaining / tot) if tot > 0 else 0.0
                for i in g:
                    chosen.append(i)
                    chosen_saving.append(float(alone[i]) * scale)
                remaining -= tot * scale
                taken.append(ACTIONS[action_l[g[0]]].lower())
            else:
                best_i = g[int(np.nanargmax(alone[g]))]  # the first of the largest, as idxmax
                best_alone = float(alone[best_i])
                frac = best_alone / total if total > 0 else 0.0
                saving = min(frac * remaining, remaining)
                remaining -= float(saving)
                chosen.append(best_i)
                chosen_saving.append(saving)
                best_name = ACTIONS[action_l[best_i]].lower()
                reason = (
                    f"alternative to {best_name} (larger saving alone: "
                    f"{money(best_alone, rep.currency)}/month); not added"
                )
                for i in g:
                    if i != best_i:
                        skips.add(i, reason)
                taken.append(best_name)
    if chosen:
        # built from rows, as a frame of chosen rows always was: each column's dtype is inferred from its values
        cols = list(a.columns)
        at = cols.index("monthly_saving")
        picked = a.iloc[chosen].itertuples(index=False, name=None)
        plan = pd.DataFrame([r[:at] + (v,) + r[at + 1 :] for r, v in zip(picked, chosen_saving)], columns=cols)
    else:
        plan = pd.DataFrame(columns=list(a.columns))
    floor = cost_policy("min_monthly_saving")
    small = plan["monthly_saving"].astype(float) < floor
    if small.any():
        too_small = _Skips(plan, skipped)
        for i in np.flatnonzero(small.to_numpy()):
            ms = float(plan["monthly_saving"].iat[i])
            too_small.add(i, f"saves {ms:.2f} {rep.currency}/month (< {floor:g}): not worth an action")
    plan = plan[~small]
    plan = plan.sort_values(
        ["monthly_saving", "action", "namespace", "workload"], ascending=[False, True, True, True], kind="stable"
    ).reset_index(drop=True)
    return plan[PLAN_COLUMNS], pd.DataFrame(skipped, columns=SKIPPED_COLUMNS)
