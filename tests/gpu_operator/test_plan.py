"""GPU Operator install plan, pre-flight and verification: pure checks on kubectl fixtures and, through the
REAL kubernetes client, against the loopback API double with healthy and broken operator states."""

from __future__ import annotations

import json
import os
from pathlib import Path

import kubernetes_validate
import pandas as pd
import pytest

import gpulib.gpu_operator as op
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.demo import demo_objects
from gpulib.demo.dra_objects import resource_slices
from gpulib.demo.simulator import FleetSimulator
from gpulib.kube import dra
from gpulib.kube.client import KubeCluster
from gpulib.kube.frames import MalformedKubernetesObject, nodes_frame, read_list
from tests.helpers.k8s_double import load_items, start_k8s_double

OPFIX = Path(__file__).parents[1] / "fixtures" / "operator"
K8SFIX = Path(__file__).parents[1] / "fixtures" / "k8s"


def _items(name: str) -> list[dict]:
    return json.loads((OPFIX / name).read_text())["items"]


def checks(findings) -> list[str]:
    return [f.data.get("check") for f in findings]


def by_check(findings, check):
    hits = [f for f in findings if f.data.get("check") == check]
    assert hits, f"no {check} finding among {[(f.data.get('check'), f.title) for f in findings]}"
    return hits


@pytest.fixture
def loopback(monkeypatch):
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(filter(None, [os.environ.get(var, ""), "127.0.0.1"])))


@pytest.fixture
def double_for(tmp_path, loopback):
    started = []

    def make(**objects):
        d = start_k8s_double(tmp_path, **objects)
        started.append(d)
        return d, KubeCluster(kubeconfig=d.kubeconfig, sleep=lambda s: None)

    yield make
    for d in started:
        d.stop()


# ------------------------------------------------------------------ install plan
def test_driver_enabled_on_nodes_with_a_host_driver_is_rejected():
    with pytest.raises(op.ContradictoryChoice) as e:
        op.install_plan(("driver", "toolkit", "device_plugin"), driver_preinstalled=True)
    assert "host driver" in str(e.value) and "driver.enabled=false" in str(e.value)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"components": ("toolkit", "device_plugin"), "driver_preinstalled": False}, "no driver anywhere"),
        ({"components": ("driver", "toolkit"), "sharing": "time-slicing"}, "device_plugin"),
        (
            {"components": ("driver", "device_plugin"), "sharing": "mps", "mig_strategy": "mixed"},
            "MPS is not supported on MIG",
        ),
        ({"components": ("driver", "toolkit"), "mig_strategy": "single"}, "device plugin and GFD"),
        ({"components": ("driver", "toolkit", "device_plugin"), "toolkit_preinstalled": True}, "toolkit enabled"),
    ],
)
def test_contradictions_name_both_choices(kw, words):
    with pytest.raises(op.ContradictoryChoice) as e:
        op.install_plan(**kw)
    assert words in str(e.value)


def test_nfd_off_without_nfd_labels_is_rejected_but_fine_when_nodes_have_them():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    op.install_plan(("driver", "toolkit", "device_plugin", "gfd"), nodes=nodes)  # fixture nodes carry pci-10de
    bare = nodes.assign(
        labels=[{k: v for k, v in lab.items() if not k.startswith("feature.node")} for lab in nodes["labels"]]
    )
    with pytest.raises(op.ContradictoryChoice, match="NFDLabelsMissing"):
        op.install_plan(("driver", "toolkit", "device_plugin", "gfd"), nodes=bare)


def test_bad_values_name_the_parameter():
    with pytest.raises(InvalidParameter, match="unknown component"):
        op.install_plan(("driver", "gpu-burner"))
    with pytest.raises(InvalidParameter, match="mig_strategy='split'"):
        op.install_plan(mig_strategy="split")
    with pytest.raises(InvalidParameter, match="replicas must be >= 2"):
        op.install_plan(sharing="time-slicing", replicas=1)


