"""operator_install on what on-call pastes and on a GPUCluster (GPU Operator's DRA stack): real log excerpts from
public GPU Operator issues (tests/fixtures/operator_pasted/README.md), pasted pod listings, gpu.deploy.* labels,
hostile input, and the DRA stack's operands."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import gpulib.gpu_operator as op
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.demo.operator_objects import demo_objects
from gpulib.demo.simulator import FleetSimulator
from gpulib.gpu_operator.pasted import load_pasted, match_causes, parse_pods_text
from gpulib.kube.frames import nodes_frame
from gpulib.sources.snapshot import SnapshotSource
from tests.gpu_operator.test_plan import double_for, loopback  # noqa: F401  (fixtures)

PASTED = Path(__file__).parent.parent / "fixtures" / "operator_pasted"
NS = "gpu-operator"
SIM = FleetSimulator()


def checks(fs):
    return [f.data.get("check") for f in fs]


@pytest.mark.parametrize(
    "fixture, cause",
    [
        ("secure_boot_266.log", "cause_secure_boot"),
        ("secure_boot_1142.log", "cause_secure_boot"),
        ("fabric_manager_1043.log", "cause_fabric_manager"),
        ("kernel_headers_227.log", "cause_kernel_headers"),
        ("kernel_headers_583.log", "cause_kernel_headers"),
        ("nouveau_16711.log", "cause_nouveau"),
        ("validator_671.log", "cause_validator_init"),
        ("runtime_1374.log", "cause_runtime_config"),
    ],
)
def test_each_cause_is_named_from_a_real_pasted_log(fixture, cause):
    hits = match_causes((PASTED / fixture).read_text())
    assert hits and hits[0][0] == cause, hits
    assert hits[0][1], "the matching lines are kept as evidence"


def test_secure_boot_log_that_also_names_nouveau_is_secure_boot():
    # the installer's generic "Unable to load the kernel module" text says "another driver, such as nouveau": the
    # signature rejection is the cause, and nouveau is not even a candidate
    causes = [c for c, _ in match_causes((PASTED / "secure_boot_266.log").read_text())]
    assert causes == ["cause_secure_boot"]


def test_fabric_manager_outranks_the_generic_validator_failure():
    # "Failed to allocate device vector A" matches the validator row too; the fabric manager is the cause
    causes = [c for c, _ in match_causes((PASTED / "fabric_manager_1043.log").read_text(), "cuda_validator")]
    assert causes[0] == "cause_fabric_manager" and "cause_validator_init" in causes


def test_pasted_pod_listings_plain_and_wide():
    plain = {p.name: p for p in parse_pods_text((PASTED / "pods_2511.txt").read_text())}
    bad = plain["nvidia-cuda-validator-rr9qz"]
    assert (bad.status, bad.restarts, bad.ready, bad.node, bad.component) == (
        "Init:Error",
        4,
        False,
        "",
        "cuda_validator",
    )
    assert plain["nvidia-cuda-validator-44rfx"].status == "Completed" and len(plain) == 11
    wide = {p.name: p for p in parse_pods_text((PASTED / "pods_1390_wide.txt").read_text())}
    gfd = wide["gpu-feature-discovery-f5vbn"]
    assert (gfd.node, gfd.status, gfd.component) == ("pooler-1744029339851", "Init:0/1", "gfd")
    assert len(wide) == 3  # the pasted prompt line and the header are not pods


def _node(name: str, labels: dict, taints: list | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": {"feature.node.kubernetes.io/pci-10de.present": "true", **labels}},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {}, "allocatable": {}},
    }


#: the node labels pasted in https://github.com/NVIDIA/gpu-operator/issues/491: only the driver ran
LABELS_491 = {
    "nvidia.com/gpu.deploy.container-toolkit": "",
    "nvidia.com/gpu.deploy.dcgm": "",
    "nvidia.com/gpu.deploy.dcgm-exporter": "",
    "nvidia.com/gpu.deploy.device-plugin": "",
    "nvidia.com/gpu.deploy.driver": "true",
    "nvidia.com/gpu.deploy.gpu-feature-discovery": "",
}


def test_deploy_labels_set_empty_name_the_node_and_the_relabel():
    nodes = nodes_frame(
        {
            "items": [
                _node("roks-gpu-1", LABELS_491),
                _node("host-driver-1", {"nvidia.com/gpu.deploy.driver": "false"}),  # documented host-driver setting
            ]
        }
    )
    state = op.state_from_objects({"cluster_policies": [], "daemonsets": []}, NS)
    state["policy_read"] = False
    fs = [f for f in op.verify(state, nodes, check_metrics=False) if f.data.get("check") == "deploy_label_disabled"]
    assert [f.node for f in fs] == ["roks-gpu-1"]
    f = fs[0]
    assert f.severity == Severity.CRITICAL and "device-plugin" in f.title
    assert f.commands[-1].endswith("--overwrite nvidia.com/gpu.deploy.device-plugin=true")
    assert all(k in " ".join(f.evidence) for k in ("container-toolkit", "gpu-feature-discovery", "dcgm-exporter"))
    assert "deploy.driver" not in " ".join(f.evidence + f.commands)


def test_gpu_node_without_operand_pods_is_explained_by_its_taint(tmp_path):
    (tmp_path / "gpu-operator-pods.txt").write_text(
        "NAME READY STATUS RESTARTS AGE IP NODE\nnvidia-driver-daemonset-abcde 1/1 Running 0 5m 10.0.0.5 gpu-a\n"
    )
    nodes = nodes_frame(
        {
            "items": [
                _node("gpu-a", {}),
                _node("gpu-b", {}, [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]),
            ]
        }
    )
    pods, problems = load_pasted(str(tmp_path))
    state = op.state_from_objects({}, NS)
    state.update(pasted_pods=pods, pasted_problems=problems, policy_read=False)
    fs = [f for f in op.verify(state, nodes, check_metrics=False) if f.data.get("check") == "node_without_operands"]
    assert [f.node for f in fs] == ["gpu-b"]
    assert "taints are not tolerated" in fs[0].sop_step and "taint dedicated=training:NoSchedule" in fs[0].evidence


def test_snapshot_pods_and_logs_name_the_cause_on_its_node(tmp_path):
    (tmp_path / "gpu-operator-pods.txt").write_text(
        "NAME                            READY   STATUS             RESTARTS   AGE   IP          NODE\n"
        "nvidia-driver-daemonset-x7k2p   0/1     CrashLoopBackOff   9          30m   10.0.0.7    gpu-a\n"
        "nvidia-operator-validator-q1w2e 0/1     Init:0/4           0          30m   10.0.0.8    gpu-a\n"
    )
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "nvidia-driver-daemonset-x7k2p.log").write_text((PASTED / "secure_boot_266.log").read_text())
    nodes = nodes_frame({"items": [_node("gpu-a", {})]})
    pods, problems = load_pasted(str(tmp_path))
    state = op.state_from_objects({}, NS)
    state.update(pasted_pods=pods, pasted_problems=problems, policy_read=False)
    top = op.verify(state, nodes, check_metrics=False)[0]
    assert (top.data["check"], top.node, top.data["pod"]) == (
        "cause_secure_boot",
        "gpu-a",
        "nvidia-driver-daemonset-x7k2p",
    )
    assert any("mokutil --sb-state" in c for c in top.commands)
    assert any("not signed by a key" in e for e in top.evidence)


def test_operator_logs_parameter_without_a_listing_still_names_the_cause(tmp_path):
    log = tmp_path / "nvidia-cuda-validator-rr9qz.log"
    log.write_text((PASTED / "fabric_manager_1043.log").read_text())
    pods, problems = load_pasted("", str(log))
    state = op.state_from_objects({}, NS)
    state.update(pasted_pods=pods, pasted_problems=problems, policy_read=False)
    f = op.verify(state, nodes_frame({"items": []}), check_metrics=False)[0]
    assert f.data["check"] == "cause_fabric_manager" and f.node is None
    assert "node unknown" in f.title and any("-o wide" in e for e in f.evidence)
    with pytest.raises(InvalidParameter):
        load_pasted("", str(tmp_path / "missing.log"))


# ---- hostile input ----------------------------------------------------------------------------------------------
def test_a_100_mb_log_is_read_by_its_tail_and_named(tmp_path):
    big = tmp_path / "nvidia-driver-daemonset-big01.log"
    line = b"Compiling NVIDIA driver kernel modules... " + b"x" * 80 + b"\n"
    with big.open("wb") as fh:
        block = line * 8000
        while fh.tell() < 100 * 1048576:
            fh.write(block)
        fh.write(b"modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
    t0 = time.monotonic()
    pods, problems = load_pasted("", str(big))
    hits = match_causes(pods[0].log, pods[0].component)
    elapsed = time.monotonic() - t0
    assert hits[0][0] == "cause_secure_boot" and not problems
    assert "read the last 8 MiB of 100 MiB" in pods[0].log_note
    assert elapsed < 60, elapsed  # bounded by the tail cap, not the file size


def test_binary_junk_and_cut_input_give_a_finding_not_a_crash(tmp_path):
    (tmp_path / "gpu-operator-pods.txt").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "nvidia-driver-daemonset-junk1.log").write_bytes(b"\x7fELF\x00\x00" + bytes(range(256)) * 16)
    text = (PASTED / "secure_boot_266.log").read_text()
    cut = text[: text.index("not signed") + 10]  # cut mid-line, inside the rejection phrase: no cause is invented
    (tmp_path / "logs" / "nvidia-driver-daemonset-cut01.log").write_text(cut)
    pods, problems = load_pasted(str(tmp_path))
    assert {p.split(":", 1)[0] for p in problems} == {"gpu-operator-pods.txt", "nvidia-driver-daemonset-junk1.log"}
    state = op.state_from_objects({}, NS)
    state.update(pasted_pods=pods, pasted_problems=problems, policy_read=False)
    fs = op.verify(state, nodes_frame({"items": []}), check_metrics=False)
    assert checks(fs).count("pasted_unreadable") == 2 and all(f.severity == Severity.WARNING for f in fs)
    # a pod listing cut mid-row keeps its complete rows
    rows = (PASTED / "pods_2511.txt").read_text()
    assert len(parse_pods_text(rows[: rows.index("nvidia-cuda-validator-rr9qz") + 40])) == 9


# ---- GPUCluster (the DRA stack) ------------------------------------------------------------------------------------
DRA_OPERANDS = ("nvidia-dra-driver-kubelet-plugin", "nvidia-dra-validator", "nvidia-dcgm-exporter-dra")


def test_gpucluster_demo_reports_its_operands_and_not_the_device_plugin():
    objs = demo_objects(SIM.nodes_json(), "gpucluster", namespace=NS)
    state = op.state_from_objects(objs, NS)
    fs = op.verify(state, nodes_frame({"items": objs["nodes"]}), check_metrics=False)
    ok = fs[0]
    assert ok.data["check"] == "gpucluster_ready" and ok.severity == Severity.INFO
    for ds in DRA_OPERANDS:
        assert any(e.startswith(f"operand {ds} ") and "ready" in e for e in ok.evidence), ds
    named = json.dumps([f.to_dict() if hasattr(f, "to_dict") else f.__dict__ for f in fs], default=str)
    for absent in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-mig-manager", "policy_absent"):
        assert absent not in named, absent


def test_gpucluster_not_ready_names_the_missing_operand():
    objs = demo_objects(SIM.nodes_json(), "gpucluster", namespace=NS)
    objs["daemonsets"] = [d for d in objs["daemonsets"] if d["metadata"]["name"] != "nvidia-dra-driver-kubelet-plugin"]
    gc = objs["gpu_clusters"][0]
    gc["status"] = {
        "state": "notReady",
        "conditions": [{"type": "Error", "status": "True", "reason": "ReconcileFailed", "message": "state-dra-driver"}],
    }
    fs = op.verify(op.state_from_objects(objs, NS), nodes_frame({"items": objs["nodes"]}), check_metrics=False)
    assert checks(fs)[:2] == ["gpucluster_not_ready", "daemonset_missing"]
    assert fs[1].data["ds"] == "nvidia-dra-driver-kubelet-plugin" and "GPUCluster" in " ".join(fs[1].evidence)


def test_gpucluster_through_the_client_and_a_snapshot(double_for, tmp_path):  # noqa: F811
    objs = demo_objects(SIM.nodes_json(), "gpucluster", namespace=NS)
    d, kube = double_for(nodes=objs["nodes"], pods=objs["pods"], daemonsets=objs["daemonsets"], cluster_policies=[])
    assert op.collect_state(kube)["gpu_cluster"] is None  # CRD not served: no GPUCluster, no error
    d.gpu_clusters = objs["gpu_clusters"]
    state = op.collect_state(kube)
    assert state["gpu_cluster"]["kind"] == "GPUCluster"
    assert op.verify(state, kube.nodes(), check_metrics=False)[0].data["check"] == "gpucluster_ready"
    # a snapshot folder with gpuclusters.json
    for name, items in (
        ("nodes.json", objs["nodes"]),
        ("daemonsets.json", objs["daemonsets"]),
        ("gpuclusters.json", objs["gpu_clusters"]),
    ):
        (tmp_path / name).write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    snap = op.operator_state(SnapshotSource(tmp_path), NS)
    assert snap["gpu_cluster"]["metadata"]["name"] == "gpu-cluster"


# ---- the runbook, headless (one code path with the notebook) -----------------------------------------------------
def test_operator_install_runbook_on_the_gpucluster_demo_reports_its_operands():
    from gpulib.run.verdict import fast_verdict

    v = fast_verdict("operator_install", {"source": "demo", "demo_operator_state": "gpucluster"})
    assert not v.errors, v.errors
    gc = [f for f in v.findings if f.data.get("check") == "gpucluster_ready"]
    assert gc and all(ds in " ".join(gc[0].evidence) for ds in DRA_OPERANDS)
    assert not [f for f in v.findings if f.data.get("check") in ("policy_absent", "daemonset_missing")]


def test_operator_install_runbook_reads_a_pasted_snapshot_and_operator_logs(tmp_path):
    from gpulib.run.verdict import fast_verdict

    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": [_node("hgx-7", {})]}))
    (tmp_path / "gpu-operator-pods.txt").write_text(
        "NAME                          READY   STATUS                  RESTARTS   AGE   IP          NODE\n"
        "nvidia-cuda-validator-rr9qz   0/1     Init:CrashLoopBackOff   4          5m    10.0.0.9    hgx-7\n"
    )
    logs = tmp_path / "pasted-logs"
    logs.mkdir()
    (logs / "nvidia-cuda-validator-rr9qz.log").write_text((PASTED / "fabric_manager_1043.log").read_text())
    params = {"source": "snapshot", "snapshot_dir": str(tmp_path), "operator_logs": str(logs)}
    v = fast_verdict("operator_install", params)
    fm = [f for f in v.findings if f.data.get("check") == "cause_fabric_manager"]
    assert fm and fm[0].node == "hgx-7" and fm[0].severity == Severity.CRITICAL, [f.title for f in v.findings]
    assert any("nvidia-fabricmanager" in c for c in fm[0].commands)
