"""MIG results -> findings: layout problems (invalid placements, stranded slots) and the guided MIG-change SOP,
which first names the clients outside Kubernetes that hold the GPU.
"""
from __future__ import annotations

import re
from dataclasses import field
from typing import Sequence

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.mig.geometry import place, stranded_slots


def layout_findings(gpu_model: str, profiles_wanted: Sequence[str | int] | dict, *, node: str | None = None,
                    gpu: str | None = None, catalog: pd.DataFrame | None = None) -> list[Finding]:
    """Findings for a proposed per-GPU layout: OK with the start slots, or CRITICAL with the reason."""
    p = place(gpu_model, profiles_wanted, catalog)
    if p.fits:
        ev = [f"{i.profile} at slot {i.start} (size {i.size}, {i.memory_gib:g} GiB)" for i in p.instances]
        ev.append(f"free memory slots: {p.free_slots or 'none'}; stranded: {stranded_slots(p, catalog)}")
        return [Finding(Severity.OK, f"MIG layout fits on {p.gpu_model}", summary=", ".join(p.requested),
                        sop_step="create the instances largest first at these start slots (or apply the mig-parted config)",
                        commands=p.nvidia_smi_commands(gpu or 0), evidence=ev, category="mig", node=node, gpu=gpu,
                        data={"placement": p.starts})]
    return [Finding(Severity.CRITICAL, f"MIG layout does not fit on {p.gpu_model}", summary=p.reason,
                    sop_step="choose smaller profiles or split the instances over more GPUs (gpulib.mig.plan)",
                    commands=["nvidia-smi mig -lgip", "nvidia-smi mig -lgipp"], evidence=[p.reason],
                    category="mig", node=node, gpu=gpu)]


# --------------------------------------------------------------------------------------------------
# guided MIG change (SOP)
# --------------------------------------------------------------------------------------------------
_GPU_RES = re.compile(r"^nvidia\.com/(gpu|mig-.+)$")


def outside_kubernetes_clients(fb_used: pd.DataFrame | None, node: str) -> list[str]:
    """GPUs / MIG instances of ``node`` whose memory is held (FB_USED above ``zombie_fb_used_min_mib``) with no
    pod attributed by dcgm-exporter: processes outside Kubernetes (or pods the exporter cannot map). ``fb_used``
    is a SUMMARY frame (e.g. ``stat="max"``); returns evidence strings."""
    if fb_used is None or fb_used.empty:
        return []
    from gpulib.core.knowledge import threshold

    held = threshold("zombie_fb_used_min_mib")
    df = fb_used[(fb_used["node"] == node) & (fb_used["pod"].fillna("").astype(str) == "")
                 & (pd.to_numeric(fb_used["value"], errors="coerce") > held)]
    return [f"GPU {r.gpu}{' ' + str(r.gpu_i_profile) if str(r.gpu_i_profile or '') not in ('', 'nan') else ''}: "
            f"{float(r.value):.0f} MiB used, no pod" for r in df.itertuples()]