def test_preinstalled_driver_with_time_slicing_values_and_command():
    plan = op.install_plan(
        ("toolkit", "device_plugin", "dcgm_exporter", "gfd", "nfd"),
        driver_preinstalled=True,
        sharing="time-slicing",
        replicas=4,
        version="v24.6.2",
    )
    v = plan.values
    assert v["driver"]["enabled"] is False and v["toolkit"]["enabled"] is True and v["migManager"]["enabled"] is False
    assert v["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"}
    cm = plan.objects[0]
    assert cm["kind"] == "ConfigMap" and cm["metadata"] == {"name": "time-slicing-config", "namespace": "gpu-operator"}
    assert "replicas: 4" in cm["data"]["any"] and "timeSlicing" in cm["data"]["any"]
    kubernetes_validate.validate(cm, "1.29", strict=True)
    cmd = plan.helm_command(upgrade=True)
    assert cmd.startswith("helm upgrade --install gpu-operator nvidia/gpu-operator")
    for flag in (
        "--set driver.enabled=false",
        "--set devicePlugin.config.name=time-slicing-config",
        "--version v24.6.2",
        "-n gpu-operator",
        "--set mig.strategy=none",
    ):
        assert flag in cmd
    cmds = plan.commands()
    assert cmds[0].startswith("helm repo add nvidia https://helm.ngc.nvidia.com/nvidia")
    assert "pod-security.kubernetes.io/enforce=privileged" in cmds[2]
    assert any("4 x nvidia.com/gpu.count" in n for n in plan.notes)


# ------------------------------------------------------------------ pre-flight
def test_preflight_on_kubectl_fixture_nodes():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    fs = op.preflight(nodes, namespace_labels={"pod-security.kubernetes.io/enforce": "restricted"})
    ok = next(f for f in fs if f.severity == Severity.OK)
    assert ok.title.startswith("5 GPU node(s)")  # 6 nodes, the CPU-only one has no pci-10de label
    taint = next(f for f in fs if "taints the operands do not tolerate" in f.title)
    # only the AKS spot taint: nvidia.com/gpu is tolerated by the chart default, node.kubernetes.io/* by the DS
    # controller
    assert taint.title.startswith("1 GPU node(s)")
    assert taint.evidence == ["aks-a100spot-31415926-vmss000002: kubernetes.azure.com/scalesetpriority=spot:NoSchedule"]
    psa = next(f for f in fs if f.data.get("check") == "pod_security")
    assert psa.severity == Severity.CRITICAL and "restricted" in psa.title
    assert (
        "kubectl label --overwrite namespace gpu-operator pod-security.kubernetes.io/enforce=privileged" in psa.commands
    )
    kernels = next(f for f in fs if "different kernels" in f.title)
    assert kernels.title == "GPU nodes run 5 different kernels"  # one kernel per GPU node in the fixture


def test_preflight_without_nfd_gpu_labels_says_no_gpu_nodes():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    bare = nodes.assign(labels=[{k: v for k, v in lab.items() if "pci-10de" not in k} for lab in nodes["labels"]])
    fs = op.preflight(bare)
    assert checks(fs) == ["no_gpu_nodes"] and fs[0].severity == Severity.CRITICAL
    assert "kubectl get nodes -L feature.node.kubernetes.io/pci-10de.present" in fs[0].commands


