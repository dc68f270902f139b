"""Scheduling hygiene the cost report checks: GPUs used without a request, non-GPU pods on GPU nodes.

* A pod whose DCGM series carry its name but that requests no ``nvidia.com/gpu`` (nor a MIG resource)
  uses a GPU the scheduler thinks is free (typically ``NVIDIA_VISIBLE_DEVICES=all`` baked into the
  image): its GPU time is *not allocated* (:func:`mark_unrequested`), and it gets its own finding.
* A non-GPU pod on a GPU node gets "taint the node" only when the node lacks the GPU taint; when the
  node has it, the pod tolerates it and the fix is the pod's toleration (SOP text: ``cost_sop.csv``).
"""
from __future__ import annotations

import shlex
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import load_table

__all__ = ["cost_sop", "unrequested_gpu_pods", "mark_unrequested", "has_gpu_taint", "unrequested_findings",
           "non_gpu_pod_findings"]

#: the taint ``kubectl taint nodes <node> nvidia.com/gpu=present:NoSchedule`` sets (cost_sop.csv)
GPU_TAINT_KEY = "nvidia.com/gpu"


@lru_cache(maxsize=1)
def _sop() -> pd.DataFrame:
    return load_table("cost_sop").set_index("kind")


def cost_sop(kind: str) -> tuple[str, list[str]]:
    """(SOP step, command templates) for one kind of cost finding, from ``gpulib/data/cost/cost_sop.csv``."""
    r = _sop().loc[kind]
    return str(r["sop_step"]), [c for c in str(r["commands"]).split("\n") if c.strip()]


def fill(commands: list[str], **values: Any) -> list[str]:
    """Fill command templates with shell-quoted values (names reach a printed shell command)."""
    q = {k: shlex.quote(str(v)) if not str(v).startswith("<") else str(v) for k, v in values.items()}
    return [c.format(**q) for c in commands]


def _mig_total(d: Any) -> float:
    return float(sum(float(v or 0) for v in d.values())) if isinstance(d, Mapping) else 0.0


def unrequested_gpu_pods(pods: pd.DataFrame | None) -> pd.DataFrame:
    """Pods (namespace, pod, node, workload, owner_kind) that request no GPU and no MIG device."""
    cols = ["namespace", "pod", "node", "workload", "owner_kind"]
    if pods is None or len(pods) == 0:
        return pd.DataFrame(columns=cols)
    req = pd.to_numeric(pods["gpu_request"], errors="coerce").fillna(0.0)
    lim = pd.to_numeric(pods["gpu_limit"], errors="coerce").fillna(0.0)
    mig = pods["mig_requests"].map(_mig_total) + pods["mig_limits"].map(_mig_total)
    return pods[(req == 0) & (lim == 0) & (mig == 0)][cols].reset_index(drop=True)


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
    return any(isinstance(t, Mapping) and t.get("key") == GPU_TAINT_KEY and t.get("effect") in ("NoSchedule", "NoExecute")
               for t in taints)


def unrequested_findings(rep, pods: pd.DataFrame | None) -> list[Finding]:
    """One WARNING per pod whose DCGM series show GPU use although it requested no GPU."""
    un = unrequested_gpu_pods(pods)
    if un.empty:
        return []
    u = rep.usage
    sop, cmds = cost_sop("unrequested_gpu")
    out = []
    for r in un.itertuples():
        mine = u[(u["namespace"] == r.namespace) & (u["pod"] == r.pod)]
        if mine.empty:
            continue
        hours = float(mine["gpu_hours"].sum())
        act = float((mine["activity_mean"] * mine["gpu_hours"]).sum() / hours) if hours else float("nan")
        gpus = ", ".join(sorted({f"{n}/GPU {g}" for n, g in zip(mine["node"], mine["gpu"])}))
        out.append(Finding(
            severity=Severity.WARNING, title=f"Pod {r.namespace}/{r.pod} uses a GPU it never requested",
            summary=f"DCGM attributes {hours:.1f} GPU-h on {gpus} to this pod, but it requests no nvidia.com/gpu: "
                    "the scheduler counts that GPU as free and may place another pod on it.",
            sop_step=sop, commands=fill(cmds, ns=r.namespace, pod=r.pod),
            evidence=[f"gpu_request 0, no MIG request; DCGM series on {gpus}",
                      f"{hours:.1f} GPU-h used, mean activity {act:.1%}" if act == act else f"{hours:.1f} GPU-h used"],
            category="cost", node=str(r.node) or None, runbook="gpu_utilization_report",
            data={"action": "unrequested_gpu", "monthly_saving": 0.0, "currency": rep.currency,
                  "namespace": r.namespace, "pod": r.pod, "workload": r.workload, "gpu_hours": round(hours, 3)}))
    return out


def non_gpu_pod_findings(rep, nodes: pd.DataFrame, pods: pd.DataFrame | None) -> list[Finding]:
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
        sop, cmds = cost_sop(kind)
        commands = (sum((fill(cmds, ns=ns, pod=p) for ns, p in zip(grp["namespace"], grp["pod"])), [])
                    if tainted else fill(cmds, node=node))
        out.append(Finding(
            severity=Severity.INFO, title=f"{len(grp)} non-GPU pod(s) on GPU node {node}",
            summary="Pods without GPU requests take CPU/memory on an expensive GPU node and can block GPU pods"
                    + (" (the node has the nvidia.com/gpu taint: these pods tolerate it)." if tainted else "."),
            sop_step=sop, commands=commands,
            evidence=[f"{ns}/{p} ({k or 'bare pod'})" for ns, p, k in zip(grp["namespace"], grp["pod"], grp["owner_kind"])][:10]
            + [f"node taint nvidia.com/gpu: {'present' if tainted else 'missing'}"],
            category="cost", node=str(node),
            data={"action": "taint" if not tainted else "toleration", "monthly_saving": 0.0, "currency": rep.currency,
                  "pods": [f"{a}/{b}" for a, b in zip(grp["namespace"], grp["pod"])]}))
    return out