def mig_change_sop(node: str, config_name: str, *, pods: pd.DataFrame | None = None,
                   nodes: pd.DataFrame | None = None, fb_used: pd.DataFrame | None = None,
                   namespace_operator: str = "gpu-operator") -> list[Finding]:
    """The guided MIG change for one node as Findings: pre-checks from live data (GPU pods still on the node,
    GPU memory held outside Kubernetes, current ``mig.config.state``), then cordon -> wait for GPU pods ->
    label ``nvidia.com/mig.config`` -> watch ``nvidia.com/mig.config.state`` -> check allocatable
    ``nvidia.com/mig-*`` -> uncordon.

    ``pods``/``nodes`` follow ``gpulib.core.schema.POD_COLUMNS``/``NODE_COLUMNS``, ``fb_used`` is a FB_USED SUMMARY
    frame (max over the window); omit them to get the SOP alone.
    """
    out: list[Finding] = []
    gpu_pods = []
    if pods is not None and not pods.empty:
        on = pods[(pods["node"] == node) & pods["phase"].isin(["Running", "Pending"])]
        for r in on.itertuples():
            mig = getattr(r, "mig_requests", None) or {}
            if (pd.notna(r.gpu_request) and float(r.gpu_request or 0) > 0) or (isinstance(mig, dict) and any(mig.values())):
                gpu_pods.append(f"{r.namespace}/{r.pod}")
    if gpu_pods:
        out.append(Finding(
            Severity.WARNING, f"{len(gpu_pods)} GPU pod(s) still running on {node}",
            summary="MIG Manager will evict or wait on GPU clients; reconfiguring under load kills their work.",
            sop_step="cordon the node and wait for (or drain) these pods before labelling",
            commands=[f"kubectl cordon {node}",
                      f"kubectl get pods -A --field-selector spec.nodeName={node} -o wide"],
            evidence=gpu_pods[:20], category="mig", node=node))
    outside = outside_kubernetes_clients(fb_used, node)
    if outside:
        out.append(Finding(
            Severity.WARNING, f"GPU memory held outside Kubernetes on {node}",
            summary="MIG Manager cannot reconfigure a GPU while any process holds it (DCGM, monitoring agents, "
                    "containers started outside the kubelet); the change ends in mig.config.state=failed.",
            sop_step="find and stop those processes on the node before labelling",
            commands=["sudo fuser -v /dev/nvidia*  # on the node", "nvidia-smi --query-compute-apps=pid,process_name,"
                      "used_memory --format=csv  # on the node"],
            evidence=outside[:20], category="mig", node=node))
    state = None
    if nodes is not None and not nodes.empty and node in set(nodes["node"]):
        row = nodes[nodes["node"] == node].iloc[0]
        state = row.get("mig_config_state") or None
        if str(row.get("mig_config") or "") == config_name and state == "success":
            out.append(Finding(Severity.OK, f"{node} already runs MIG config {config_name}",
                               evidence=[f"nvidia.com/mig.config={config_name}", "nvidia.com/mig.config.state=success"],
                               category="mig", node=node))
            return out
        if state == "failed":
            out.append(Finding(
                Severity.CRITICAL, f"previous MIG reconfiguration failed on {node}",
                summary="nvidia.com/mig.config.state=failed: read the MIG Manager log before relabelling",
                sop_step="check the mig-manager pod log on the node, fix the cause (GPU clients outside Kubernetes, "
                         "unsupported profile), then relabel",
                commands=[f"kubectl -n {namespace_operator} logs -l app=nvidia-mig-manager --tail=200 "
                          f"--field-selector spec.nodeName={node}",
                          "sudo fuser -v /dev/nvidia*  # on the node: GPU clients outside Kubernetes"],
                evidence=["nvidia.com/mig.config.state=failed"], category="mig", node=node))
    steps = [
        f"kubectl cordon {node}",
        f"kubectl get pods -A --field-selector spec.nodeName={node} -o json | "
        "jq -r '.items[] | select(any(.spec.containers[]; .resources.limits // {} | keys[] | "
        "test(\"nvidia.com/(gpu|mig-)\"))) | .metadata.namespace + \"/\" + .metadata.name'",
        "sudo fuser -v /dev/nvidia*  # on the node: no GPU clients outside Kubernetes (DCGM/monitoring agents)",
        f"kubectl label node {node} nvidia.com/mig.config={config_name} --overwrite",
        f"kubectl get node {node} -L nvidia.com/mig.config.state -w  # pending -> (rebooting) -> success | failed",
        f"kubectl get node {node} -o jsonpath='{{.status.allocatable}}' | tr ',' '\\n' | grep nvidia.com/",
        f"kubectl uncordon {node}",
    ]
    out.append(Finding(
        Severity.INFO, f"Guided MIG change on {node} to config {config_name}",
        summary="cordon -> wait for GPU pods to finish -> label nvidia.com/mig.config -> watch "
                "nvidia.com/mig.config.state until success -> check allocatable nvidia.com/mig-* -> uncordon",
        sop_step="run the commands in order; do not uncordon until mig.config.state=success and the allocatable "
                 "MIG resources match the config",
        commands=steps, evidence=[f"current mig.config.state: {state or 'unknown'}"],
        escalation="mig.config.state=failed twice or GPUs missing after success: collect nvidia-bug-report.sh and "
                   "open a vendor ticket",
        category="mig", node=node, data={"config": config_name}))
    return out