def test_preflight_reads_nfd_kernel_and_os_labels():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json")).head(1)
    lab = dict(
        nodes["labels"].iloc[0],
        **{
            "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1063-nvidia",
            "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        },
    )
    nodes = nodes.assign(labels=[lab])
    t = op.node_table(nodes, {"dgx-a100-07": "containerd://1.7.12"})
    assert t.loc[0, ["kernel_nfd", "os_nfd", "runtime"]].tolist() == [
        "5.15.0-1063-nvidia",
        "ubuntu 22.04",
        "containerd://1.7.12",
    ]
    fs = op.preflight(nodes, namespace_labels={"pod-security.kubernetes.io/enforce": "privileged"})
    assert [f.severity for f in fs] == [Severity.OK]


# ------------------------------------------------------------------ verification on kubectl fixtures (pure)
def test_fixture_cluster_verification_names_each_broken_thing():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    state = op.state_from_objects(
        {
            "daemonsets": load_items("daemonsets-gpu-operator.json"),
            "cluster_policies": load_items("clusterpolicies.json"),
            "pods": load_items("pods.json"),
        }
    )
    fs = op.verify(state, nodes, check_metrics=False)
    pol = by_check(fs, "policy_not_ready")[0]
    assert (
        pol.title == "ClusterPolicy cluster-policy is notReady (OperandNotReady)"
        and "[state-device-plugin]" in pol.sop_step
    )
    dp = by_check(fs, "daemonset_not_ready")
    assert [f.title for f in dp] == ["DaemonSet nvidia-device-plugin-daemonset: 4/5 pods ready"]
    short = {f.node: f for f in by_check(fs, "allocatable_short")}
    # README: dgx-a100-07 has one unhealthy 1g.5gb (15 of 16); the EKS H100 node 7 of 8
    assert set(short) == {"dgx-a100-07", "ip-10-0-12-34.ec2.internal"}
    assert "nvidia.com/mig-1g.5gb 15 < expected 16" in short["dgx-a100-07"].title
    assert "nvidia.com/gpu 7 < expected 8" in short["ip-10-0-12-34.ec2.internal"].title
    mig = by_check(fs, "mig_config_failed")[0]
    assert (
        mig.node == "ip-10-0-77-8.us-west-2.compute.internal"
        and "nvidia.com/mig.config=all-1g.18gb" in mig.commands[-1]
    )
    # time-sliced GKE node: 2 GPUs x 4 replicas = 8 allocatable: no finding; MIG single AKS node: 56 = 56
    assert not [f for f in fs if f.node in ("gke-inference-l4-pool-7c9e2f1a-x2bd", "aks-a100spot-31415926-vmss000002")]


def test_broken_pods_fixture_gives_driver_and_validator_sops():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    state = op.state_from_objects(
        {
            "daemonsets": _items("daemonsets-no-gfd.json"),
            "cluster_policies": _items("clusterpolicies-nfd-missing.json"),
            "pods": _items("pods-gpu-operator-broken.json"),
        }
    )
    fs = op.verify(state, nodes, check_metrics=False)
    drv = by_check(fs, "driver_crashloop")
    assert len(drv) == 1 and drv[0].node == "ip-10-0-12-34.ec2.internal"
    assert (
        drv[0].title == "Driver pod nvidia-driver-daemonset-7xq2k on ip-10-0-12-34.ec2.internal is in CrashLoopBackOff"
    )
    assert (
        "kubectl -n gpu-operator logs nvidia-driver-daemonset-7xq2k -c nvidia-driver-ctr --previous | tail -50"
        in drv[0].commands
    )
    assert "9 restarts" in drv[0].evidence and "node kernel 5.10.223-212.873.amzn2.x86_64" in drv[0].evidence
    for words in ("kernel", "Secure Boot", "precompiled", "driver.enabled=false"):
        assert words in drv[0].sop_step
    val = {f.node: f for f in by_check(fs, "validator_init")}
    assert val["ip-10-0-12-34.ec2.internal"].title.endswith("stuck in driver-validation (driver-ready not written)")
    gke = val["gke-inference-l4-pool-7c9e2f1a-x2bd"]
    assert gke.title.endswith("stuck in toolkit-validation (toolkit-ready not written)")
    assert gke.evidence[0] == "init containers completed: driver-validation" and "restarts 6" in gke.evidence[1]
    assert "kubectl -n gpu-operator logs nvidia-operator-validator-k2x7c -c toolkit-validation" in gke.commands
    gfd = by_check(fs, "daemonset_missing")
    assert [f.data["ds"] for f in gfd] == ["gpu-feature-discovery"] and "missing" in gfd[0].title
    pol = by_check(fs, "policy_not_ready")[0]
    assert pol.data["reason"] == "NFDLabelsMissing" and "nfd.enabled=true" in pol.sop_step
    # the toolkit DS is 4/5 but its pod only waits in PodInitializing: the generic not-ready SOP, not a crash
    tk = [f for f in fs if f.data.get("ds") == "nvidia-container-toolkit-daemonset"]
    assert checks(tk) == ["daemonset_not_ready"]


def test_truncated_pods_fixture_raises_malformed():
    with pytest.raises(MalformedKubernetesObject, match="truncated"):
        read_list(OPFIX / "pods-gpu-operator-truncated.json")


def test_dcgm_presence_and_up():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    last = pd.DataFrame(
        {
            "node": ["ip-10-0-12-34.ec2.internal"] * 6 + ["gke-inference-l4-pool-7c9e2f1a-x2bd"] * 2,
            "gpu": ["0", "1", "2", "3", "5", "6", "0", "1"],
        }
    )
    up = [
        {"metric": {"instance": "10.0.12.34:9400", "job": "nvidia-dcgm-exporter"}, "value": [0, "0"]},
        {"metric": {"instance": "10.0.40.2:9400", "job": "nvidia-dcgm-exporter"}, "value": [0, "1"]},
    ]
    fs = op.check_dcgm(last, nodes, up=up)
    down = by_check(fs, "dcgm_target_down")
    assert [f.title for f in down] == ["dcgm-exporter target 10.0.12.34:9400 is down in Prometheus"]
    miss = {f.node: f.data["gpus"] for f in by_check(fs, "dcgm_missing")}
    assert miss["ip-10-0-12-34.ec2.internal"] == "4, 7"  # 8 GPUs, 6 reporting
    assert "gke-inference-l4-pool-7c9e2f1a-x2bd" not in miss  # both L4s report
    assert miss["aks-a100spot-31415926-vmss000002"] == "all"  # MIG single: any series would do; none here
    assert miss["dgx-a100-07"] == "0, 1, 2, 3, 4, 5, 6, 7"
    assert "ip-10-0-3-21.ec2.internal" not in miss  # CPU node


# ------------------------------------------------------------------ through the kubernetes client
SIM = FleetSimulator()


@pytest.mark.parametrize(
    "scenario, check, node, words",
    [
        ("driver_crashloop", "driver_crashloop", "dgx-h100-0", ["kernel", "Secure Boot", "precompiled"]),
        ("gfd_missing", "daemonset_missing", None, ["gpu-feature-discovery"]),
        ("policy_not_ready", "policy_not_ready", None, ["state-mig-manager"]),
        (
            "allocatable_zero",
            "allocatable_zero",
            "dgx-h100-0",
            ["device-plugin log", "nvidia-smi inside the driver container"],
        ),
        ("validator_stuck", "validator_init", "dgx-h100-0", ["toolkit-ready"]),
        ("mig_failed", "mig_config_failed", "a100-40-mig-0", ["mig-manager"]),
    ],
)
def test_broken_operator_states_through_the_client(double_for, scenario, check, node, words):
    objs = demo_objects(SIM.nodes_json(), scenario)
    double, kube = double_for(
        nodes=objs["nodes"], pods=objs["pods"], daemonsets=objs["daemonsets"], cluster_policies=objs["cluster_policies"]
    )
    state = op.collect_state(kube)
    fs = op.verify(state, kube.nodes(), check_metrics=False)
    hit = by_check(fs, check)[0]
    assert hit.severity == Severity.CRITICAL
    if node:
        assert hit.node == node
    text = " ".join([hit.title, hit.sop_step, *hit.commands])
    for w in words:
        assert w in text, (w, text)
    assert double.requests_to("GET", "/apis/nvidia.com/v1/clusterpolicies")
    assert double.requests_to("GET", "/apis/apps/v1/namespaces/gpu-operator/daemonsets")


def test_gfd_missing_also_flags_every_gpu_node_without_labels(double_for):
    objs = demo_objects(SIM.nodes_json(), "gfd_missing")
    _, kube = double_for(
        nodes=objs["nodes"], pods=objs["pods"], daemonsets=objs["daemonsets"], cluster_policies=objs["cluster_policies"]
    )
    fs = op.verify(op.collect_state(kube), kube.nodes(), check_metrics=False)
    assert sorted(f.node for f in by_check(fs, "gfd_labels_missing")) == sorted(s["name"] for s in SIM.node_specs)


def test_healthy_operator_through_the_client_is_verified(double_for):
    objs = demo_objects(SIM.nodes_json(), "healthy")
    _, kube = double_for(
        nodes=objs["nodes"],
        pods=objs["pods"],
        daemonsets=objs["daemonsets"],
        cluster_policies=objs["cluster_policies"],
        resource_slices=resource_slices(SIM),  # the demo's DRA node serves its GPUs as ResourceSlice devices
    )
    state = op.collect_state(kube)
    assert state["namespace_labels"]["pod-security.kubernetes.io/enforce"] == "privileged"  # namespaces.json
    assert state["runtimes"]["dgx-h100-0"].startswith("containerd://")
    # the nodes as a source gives them: with the GPUs the DRA node's ResourceSlices advertise (gpulib.kube.dra)
    nodes = dra.attach_nodes(kube.nodes(), dra.slice_devices(kube.list_resource_slices()["items"]))
    fs = op.verify(state, nodes, check_metrics=False)
    assert [(f.severity, f.title) for f in fs] == [(Severity.OK, "GPU Operator verified")]


def _ns(name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}},
    }


