"""GPU scheduling checks on kubectl fixtures and small hand-built frames (expected values worked from the
fixtures' README: taints, tolerations, requests)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gpulib.fleet.scheduling as s
from gpulib.core.findings import Severity
from gpulib.kube.frames import nodes_frame, pods_frame, read_list

K8S = Path(__file__).parents[1] / "fixtures" / "k8s"
NCCL = Path(__file__).parents[1] / "fixtures" / "nccl"


@pytest.fixture(scope="module")
def cluster():
    nodes = nodes_frame(read_list(K8S / "nodes.json"))
    raw = read_list(K8S / "pods.json")
    return nodes, pods_frame(raw), raw["items"]


def by(findings, check):
    return [f for f in findings if f.data.get("check") == check]


def test_fixture_cluster(cluster):
    nodes, pods, specs = cluster
    fs = s.check_scheduling(nodes, pods, pod_specs=specs)
    # notebook-alice (Pending, nvidia.com/gpu request) tolerates only not-ready/unreachable: all 4 nodes that
    # offer nvidia.com/gpu carry a NoSchedule taint it does not tolerate (AKS spot, nvidia.com/gpu x3)
    unt = by(fs, "untolerated")
    assert [(f.data["namespace"], f.data["pod"], f.severity) for f in unt] == [
        ("research", "notebook-alice", Severity.CRITICAL)
    ]
    assert "4 node(s) offering nvidia.com/gpu" in unt[0].evidence[0]
    # dgx-a100-07 (MIG mixed, no taint) is the only GPU node without a hard taint (the H200 one is cordoned AND tainted)
    bare = by(fs, "untainted")
    assert bare[0].data["nodes"] == ["dgx-a100-07"]
    assert bare[0].commands == ["kubectl taint nodes dgx-a100-07 nvidia.com/gpu=present:NoSchedule"]
    # the non-GPU Deployment pod on the H100 node; DaemonSet (operator) pods are excluded
    assert by(fs, "non_gpu_on_gpu")[0].data["pods"] == ["inference/embed-api-7c6d9f8b4-mm2lp"]
    # notebook-alice: a GPU request without a limit
    rl = by(fs, "request_limit")
    assert [(f.data["pod"], f.data["container"]) for f in rl] == [("notebook-alice", "jupyter")]
    assert "without a limit" in rl[0].title


def _node(name, **kw):
    row = {
        "node": name,
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "gpu_count": 8,
        "gpu_memory_mib": 81559,
        "gpu_capacity": 8,
        "gpu_allocatable": 8,
        "mig_capacity": {},
        "mig_allocatable": {},
        "mig_strategy": "",
        "mig_config": "",
        "mig_config_state": "",
        "gpu_replicas": 1,
        "sharing_strategy": "none",
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "schedulable": True,
        "ready": True,
        "spot": False,
        "instance_type": "p5.48xlarge",
        "kernel": "",
        "os_image": "",
        "labels": {},
    }
    row.update(kw)
    return row


def _pod(name, **kw):
    row = {
        "namespace": "ml",
        "pod": name,
        "node": "",
        "phase": "Pending",
        "gpu_request": 1,
        "gpu_limit": 1,
        "mig_requests": {},
        "mig_limits": {},
        "owner_kind": "Job",
        "owner_name": name,
        "workload": name,
        "start_time": pd.NaT,
        "tolerations": [],
        "node_selector": {},
        "labels": {},
        "containers": [],
    }
    row.update(kw)
    return row


def test_toleration_semantics():
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert s.tolerates(taint, [{"operator": "Exists"}])  # empty key + Exists: all
    assert s.tolerates(taint, [{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert s.tolerates(taint, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])  # Equal default
    assert not s.tolerates(taint, [{"key": "nvidia.com/gpu", "value": "true"}])
    assert not s.tolerates(taint, [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}])


def test_pod_tolerating_one_of_two_pools_is_fine_and_mig_uses_its_resource():
    nodes = pd.DataFrame(
        [
            _node("a"),
            _node("b", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]),
            _node(
                "m",
                gpu_capacity=0,
                mig_capacity={"nvidia.com/mig-1g.10gb": 14},
                taints=[{"key": "mig", "value": "", "effect": "NoSchedule"}],
            ),
        ]
    )
    ok = _pod("ok", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    migpod = _pod(
        "migpod",
        gpu_request=0,
        gpu_limit=0,
        mig_requests={"nvidia.com/mig-1g.10gb": 1},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
    )
    running = _pod("running", phase="Running", node="a")
    fs = s.untolerated_gpu_pods(nodes, pd.DataFrame([ok, migpod, running]))
    assert [(f.data["pod"], f.severity) for f in fs] == [("migpod", Severity.CRITICAL), ("running", Severity.WARNING)]
    assert "nvidia.com/mig-1g.10gb" in fs[0].title and "mig:NoSchedule" in fs[0].evidence[0]


def test_product_affinity_from_selector_and_required_affinity():
    nodes = pd.DataFrame([_node("a"), _node("b", gpu_product="NVIDIA-A100-SXM4-80GB")])
    pods = pd.DataFrame(
        [
            _pod("sel-bad", node_selector={"nvidia.com/gpu.product": "NVIDIA H100 80GB HBM3"}),
            _pod("sel-ok", node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        ]
    )
    spec = {
        "metadata": {"name": "aff-bad", "namespace": "ml"},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": ["NVIDIA-H200", "NVIDIA-L40S"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        },
    }
    spec_ok = {
        "metadata": {"name": "aff-ok", "namespace": "ml"},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": ["NVIDIA-H200", "NVIDIA-H100-80GB-HBM3"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        },
    }
    fs = s.unknown_product_affinity(nodes, pods, [spec, spec_ok])
    assert sorted(f.data["pod"] for f in fs) == ["aff-bad", "sel-bad"]
    assert all(f.severity == Severity.CRITICAL for f in fs)
    assert "NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3" in fs[0].evidence[0]


@pytest.mark.parametrize(
    "req, lim, words",
    [
        ({"nvidia.com/gpu": "0.5"}, {"nvidia.com/gpu": "0.5"}, "fractional"),
        ({"nvidia.com/gpu": "500m"}, {"nvidia.com/gpu": "500m"}, "fractional"),
        ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}, "request 1 != limit 2"),
        ({"nvidia.com/mig-1g.5gb": 2}, {"nvidia.com/mig-1g.5gb": 1}, "request 2 != limit 1"),
    ],
)
def test_request_limit_problems(req, lim, words):
    obj = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": req, "limits": lim}}]},
    }
    fs = s.request_limit_problems([obj])
    assert len(fs) == 1 and words in fs[0].title and fs[0].severity == Severity.CRITICAL


def test_request_equal_limit_or_limit_only_is_fine():
    ok = [
        {
            "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]},
        },
        {
            "metadata": {"name": "b"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "resources": {
                            "requests": {"nvidia.com/gpu": "2", "cpu": "500m"},
                            "limits": {"nvidia.com/gpu": "2"},
                        },
                    }
                ]
            },
        },
    ]
    assert s.request_limit_problems(ok) == []


def test_split_across_sockets_on_pcie_topology_not_on_nvlink():
    pcie = (NCCL / "topo_old_pcie_mlx4.txt").read_text()  # GPU0-2 on CPUs 0-9,20-29; GPU3 on 10-19,30-39; SYS between
    nvlink = (NCCL / "topo_8xA100_spaces.txt").read_text()  # 4+4 per NUMA node, NVLink between all GPUs
    pods = pd.DataFrame(
        [
            _pod("four", node="old", phase="Running", gpu_request=4, gpu_limit=4),
            _pod("three", node="old", phase="Running", gpu_request=3, gpu_limit=3),
            _pod("eight", node="dgx", phase="Running", gpu_request=8, gpu_limit=8),
        ]
    )
    fs = s.split_across_sockets(pods, {"old": pcie, "dgx": nvlink})
    assert [f.data["pod"] for f in fs] == ["four"]
    assert fs[0].title == "ml/four needs 4 GPUs; old has at most 3 per socket"
    assert "cross-socket GPU link: SYS" in fs[0].evidence


def test_demo_fleet_flags_the_pod_without_a_gpu_request():
    import gpulib

    d = gpulib.connect("demo")
    fs = s.check_scheduling(d.nodes(), d.pods(), pod_specs=d.pods_json()["items"])
    # every demo GPU node is tainted nvidia.com/gpu and every GPU pod tolerates it; fluent-bit is a DaemonSet
    assert [f.data["check"] for f in fs] == ["non_gpu_on_gpu"]
    assert fs[0].data["pods"] == ["media/legacy-transcoder-0"]
