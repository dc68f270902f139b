"""KEP-4680 pod device health: ``status.containerStatuses[].allocatedResourcesStatus`` read from Pod objects
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus). Resource names and ids
follow kubelet (``claim:<claim>[/<request>]``, ``<driver>/<pool>/<device>``: kubernetes/kubernetes:
pkg/kubelet/cm/dra/manager.go @e0a566e7) and the device plugin (GPU UUID, ``<uuid>::<replica>``:
NVIDIA/k8s-device-plugin: internal/rm/devices.go @03973a97); the values are written by hand."""

from __future__ import annotations

import pandas as pd

from gpulib.kube import dra
from gpulib.kube.device_health import (
    container_device_health,
    device_health_frame,
    history_rows,
    not_healthy,
)
from gpulib.kube.frames import pods_frame

UUID = "GPU-11111111-2222-3333-4444-555555555555"


def _pod(name, statuses, node="gpu-a", ns="ml", claim=None):
    pod = {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "i"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "allocatedResourcesStatus": statuses}]},
    }
    if claim:
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def test_every_entry_of_every_container_is_read():
    pod = _pod(
        "p",
        [
            {"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID, "health": "Healthy"}]},
            {
                "name": "claim:gpu/big",
                "resources": [{"resourceID": "gpu.nvidia.com/gpu-a/gpu-1", "health": "Unhealthy", "message": "x"}],
            },
        ],
    )
    pod["status"]["initContainerStatuses"] = [
        {"name": "init", "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [{"resourceID": "r"}]}]}
    ]
    got = container_device_health(pod)
    assert [(e["container"], e["resource"], e["health"], e["message"]) for e in got] == [
        ("init", "claim:gpu", "Unknown", ""),  # no health given: Unknown, never Healthy
        ("main", "nvidia.com/gpu", "Healthy", ""),
        ("main", "claim:gpu/big", "Unhealthy", "x"),
    ]
    assert container_device_health({"status": {}}) == []
    odd = _pod("q", [{"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID, "health": "Degraded"}]}])
    assert container_device_health(odd)[0]["health"] == "Unknown"


def test_the_gpu_is_found_from_the_plugin_uuid_a_replica_and_the_dra_device():
    pods = pods_frame(
        {
            "items": [
                _pod(
                    "plugin", [{"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID, "health": "Unhealthy"}]}]
                ),
                _pod(
                    "shared",
                    [
                        {
                            "name": "nvidia.com/gpu.shared",
                            "resources": [{"resourceID": UUID + "::3", "health": "Unknown"}],
                        }
                    ],
                ),
                _pod(
                    "dra",
                    [
                        {
                            "name": "claim:gpu",
                            "resources": [
                                {"resourceID": "gpu.nvidia.com/gpu-a/gpu-0", "health": "Unhealthy", "message": "m"},
                                {"resourceID": "k8s.gpu.nvidia.com/claim=5f2e-gpu-1", "health": "Healthy"},
                            ],
                        }
                    ],
                    claim="c",
                ),
            ]
        }
    )
    slices = [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "gpu-a",
                "pool": {"name": "gpu-a"},
                "devices": [
                    {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-dra-0"}, "type": {"string": "gpu"}}},
                    {"name": "gpu-1", "attributes": {"uuid": {"string": "GPU-dra-1"}, "type": {"string": "gpu"}}},
                ],
            }
        }
    ]
    claim = {
        "metadata": {"name": "c", "namespace": "ml"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-a", "device": d}
                        for d in ("gpu-0", "gpu-1")
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "dra"}],
        },
    }
    pods = dra.attach_pods(pods, dra.claim_allocations([claim], slices, pods))
    gpus = pd.DataFrame(
        {"node": ["gpu-a"] * 2, "gpu": ["0", "5"], "uuid": [UUID, "GPU-dra-1"], "pci_bus_id": ["A", "B"]}
    )
    f = device_health_frame(pods, gpus)
    assert list(zip(f["pod"], f["uuid"], f["gpu"], f["health"])) == [
        ("plugin", UUID, "0", "Unhealthy"),
        ("shared", UUID, "0", "Unknown"),
        ("dra", "GPU-dra-0", "", "Unhealthy"),  # no index from the slice nor the GPU list: left unknown
        ("dra", "GPU-dra-1", "5", "Healthy"),  # CDI id ending in the device name
    ]
    bad = not_healthy(f)
    assert list(bad["pod"]) == ["plugin", "shared", "dra"]
    assert list(not_healthy(f, "gpu-a", "0")["pod"]) == ["plugin", "shared", "dra"]  # unknown GPU kept
    assert list(not_healthy(f, "gpu-b")["pod"]) == []
    h = history_rows(f, "gpu-a", "2026-01-01T00:00:00Z")
    assert list(h["signal"].unique()) == ["pod_device_health"] and list(h["code"]) == [
        "Unhealthy",
        "Unknown",
        "Unhealthy",
    ]
    assert h["detail"].iloc[2].endswith("gpu.nvidia.com/gpu-a/gpu-0 Unhealthy: m")


def test_pods_frame_keeps_the_health_and_the_claim_names():
    p = pods_frame({"items": [_pod("x", [{"name": "nvidia.com/gpu", "resources": [{"resourceID": UUID}]}], claim="c")]})
    assert p["device_health"].iloc[0][0]["resource_id"] == UUID and p["dra_claims"].iloc[0] == ["c"]
    assert device_health_frame(None).empty and device_health_frame(p.drop(columns="device_health")).empty