def test_preflight_reads_namespace_labels_through_the_client(double_for):
    """GET /api/v1/namespaces/{name} through the real client: the kubectl fixture's gpu-operator namespace is
    privileged (no PodSecurity finding); a baseline one is flagged; a missing one is 'create it'."""
    nodes = SIM.nodes_json()["items"]
    double, kube = double_for(nodes=nodes)
    obj = kube.core.read_namespace("gpu-operator")
    assert obj.metadata.labels == {
        "kubernetes.io/metadata.name": "gpu-operator",
        "pod-security.kubernetes.io/enforce": "privileged",
    }
    assert [n.metadata.name for n in kube.core.list_namespace().items] == [
        "default",
        "gpu-operator",
        "kube-system",
        "notebooks",
    ]
    state = op.collect_state(kube)
    assert double.requests_to("GET", "/api/v1/namespaces/gpu-operator")
    assert not [
        f
        for f in op.preflight(kube.nodes(), namespace_labels=state["namespace_labels"])
        if "PodSecurity" in f.title or "Namespace" in f.title
    ]

    _, kube = double_for(
        nodes=nodes, namespaces=[_ns("gpu-operator", **{"pod-security.kubernetes.io/enforce": "baseline"})]
    )
    fs = op.preflight(kube.nodes(), namespace_labels=op.collect_state(kube)["namespace_labels"])
    ps = [f for f in fs if f.data.get("check") == "pod_security"]
    assert len(ps) == 1 and ps[0].severity == Severity.CRITICAL and "'baseline'" in ps[0].title
    assert ps[0].commands == [
        "kubectl label --overwrite namespace gpu-operator pod-security.kubernetes.io/enforce=privileged"
    ]

    _, kube = double_for(nodes=nodes, namespaces=[_ns("default")])
    with pytest.raises(Exception) as e:
        kube.core.read_namespace("gpu-operator")
    assert getattr(e.value, "status", None) == 404
    assert op.collect_state(kube)["namespace_labels"] is None
    fs = op.preflight(kube.nodes(), namespace_labels=None)
    assert any(f.title == "Namespace gpu-operator not found (or not readable): create it privileged" for f in fs)


