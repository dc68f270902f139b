"""The rows a lesson asks about, picked from the frames the analyses return, so a lesson cell stays one call
(no filtering or sorting in a notebook: docs/architecture.md, "Notebooks stay thin").

Each function takes the frame the lesson already has (``Source.pods()``, :func:`gpulib.fleet.health.inventory`,
``Source.summary()``, :func:`gpulib.learn.model_sizes`...) and returns the rows or the count the question needs.
"""

from __future__ import annotations

import pandas as pd

__all__ = [
    "best_row",
    "workload_pods",
    "deployments",
    "mig_node_count",
    "overcommitted_nodes",
    "mig_nodes",
    "blind_alerts",
    "whole_gpus",
    "at_or_above",
    "mig_capable_models",
    "model_size",
    "tier_row",
    "gpus_with_sbe",
]


def _text(s: pd.Series) -> pd.Series:
    return s.astype("string").fillna("")


def best_row(df: pd.DataFrame, column: str) -> pd.Series:
    """The row with the largest ``column`` (e.g. the cost checklist item that saves the most)."""
    return df.sort_values(column, ascending=False).iloc[0]


def workload_pods(pods: pd.DataFrame, *, contains: str = "", prefix: str = "") -> pd.DataFrame:
    """Pods whose ``workload`` (owner name) contains ``contains`` and starts with ``prefix``."""
    w = pods["workload"].astype(str)
    return pods[w.str.contains(contains, regex=False) & w.str.startswith(prefix)]


def deployments(pods: pd.DataFrame) -> pd.DataFrame:
    """One row per workload: replicas (pods), GPUs per replica and the node of its first pod."""
    return (
        pods.groupby("workload")
        .agg(replicas=("pod", "count"), gpus=("gpu_request", "first"), node=("node", "first"))
        .reset_index()
    )


def mig_node_count(inventory: pd.DataFrame) -> int:
    """Nodes of :func:`gpulib.fleet.health.inventory` that expose MIG devices."""
    return int((inventory["mig"] != "").sum())


def overcommitted_nodes(inventory: pd.DataFrame) -> int:
    """Nodes whose requested devices exceed their allocatable ones."""
    return int((inventory["requested"] > inventory["allocatable"]).sum())


def mig_nodes(nodes: pd.DataFrame) -> pd.DataFrame:
    """Nodes with a MIG strategy set (the ``nvidia.com/mig.strategy`` label, ``Source.nodes()``)."""
    return nodes[_text(nodes["mig_strategy"]) != ""]


def blind_alerts(rules: pd.DataFrame) -> list[str]:
    """Alerts of :func:`gpulib.learn.alert_catalog` that need fields off in dcgm-exporter's default counters."""
    return rules.loc[rules["needs_non_default_fields"] != "", "alert"].tolist()


def whole_gpus(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows of a ``Source.summary()`` for whole GPUs (no MIG instance id)."""
    return summary[_text(summary["gpu_i_id"]) == ""] if "gpu_i_id" in summary else summary


def at_or_above(summary: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Rows whose ``value`` is at or above ``threshold``, highest first."""
    return summary[summary["value"] >= threshold].sort_values("value", ascending=False)


def mig_capable_models(models: pd.DataFrame) -> list[str]:
    """GPU models of :func:`gpulib.mig.gpu_models` marked MIG-capable, sorted."""
    return sorted(models.loc[models["mig_capable"] == "yes", "gpu_model"])


def model_size(sizes: pd.DataFrame, model: str, dtype: str) -> pd.Series:
    """The row of :func:`gpulib.learn.model_sizes` for ``model`` in ``dtype``."""
    return sizes[(sizes["model"] == model) & (sizes["dtype"] == dtype)].iloc[0]


def tier_row(load_times: pd.DataFrame, tier: str) -> pd.Series:
    """The row of :func:`gpulib.learn.load_times` for storage ``tier``."""
    return load_times[load_times["tier"] == tier].iloc[0]


def gpus_with_sbe(query: pd.DataFrame) -> list[int]:
    """GPU indices of a parsed ``nvidia-smi -q`` (:func:`gpulib.nvidia.parse_query`) with aggregate single-bit
    ECC errors."""
    return query.loc[query["ecc_sbe_aggregate"] > 0, "index"].astype(int).tolist()
