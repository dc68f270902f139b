"""A GPU Operator install on the demo fleet as raw Kubernetes objects, healthy or broken per scenario
(:data:`SCENARIOS`), for the demo source and the tests. Pod and DaemonSet names follow the operator's operands
(``gpulib/data/gpu_operator/operator_components.csv``).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from gpulib.core.errors import InvalidParameter
from gpulib.gpu_operator.knowledge import _components, gpucluster_components, setting
from gpulib.gpu_operator.plan import TOGGLES
from gpulib.gpu_operator.post_install import _pod_ready
from gpulib.gpu_operator.pre_install import DEFAULT_OPERAND_TOLERATIONS, _nfd_gpu

#: demo/test scenarios of :func:`demo_objects`
SCENARIOS = (
    "healthy",
    "driver_crashloop",
    "gfd_missing",
    "policy_not_ready",
    "allocatable_zero",
    "validator_stuck",
    "mig_failed",
    "secure_boot",
    "deploy_disabled",
    "gpucluster",
)

#: the driver container's log tail in the secure_boot scenario (its termination message), in the words of the
#: driver installer as users pasted it (https://github.com/NVIDIA/gpu-operator/issues/266,
#: https://github.com/NVIDIA/gpu-operator/issues/1726)
SECURE_BOOT_LOG = (
    "Building kernel modules\n"
    "  : [##############################] 100%\n"
    "ERROR: The kernel module failed to load, because it was not signed by a key that is trusted by the kernel. "
    "Please try installing the driver again, and sign the kernel module when prompted to do so.\n"
    "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel module was "
    "built against the wrong or improperly configured kernel sources, with a version of gcc that differs from the "
    "one used to build the target kernel, or if another driver, such as nouveau, is present and prevents the NVIDIA "
    "kernel module from obtaining ownership of the NVIDIA GPU(s)\n"
    "Kernel module load error: Key was rejected by service\n"
)


def _suffix(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:5]


def _running(name: str, image: str, *, ready: bool = True, restarts: int = 0) -> dict:
    return {
        "name": name,
        "image": image,
        "ready": ready,
        "restartCount": restarts,
        "started": ready,
        "state": {"running": {"startedAt": "2026-11-27T08:00:00Z"}},
    }


def demo_objects(nodes_json: dict, scenario: str = "healthy", *, namespace: str | None = None) -> dict:
    """A GPU Operator install on ``nodes_json`` as raw objects (DaemonSets, ClusterPolicy, operand pods,
    namespace labels, and the nodes, possibly modified), healthy or broken per ``scenario`` (:data:`SCENARIOS`)."""
    if scenario not in SCENARIOS:
        raise InvalidParameter(f"operator scenario {scenario!r}; use one of {', '.join(SCENARIOS)}")
    ns = namespace or setting("namespace")
    nodes = copy.deepcopy(nodes_json.get("items", []))
    gpu_nodes = [n for n in nodes if _nfd_gpu(n["metadata"].get("labels") or {})]
    mig_nodes = [n for n in gpu_nodes if (n["metadata"].get("labels") or {}).get("nvidia.com/mig.capable") == "true"]
    victim = gpu_nodes[0]["metadata"]["name"] if gpu_nodes else ""
    comps = _components()
    enabled = ["driver", "toolkit", "device_plugin", "gfd", "dcgm_exporter", "mig_manager", "validator"]
    wanted = list(enabled)
    if scenario == "gfd_missing":
        wanted.remove("gfd")
        for n in gpu_nodes:
            for k in [
                k
                for k in n["metadata"]["labels"]
                if k.startswith(("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig."))
                and not k.startswith("nvidia.com/gpu.deploy.")
                and k != "nvidia.com/gpu.present"
            ]:
                del n["metadata"]["labels"][k]
    spare = next((n for n in gpu_nodes[1:] if n not in mig_nodes), None) if scenario == "deploy_disabled" else None
    if spare is not None:  # as in gpu-operator #491: the driver label true, every other deploy label ""
        for k in list(spare["metadata"]["labels"]):
            if k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.deploy.driver":
                spare["metadata"]["labels"][k] = ""
        for c in wanted:
            if comps.loc[c, "deploy_label"] and c != "driver":
                spare["metadata"]["labels"][comps.loc[c, "deploy_label"]] = ""
    selectors = {c: comps.loc[c, "daemonset"] for c in wanted}
    labels_of = {c: comps.loc[c, "deploy_label"] for c in wanted}
    if scenario == "gpucluster":  # the DRA stack's operands (gpulib/data/gpu_operator/gpucluster_components.csv)
        dra = gpucluster_components()
        dra = dra[dra["default_enabled"] == "yes"]
        wanted = list(dra["component"])
        selectors = dict(zip(dra["component"], dra["daemonset"]))
        labels_of = dict(zip(dra["component"], dra["deploy_label"]))
    images = {
        "dra_driver": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0",
        "dra_validator": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.0",
        "driver": "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04",
        "toolkit": "nvcr.io/nvidia/k8s/container-toolkit:v1.16.2-ubuntu20.04",
        "device_plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2-ubi8",
        "gfd": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2-ubi8",
        "dcgm_exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
        "mig_manager": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.8.0-ubuntu20.04",
        "validator": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.6.2",
    }
    daemonsets, pods = [], []
    for comp in wanted:
        ds = selectors[comp]
        targets = mig_nodes if comp == "mig_manager" else gpu_nodes
        if spare is not None and comp != "driver":
            targets = [n for n in targets if n is not spare]
        ready = 0
        for n in targets:
            node = n["metadata"]["name"]
            pod = _operand_pod(ds, comp, node, ns, images[comp], scenario, victim)
            ready += _pod_ready(pod)
            pods.append(pod)
        daemonsets.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {
                    "name": ds,
                    "namespace": ns,
                    "labels": {"app": ds, "app.kubernetes.io/managed-by": "gpu-operator"},
                },
                "spec": {
                    "selector": {"matchLabels": {"app": ds}},
                    "template": {
                        "metadata": {"labels": {"app": ds}},
                        "spec": {
                            "nodeSelector": {labels_of[comp]: "true"},
                            "containers": [{"name": ds, "image": images[comp]}],
                        },
                    },
                },
                "status": {
                    "desiredNumberScheduled": len(targets),
                    "currentNumberScheduled": len(targets),
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "updatedNumberScheduled": len(targets),
                    "numberMisscheduled": 0,
                    **({"numberUnavailable": len(targets) - ready} if ready < len(targets) else {}),
                },
            }
        )
    if scenario == "allocatable_zero":
        n = next(n for n in gpu_nodes if int(n["status"]["capacity"].get("nvidia.com/gpu", "0")) > 0)
        n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    if scenario == "mig_failed" and mig_nodes:
        mig = next((n for n in mig_nodes if "nvidia.com/mig.config.state" in n["metadata"]["labels"]), mig_nodes[0])
        mig["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    spec = {comps.loc[c, "helm_key"]: {"enabled": c in enabled} for c in TOGGLES}
    spec.update(
        {
            "mig": {"strategy": "mixed"},
            "operator": {"defaultRuntime": "containerd"},
            "daemonsets": {"tolerations": DEFAULT_OPERAND_TOLERATIONS},
        }
    )
    not_ready = {
        "driver_crashloop": "state-driver",
        "secure_boot": "state-driver",
        "policy_not_ready": "state-mig-manager",
        "validator_stuck": "state-operator-validation",
        "allocatable_zero": "",
        "gfd_missing": "",
    }.get(scenario)
    if not_ready:
        msg = f"ClusterPolicy is not ready, states not ready: [{not_ready}]"
        status = {
            "state": "notReady",
            "namespace": ns,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "OperandNotReady",
                    "message": msg,
                    "lastTransitionTime": "2026-11-29T10:05:13Z",
                },
                {
                    "type": "Error",
                    "status": "True",
                    "reason": "OperandNotReady",
                    "message": msg,
                    "lastTransitionTime": "2026-11-29T10:05:13Z",
                },
            ],
        }
    else:
        status = {
            "state": "ready",
            "namespace": ns,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "ClusterPolicy is ready",
                    "lastTransitionTime": "2026-11-27T08:05:13Z",
                },
                {
                    "type": "Error",
                    "status": "False",
                    "reason": "Reconciled",
                    "message": "",
                    "lastTransitionTime": "2026-11-27T08:05:13Z",
                },
            ],
        }
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": setting("clusterpolicy_name"), "generation": 1},
        "spec": spec,
        "status": status,
    }
    gpu_clusters = []
    if scenario == "gpucluster":
        gpu_clusters = [_gpu_cluster(status)]
    return {
        "daemonsets": daemonsets,
        "cluster_policies": [] if gpu_clusters else [policy],
        "gpu_clusters": gpu_clusters,
        "pods": pods,
        "nodes": nodes,
        "namespaces": {
            ns: {setting("pod_security_label"): setting("pod_security_required"), "kubernetes.io/metadata.name": ns}
        },
    }


def _operand_pod(ds: str, comp: str, node: str, ns: str, image: str, scenario: str, victim: str) -> dict:
    name = f"{ds}-{_suffix(ds, node)}"
    status: dict[str, Any] = {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "startTime": "2026-11-27T08:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [_running(f"{ds.replace('-daemonset', '')}-ctr" if comp == "driver" else ds, image)],
    }
    if comp == "driver":
        status["containerStatuses"][0]["name"] = "nvidia-driver-ctr"
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": status["containerStatuses"][0]["name"], "image": image}],
    }
    broken = node == victim
    if comp == "driver" and scenario in ("driver_crashloop", "secure_boot") and broken:
        status["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
        status["containerStatuses"][0].update(
            ready=False,
            started=False,
            restartCount=14,
            state={
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 5m0s restarting failed container=nvidia-driver-ctr pod={name}_{ns}",
                }
            },
            lastState={"terminated": {"exitCode": 1, "reason": "Error"}},
        )
        if scenario == "secure_boot":
            status["containerStatuses"][0]["lastState"]["terminated"]["message"] = SECURE_BOOT_LOG
    if comp == "validator":
        inits = [r for r in ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")]
        stuck_at = (
            {
                "driver_crashloop": "driver-validation",
                "secure_boot": "driver-validation",
                "validator_stuck": "toolkit-validation",
            }.get(scenario)
            if broken
            else None
        )
        statuses = []
        for c in inits:
            if stuck_at and inits.index(c) > inits.index(stuck_at):
                statuses.append(
                    {
                        "name": c,
                        "image": image,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": "PodInitializing"}},
                    }
                )
            elif c == stuck_at:
                statuses.append(
                    {
                        "name": c,
                        "image": image,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-11-29T09:00:00Z"}},
                    }
                )
            else:
                statuses.append(
                    {
                        "name": c,
                        "image": image,
                        "ready": True,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                    }
                )
        status["initContainerStatuses"] = statuses
        spec["initContainers"] = [{"name": c, "image": image} for c in inits]
        if stuck_at:
            status["phase"] = "Pending"
            status["conditions"] = [{"type": "Initialized", "status": "False"}, {"type": "Ready", "status": "False"}]
            status["containerStatuses"][0].update(
                ready=False, started=False, state={"waiting": {"reason": "PodInitializing"}}
            )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": ds},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": ds,
                    "controller": True,
                    "uid": f"ds-{_suffix(ds)}",
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def _gpu_cluster(status: dict) -> dict:
    """The singleton GPUCluster of the DRA stack (NVIDIA/gpu-operator: config/samples/nvidia_v1alpha1_gpucluster.yaml
    @ a22dbf67), with the ClusterPolicy's status shape (the same ready/notReady states and conditions)."""
    st = copy.deepcopy(status)
    for c in st["conditions"]:
        c["message"] = c["message"].replace("ClusterPolicy", "GPUCluster")
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": setting("gpucluster_name"), "generation": 1},
        "spec": {
            "draDriver": {"gpus": {"kubeletPlugin": {}}, "computeDomains": {"enabled": True}},
            "dcgm": {"enabled": False},
            "dcgmExporter": {"enabled": True},
            "daemonsets": {"tolerations": DEFAULT_OPERAND_TOLERATIONS},
        },
        "status": st,
    }