def test_operator_not_installed_crd_absent(double_for):
    _, kube = double_for(nodes=SIM.nodes_json()["items"], pods=[], daemonsets=[], cluster_policies=[])
    kube_double = _
    kube_double.crd_installed = False
    fs = op.verify(op.collect_state(kube), kube.nodes(), check_metrics=False)
    assert checks(fs)[0] == "policy_absent"
    # every enabled-by-default operand DaemonSet is reported missing
    assert "nvidia-driver-daemonset" in [f.data.get("ds") for f in fs]


def test_unknown_scenario_and_sop_errors():
    with pytest.raises(InvalidParameter, match="operator scenario 'melted'"):
        demo_objects(SIM.nodes_json(), "melted")
    with pytest.raises(InvalidParameter, match="no SOP for check"):
        op.sop("nope")
    assert all(str(e["source"]).strip() for e in op.sop_table().values())


def test_cuda_test_pod_validates():
    pod = op.cuda_test_pod(node="dgx-h100-0")
    kubernetes_validate.validate(pod, "1.29", strict=True)
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    mig = op.cuda_test_pod(resource="nvidia.com/mig-1g.5gb")
    assert mig["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.5gb": 1}


def test_renamed_time_slicing_node_accepts_gpu_shared():
    nodes = nodes_frame(read_list(K8SFIX / "nodes-timeslicing-renamed.json"))
    row = next(nodes.itertuples(index=False))
    assert op.expected_devices(row) == {"nvidia.com/gpu.shared": 16}  # gpu.count 4 x replicas 4
    assert op.check_nodes(nodes) == []  # allocatable 16 of 16
    doc = json.loads((K8SFIX / "nodes-timeslicing-renamed.json").read_text())
    doc["items"][0]["status"]["allocatable"]["nvidia.com/gpu.shared"] = "12"  # one A10G's 4 replicas unhealthy
    short = op.check_nodes(nodes_frame(doc))
    assert checks(short) == ["allocatable_short"]
    assert short[0].data["resource"] == "nvidia.com/gpu.shared" and short[0].data["alloc"] == 12
    doc["items"][0]["status"]["allocatable"]["nvidia.com/gpu.shared"] = "0"
    zero = op.check_nodes(nodes_frame(doc))
    assert checks(zero) == ["allocatable_zero"] and zero[0].data["resource"] == "nvidia.com/gpu.shared"


