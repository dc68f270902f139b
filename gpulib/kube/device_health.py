"""Pod device health (KEP-4680, ``ResourceHealthStatus``, beta and on by default from Kubernetes 1.36): kubelet
writes ``status.containerStatuses[].allocatedResourcesStatus`` — per resource (a device-plugin resource name such as
``nvidia.com/gpu``, or ``claim:<claim>[/<request>]`` for DRA) a list of ``{resourceID, health, message}`` with
health ``Healthy``, ``Unhealthy`` or ``Unknown``
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus,
https://github.com/kubernetes/enhancements/tree/master/keps/sig-node/4680-add-resource-health-to-pod-status). For a
DRA device the ``resourceID`` is its CDI device id, else ``<driver>/<pool>/<device>``
(kubernetes/kubernetes: pkg/kubelet/cm/dra/manager.go ``UpdateAllocatedResourcesStatus`` @e0a566e7); NVIDIA's device
plugin's device ids are GPU (or MIG) UUIDs, a time-sliced replica ``<uuid>::<n>`` (NVIDIA/k8s-device-plugin:
internal/rm/devices.go @03973a97 ``BuildDevice``, ``NewAnnotatedID``).

:func:`container_device_health` reads one Pod object (the pods frame keeps it in ``device_health``);
:func:`device_health_frame` lists every device of every pod with the GPU it is (UUID, PCI bus id, index where the
DRA allocation gives them); :func:`not_healthy` keeps the ``Unhealthy``/``Unknown`` ones.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = [
    "DEVICE_HEALTH_COLUMNS",
    "NOT_HEALTHY",
    "container_device_health",
    "device_health_frame",
    "history_rows",
    "not_healthy",
]

#: the health values that are not ``Healthy`` (``Unknown``: kubelet lost the plugin's health stream; never OK)
NOT_HEALTHY = ("Unhealthy", "Unknown")

DEVICE_HEALTH_COLUMNS = [
    "node",
    "namespace",
    "pod",
    "owner_kind",
    "owner_name",
    "container",
    "resource",
    "resource_id",
    "health",
    "message",
    "uuid",
    "pci_bus_id",
    "gpu",
    "claim",
    "device",
]


def container_device_health(pod: dict) -> list[dict[str, str]]:
    """``[{container, resource, resource_id, health, message}]`` from every (init) container status of a Pod object;
    a health value other than the three KEP-4680 defines reads as ``Unknown``."""
    st = (pod or {}).get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            if not isinstance(cs, dict):
                continue
            for rs in cs.get("allocatedResourcesStatus") or []:
                if not isinstance(rs, dict):
                    continue
                for h in rs.get("resources") or []:
                    if not isinstance(h, dict):
                        continue
                    health = str(h.get("health") or "Unknown")
                    out.append(
                        {
                            "container": str(cs.get("name") or ""),
                            "resource": str(rs.get("name") or ""),
                            "resource_id": str(h.get("resourceID") or ""),
                            "health": health if health in ("Healthy", *NOT_HEALTHY) else "Unknown",
                            "message": str(h.get("message") or ""),
                        }
                    )
    return out


def _dra_device(resource: str, resource_id: str, devices: list[dict]) -> dict | None:
    """The pod's DRA device a ``claim:`` status names: by ``<driver>/<pool>/<device>`` or a CDI id ending in the
    device name (NVIDIA's driver's CDI ids end ``-<device>``)."""
    if not resource.startswith("claim:"):
        return None
    for d in devices or []:
        if resource_id == f"{d['driver']}/{d['pool']}/{d['device']}":
            return d
    for d in devices or []:
        if d["device"] and (resource_id.endswith("-" + d["device"]) or resource_id.endswith("=" + d["device"])):
            return d
    return None


def device_health_frame(pods: pd.DataFrame | None, gpus: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every device health entry of the pods frame (``device_health``), one row each (``DEVICE_HEALTH_COLUMNS``).
    The GPU is found from the pod's DRA device (``dra_devices``) or, for a device-plugin resource, from the
    ``resourceID`` being the GPU's UUID (a time-sliced replica ``<uuid>::<n>`` too); ``gpus`` (node, gpu, uuid,
    pci_bus_id, e.g. :meth:`gpulib.sources.base.Source.gpus`) fills the index and PCI bus id from the UUID."""
    rows: list[dict[str, Any]] = []
    if pods is None or len(pods) == 0 or "device_health" not in pods:
        return pd.DataFrame(rows, columns=DEVICE_HEALTH_COLUMNS)
    by_uuid: dict[tuple[str, str], dict] = {}
    if gpus is not None and len(gpus):
        for g in gpus.to_dict("records"):
            for u in (g.get("uuid"), g.get("mig_uuid")):
                if isinstance(u, str) and u:
                    by_uuid.setdefault((str(g.get("node") or ""), u), g)
    for p in pods.to_dict("records"):
        entries = p.get("device_health")
        if not isinstance(entries, list) or not entries:
            continue
        devices = p.get("dra_devices") if isinstance(p.get("dra_devices"), list) else []
        node = str(p.get("node") or "")
        for e in entries:
            d = _dra_device(e["resource"], e["resource_id"], devices)
            uuid = (d or {}).get("uuid") or ""
            if d is None and not e["resource"].startswith("claim:"):
                uuid = e["resource_id"].split("::")[0]
            g = by_uuid.get((node, uuid), {})
            rows.append(
                {
                    "node": node,
                    "namespace": str(p.get("namespace") or ""),
                    "pod": str(p.get("pod") or ""),
                    "owner_kind": str(p.get("owner_kind") or ""),
                    "owner_name": str(p.get("owner_name") or ""),
                    **e,
                    "uuid": uuid,
                    "pci_bus_id": (d or {}).get("pci_bus_id") or str(g.get("pci_bus_id") or ""),
                    "gpu": str(g.get("gpu") or (d or {}).get("gpu") or ""),
                    "claim": (d or {}).get("claim", ""),
                    "device": (d or {}).get("device", ""),
                }
            )
    return pd.DataFrame(rows, columns=DEVICE_HEALTH_COLUMNS)


