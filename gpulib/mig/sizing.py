"""Sizing from observed usage: the smallest MIG profile per pod from its memory (``DCGM_FI_DEV_FB_USED`` p95/max)
and activity (``PROF_GR_ENGINE_ACTIVE`` p95), with frameworks' pre-allocated pools told apart from real need, and
the planner workloads (:class:`gpulib.mig.plan.Workload`) those rows become. The findings on the rows are
:func:`gpulib.mig.findings.sizing_findings`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import overhead
from gpulib.mig.catalog import device_memory_gib, get_profile, is_mig_capable, resolve_gpu_model, slot_geometry
from gpulib.mig.plan import Workload, choose_profile

__all__ = ["SIZING_COLUMNS", "looks_preallocated", "size_from_usage", "workloads_from_sizing"]

#: one row per pod of :func:`size_from_usage`
SIZING_COLUMNS = [
    "namespace",
    "pod",
    "node",
    "device",
    "current_profile",
    "device_gib",
    "device_compute_slices",
    "gpus",
    "fb_p95_gib",
    "fb_max_gib",
    "activity_p95",
    "need_gib",
    "compute_slices",
    "target_model",
    "profile",
    "profile_memory_gib",
    "preallocated",
]


def _device_of(row) -> tuple[str | None, float | None, int]:
    """(catalog GPU model, memory GiB, compute slices) of the device a SUMMARY row was measured on."""
    try:
        model = resolve_gpu_model(str(row.get("model") or ""))
    except InvalidParameter:
        return None, None, 0
    prof = str(row.get("gpu_i_profile") or "")
    if prof and prof != "nan":
        try:
            p = get_profile(model, prof)
            return model, p.memory_gib, p.compute_slices
        except InvalidParameter:
            return model, None, 0
    try:
        return model, device_memory_gib(model), (slot_geometry(model)[1] if is_mig_capable(model) else 7)
    except InvalidParameter:
        return model, None, 7


def looks_preallocated(
    max_mib: float, p95_mib: float, device_gib: float | None, *, low_mib: float | None = None
) -> bool:
    """Whether FB_USED looks like a framework's pre-allocated pool rather than a need: near-constant
    (p95, and ``low_mib`` = min when known, at or above ``preallocation_flat_ratio`` of the max) AND at a
    high share of the device (max at or above ``preallocation_ratio`` of ``device_gib``). Both thresholds
    live in ``data/vllm/model_memory_overheads.csv``. Flat alone is not enough: an idle pod is flat too."""
    if not device_gib or np.isnan(max_mib) or max_mib <= 0:
        return False
    flat = overhead("preallocation_flat_ratio") * max_mib
    near_constant = p95_mib >= flat and (low_mib is None or np.isnan(low_mib) or low_mib >= flat)
    return bool(near_constant and max_mib / 1024 >= overhead("preallocation_ratio") * device_gib)


def size_from_usage(
    fb_summary: pd.DataFrame,
    activity_summary: pd.DataFrame | None = None,
    *,
    gpu_model: str | None = None,
    headroom: float | None = None,
) -> pd.DataFrame:
    """Recommend the smallest MIG profile per pod from observed memory (``DCGM_FI_DEV_FB_USED`` in MiB,
    SUMMARY frame with ``stat`` p95 and max) and activity (``PROF_GR_ENGINE_ACTIVE``/``SM_ACTIVE`` p95, 0..1):
    one row per pod (:data:`SIZING_COLUMNS`), an empty frame without FB_USED data.

    Need = max FB_USED x (1 + headroom). Flags memory that looks pre-allocated (:func:`looks_preallocated`:
    near-constant at a high share of the device): vLLM and other frameworks take a fixed fraction regardless
    of load, so size those from the model instead (:func:`gpulib.mig.findings.sizing_findings` says so).
    """
    headroom = overhead("sizing_headroom") if headroom is None else float(headroom)
    if fb_summary is None or fb_summary.empty:
        return pd.DataFrame()
    fb = fb_summary[fb_summary["pod"].astype(str) != ""]
    piv = fb.pivot_table(index=["namespace", "pod"], columns="stat", values="value", aggfunc="max")
    meta = fb.drop_duplicates(["namespace", "pod"]).set_index(["namespace", "pod"])
    n_gpus = (
        fb.assign(_dev=fb["node"].astype(str) + "/" + fb["gpu"].astype(str))
        .groupby(["namespace", "pod"])["_dev"]
        .nunique()
    )
    act = None
    if activity_summary is not None and not activity_summary.empty:
        a = activity_summary[activity_summary["stat"].isin(["p95", "max"])]
        act = a.groupby(["namespace", "pod"])["value"].max()
    rows = []
    for (ns, pod), r in piv.iterrows():
        mx = float(r.get("max", r.get("p95", np.nan)))
        p95 = float(r.get("p95", mx))
        cur_model, cur_gib, cur_compute = _device_of(meta.loc[(ns, pod)])
        target = resolve_gpu_model(gpu_model) if gpu_model else cur_model
        need = mx / 1024 * (1 + headroom)
        a95 = float(act.get((ns, pod), np.nan)) if act is not None else np.nan
        slices = max(1, math.ceil(a95 * cur_compute - 1e-9)) if not np.isnan(a95) and cur_compute else 1
        pre = looks_preallocated(mx, p95, cur_gib, low_mib=float(r["min"]) if "min" in r.index else None)
        prof = choose_profile(target, mx / 1024, slices, headroom) if target and is_mig_capable(target) else None
        cur_prof = str(meta.loc[(ns, pod)].get("gpu_i_profile") or "")
        rows.append(
            {
                "namespace": ns,
                "pod": pod,
                "node": meta.loc[(ns, pod)].get("node"),
                "device": cur_model,
                "current_profile": "" if cur_prof == "nan" else cur_prof,
                "device_gib": cur_gib,
                "device_compute_slices": cur_compute,
                "gpus": int(n_gpus.get((ns, pod), 1)),
                "fb_p95_gib": p95 / 1024,
                "fb_max_gib": mx / 1024,
                "activity_p95": a95,
                "need_gib": need,
                "compute_slices": slices,
                "target_model": target,
                "profile": prof.name if prof else None,
                "profile_memory_gib": prof.memory_gib if prof else None,
                "preallocated": pre,
            }
        )
    return pd.DataFrame(rows, columns=SIZING_COLUMNS) if rows else pd.DataFrame()


def workloads_from_sizing(sizing: pd.DataFrame, preallocated: str = "skip") -> list[Workload]:
    """Turn :func:`size_from_usage` rows into planner workloads.

    ``preallocated``: what to do with rows whose memory looks pre-allocated (their FB_USED says nothing about
    need): ``"skip"`` leaves them out; ``"keep"`` keeps them at their current size (the same MIG profile, or a
    whole GPU), so a plan never shrinks a workload it cannot size. Pods that span several GPUs (``gpus`` > 1:
    tensor/data parallel) keep that many whole GPUs.
    """
    if preallocated not in ("skip", "keep"):
        raise InvalidParameter(f"preallocated={preallocated!r}: use 'skip' or 'keep'")
    out = []
    for r in sizing.itertuples():
        name = f"{r.namespace}/{r.pod}"
        gpus = int(getattr(r, "gpus", 1) or 1)
        dev = getattr(r, "device_gib", None)
        if gpus > 1 and dev is not None and not pd.isna(dev):  # multi-GPU job: keep its GPU count
            out.append(Workload(name, gpus * float(dev), isolation="whole"))
            continue
        if r.preallocated:
            if preallocated == "skip":
                continue
            cur = str(getattr(r, "current_profile", "") or "")
            gib = getattr(r, "device_gib", None)
            gib = float(gib) if gib is not None and not pd.isna(gib) else float(r.fb_max_gib)
            out.append(Workload(name, gib, isolation="mig" if cur else "whole", profile=cur or None))
            continue
        out.append(Workload(name, float(r.need_gib), int(r.compute_slices), isolation="mig" if r.profile else "whole"))
    return out