def test_renamed_time_slicing_node_through_the_client(double_for):
    _, kube = double_for(
        nodes=read_list(K8SFIX / "nodes-timeslicing-renamed.json")["items"],
        pods=read_list(K8SFIX / "pods-gpu-shared.json")["items"],
        daemonsets=[],
        cluster_policies=[],
    )
    nodes = kube.nodes()
    assert nodes[["gpu_allocatable", "gpu_replicas", "sharing_strategy"]].values.tolist() == [[16, 4, "time-slicing"]]
    assert op.check_nodes(nodes) == []
    assert kube.pods()["gpu_request"].tolist() == [1]


def test_dcgm_up_targets_name_nodes_down_and_absent():
    nodes = nodes_frame(read_list(K8SFIX / "nodes.json"))
    last = pd.DataFrame(
        {
            "node": ["ip-10-0-12-34.ec2.internal"] * 7 + ["gke-inference-l4-pool-7c9e2f1a-x2bd"] * 2,
            "gpu": ["0", "1", "2", "3", "4", "5", "6", "0", "1"],
        }
    )
    up = [
        {
            "metric": {
                "job": "nvidia-dcgm-exporter",
                "instance": "10.0.12.40:9400",
                "node": "ip-10-0-12-34.ec2.internal",
            },
            "value": [0, "1"],
        },
        # no node label: the instance's host is the node name
        {
            "metric": {"job": "nvidia-dcgm-exporter", "instance": "gke-inference-l4-pool-7c9e2f1a-x2bd:9400"},
            "value": [0, "1"],
        },
        {
            "metric": {"job": "nvidia-dcgm-exporter", "instance": "10.0.7.10:9400", "nodename": "dgx-a100-07"},
            "value": [0, "0"],
        },
    ]
    fs = op.check_dcgm(last, nodes, up=up)
    down = by_check(fs, "dcgm_target_down")
    assert [(f.node, f.title) for f in down] == [
        ("dgx-a100-07", "dcgm-exporter target 10.0.7.10:9400 is down in Prometheus")
    ]
    # dgx-a100-07's missing series follow from its down target: not reported twice
    miss = {f.node: f for f in by_check(fs, "dcgm_missing")}
    assert set(miss) == {"ip-10-0-12-34.ec2.internal"} and miss["ip-10-0-12-34.ec2.internal"].data["gpus"] == "7"
    assert any("10.0.12.40:9400 is up" in e for e in miss["ip-10-0-12-34.ec2.internal"].evidence)
    # the other two Ready GPU nodes have no exporter target at all (the CPU node and NotReady nodes are skipped)
    absent = sorted(f.node for f in by_check(fs, "dcgm_target_absent"))
    assert absent == ["aks-a100spot-31415926-vmss000002", "ip-10-0-77-8.us-west-2.compute.internal"]
    assert all(f.severity == Severity.WARNING for f in by_check(fs, "dcgm_target_absent"))


