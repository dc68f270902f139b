"""GPU sharing-strategy advisor: whole GPU / MIG / time-slicing / MPS, and the device-plugin configs.

Decision tree (seed runbook, made explicit): hard isolation or multi-tenant production on a MIG-capable GPU
-> MIG; heavy inference or training that needs the whole memory -> whole GPU; dev/test or bursty small jobs
-> time-slicing; cooperative small inference clients that need a guaranteed share without MIG -> MPS.
Config format: ``NVIDIA/k8s-device-plugin: api/config/v1`` @ 1b826acc.
"""

from __future__ import annotations

import json

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.mig.catalog import device_memory_gib, is_mig_capable, profile_objects, resolve_gpu_model

WORKLOADS = ("inference", "training", "dev")
ISOLATION = ("none", "soft", "hard")

CAVEATS = {
    "time-slicing": [
        "time-slicing gives no memory or fault isolation: one pod can OOM or crash the others",
        "replicas do not add memory: every replica shares the one GPU's memory",
        "a request for 2 shared units gets no more compute than 1 (set failRequestsGreaterThanOne)",
        "DCGM reports per GPU, not per replica: per-pod usage needs the pod labels of the exporter",
    ],
    "mps": [
        "MPS limits (memory and compute = 1/replicas) apply per client; a client cannot exceed them",
        "MPS is not supported on MIG-enabled devices and shares one fault domain across clients",
        "MPS in the device plugin is marked experimental (since v0.15.0)",
    ],
    "mig": [
        "MIG instances have no P2P and no NCCL between them: multi-GPU jobs need whole GPUs",
        "DCGM_FI_DEV_GPU_UTIL is absent under MIG: use DCGM_FI_PROF_GR_ENGINE_ACTIVE per instance",
        "changing the layout needs the GPU idle (cordon, drain GPU pods, relabel nvidia.com/mig.config)",
        "frameworks pre-allocate (vLLM takes gpu_memory_utilization of the instance): size from the model, "
        "not from FB_USED",
    ],
    "whole": ["a whole GPU for a small model wastes memory and money: check FB_USED and GR_ENGINE_ACTIVE p95"],
}


def recommend(
    gpu_model: str,
    *,
    workload: str = "inference",
    isolation: str = "none",
    multi_tenant: bool = False,
    production: bool = True,
    memory_gib: float | None = None,
    load: float | None = None,
    replicas: int = 1,
    gpu_memory_gib: float | None = None,
) -> Finding:
    """Recommend a sharing strategy for one kind of workload on ``gpu_model``.

    ``workload``: inference | training | dev; ``isolation``: none | soft | hard (hard = separate tenants
    that must not affect each other); ``memory_gib``: memory need per replica; ``load``: expected busy
    fraction of a whole GPU (GR_ENGINE_ACTIVE p95, 0..1); ``replicas``: pods that would share one GPU;
    ``gpu_memory_gib``: the GPU's memory when the catalog has none (e.g. the node's nvidia.com/gpu.memory / 1024).
    Returns a Finding whose ``data["strategy"]`` is ``whole`` | ``mig`` | ``time-slicing`` | ``mps``.
    """
    if workload not in WORKLOADS:
        raise InvalidParameter(f"workload must be one of {WORKLOADS}, got {workload!r}")
    if isolation not in ISOLATION:
        raise InvalidParameter(f"isolation must be one of {ISOLATION}, got {isolation!r}")
    if load is not None and not 0 <= load <= 1:
        raise InvalidParameter(f"load is a busy fraction 0..1 (GR_ENGINE_ACTIVE), got {load}")
    if replicas < 1:
        raise InvalidParameter(f"replicas must be >= 1, got {replicas}")
    mig_ok = is_mig_capable(gpu_model)
    model = resolve_gpu_model(gpu_model)
    reasons: list[str] = [f"{model} is {'MIG-capable' if mig_ok else 'not MIG-capable'}"]
    largest_mig = max((p.memory_gib for p in profile_objects(model)), default=0.0) if mig_ok else 0.0
    half = sorted({p.memory_gib for p in profile_objects(model)})[-2] if mig_ok else 0.0
    per_gpu_share = None
    if memory_gib is not None:
        try:
            total = gpu_memory_gib or device_memory_gib(model)
        except InvalidParameter:
            total = None
        if total:
            per_gpu_share = memory_gib / total
            reasons.append(f"memory need {memory_gib:g} GiB = {per_gpu_share:.0%} of the GPU")

    def done(strategy: str, title: str, sop: str, commands: list[str], sev=Severity.INFO) -> Finding:
        return Finding(
            sev,
            title,
            summary="; ".join(reasons),
            sop_step=sop,
            commands=commands,
            evidence=CAVEATS[strategy],
            category="sharing",
            data={"strategy": strategy, "gpu_model": model},
        )

    heavy = workload == "training" or (per_gpu_share is not None and per_gpu_share > 0.5) or (load or 0) > 0.6
    if heavy:
        reasons.append(
            "training, or memory above half a GPU, or load above 60 %: sharing would slow it down"
            if workload != "training"
            else "training uses the whole GPU and NCCL across GPUs"
        )
        return done(
            "whole",
            "Use whole GPUs",
            "request nvidia.com/gpu: 1 (or N) per pod; keep MIG disabled",
            ["kubectl label node <node> nvidia.com/mig.config=all-disabled --overwrite"],
        )
    if isolation == "hard" or (multi_tenant and production):
        if mig_ok:
            reasons.append("separate tenants in production need memory and fault isolation: only MIG gives it")
            if memory_gib is not None and memory_gib > largest_mig:
                reasons.append(f"but {memory_gib:g} GiB exceeds the largest MIG profile ({largest_mig:g} GiB)")
                return done("whole", "Use whole GPUs (too large for MIG)", "request whole GPUs", [])
            return done(
                "mig",
                "Use MIG",
                "size each workload to the smallest profile with headroom "
                "(gpulib.mig.plan) and apply the layout with the guided MIG change",
                ["kubectl label node <node> nvidia.com/mig.config=<config> --overwrite"],
            )
        reasons.append("isolation is needed but the GPU has no MIG: give each tenant whole GPUs")
        return done(
            "whole",
            "Use whole GPUs (no MIG on this model)",
            "dedicate GPUs per tenant (taints/node pools)",
            [],
            sev=Severity.WARNING,
        )
    if workload == "dev" or not production:
        reasons.append("dev/test: bursty and tolerant of interference; time-slicing packs the most pods")
        return done(
            "time-slicing",
            f"Use time-slicing ({max(replicas, 2)} replicas)",
            "apply the device-plugin ConfigMap (time_slicing_config) and point the ClusterPolicy at it",
            [
                "kubectl apply -f time-slicing-config.yaml",
                "kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p "
                '\'{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"any"}}}}\'',
            ],
        )
    if mig_ok and half and (memory_gib is None or memory_gib <= half):
        reasons.append("small production inference: MIG gives guaranteed memory and compute per replica")
        return done(
            "mig",
            "Use MIG",
            "size with gpulib.mig.plan and apply with the guided MIG change",
            ["kubectl label node <node> nvidia.com/mig.config=<config> --overwrite"],
        )
    reasons.append("small production inference on a GPU without MIG: MPS caps each client's memory and compute")
    return done(
        "mps",
        f"Use MPS ({max(replicas, 2)} replicas)",
        "apply the device-plugin MPS config (mps_config) and point the ClusterPolicy at it",
        ["kubectl apply -f mps-config.yaml"],
    )


