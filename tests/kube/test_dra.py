"""DRA: ResourceClaims/ResourceSlices (resource.k8s.io/v1) -> which pod holds which GPU, through the converters, a
snapshot, the real kubernetes client against the API double, and the demo's DRA node. Object shapes follow the API
reference (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/resource-claim-v1/,
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/resource-slice-v1/) and NVIDIA's driver's
attributes (NVIDIA/k8s-dra-driver-gpu: cmd/gpu-kubelet-plugin/deviceinfo.go @03af8246); values are written by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpulib
from gpulib.kube import dra
from gpulib.kube.frames import nodes_frame, pods_frame

UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-66666666-7777-8888-9999-000000000000"
MIG = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def _slice(node="gpu-a", driver="gpu.nvidia.com"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com-abcde"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": UUID0},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        "pcieBusID": {"string": "0000:18:00.0"},
                    },
                },
                {  # fully qualified attribute names are the same attributes
                    "name": "gpu-1",
                    "attributes": {
                        "gpu.nvidia.com/type": {"string": "gpu"},
                        "gpu.nvidia.com/uuid": {"string": UUID1},
                        "gpu.nvidia.com/index": {"int": 1},
                    },
                },
                {
                    "name": "gpu-1-mig-9-4-2",
                    "attributes": {
                        "type": {"string": "mig"},
                        "uuid": {"string": MIG},
                        "parentUUID": {"string": UUID1},
                        "profile": {"string": "1g.10gb"},
                    },
                },
            ],
        },
    }


def _claim(name, ns, pod, devices, reserved=True, driver="gpu.nvidia.com", pool="gpu-a"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": driver, "pool": pool, "device": d} for d in devices]
                }
            },
            **({"reservedFor": [{"resource": "pods", "name": pod, "uid": "uid-" + pod}]} if reserved else {}),
        },
    }


def _pod(name, ns="ml", node="gpu-a", claim=None, gpu_limit=None):
    res = {"limits": {"nvidia.com/gpu": str(gpu_limit)}} if gpu_limit else {}
    c = {"name": "main", "image": "img", "resources": {**res, **({"claims": [{"name": "gpu"}]} if claim else {})}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "containers": [c]},
        "status": {"phase": "Running"},
    }
    if claim:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "tpl"}]
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def test_slice_devices_read_v1_attributes_qualified_names_and_v1beta1():
    devs = dra.slice_devices({"items": [_slice()]})
    assert list(devs["device"]) == ["gpu-0", "gpu-1", "gpu-1-mig-9-4-2"]
    r0, r1, m = devs.to_dict("records")
    assert (r0["uuid"], r0["type"], r0["node"], r0["pool"]) == (UUID0, "gpu", "gpu-a", "gpu-a")
    assert r0["pci_bus_id"] == "00000000:18:00.0"  # as DCGM and nvidia-smi print it
    assert r0["gpu"] == ""  # gpu-0 is the /dev/nvidia minor, not the NVML index: no index attribute, none guessed
    assert (r1["uuid"], r1["gpu"]) == (UUID1, "1")
    assert (m["type"], m["parent_uuid"], m["profile"]) == ("mig", UUID1, "1g.10gb")
    beta = _slice()
    beta["spec"]["devices"] = [{"name": "gpu-0", "basic": {"attributes": {"uuid": {"string": UUID0}}}}]
    assert list(dra.slice_devices({"items": [beta]})["uuid"]) == [UUID0]


def test_claim_allocations_name_pod_node_and_skip_unallocated():
    claims = [
        _claim("train-gpu-x", "ml", "train-0", ["gpu-0", "gpu-1"]),
        _claim("spare", "ml", "", ["gpu-1-mig-9-4-2"], reserved=False),
        {"metadata": {"name": "pending", "namespace": "ml"}, "status": {}},
    ]
    a = dra.claim_allocations({"items": claims}, {"items": [_slice()]})
    assert list(zip(a["claim"], a["pod"], a["device"])) == [
        ("train-gpu-x", "train-0", "gpu-0"),
        ("train-gpu-x", "train-0", "gpu-1"),
        ("spare", "", "gpu-1-mig-9-4-2"),
    ]
    assert set(a["node"]) == {"gpu-a"} and list(a["uuid"][:2]) == [UUID0, UUID1]
    # no slice for the device: the allocation's node selector says where
    c = _claim("x", "ml", "p", ["gpu-7"], pool="elsewhere")
    c["status"]["allocation"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-b"]}]}]
    }
    assert list(dra.claim_allocations([c], [])["node"]) == ["gpu-b"]


def test_attach_pods_counts_dra_gpus_and_mig_like_the_device_plugin():
    pods = pods_frame(
        {"items": [_pod("train-0", claim="train-gpu-x"), _pod("small", claim="mig-c"), _pod("dp", gpu_limit=2)]}
    )
    assert list(pods["dra_claims"]) == [["train-gpu-x"], ["mig-c"], []]
    assert list(pods["gpu_request"]) == [0, 0, 2]  # the pod list alone: a DRA pod requests no nvidia.com/gpu
    claims = [
        _claim("train-gpu-x", "ml", "train-0", ["gpu-0", "gpu-1"]),
        _claim("mig-c", "ml", "small", ["gpu-1-mig-9-4-2"]),
    ]
    out = dra.attach_pods(pods, dra.claim_allocations(claims, [_slice()], pods))
    assert list(out["gpu_request"]) == [2, 0, 2] and list(out["gpu_limit"]) == [2, 0, 2]
    assert out["mig_requests"].iloc[1] == {"nvidia.com/mig-1g.10gb": 1}
    assert [d["uuid"] for d in out["dra_devices"].iloc[0]] == [UUID0, UUID1]
    assert out["containers"].iloc[0][0]["gpu_request"] == 0  # the containers' own resources stay as written
    other = [_claim("train-gpu-x", "ml", "train-0", ["nic-0"], driver="net.example.com")]
    assert list(dra.attach_pods(pods, dra.claim_allocations(other, []))["gpu_request"]) == [0, 0, 2]


def test_allocation_model_per_gpu_node():
    nodes = nodes_frame(
        {
            "items": [
                {"metadata": {"name": n, "labels": lab}, "status": {"capacity": cap}}
                for n, lab, cap in (
                    ("plugin", {}, {"nvidia.com/gpu": "8"}),
                    ("dra", {}, {}),
                    ("both", {}, {"nvidia.com/mig-1g.10gb": "7"}),
                    ("neither", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {}),
                    ("cpu", {}, {"cpu": "64"}),
                )
            ]
        }
    )
    nodes = dra.attach_nodes(nodes, dra.slice_devices([_slice("dra"), _slice("both")]))
    assert dra.allocation_models(nodes) == {
        "plugin": "device plugin",
        "dra": "DRA",
        "both": "both",
        "neither": "none",
    }
    row = nodes.set_index("node").loc["dra"]
    assert row["dra_gpus"] == 2 and row["gpu_product"] == "NVIDIA H100 80GB HBM3" and row["gpu_count"] == 2


def test_attribute_series_fills_only_rows_without_a_pod():
    pods = dra.attach_pods(
        pods_frame({"items": [_pod("train-0", claim="c")]}),
        dra.claim_allocations([_claim("c", "ml", "train-0", ["gpu-0"])], [_slice()]),
    )
    frame = pd.DataFrame(
        {
            "node": ["gpu-a", "gpu-a", "gpu-b"],
            "gpu": ["0", "1", "0"],
            "uuid": [UUID0, UUID1, UUID0],
            "pod": ["", "", ""],
            "namespace": ["", "", ""],
            "value": [1.0, 2.0, 3.0],
        }
    )
    out = dra.attribute_series(frame, pods)
    assert list(out["pod"]) == ["train-0", "", ""] and list(out["namespace"]) == ["ml", "", ""]
    assert list(out["container"]) == ["main", "", ""]
    labelled = frame.assign(pod=["exporter-says", "", ""], namespace=["x", "", ""])
    assert list(dra.attribute_series(labelled, pods)["pod"]) == ["exporter-says", "", ""]


def test_snapshot_reads_claims_and_slices(tmp_path):
    node = {"metadata": {"name": "gpu-a", "labels": {}}, "status": {"capacity": {}}}
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": [node]}))
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": [_pod("train-0", claim="c")]}))
    src = gpulib.connect("snapshot", path=str(tmp_path))
    assert list(src.pods()["gpu_request"]) == [0] and dra.allocation_models(src.nodes()) == {}
    (tmp_path / "resourceclaims.json").write_text(json.dumps({"items": [_claim("c", "ml", "train-0", ["gpu-0"])]}))
    (tmp_path / "resourceslices.json").write_text(json.dumps({"items": [_slice()]}))
    src = gpulib.connect("snapshot", path=str(tmp_path))
    assert list(src.pods()["gpu_request"]) == [1]
    assert dra.allocation_models(src.nodes()) == {"gpu-a": "DRA"}


def test_live_client_reads_resource_v1_through_the_api_double(tmp_path):
    from gpulib.sources.prometheus import PrometheusSource
    from tests.helpers.k8s_double import KubeApiDouble

    nodes = [{"metadata": {"name": "gpu-a", "labels": {}}, "status": {"capacity": {}}}]
    pods = [_pod("train-0", claim="c"), _pod("other", ns="web", claim="d")]
    claims = [_claim("c", "ml", "train-0", ["gpu-0"]), _claim("d", "web", "other", ["gpu-1"])]
    with KubeApiDouble(nodes=nodes, pods=pods, resource_claims=claims, resource_slices=[_slice()]) as d:
        d.write_kubeconfig(tmp_path / "kubeconfig")
        kube = gpulib.kube.KubeCluster(kubeconfig=d.kubeconfig, sleep=lambda s: None, page_size=1)
        assert [c["metadata"]["name"] for c in kube.list_resource_claims("web")["items"]] == ["d"]
        assert len(kube.list_resource_claims()["items"]) == 2  # two pages of one
        src = PrometheusSource("http://127.0.0.1:9", kube=kube)
        assert dict(zip(src.pods()["pod"], src.pods()["gpu_request"])) == {"train-0": 1, "other": 1}
        assert dra.allocation_models(src.nodes()) == {"gpu-a": "DRA"}
        assert d.requests_to("GET", "/apis/resource.k8s.io/v1/resourceslices")
    with KubeApiDouble(nodes=nodes, pods=pods, resource_api=False) as d:  # no resource.k8s.io/v1: no DRA, said so
        d.write_kubeconfig(tmp_path / "kubeconfig2")
        kube = gpulib.kube.KubeCluster(kubeconfig=d.kubeconfig, sleep=lambda s: None)
        src = PrometheusSource("http://127.0.0.1:9", kube=kube)
        assert list(src.pods()["gpu_request"]) == [0, 0]
        assert "HTTP 404" in dra.dra_note(src)


@pytest.fixture(scope="module")
def demo():
    from tests.helpers.pinned import DEMO_END

    return gpulib.connect("demo", end=DEMO_END)


def test_demo_dra_node_is_served_by_dra_and_its_pods_hold_gpus(demo):
    """demo_fleet.yaml h100-dra-0: no nvidia.com/gpu capacity, 8 GPUs in its ResourceSlice, three claims."""
    n = demo.nodes().set_index("node").loc["h100-dra-0"]
    assert n["gpu_capacity"] == 0 and n["dra_gpus"] == 8
    assert demo.preflight("1h").allocation["h100-dra-0"] == "DRA"
    assert demo.preflight("1h").allocation["dgx-h100-1"] == "device plugin"
    p = demo.pods().set_index("pod")
    assert p.loc["dra-train-worker-0", "gpu_request"] == 2 and p.loc["dra-notebook-0", "gpu_request"] == 1


def test_done_when_triage_impact_names_the_dra_pod_on_the_failed_gpu(demo):
    """The XID 79 on h100-dra-0 GPU 1: the pod holding it through its claim is named, with kubelet's message."""
    import gpulib.xid.steps as xs

    inp = xs.collect(demo, "h100-dra-0", "1", "6h")
    hit = xs.impact(inp)
    assert list(hit["pod"]) == ["dra-train-worker-0"]
    assert hit["matched_by"].iloc[0].startswith("DRA ResourceClaim research/dra-train-worker-0-gpu-")
    assert "Unhealthy: GPU has fallen off the bus (XID 79)" in hit["device_health"].iloc[0]
    top = xs.findings(inp)[0]
    assert top.data["bucket"] == "RESTART_BM" and top.data["pods"][0]["pod"] == "dra-train-worker-0"
    assert any("kubelet: pod research/dra-train-worker-0" in e for e in top.evidence)


