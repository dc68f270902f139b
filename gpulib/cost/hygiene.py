"""Scheduling hygiene the cost report checks: GPUs used without a request, non-GPU pods on GPU nodes.

* A pod whose DCGM series carry its name but that requests no ``nvidia.com/gpu`` (nor a MIG resource)
  uses a GPU the scheduler thinks is free (typically ``NVIDIA_VISIBLE_DEVICES=all`` baked into the
  image): its GPU time is *not allocated* (:func:`mark_unrequested`), and it gets its own finding.
* A non-GPU pod on a GPU node gets "taint the node" only when the node lacks the GPU taint
  (:func:`has_gpu_taint`); when the node has it, the pod tolerates it and the fix is the pod's toleration.

The findings (SOP text from ``cost_sop.csv``) are :func:`gpulib.cost.findings.unrequested_findings` and
:func:`gpulib.cost.findings.non_gpu_pod_findings`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from gpulib.kube.requests import REQUEST_COLUMNS, requests_nvidia

__all__ = ["unrequested_gpu_pods", "mark_unrequested", "has_gpu_taint"]

#: the taint ``kubectl taint nodes <node> nvidia.com/gpu=present:NoSchedule`` sets (cost_sop.csv)
GPU_TAINT_KEY = "nvidia.com/gpu"


def unrequested_gpu_pods(pods: pd.DataFrame | None) -> pd.DataFrame:
    """Pods (namespace, pod, node, workload, owner_kind) that request no GPU and no MIG device (the request rule of
    :func:`gpulib.kube.requests.requests_nvidia`, which :func:`gpulib.kube.requests.non_gpu_pods` uses too)."""
    cols = ["namespace", "pod", "node", "workload", "owner_kind"]
    if pods is None or len(pods) == 0:
        return pd.DataFrame(columns=cols)
    asked = pods[[c for c in REQUEST_COLUMNS if c in pods.columns]]  # the only columns requests_nvidia reads
    keep = [not requests_nvidia(r) for r in asked.to_dict("records")]
    return pods[keep][cols].reset_index(drop=True)


def mark_unrequested(samples: pd.DataFrame, pods: pd.DataFrame | None) -> pd.DataFrame:
    """Samples of pods that requested no GPU are not *allocated* (the scheduler never gave them one)."""
    un = unrequested_gpu_pods(pods)
    if un.empty or samples.empty:
        return samples
    key = set(zip(un["namespace"].astype(str), un["pod"].astype(str)))
    lab = samples.drop_duplicates("sid")[["sid", "namespace", "pod"]]
    bad = lab[[(str(n), str(p)) in key for n, p in zip(lab["namespace"], lab["pod"])]]["sid"]
    if bad.empty:
        return samples
    out = samples.copy(deep=False)
    out["allocated"] = samples["allocated"].to_numpy() & ~samples["sid"].isin(set(bad)).to_numpy()
    return out


def has_gpu_taint(taints: Any) -> bool:
    """True when the node's taints include ``nvidia.com/gpu`` with effect NoSchedule or NoExecute."""
    if not isinstance(taints, (list, tuple, np.ndarray)):
        return False
    return any(
        isinstance(t, Mapping) and t.get("key") == GPU_TAINT_KEY and t.get("effect") in ("NoSchedule", "NoExecute")
        for t in taints
    )
