"""Kubelet's per-device health in pod status (KEP-4680 ``allocatedResourcesStatus``, read by
:mod:`gpulib.kube.device_health`) in the XID/ECC triage: a device kubelet reports ``Unhealthy`` or ``Unknown`` is
evidence on the finding about that GPU when the triage has one, and a finding of its own (xid_sop.csv rows
``POD_DEVICE_UNHEALTHY`` / ``POD_DEVICE_UNKNOWN``) when nothing else fired on it: the API's own answer to "which pod
is on the unhealthy GPU" is never an OK (https://github.com/kubernetes/enhancements/tree/master/keps/sig-node/4680-add-resource-health-to-pod-status).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.kube.device_health import device_health_frame, not_healthy
from gpulib.xid.sops import fill_commands, impact_evidence, pod_impact, sop

__all__ = ["RULES", "with_device_health"]

#: health -> the xid_sop.csv row of a device kubelet reports so, with no other signal on the GPU
RULES = {"Unhealthy": "POD_DEVICE_UNHEALTHY", "Unknown": "POD_DEVICE_UNKNOWN"}


def _line(r: dict) -> str:
    return (
        f"kubelet: pod {r['namespace']}/{r['pod']} container {r['container']} {r['resource']} device "
        f"{r['resource_id']} {r['health']}" + (f": {r['message']}" if r["message"] else "")
    )


def with_device_health(
    findings: list[Finding], node: str, gpu: str | None, pods: pd.DataFrame | None, ids: pd.DataFrame
) -> list[Finding]:
    """``findings`` of one node's triage with kubelet's not-Healthy devices of the node (of ``gpu`` when given): added
    as evidence to the non-OK finding about the same GPU, else one finding per GPU. ``ids``: the node's GPU index /
    UUID / PCI bus id map (:func:`gpulib.xid.triage.node_gpu_ids`)."""
    if pods is None or not len(pods) or "device_health" not in pods:
        return findings
    gpus = ids.assign(node=node) if len(ids) else None
    bad = not_healthy(device_health_frame(pods[pods["node"] == node], gpus), node)
    if bad.empty:
        return findings
    out = list(findings)
    for (g, uuid), rows in bad.groupby(["gpu", "uuid"], sort=True):
        if gpu is not None and g not in ("", str(gpu)):
            continue
        g = g or (str(gpu) if gpu is not None else "")
        lines = [_line(r) for r in rows.to_dict("records")]
        hit = next(
            (i for i, f in enumerate(out) if f.severity is not Severity.OK and str(f.gpu) == g and g != ""), None
        )
        if hit is not None:  # the same fault seen twice: one finding, kubelet's word as evidence
            f = out[hit]
            out[hit] = replace(f, evidence=f.evidence + lines, data={**f.data, "device_health": lines})
            continue
        health = "Unhealthy" if (rows["health"] == "Unhealthy").any() else "Unknown"
        key = RULES[health]
        row = sop(key)
        impact = pod_impact(node, g or None, pods=pods, uuid=uuid or None)
        where = f"GPU {g}" if g else f"device {rows['resource_id'].iloc[0]}"
        out.append(
            Finding(
                severity=Severity(row["severity"]),
                title=f"Kubelet reports {node} {where} {health} in pod status",
                category=row["verdict"],
                node=node,
                gpu=g or None,
                summary=(
                    "The device's plugin or DRA driver told kubelet the device is "
                    + ("unhealthy" if health == "Unhealthy" else "of unknown health (its health stream stopped)")
                    + "; no XID, ECC or thermal signal in this window says why."
                ),
                sop_step=row["sop_step"],
                commands=fill_commands(row["commands"], node, g or None, impact),
                evidence=lines + impact_evidence(impact),
                escalation=row["escalation"],
                runbook="xid_ecc_triage",
                data={
                    "rule": key,
                    "uuid": uuid,
                    "pods": impact.to_dict("records"),
                    "device_health": lines,
                },
            )
        )
    return out
