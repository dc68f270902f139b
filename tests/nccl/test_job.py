"""gpulib.nccl.job: the in-cluster probe as a Job (kubernetes-validate strict) and a PyTorchJob (structural +
pod templates strict), with the NCCL pod checks of gpulib.nccl.env.check_pod_spec finding nothing to fix.
Both come as a v1 List with the probe's ConfigMap (tests/nccl/test_probe_files.py covers that part)."""

from __future__ import annotations

import shlex

import kubernetes_validate
import pytest
import yaml

import gpulib.nccl as nccl
import gpulib.nccl.job as J
import gpulib.nccl.probe as P
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity


def _env(container):
    return {e["name"]: e["value"] for e in container["env"]}


def _probe_argv(command: list[str]) -> list[str]:
    """The arguments after the ConfigMap's ``/probe/nccl_probe.py`` of a container command (list or ``sh -c``)."""
    argv = shlex.split(command[-1]) if command[0] == "/bin/sh" else command
    i = argv.index("/probe/nccl_probe.py")
    assert "torchrun" in argv[:i] and any(a.startswith("--nproc_per_node=") for a in argv[:i])
    return argv[i + 1 :]


# ------------------------------------------------------------------ Job


def test_job_is_valid_and_gives_nccl_what_it_needs():
    m = J.job_manifest(gpus=4, node="gpu-node-7")
    checked = J.validate(m)
    assert checked[:2] == [
        "ConfigMap/nccl-probe-script: valid for Kubernetes 1.30.0 (strict)",
        "Job/nccl-probe: valid for Kubernetes 1.30.0 (strict)",
    ]
    assert checked[2].startswith("Job/nccl-probe: every pod mounts ConfigMap/nccl-probe-script read-only")
    job = J.workload(m)
    kubernetes_validate.validate(
        job, "1.30.0", strict=True
    )  # the Job alone through kubernetes-validate itself, not only J.validate
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "probe", "configMap": {"name": "nccl-probe-script", "defaultMode": 0o444}},
    ]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 4 and c["resources"]["requests"]["nvidia.com/gpu"] == 4
    env = _env(c)
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NCCL_DEBUG"] == "INFO"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-7"}
    assert c["command"][:3] == ["torchrun", "--standalone", "--nproc_per_node=4"]


def test_job_pod_spec_has_no_nccl_findings():
    m = J.job_manifest(gpus=8)
    assert list(nccl.check_pod_spec(J.workload(m)["spec"]["template"])) == []
    assert J.pod_findings(m) == []


def test_job_command_is_a_valid_probe_command_with_the_capture_sweep():
    job = J.workload(J.job_manifest(gpus=2))
    opts = P.parse_args(_probe_argv(job["spec"]["template"]["spec"]["containers"][0]["command"]))
    # the 2xH200 capture's sweep: 3 collectives, 8 B .. 4 GiB, 20 iterations after 5 warm-ups
    assert opts.collectives == ["all_reduce", "all_gather", "reduce_scatter"]
    assert P.parse_size(opts.min_bytes) == 8 and P.parse_size(opts.max_bytes) == 4 << 30
    assert (opts.iters, opts.warmup, opts.check) == (20, 5, True)


def test_job_options_and_yaml_roundtrip(tmp_path):
    job = J.job_manifest(
        "probe-h100",
        gpus=8,
        namespace="ml",
        collectives="all_reduce",
        max_bytes="1G",
        iters=5,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        extra_env={"NCCL_SOCKET_IFNAME": "eth0"},
    )
    assert J.validate(job, "1.29")
    c = J.workload(job)["spec"]["template"]["spec"]["containers"][0]
    assert _env(c)["NCCL_SOCKET_IFNAME"] == "eth0"
    assert _probe_argv(c["command"]) == [
        "--collectives",
        "all_reduce",
        "--min-bytes",
        "8",
        "--max-bytes",
        "1G",
        "--iters",
        "5",
        "--warmup",
        "5",
    ]
    text = J.to_yaml(job)
    assert "&id" not in text and yaml.safe_load(text) == job
    p = J.write_manifest(job, tmp_path / "out" / "probe.yaml")
    assert yaml.safe_load(p.read_text()) == job
    cmds = J.apply_commands(job, p)
    assert cmds[0] == f"kubectl apply --dry-run=server -f {p}" and cmds[1] == f"kubectl apply -f {p}"
    assert "kubectl logs -n ml job/probe-h100 > probe-h100.txt" in cmds


