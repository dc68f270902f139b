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


def _signal(row: pd.Series, rules: pd.DataFrame, activity: str, serving: dict) -> str:
    base = str(rules.loc[row["action"], "signal"]).format(
        activity=activity.replace("DCGM_FI_", ""), owner_kind=row["owner_kind"] or "pod"
    )
    if rules.loc[row["action"], "group"] != "shrink":
        return base
    sv = serving.get((str(row["namespace"]), str(row["workload"])))
    if sv is None or not sv.get("verdict"):
        return base + " (no vllm: serving metrics: activity alone decided)"
    return f"{sv['signal']}; {base}"


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
    a["signal"] = [_signal(r, rules, rep.activity_field, serving_by) for _, r in a.iterrows()]
    a["group"] = a["action"].map(rules["group"])
    a["order"] = a["action"].map(rules["order"]).astype(int)
    a["combine"] = a["action"].map(rules["combine"])

    skipped: list[dict] = []

    def skip(r, reason: str) -> None:
        skipped.append(
            {
                "action": r["action"],
                "namespace": r["namespace"],
                "workload": r["workload"],
                "pod": r["pod"],
                "node": r["node"],
                "saving_alone": float(r["saving_alone"]),
                "reason": reason,
            }
        )

    # serving veto
    veto = pd.Series(False, index=a.index)
    for i, r in a[a["group"] == "shrink"].iterrows():
        sv = serving_by.get((str(r["namespace"]), str(r["workload"])))
        if sv is not None and bool(sv.get("overloaded")):
            veto[i] = True
            skip(r, f"vetoed: {sv['signal']} (shrinking an overloaded deployment would make it worse)")
    a = a[~veto]

    spend = pd.Series(dtype=float)
    w = workloads
    if len(w):
        spend = w.groupby(["namespace", "workload"])["allocated_cost"].sum() * rep.month_factor
    a["key_ns"] = a["namespace"].where(a["namespace"] != "", "")
    a["key_wl"] = a["workload"].where(a["namespace"] != "", "node:" + a["node"].astype(str))
    chosen: list[pd.Series] = []
    for (ns, wl), grp in a.groupby(["key_ns", "key_wl"], sort=False):
        total = float(spend.get((ns, wl), np.nan)) if ns else float(grp["monthly_cost"].max())
        if not total == total:
            total = float(grp["monthly_cost"].max())
        remaining = total
        taken: list[str] = []
        for _, g in grp.sort_values("order", kind="stable").groupby("order", sort=True):
            if remaining <= 0:
                for _, r in g.iterrows():
                    skip(r, f"nothing left to save after {', '.join(taken) or 'the other actions'}")
                continue
            if g["combine"].iloc[0] == "sum":
                tot = float(g["saving_alone"].sum())
                scale = min(1.0, remaining / tot) if tot > 0 else 0.0
                for _, r in g.iterrows():
                    r = r.copy()
                    r["monthly_saving"] = float(r["saving_alone"]) * scale
                    chosen.append(r)
                remaining -= tot * scale
                taken.append(ACTIONS[g["action"].iloc[0]].lower())
            else:
                best_i = g["saving_alone"].idxmax()
                best = g.loc[best_i].copy()
                frac = float(best["saving_alone"]) / total if total > 0 else 0.0
                best["monthly_saving"] = min(frac * remaining, remaining)
                remaining -= float(best["monthly_saving"])
                chosen.append(best)
                for i, r in g.iterrows():
                    if i != best_i:
                        skip(
                            r,
                            f"alternative to {ACTIONS[best['action']].lower()} (larger saving alone: "
                            f"{money(float(best['saving_alone']), rep.currency)}/month); not added",
                        )
                taken.append(ACTIONS[best["action"]].lower())
    plan = pd.DataFrame(chosen) if chosen else pd.DataFrame(columns=list(a.columns))
    floor = cost_policy("min_monthly_saving")
    small = plan["monthly_saving"].astype(float) < floor
    for _, r in plan[small].iterrows():
        skip(r, f"saves {float(r['monthly_saving']):.2f} {rep.currency}/month (< {floor:g}): not worth an action")
    plan = plan[~small]
    plan = plan.sort_values(
        ["monthly_saving", "action", "namespace", "workload"], ascending=[False, True, True, True], kind="stable"
    ).reset_index(drop=True)
    return plan[PLAN_COLUMNS], pd.DataFrame(skipped, columns=SKIPPED_COLUMNS)
