"""GPU Operator install plan: Helm values and the ``helm install`` / ``helm upgrade --install`` command for the
components wanted, rejecting contradictory choices (:class:`ContradictoryChoice`) with the reason.

Helm keys are the ClusterPolicy spec keys (``NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go`` @ a22dbf67),
kept in ``gpulib/data/gpu_operator/operator_components.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

import gpulib.mig as mig
from gpulib.core.errors import ContradictoryChoice, InvalidParameter
from gpulib.gpu_operator.knowledge import _components, setting

MIG_STRATEGIES = ("none", "single", "mixed")
SHARING = ("none", "time-slicing", "mps")
#: components a user can switch on or off (``operator_components.csv`` rows with a Helm key)
TOGGLES = (
    "driver",
    "toolkit",
    "device_plugin",
    "gfd",
    "dcgm",
    "dcgm_exporter",
    "mig_manager",
    "node_status_exporter",
    "nfd",
)
DEFAULT_COMPONENTS = ("driver", "toolkit", "device_plugin", "gfd", "dcgm_exporter", "mig_manager", "nfd")


# --------------------------------------------------------------------------------------------
# install plan
# --------------------------------------------------------------------------------------------
@dataclass
class InstallPlan:
    """Helm values for the GPU Operator chart plus the objects and commands that go with them."""

    values: dict
    components: tuple[str, ...]
    namespace: str
    release: str
    version: str | None = None
    objects: list[dict] = field(default_factory=list)  # e.g. the device-plugin sharing ConfigMap
    notes: list[str] = field(default_factory=list)

    def set_flags(self) -> list[str]:
        """``--set key=value`` flags equivalent to :attr:`values` (sorted, deterministic)."""
        out: list[str] = []

        def walk(prefix: str, v: Any) -> None:
            if isinstance(v, dict):
                for k in sorted(v):
                    walk(f"{prefix}.{k}" if prefix else k, v[k])
            else:
                out.append(f"{prefix}={str(v).lower() if isinstance(v, bool) else v}")

        walk("", self.values)
        return out

    def values_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.values, sort_keys=True)

    def helm_command(self, *, upgrade: bool = False) -> str:
        """``helm install`` (first install) or ``helm upgrade --install`` with every value as ``--set``."""
        verb = "upgrade --install" if upgrade else "install"
        parts = [
            f"helm {verb} {self.release} {setting('chart')}",
            f"-n {self.namespace}",
            "--create-namespace",
            "--wait",
        ]
        if self.version:
            parts.append(f"--version {self.version}")
        parts += [f"--set {s}" for s in self.set_flags()]
        return " \\\n  ".join(parts)

    def commands(self) -> list[str]:
        """Everything to run, in order: repo, namespace with its PodSecurity label, sharing ConfigMap, install."""
        ns = self.namespace
        cmds = [
            f"helm repo add {setting('helm_repo_name')} {setting('helm_repo_url')} && helm repo update",
            f"kubectl create namespace {ns} --dry-run=client -o yaml | kubectl apply -f -",
            f"kubectl label --overwrite namespace {ns} {setting('pod_security_label')}={setting('pod_security_required')}",
        ]
        for obj in self.objects:
            cmds.append(f"kubectl apply -f {obj['metadata']['name']}.yaml   # {obj['kind']} below")
        cmds.append(self.helm_command(upgrade=True))
        cmds.append(f"kubectl get clusterpolicy {setting('clusterpolicy_name')} -w   # wait for STATUS ready")
        return cmds


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    v = str(value).strip().lower()
    if v not in allowed:
        raise InvalidParameter(f"{name}={value!r}; use one of {', '.join(allowed)}")
    return v


def install_plan(
    components: Iterable[str] | str = DEFAULT_COMPONENTS,
    *,
    driver_preinstalled: bool = False,
    toolkit_preinstalled: bool = False,
    mig_strategy: str = "none",
    sharing: str = "none",
    replicas: int = 4,
    nodes: pd.DataFrame | None = None,
    namespace: str | None = None,
    release: str | None = None,
    version: str | None = None,
) -> InstallPlan:
    """Helm values for ``components`` (subset of :data:`TOGGLES`), with contradictions rejected.

    ``driver_preinstalled`` / ``toolkit_preinstalled``: the nodes already run the NVIDIA driver / container
    toolkit on the host. ``mig_strategy``: none | single | mixed. ``sharing``: none | time-slicing | mps
    with ``replicas`` per GPU. ``nodes`` (NODE frame, optional) lets the plan check NFD labels.
    ``components`` may be a comma-separated string (the runbook parameter). Raises :class:`ContradictoryChoice`
    naming the two choices that conflict.
    """
    if isinstance(components, str):
        components = [c for c in components.split(",") if c.strip()]
    comps = tuple(dict.fromkeys(str(c).strip().lower().replace("-", "_") for c in components))
    unknown = [c for c in comps if c not in TOGGLES]
    if unknown:
        raise InvalidParameter(f"unknown component(s) {unknown}; choose from {', '.join(TOGGLES)}")
    mig_strategy = _check_choice("mig_strategy", mig_strategy, MIG_STRATEGIES)
    sharing = _check_choice("sharing", sharing, SHARING)
    has = set(comps).__contains__
    if has("driver") and driver_preinstalled:
        raise ContradictoryChoice(
            "driver enabled on nodes that already run a host driver (driver_preinstalled=True): the driver "
            "container cannot load its kernel module while the host's is loaded; drop 'driver' from the "
            "components (driver.enabled=false)"
        )
    if not has("driver") and not driver_preinstalled:
        raise ContradictoryChoice(
            "no driver anywhere: 'driver' is not among the components and driver_preinstalled=False; enable the "
            "driver container or confirm the host driver is installed"
        )
    if has("toolkit") and toolkit_preinstalled:
        raise ContradictoryChoice(
            "toolkit enabled on nodes whose container runtime is already configured by a host "
            "nvidia-container-toolkit (toolkit_preinstalled=True); drop 'toolkit' (toolkit.enabled=false)"
        )
    if sharing != "none" and not has("device_plugin"):
        raise ContradictoryChoice(f"sharing={sharing!r} is a device-plugin setting but 'device_plugin' is not enabled")
    if sharing == "mps" and mig_strategy != "none":
        raise ContradictoryChoice(
            f"sharing='mps' with mig_strategy={mig_strategy!r}: MPS is not supported on "
            "MIG-enabled devices (NVIDIA/k8s-device-plugin README.md @ 1b826acc); "
            "use time-slicing or no MIG"
        )
    if mig_strategy != "none" and not has("device_plugin"):
        raise ContradictoryChoice(
            f"mig_strategy={mig_strategy!r} is applied by the device plugin and GFD, but 'device_plugin' is not enabled"
        )
    if nodes is not None and not has("nfd") and len(nodes):
        if not any(k.startswith("feature.node.kubernetes.io/") for labels in nodes["labels"] for k in labels):
            raise ContradictoryChoice(
                "'nfd' disabled but no node carries NFD labels (feature.node.kubernetes.io/*): "
                "the operator would report NFDLabelsMissing and deploy nothing; enable 'nfd'"
            )
    rows = _components()
    values: dict[str, Any] = {}
    for comp in TOGGLES:
        values.setdefault(rows.loc[comp, "helm_key"], {})["enabled"] = has(comp)
    values["mig"] = {"strategy": mig_strategy}
    objects: list[dict] = []
    notes: list[str] = []
    ns = namespace or setting("namespace")
    if sharing != "none":
        cfg = (
            mig.time_slicing_config(replicas, mig_strategy=mig_strategy)
            if sharing == "time-slicing"
            else mig.mps_config(replicas)
        )
        name = f"{sharing}-config"
        objects.append(mig.device_plugin_configmap({"any": cfg}, name=name, namespace=ns))
        values["devicePlugin"]["config"] = {"name": name, "default": "any"}
        notes.append(
            f"{sharing}: each GPU is advertised {replicas} times; expect allocatable nvidia.com/gpu = "
            f"{replicas} x nvidia.com/gpu.count after install"
        )
    if mig_strategy != "none" and not has("mig_manager"):
        notes.append("MIG strategy set without mig-manager: partition the GPUs yourself (nvidia-smi mig / mig-parted)")
    if driver_preinstalled:
        notes.append("driver.enabled=false: the host driver version must support the CUDA of your images")
    return InstallPlan(values, comps, ns, release or setting("release"), version, objects, notes)