def not_healthy(frame: pd.DataFrame, node: str | None = None, gpu: str | None = None) -> pd.DataFrame:
    """The ``Unhealthy``/``Unknown`` rows of :func:`device_health_frame` (of ``node``; of GPU index ``gpu``, rows whose
    GPU is unknown kept)."""
    out = frame[frame["health"].isin(NOT_HEALTHY)]
    if node is not None:
        out = out[out["node"] == node]
    if gpu is not None:
        out = out[(out["gpu"] == str(gpu)) | (out["gpu"] == "")]
    return out.reset_index(drop=True)


def history_rows(frame: pd.DataFrame, node: str, at: Any) -> pd.DataFrame:
    """The node's not-Healthy devices of :func:`device_health_frame` as node-history rows (``HISTORY_COLUMNS``,
    signal ``pod_device_health``, code = the health) at ``at``, the moment the pod status was read: kubelet keeps
    the state, not when it changed."""
    cols = ["time", "end", "node", "gpu", "signal", "code", "value", "detail", "origin"]
    bad = not_healthy(frame, node)
    rows = [
        {
            "time": pd.Timestamp(at),
            "end": pd.NaT,
            "node": node,
            "gpu": r["gpu"],
            "signal": "pod_device_health",
            "code": r["health"],
            "value": 1.0,
            "detail": f"kubelet: pod {r['namespace']}/{r['pod']} {r['resource']} device {r['resource_id']} "
            f"{r['health']}" + (f": {r['message']}" if r["message"] else ""),
            "origin": "pod status (allocatedResourcesStatus)",
        }
        for r in bad.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=cols)
