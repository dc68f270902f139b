"""The demo fleet's Dynamic Resource Allocation objects (synthetic): a node whose spec says ``allocation: dra`` is
served by NVIDIA's DRA driver instead of the device plugin. It advertises its GPUs in one ResourceSlice (driver
``gpu.nvidia.com``, pool = node name, devices ``gpu-<minor>`` with the driver's attributes ``type``, ``uuid``,
``productName``, ``pcieBusID``: NVIDIA/k8s-dra-driver-gpu: cmd/gpu-kubelet-plugin/deviceinfo.go @03af8246), each
workload holds its GPUs through a ResourceClaim generated from a template (``<pod>-gpu-<suffix>``, allocated on the
node and reserved for the pod: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/resource-claim-v1/),
and the node spec's ``device_health`` entries become kubelet's ``allocatedResourcesStatus`` on the pod holding the GPU
(resourceID ``<driver>/<pool>/<device>``: kubernetes/kubernetes: pkg/kubelet/cm/dra/manager.go @e0a566e7).

Its dcgm-exporter runs without ``--kubernetes-enable-dra`` (the default, NVIDIA/dcgm-exporter: pkg/cmd/app.go
@5a052c34), so the DCGM series of its GPUs carry no pod label: only the claims say who holds them.
"""

from __future__ import annotations

DRIVER = "gpu.nvidia.com"
#: the container's claim name and the pod-level claim name of a demo DRA workload
CLAIM = "gpu"


def is_dra(spec: dict) -> bool:
    """Whether a node spec of the scenario is served by the DRA driver."""
    return str(spec.get("allocation", "")).lower() == "dra"


def claim_name(pod: str) -> str:
    """The ResourceClaim generated for a pod's ``gpu`` claim (``<pod>-<claim>-<random suffix>``, suffix fixed)."""
    return f"{pod}-{CLAIM}-x7k2p"


def _health(spec: dict, gpu: int) -> dict | None:
    return next((h for h in spec.get("device_health") or [] if int(h.get("gpu", -1)) == gpu), None)


def pod_parts(sim, spec: dict, w: dict, container: str) -> tuple[dict, dict, dict]:
    """(pod spec additions, container resource claims, status additions) of a DRA workload ``w`` on ``spec``'s node."""
    pod_spec = {"resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": f"{w.get('owner', w['pod'])}-gpu"}]}
    claims = {"claims": [{"name": CLAIM}]}
    resources = []
    for g in w.get("gpus", []):
        entry = {"resourceID": f"{DRIVER}/{spec['name']}/gpu-{int(g)}", "health": "Healthy"}
        h = _health(spec, int(g))
        if h:
            entry["health"] = str(h.get("health", "Unhealthy"))
            if h.get("message"):
                entry["message"] = str(h["message"])
        resources.append(entry)
    status = {
        "resourceClaimStatuses": [{"name": CLAIM, "resourceClaimName": claim_name(w["pod"])}],
        "allocatedResourcesStatus": [{"name": f"claim:{CLAIM}", "resources": resources}] if resources else [],
    }
    return pod_spec, claims, status


def resource_slices(sim) -> list[dict]:
    """One ResourceSlice per DRA node: its full GPUs."""
    out = []
    for spec in sim.node_specs:
        if not is_dra(spec):
            continue
        m = sim._models[spec["model"]]
        devices = []
        for d in sim.devices:
            if d.node != spec["name"] or d.is_instance:
                continue
            devices.append(
                {
                    "name": f"gpu-{d.index}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": d.uuid},
                        "productName": {"string": m["dcgm_model_name"]},
                        "pcieBusID": {"string": d.pci_bus_id[4:].lower()},
                        "driverVersion": {"version": sim.driver_version},
                    },
                    "capacity": {"memory": {"value": f"{int(d.memory_mib)}Mi"}},
                }
            )
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{spec['name']}-{DRIVER}-4xq9z"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": spec["name"],
                    "pool": {"name": spec["name"], "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return out


def resource_claims(sim, namespace: str | None = None) -> list[dict]:
    """One allocated ResourceClaim per workload with GPUs on a DRA node, reserved for its pod."""
    out = []
    for spec in sim.node_specs:
        if not is_dra(spec):
            continue
        for w in spec.get("workloads", []):
            if not w.get("gpus") or w.get("persona") == "none":
                continue
            if namespace is not None and w["namespace"] != namespace:
                continue
            out.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": claim_name(w["pod"]),
                        "namespace": w["namespace"],
                        "annotations": {"resource.kubernetes.io/pod-claim-name": CLAIM},
                    },
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": CLAIM,
                                    "exactly": {
                                        "deviceClassName": DRIVER,
                                        "allocationMode": "ExactCount",
                                        "count": len(w["gpus"]),
                                    },
                                }
                            ]
                        }
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": CLAIM,
                                        "driver": DRIVER,
                                        "pool": spec["name"],
                                        "device": f"gpu-{int(g)}",
                                    }
                                    for g in w["gpus"]
                                ]
                            },
                            "nodeSelector": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {"key": "metadata.name", "operator": "In", "values": [spec["name"]]}
                                        ]
                                    }
                                ]
                            },
                        },
                        "reservedFor": [
                            {"resource": "pods", "name": w["pod"], "uid": sim._uuid("pod", w["namespace"], w["pod"])}
                        ],
                    },
                }
            )
    return out