def test_strict_validation_rejects_a_typo():
    job = J.job_manifest(gpus=1)
    J.workload(job)["spec"]["template"]["spec"]["containers"][0]["shmSize"] = "1Gi"  # not a Kubernetes field
    with pytest.raises(InvalidParameter, match="shmSize"):
        J.validate(job)
    with pytest.raises(InvalidParameter, match="version='1.10.0'"):
        J.validate(J.job_manifest(gpus=1), "1.10.0")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"name": "NCCL_Probe"}, "name='NCCL_Probe'"),
        ({"gpus": 0}, "gpus=0"),
        ({"collectives": "alltoall"}, "alltoall"),
        ({"min_bytes": "1G", "max_bytes": "8"}, "min_bytes='1G'"),
        ({"extra_env": {"NCCL_NVLS_ENABLE": "1"}}, "NVLink SHARP off"),
        ({"extra_env": {"BAD-NAME": "1"}}, "BAD-NAME"),
        ({"image": "two words"}, "image="),
        ({"warmup": -1}, "warmup=-1"),
    ],
)
def test_job_bad_inputs_name_the_parameter(kwargs, match):
    with pytest.raises(InvalidParameter, match=match):
        J.job_manifest(**kwargs)


# ------------------------------------------------------------------ PyTorchJob


def test_pytorchjob_structure_and_pod_templates_valid():
    m = J.pytorchjob_manifest(nodes=3, gpus_per_node=8, rdma_resource="rdma/rdma_shared_device_a")
    assert J.check_pytorchjob(m) == []
    checked = J.validate(m)
    # ConfigMap, PyTorchJob structure, Master and Worker pod templates, the ConfigMap mount
    assert len(checked) == 5 and checked[2].endswith("Master pod template: valid for Kubernetes 1.30.0 (strict)")
    pj = J.workload(m)
    specs = pj["spec"]["pytorchReplicaSpecs"]
    assert (pj["apiVersion"], pj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    for rs in specs.values():
        pod = rs["template"]["spec"]
        (c,) = pod["containers"]
        assert c["name"] == "pytorch" and c["ports"] == [
            {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}
        ]
        assert c["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert _env(c)["NCCL_NVLS_ENABLE"] == "0"
        launch = c["command"][-1]
        assert "--nnodes=3" in launch and '--node_rank="$RANK"' in launch and '--master_addr="$MASTER_ADDR"' in launch
        assert P.parse_args(_probe_argv(c["command"])).collectives == ["all_reduce", "all_gather", "reduce_scatter"]
        term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == "kubernetes.io/hostname"  # one pod per node: inter-node traffic
    assert J.pod_findings(m) == []


def test_pytorchjob_is_a_crd_kubernetes_validate_cannot_check():
    pj = J.workload(J.pytorchjob_manifest(nodes=2))
    with pytest.raises(kubernetes_validate.utils.SchemaNotFoundError):
        kubernetes_validate.validate(pj, "1.30.0", strict=True)


def test_pytorchjob_without_rdma_is_flagged_and_host_network_noted():
    f = J.pod_findings(J.pytorchjob_manifest(nodes=2))
    assert [x.title for x in f] == ["Multi-node job without RDMA resources"] * 2  # Master and Worker
    assert all(x.severity == Severity.WARNING for x in f)
    hn = J.pytorchjob_manifest(nodes=2, host_network=True)
    assert [x.title for x in J.pod_findings(hn)] == ["hostNetwork: NCCL sees the node's interfaces"] * 2
    assert (
        J.workload(hn)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["dnsPolicy"]
        == "ClusterFirstWithHostNet"
    )
    assert J.validate(hn)


def test_pytorchjob_node_pair():
    pj = J.workload(J.pytorchjob_manifest(nodes=2, node_names=["gpu-a", "gpu-b"]))
    expr = pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a", "gpu-b"]}
    with pytest.raises(InvalidParameter, match="2 distinct nodes"):
        J.pytorchjob_manifest(nodes=2, node_names=["gpu-a", "gpu-a"])
    with pytest.raises(InvalidParameter, match="nodes=1"):
        J.pytorchjob_manifest(nodes=1)
    with pytest.raises(InvalidParameter, match="rdma_resource"):
        J.pytorchjob_manifest(nodes=2, rdma_resource="mlx5 nic")


def test_check_pytorchjob_finds_broken_structure():
    pj = J.pytorchjob_manifest(nodes=2)
    specs = J.workload(pj)["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["replicas"] = 2
    specs["Worker"]["restartPolicy"] = "Sometimes"
    specs["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    probs = J.check_pytorchjob(pj)
    assert any("Master.replicas is 2" in p for p in probs)
    assert any("Worker.restartPolicy 'Sometimes'" in p for p in probs)
    assert any("Worker: no container named 'pytorch'" in p for p in probs)
    with pytest.raises(InvalidParameter, match="PyTorchJob/nccl-probe"):
        J.validate(pj)
    assert (
        J.check_pytorchjob({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}})[-1]
        == "spec.pytorchReplicaSpecs needs a Master replica spec"
    )


def test_probe_manifest_dispatch_and_nccl_entry_point():
    assert J.workload(J.probe_manifest(1, gpus=2))["kind"] == "Job"
    assert J.workload(J.probe_manifest(2, gpus=4))["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    with pytest.raises(InvalidParameter, match="node_names"):
        J.probe_manifest(1, node_names=["a", "b"])
    assert nccl.job_manifest(gpus=2) == J.job_manifest(gpus=2)
    with pytest.raises(InvalidParameter, match="kind="):
        J.pod_templates({"kind": "Deployment"})