def _sharing_doc(
    kind: str,
    replicas: int,
    resource: str,
    rename_by_default: bool,
    fail_requests_greater_than_one: bool,
    mig_strategy: str,
) -> dict:
    if int(replicas) < 2:
        raise InvalidParameter(f"replicas must be >= 2 to share a GPU, got {replicas}")
    if mig_strategy not in ("none", "single", "mixed"):
        raise InvalidParameter(f"migStrategy must be none, single or mixed, got {mig_strategy!r}")
    if kind == "mps" and resource != "nvidia.com/gpu":
        raise InvalidParameter("MPS shares only nvidia.com/gpu (not MIG devices)")
    if not (resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-")):
        raise InvalidParameter(f"resource must be nvidia.com/gpu or nvidia.com/mig-<profile>, got {resource!r}")
    return {
        "version": "v1",
        "flags": {"migStrategy": mig_strategy},
        "sharing": {
            kind: {
                "renameByDefault": bool(rename_by_default),
                "failRequestsGreaterThanOne": bool(fail_requests_greater_than_one),
                "resources": [{"name": resource, "replicas": int(replicas)}],
            }
        },
    }


def time_slicing_config(
    replicas: int,
    *,
    resource: str = "nvidia.com/gpu",
    rename_by_default: bool = False,
    fail_requests_greater_than_one: bool = True,
    mig_strategy: str = "none",
) -> str:
    """Device-plugin config (``api/config/v1``) for time-slicing.

    ``renameByDefault: true`` advertises ``<resource>.shared`` (e.g. ``nvidia.com/gpu.shared``) so pods opt in
    explicitly; ``failRequestsGreaterThanOne: true`` rejects requests > 1 (they would get no more compute).
    """
    import yaml

    return yaml.safe_dump(
        _sharing_doc(
            "timeSlicing", replicas, resource, rename_by_default, fail_requests_greater_than_one, mig_strategy
        ),
        sort_keys=False,
    )


def mps_config(replicas: int, *, rename_by_default: bool = False, fail_requests_greater_than_one: bool = True) -> str:
    """Device-plugin config for MPS: each of ``replicas`` clients gets 1/replicas of memory and compute."""
    import yaml

    return yaml.safe_dump(
        _sharing_doc("mps", replicas, "nvidia.com/gpu", rename_by_default, fail_requests_greater_than_one, "none"),
        sort_keys=False,
    )


def device_plugin_configmap(
    configs: dict[str, str], *, name: str = "time-slicing-config", namespace: str = "gpu-operator"
) -> dict:
    """ConfigMap holding device-plugin configs by key (``{"any": time_slicing_config(4)}``)."""
    if not configs:
        raise InvalidParameter("configs must hold at least one key -> config YAML")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(configs),
    }


def clusterpolicy_patch(configmap: str, default_key: str) -> dict:
    """Merge patch for the GPU Operator ClusterPolicy: ``devicePlugin.config.{name,default}``. Per-node
    override: label ``nvidia.com/device-plugin.config=<key>``."""
    return {"spec": {"devicePlugin": {"config": {"name": configmap, "default": default_key}}}}


def sharing_commands(
    configmap: str, default_key: str, node: str | None = None, node_key: str | None = None
) -> list[str]:
    """The commands that apply a sharing ConfigMap through the GPU Operator."""
    cmds = [
        f"kubectl apply -f {configmap}.yaml",
        "kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p "
        f"'{json.dumps(clusterpolicy_patch(configmap, default_key))}'",
    ]
    if node and node_key:
        cmds.append(f"kubectl label node {node} nvidia.com/device-plugin.config={node_key} --overwrite")
    cmds.append(
        "kubectl get node " + (node or "<node>") + " -o jsonpath='{.status.allocatable}'  # nvidia.com/gpu x replicas"
    )
    return cmds
