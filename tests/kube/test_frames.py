"""Pure converters over kubectl-shaped JSON (tests/fixtures/k8s, described in its README).

Expected values are read off the fixture by hand (labels/capacity of each node, resources of each
pod), and from the GFD/device-plugin rules in NVIDIA/k8s-device-plugin: README.md and
docs/gpu-feature-discovery/README.md @ 1b826acc.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import gpulib.kube as k8s
from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS
from gpulib.kube.frames import NODE_EXTRA, POD_EXTRA

FIX = Path(__file__).parents[1] / "fixtures" / "k8s"
DGX, AKS, H100 = "dgx-a100-07", "aks-a100spot-31415926-vmss000002", "ip-10-0-12-34.ec2.internal"
L4, H200, CPU = (
    "gke-inference-l4-pool-7c9e2f1a-x2bd",
    "ip-10-0-77-8.us-west-2.compute.internal",
    "ip-10-0-3-21.ec2.internal",
)


@pytest.fixture(scope="module")
def nodes() -> pd.DataFrame:
    return k8s.nodes_frame(k8s.read_list(FIX / "nodes.json")).set_index("node", drop=False)


@pytest.fixture(scope="module")
def pods() -> pd.DataFrame:
    return k8s.pods_frame(k8s.read_list(FIX / "pods.json")).set_index("pod", drop=False)


def _node(name: str, labels=None, capacity=None, **spec) -> dict:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"capacity": capacity or {}, "allocatable": capacity or {}},
    }


# ----------------------------------------------------------------------------------- nodes
def test_node_frame_has_schema_columns_and_one_row_per_node(nodes):
    assert list(nodes.columns) == NODE_COLUMNS + NODE_EXTRA  # the schema, then the DRA column (dra_gpus)
    assert sorted(nodes["node"]) == sorted([DGX, AKS, H100, L4, H200, CPU])


def test_mig_mixed_node_lists_every_mig_resource_and_full_gpu_labels(nodes):
    n = nodes.loc[DGX]
    # all-balanced on A100-40GB = 2x1g.5gb + 1x2g.10gb + 1x3g.20gb per GPU, 8 GPUs (NVIDIA/mig-parted:
    # deployments/systemd/config-default.yaml @ bd7160f4)
    assert n.mig_capacity == {"nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8, "nvidia.com/mig-3g.20gb": 8}
    assert n.mig_allocatable["nvidia.com/mig-1g.5gb"] == 15  # one unhealthy MIG device
    assert (n.gpu_capacity, n.gpu_allocatable) == (0, 0)  # mixed: no full GPUs advertised
    assert (n.gpu_product, n.gpu_count, n.gpu_memory_mib) == ("NVIDIA-A100-SXM4-40GB", 8, 40960)
    assert (n.mig_strategy, n.mig_config, n.mig_config_state) == ("mixed", "all-balanced", "success")
    assert n.instance_type == "DGXA100-920-23687-2530-000"  # no cloud label: nvidia.com/gpu.machine


def test_mig_single_node_describes_mig_devices_through_gpu_labels(nodes):
    n = nodes.loc[AKS]
    assert n.gpu_product == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert (n.gpu_count, n.gpu_memory_mib, n.gpu_capacity, n.gpu_allocatable) == (56, 4864, 56, 56)  # 7 x 8 GPUs
    assert n.mig_capacity == {} and n.mig_strategy == "single"


def test_time_slicing_node_reports_replicas_and_shared_capacity(nodes):
    n = nodes.loc[L4]
    assert (n.gpu_count, n.gpu_replicas, n.sharing_strategy) == (2, 4, "time-slicing")
    assert n.gpu_capacity == 8  # 2 GPUs x 4 replicas
    assert n.gpu_product.endswith("-SHARED")


def test_renamed_time_slicing_node_counts_gpu_shared():
    # device plugin with renameByDefault: true advertises nvidia.com/gpu.shared (NVIDIA/k8s-device-plugin:
    # api/config/v1/ @ 1b826acc) and GFD keeps the
    # product name without the -SHARED suffix (§6.3): 4 A10G x 4 replicas = 16 shared units, no nvidia.com/gpu
    n = k8s.nodes_frame(k8s.read_list(FIX / "nodes-timeslicing-renamed.json")).iloc[0]
    assert (n.node, n.gpu_product, n.gpu_count) == ("ip-10-0-21-7.ec2.internal", "NVIDIA-A10G", 4)
    assert (n.gpu_capacity, n.gpu_allocatable) == (16, 16)
    assert (n.gpu_replicas, n.sharing_strategy) == (4, "time-slicing")
    assert k8s.gpu_resource_name(n) == "nvidia.com/gpu.shared"
    assert list(k8s.iter_gpu_nodes(k8s.nodes_frame(k8s.read_list(FIX / "nodes-timeslicing-renamed.json")))) == [n.node]


def test_gpu_shared_without_gfd_sharing_labels_infers_replicas():
    # no GFD replicas/strategy labels: replicas = shared units / gpu.count
    node = _node(
        "ts", {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-L4"}, {"nvidia.com/gpu.shared": "8"}
    )
    n = k8s.nodes_frame({"items": [node]}).iloc[0]
    assert (n.gpu_capacity, n.gpu_replicas, n.sharing_strategy) == (8, 4, "time-slicing")
    plain = k8s.nodes_frame({"items": [_node("p", {"nvidia.com/gpu.count": "2"}, {"nvidia.com/gpu": "2"})]}).iloc[0]
    assert k8s.gpu_resource_name(plain) == "nvidia.com/gpu"


def test_pod_requesting_gpu_shared_counts_as_a_gpu_request():
    pod = k8s.pods_frame(k8s.read_list(FIX / "pods-gpu-shared.json")).iloc[0]
    assert (pod.pod, pod.node, pod.gpu_request, pod.gpu_limit) == (
        "jupyter-dev-7b9c4d5f6a-q2w3e",
        "ip-10-0-21-7.ec2.internal",
        1,
        1,
    )
    assert (pod.owner_kind, pod.owner_name) == ("Deployment", "jupyter-dev")


def test_unhealthy_gpu_shows_as_allocatable_below_capacity(nodes):
    assert (nodes.loc[H100, "gpu_capacity"], nodes.loc[H100, "gpu_allocatable"]) == (8, 7)


@pytest.mark.parametrize("name,spot", [(DGX, False), (AKS, True), (H100, False), (L4, True), (H200, True), (CPU, True)])
def test_spot_from_cloud_labels(nodes, name, spot):
    assert bool(nodes.loc[name, "spot"]) is spot


@pytest.mark.parametrize(
    "labels,spot",
    [
        ({"cloud.google.com/gke-preemptible": "true"}, True),
        ({"karpenter.sh/capacity-type": "on-demand"}, False),
        ({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, False),
        ({"kubernetes.azure.com/scalesetpriority": "regular"}, False),
        ({}, False),
    ],
)
def test_spot_rules_inline(labels, spot):
    assert k8s.is_spot(labels) is spot


def test_taints_schedulable_and_ready(nodes):
    assert nodes.loc[H100, "taints"] == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert nodes.loc[DGX, "taints"] == []
    assert not nodes.loc[H200, "schedulable"] and nodes.loc[H200, "ready"]
    assert nodes.loc[H200, "mig_config_state"] == "failed"
    assert nodes.loc[CPU, "schedulable"] and not nodes.loc[CPU, "ready"]  # Ready=Unknown
    assert {t["effect"] for t in nodes.loc[CPU, "taints"]} == {"NoSchedule", "NoExecute"}


def test_cpu_node_has_missing_gpu_labels_as_na(nodes):
    n = nodes.loc[CPU]
    assert n.gpu_product == "" and pd.isna(n.gpu_count) and pd.isna(n.gpu_memory_mib) and pd.isna(n.gpu_replicas)
    assert (n.gpu_capacity, n.mig_capacity) == (0, {})


def test_kernel_os_and_instance_type(nodes):
    assert nodes.loc[H100, "kernel"] == "5.10.223-212.873.amzn2.x86_64"
    assert nodes.loc[L4, "os_image"] == "Container-Optimized OS from Google"
    assert nodes.loc[H200, "instance_type"] == "p5en.48xlarge"
    assert nodes.loc[AKS, "labels"]["kubernetes.azure.com/agentpool"] == "a100spot"


def test_empty_node_list_keeps_columns():
    df = k8s.nodes_frame(k8s.read_list(FIX / "nodes-empty.json"))
    assert df.empty and list(df.columns) == NODE_COLUMNS


def test_single_node_object_and_bare_items_list_are_accepted():
    one = _node("n1", {"nvidia.com/gpu.count": "4"}, {"nvidia.com/gpu": "4"})
    assert k8s.nodes_frame(dict(one, kind="Node"))["gpu_count"].tolist() == [4]
    assert k8s.nodes_frame([one])["gpu_capacity"].tolist() == [4]  # `jq .items` output


def test_iter_gpu_nodes_skips_cpu_node(nodes):
    assert set(k8s.iter_gpu_nodes(nodes)) == {DGX, AKS, H100, L4, H200}


# ----------------------------------------------------------------------------------- pods
def test_pod_frame_schema(pods):
    assert list(pods.columns) == POD_COLUMNS + POD_EXTRA and len(pods) == 11  # + DRA claims/devices, device health
    assert str(pods["start_time"].dt.tz) == "UTC"


@pytest.mark.parametrize(
    "pod,kind,name",
    [
        ("vllm-llama3-8b-6d5f7c9b8d-x7k2p", "Deployment", "vllm-llama3-8b"),
        ("embed-api-7c6d9f8b4-mm2lp", "Deployment", "embed-api"),
        ("nightly-eval-29787960-7hq4x", "CronJob", "nightly-eval"),
        ("data-prep-x2x7c", "Job", "data-prep"),
        ("triton-0", "StatefulSet", "triton"),
        ("llm-train-worker-0", "PyTorchJob", "llm-train"),
        ("mig-bench-legacy-9zq4d", "ReplicaSet", "mig-bench-legacy"),  # no pod-template-hash label
        ("nvidia-dcgm-exporter-4xk9p", "DaemonSet", "nvidia-dcgm-exporter"),
        ("gpu-burn-h200", "", ""),
    ],
)
def test_owner_resolution(pods, pod, kind, name):
    assert (pods.loc[pod, "owner_kind"], pods.loc[pod, "owner_name"]) == (kind, name)
    assert pods.loc[pod, "workload"] == (name or pod)


def test_job_with_short_numeric_suffix_is_not_taken_for_a_cronjob():
    meta = {"ownerReferences": [{"kind": "Job", "name": "train-42", "controller": True}]}
    assert k8s.resolve_owner(meta) == ("Job", "train-42")


def test_gpu_sums_over_app_containers_exclude_init(pods):
    assert (pods.loc["triton-0", "gpu_request"], pods.loc["triton-0", "gpu_limit"]) == (3, 3)  # 2 + 1
    # the 7-GPU init container nccl-check is not added (schema: init containers excluded)
    assert (pods.loc["llm-train-worker-0", "gpu_request"], pods.loc["llm-train-worker-0", "gpu_limit"]) == (7, 7)
    assert [c["name"] for c in pods.loc["triton-0", "containers"]] == ["triton", "warmup"]


def test_mig_requests_summed_per_resource(pods):
    assert pods.loc["nightly-eval-29787960-7hq4x", "mig_requests"] == {
        "nvidia.com/mig-3g.20gb": 1,
        "nvidia.com/mig-1g.5gb": 1,
    }
    assert pods.loc["mig-bench-legacy-9zq4d", "mig_limits"] == {"nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-2g.10gb": 1}
    assert pods.loc["nightly-eval-29787960-7hq4x", "gpu_request"] == 0


def test_gpu_request_without_limit_is_kept_visible(pods):
    p = pods.loc["notebook-alice"]
    assert (p.gpu_request, p.gpu_limit, p.node, p.phase) == (1, 0, "", "Pending")
    assert pd.isna(p.start_time) and (p.owner_kind, p.workload) == ("", "notebook-alice")


def test_limit_only_defaults_request_like_the_api_server():
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": 1}}}]
        },
    }
    row = k8s.pods_frame({"items": [pod]}).iloc[0]
    assert (row.gpu_request, row.gpu_limit) == (2, 2)
    assert row.mig_requests == {"nvidia.com/mig-1g.10gb": 1}


def test_tolerations_node_selector_and_start_time(pods):
    p = pods.loc["vllm-llama3-8b-6d5f7c9b8d-x7k2p"]
    assert {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"} in p.tolerations
    assert p.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert p.start_time == pd.Timestamp("2026-08-20T09:14:03Z")
    assert p.node == L4 and p.phase == "Running"


# ----------------------------------------------------------------------------------- malformed input
def test_truncated_file_names_file_and_line():
    with pytest.raises(k8s.MalformedKubernetesObject, match=r"nodes-truncated\.json: not valid JSON at line \d+") as ei:
        k8s.read_list(FIX / "nodes-truncated.json")
    assert "truncated" in str(ei.value)


def test_saved_error_status_is_reported_with_its_message():
    with pytest.raises(k8s.MalformedKubernetesObject, match="API error Status.*pods is forbidden"):
        k8s.pods_frame(k8s.read_list(FIX / "pods-forbidden-status.json"))


@pytest.mark.parametrize(
    "doc,match",
    [
        ("not json object", "got str"),
        ({"kind": "NodeList"}, "no 'items'"),
        ({"items": {"a": 1}}, "not a list"),
        ({"items": [1, 2]}, r"items \[0, 1\] are not objects"),
    ],
)
def test_wrong_shapes_raise_specific_error(doc, match):
    with pytest.raises(k8s.MalformedKubernetesObject, match=match):
        k8s.nodes_frame(doc)


def test_fractional_gpu_quantity_names_node_and_resource():
    bad = _node("gpu-9", capacity={"nvidia.com/gpu": "1.5"})
    with pytest.raises(k8s.MalformedKubernetesObject, match=r"node gpu-9 capacity\[nvidia.com/gpu\].*fractional"):
        k8s.nodes_frame({"items": [bad]})


def test_suffixed_quantity_is_parsed():
    assert k8s.nodes_frame({"items": [_node("big", capacity={"nvidia.com/gpu": "1k"})]})["gpu_capacity"].tolist() == [
        1000
    ]


def test_missing_file():
    with pytest.raises(k8s.MalformedKubernetesObject, match="file not found"):
        k8s.read_list(FIX / "no-such.json")


# ----------------------------------------------------------------------------------- GPU Operator objects
def test_daemonsets_frame_counts():
    ds = k8s.daemonsets_frame(k8s.read_list(FIX / "daemonsets-gpu-operator.json")).set_index("daemonset")
    assert len(ds) == 7
    dp = ds.loc["nvidia-device-plugin-daemonset"]
    assert (dp.desired, dp.ready, dp.unavailable) == (5, 4, 1)
    assert ds.loc["nvidia-driver-daemonset", "node_selector"] == {"nvidia.com/gpu.deploy.driver": "true"}
    assert (ds["desired"] == ds["ready"]).sum() == 6


def test_cluster_policy_status():
    cp = k8s.read_list(FIX / "clusterpolicies.json")["items"][0]
    st = k8s.cluster_policy_status(cp)
    assert (st["name"], st["state"], st["namespace"], st["ready"]) == (
        "cluster-policy",
        "notReady",
        "gpu-operator",
        False,
    )
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [
        ("Ready", "False", "OperandNotReady"),
        ("Error", "True", "OperandNotReady"),
    ]
    assert k8s.cluster_policy_status(None)["state"] == "absent"


def test_fixture_is_kubectl_shaped():
    doc = json.loads((FIX / "nodes.json").read_text())
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
    assert all(item["kind"] == "Node" for item in doc["items"])