@pytest.mark.prometheus
def test_dcgm_presence_against_real_prometheus(live_env):
    """The backfilled demo fleet: every node's exporter target is up; every GPU reports except dgx-h100-1 GPU 5,
    which fell off the bus (XID 79) 2 h before the end and stopped reporting 60 s later, and h100-dra-0 GPU 1 (the
    same XID 1 h before the end)."""
    import gpulib

    src = gpulib.connect("live")
    last, up = op.dcgm_presence(src)
    nodes = src.nodes()
    targets = op.exporter_targets(up, nodes["node"])
    assert sorted(targets["node"]) == sorted(nodes["node"])  # one target per demo node
    assert set(targets["up"]) == {1.0} and set(targets["job"]) == {"nvidia-dcgm-exporter"}
    assert all(i.endswith(":9400") for i in targets["instance"])
    fs = op.check_dcgm(last, nodes, up=up)
    assert [(f.node, f.data["check"], f.data.get("gpus")) for f in fs] == [
        ("dgx-h100-1", "dcgm_missing", "5"),
        ("h100-dra-0", "dcgm_missing", "1"),  # the DRA node's GPU 1 fell off the bus (XID 79) too
    ]
    assert any("is up: the exporter is scraped" in e for e in fs[0].evidence)


@pytest.mark.prometheus
def test_exporter_down_against_real_prometheus(tmp_path):
    """A scenario whose l4-spot-0 exporter is not scraped (up 0, no series) through a real Prometheus: one
    target-down finding for that node and no separate missing-series finding for its GPUs."""
    import gpulib
    from tests.helpers.pinned import DEMO_END, SCRAPE
    from tests.helpers.pinned import need_prometheus as _need_prometheus
    from tests.helpers.promharness import PrometheusServer, backfill

    _need_prometheus()
    sim = FleetSimulator(end=DEMO_END, scrape_interval=SCRAPE, exporter_down=["l4-spot-0"])
    server = PrometheusServer(backfill(sim, "20m", tmp_path), tmp_path)
    try:
        src = gpulib.connect("prometheus", url=server.url, end=DEMO_END)
        last, up = op.dcgm_presence(src)
        fs = op.check_dcgm(last, nodes_frame(sim.nodes_json()), up=up)
    finally:
        server.stop()
    assert sorted((f.node, f.data["check"]) for f in fs) == [
        ("dgx-h100-1", "dcgm_missing"),
        ("h100-dra-0", "dcgm_missing"),  # the DRA node's XID 79 GPU
        ("l4-spot-0", "dcgm_target_down"),
    ]
    down = by_check(fs, "dcgm_target_down")[0]
    assert down.severity == Severity.CRITICAL and down.data["instance"].endswith(":9400")