def test_done_when_cost_report_names_the_dra_pods(demo):
    """The cost report attributes h100-dra-0's GPUs to the pods holding them and prices the node's 8 GPUs."""
    import gpulib.cost.steps as cs

    rep = cs.cost_report(cs.load_report_data(demo, "24h"))
    u = rep.usage[rep.usage["node"] == "h100-dra-0"].drop_duplicates(["gpu", "pod"])
    assert dict(zip(u["gpu"], u["pod"])) == {
        "0": "dra-train-worker-0",
        "1": "dra-train-worker-0",
        "2": "dra-embed-7b9c4d6f8-k2m4p",
        "3": "dra-notebook-0",
        "4": "",
        "5": "",
        "6": "",
        "7": "",
    }
    inv = rep.nodes.set_index("node").loc["h100-dra-0"]
    assert inv["gpu_equiv_allocatable"] == 8 and inv["gpu_equiv_requested"] == 4
    idle = [f for f in rep.findings if "notebooks/dra-notebook" in f.title]
    assert idle and idle[0].severity.value == "warning"


def test_report_totals_give_dra_held_gpus_to_their_pod_as_attribute_series_does():
    """The report's totals path (gpulib.cost.totals.build_totals, Prometheus answers per series) gives a series
    without a pod label on a DRA-held GPU to its holder by the same rule as the frames path: node + UUID, a MIG
    instance by its parent UUID and profile; a labelled series keeps its pod; another node or profile gets none.
    The held GPU's idle hours are allocated to the pod and its held-idle steps make it a zombie."""
    from gpulib.cost.totals import Answers, build_totals
    from gpulib.cost.usage import GR_ENGINE_ACTIVE, Thresholds
    from gpulib.sources.dcgm import normalise_labels

    pods = dra.attach_pods(
        pods_frame({"items": [_pod("train-0", claim="c"), _pod("mig-0", ns="small", claim="m")]}),
        dra.claim_allocations(
            [_claim("c", "ml", "train-0", ["gpu-0"]), _claim("m", "small", "mig-0", ["gpu-1-mig-9-4-2"])], [_slice()]
        ),
    )
    node = {"metadata": {"name": "gpu-a", "labels": {}}, "status": {"capacity": {}}}
    nodes = nodes_frame({"items": [node, {**node, "metadata": {"name": "gpu-b", "labels": {}}}]})
    h100 = {"modelName": "NVIDIA H100 80GB HBM3"}
    series = [
        {"Hostname": "gpu-a", "gpu": "0", "UUID": UUID0, **h100},  # DRA full GPU, no pod label
        {"Hostname": "gpu-a", "gpu": "1", "UUID": UUID1, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "9", **h100},
        {"Hostname": "gpu-a", "gpu": "1", "UUID": UUID1, "GPU_I_PROFILE": "2g.20gb", "GPU_I_ID": "3", **h100},
        {"Hostname": "gpu-b", "gpu": "0", "UUID": UUID0, **h100},  # same UUID, other node: not the claim's GPU
        {"Hostname": "gpu-a", "gpu": "0", "UUID": UUID0, "pod": "exporter-says", "namespace": "x", **h100},
    ]
    end, step = 1.8e9, 300.0
    ts = end - step * np.arange(11, -1, -1)  # 12 steps of 5 minutes

    def vec(v):
        return [{"metric": m, "value": [end, str(v)]} for m in series]

    held = {
        "act": [{"metric": series[0], "values": [[t, "0"] for t in ts]}],
        "fb": [{"metric": series[0], "values": [[t, "40000"] for t in ts]}],
    }
    got = Answers(
        path="rules",
        end_ts=end,
        window_s=12 * step,
        bucket_s=12 * step,
        vectors={
            "n": vec(12),
            "n_idle": vec(12),
            "act_sum": vec(0),
            "act_p95": vec(0),
            "fb_mean": vec(40000),
            "fb_max": vec(40000),
        },
        held=held,
        buckets={"n": [{"metric": m, "values": [[end, "12"]]} for m in series], "act_sum": []},
        probes={GR_ENGINE_ACTIVE: [{"metric": h100}]},
        sent=["q"],
    )
    totals = build_totals(got, nodes=nodes, pods=pods, th=Thresholds.from_table())
    u = totals.usage.sort_values(["node", "gpu", "gpu_i_profile", "pod"]).reset_index(drop=True)
    want = [
        ("gpu-a", "0", "", "exporter-says", "x"),  # labelled: kept
        ("gpu-a", "0", "", "train-0", "ml"),  # DRA full GPU
        ("gpu-a", "1", "1g.10gb", "mig-0", "small"),  # DRA MIG: parent UUID + profile
        ("gpu-a", "1", "2g.20gb", "", ""),  # no claim holds this profile
        ("gpu-b", "0", "", "", ""),  # other node
    ]
    assert list(u[["node", "gpu", "gpu_i_profile", "pod", "namespace"]].itertuples(index=False, name=None)) == want
    assert u.loc[1, "container"] == "main"
    # the same holders as the frames path's rule on the same label sets
    frame = dra.attribute_series(pd.DataFrame([normalise_labels(m) for m in series]), pods)
    per_series = {(r.node, r.gpu, r.gpu_i_profile, r.pod, r.namespace, r.container) for r in frame.itertuples()}
    assert per_series == set(
        u[["node", "gpu", "gpu_i_profile", "pod", "namespace", "container"]].itertuples(index=False, name=None)
    )
    # the hour the DRA-held GPU sat idle is the pod's allocated idle time, and it was held idle: a zombie
    assert u.loc[1, "idle_allocated_gpu_hours"] == pytest.approx(1.0)
    assert u.loc[4, "allocated_gpu_hours"] == 0 and u.loc[4, "unallocated_gpu_hours"] == pytest.approx(1.0)
    assert set(zip(totals.zombies["namespace"], totals.zombies["pod"])) == {("ml", "train-0")}
