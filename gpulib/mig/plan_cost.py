"""What a MIG plan saves: GPUs and on-demand $ per hour and month for whole-GPU placement (one GPU per replica), the
current state and the proposed plan, priced from the cost domain's price table (``gpulib.cost.price_table``) and
``hours_per_month`` of its ``cost_policy.csv``.
"""

from __future__ import annotations

import pandas as pd

import gpulib.cost as cost
from gpulib.mig.plan import Plan

__all__ = ["gpu_price", "savings"]


def gpu_price(gpu_model: str, pricing: str = "on_demand") -> float:
    """$/GPU-hour of a MIG catalog model from the cost domain's price table (``gpulib.cost.price_table``; NaN when
    not priced)."""
    key = cost.canonical_model(gpu_model) or gpu_model
    table = cost.price_table()
    return float(table.loc[key, pricing]) if key in table.index else float("nan")


def savings(plan: Plan, gpu_model: str, current_gpus: int | None = None) -> pd.DataFrame:
    """GPUs and on-demand $ per hour / month for: whole-GPU placement (one GPU per replica), the current state
    (GPUs holding the sized workloads now, when known) and the proposed MIG plan."""
    price = gpu_price(gpu_model)
    month = cost.cost_policy("hours_per_month")
    rows = [("whole GPU per replica", plan.baseline_gpus)]
    if current_gpus is not None:
        rows.append(("current", int(current_gpus)))
    rows.append(("proposed MIG plan", plan.gpus_used))
    df = pd.DataFrame(rows, columns=["placement", "gpus"])
    df["usd_per_hour"] = df["gpus"] * price
    df["usd_per_month"] = df["usd_per_hour"] * month
    df["gpus_saved_vs_whole"] = plan.baseline_gpus - df["gpus"]
    df["usd_saved_per_month_vs_whole"] = df["gpus_saved_vs_whole"] * price * month
    df.attrs["price_per_gpu_hour"] = price
    return df