# ------------------------------------------------------------------ Source.operator_state
def test_snapshot_and_demo_operator_state(tmp_path):
    import shutil

    import gpulib
    from gpulib.core.errors import SourceError

    for src_name, dst in (
        ("nodes.json", "nodes.json"),
        ("pods.json", "pods.json"),
        ("daemonsets-gpu-operator.json", "daemonsets.json"),
        ("clusterpolicies.json", "clusterpolicies.json"),
    ):
        shutil.copy(K8SFIX / src_name, tmp_path / dst)
    snap = gpulib.connect("snapshot", path=str(tmp_path))
    st = op.operator_state(snap)
    assert st["cluster_policy"]["metadata"]["name"] == "cluster-policy"
    assert sorted(st["daemonsets"]["daemonset"])[0] == "gpu-feature-discovery" and len(st["daemonsets"]) == 7
    assert {p["metadata"]["name"] for p in st["pods"]} == {
        "nvidia-dcgm-exporter-4xk9p",
        "nvidia-device-plugin-daemonset-q8k2m",
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(K8SFIX / "nodes.json", empty / "nodes.json")
    with pytest.raises(SourceError, match="not available"):
        op.operator_state(gpulib.connect("snapshot", path=str(empty)))
    demo = gpulib.connect("demo", operator_scenario="allocatable_zero")
    fs = op.verify(op.operator_state(demo), demo.nodes(), check_metrics=False)
    assert checks(fs) == ["allocatable_zero"] and fs[0].node == "dgx-h100-0"


def test_operator_install_verdict_is_one_call_over_the_gathered_inputs():
    """The steps only gather; steps.findings(inputs) is the run's verdict, in section order (pre-flight, scheduling,
    verification), and a step whose data could not be read (input left None) loses only its own checks."""
    import gpulib
    import gpulib.gpu_operator.steps as steps
    from tests.helpers.pinned import DEMO_END

    src = gpulib.connect("demo", end=DEMO_END, operator_scenario="driver_crashloop")
    inp = steps.Inputs("gpu-operator")
    steps.plan_step(
        src,
        inp,
        components=op.DEFAULT_COMPONENTS,
        driver_preinstalled=False,
        mig_strategy="none",
        sharing="none",
        replicas=4,
    )
    steps.state_step(src, inp)
    steps.preflight_step(src, inp)
    steps.scheduling_step(src, inp)
    steps.verification_step(src, inp)
    titles = [f.title for f in steps.findings(inp)]
    found = next(i for i, t in enumerate(titles) if "found by NFD" in t)
    sched = next(i for i, t in enumerate(titles) if "without a GPU request run on GPU nodes" in t)
    driver = next(i for i, t in enumerate(titles) if t.startswith("Driver pod") and "CrashLoopBackOff" in t)
    assert found < sched < driver
    assert [f.title for f in steps.scheduling_findings(inp)] == [titles[sched]]
    inp.state = None  # "Operator objects" could not be read: no verification, pre-flight stays
    without = [f.title for f in steps.findings(inp)]
    assert (
        titles[found] in without and titles[sched] in without and not any(t.startswith("Driver pod") for t in without)
    )


def test_every_gpu_operator_sop_row_is_used_and_every_key_asked_for_exists():
    """gpu_operator_sop.csv and the operator domain agree: every key a finding asks for is a row, every row is asked
    for (the check SOPs of operator_sop.yaml are asked for by check id, tests above)."""
    from gpulib.core.sop import keys
    from tests.helpers.sopcheck import scan, unknown_keys, unused_rows

    pkg, rows = Path(op.__file__).parent, set(keys("gpu_operator_sop"))
    assert scan(pkg, "gpu_operator_sop")[0] == rows
    assert unknown_keys(pkg, "gpu_operator_sop", rows) == [] and unused_rows(pkg, "gpu_operator_sop", rows) == []
