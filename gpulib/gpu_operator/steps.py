"""The steps of the operator_install runbook: each step gathers one input from the source into :class:`Inputs`
(and shows what it read), and :func:`findings` turns the gathered inputs into the run's findings in one call, the
verdict the notebook's closing step records. A server holding the same inputs gets the same findings without a
notebook kernel.

The checks are :mod:`gpulib.gpu_operator.pre_install` (before ``helm install``), the GPU scheduling checks of the
fleet domain (``gpulib.fleet.check_scheduling``) and :mod:`gpulib.gpu_operator.post_install` (after it); the
tables and charts :mod:`gpulib.gpu_operator.view`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

import gpulib.fleet as fleet
from gpulib.core.findings import Finding
from gpulib.core.runbook import DIR, FILE_OR_DIR, Param, Runbook, Step
from gpulib.gpu_operator.plan import InstallPlan, install_plan
from gpulib.gpu_operator.post_install import dcgm_presence, verify
from gpulib.gpu_operator.pre_install import node_table, preflight
from gpulib.gpu_operator.state import operator_state

__all__ = [
    "Inputs",
    "plan_step",
    "state_step",
    "preflight_step",
    "scheduling_step",
    "verification_step",
    "scheduling_findings",
    "findings",
    "RUNBOOK",
]


@dataclass
class Inputs:
    """What the operator_install steps gathered. A step whose data could not be read leaves its input ``None`` and
    :func:`findings` skips the checks that need it (the Runbook has already marked the run INCOMPLETE)."""

    namespace: str
    #: the cluster's nodes (NODE_COLUMNS), read by the install plan or else by the pre-flight
    nodes: pd.DataFrame | None = None
    plan: InstallPlan | None = None
    #: :func:`gpulib.gpu_operator.operator_state` of the operator namespace
    state: dict | None = None
    #: the scheduling checks' frames: (nodes, pods, pod specs)
    scheduling: tuple[pd.DataFrame, pd.DataFrame, Any] | None = None
    #: :func:`gpulib.gpu_operator.dcgm_presence`: (last DCGM sample per GPU, the exporter's ``up``)
    dcgm: tuple[pd.DataFrame | None, list[dict] | None] | None = None


def plan_step(
    src,
    inp: Inputs,
    *,
    components,
    driver_preinstalled: bool,
    mig_strategy: str,
    sharing: str,
    replicas: int,
    version: str = "",
) -> InstallPlan:
    """Step "Install plan": the nodes, then the Helm values and commands for the components wanted (contradictory
    choices are a usage error, :class:`~gpulib.core.errors.ContradictoryChoice`)."""
    inp.nodes = src.nodes()
    inp.plan = install_plan(
        components,
        driver_preinstalled=driver_preinstalled,
        mig_strategy=mig_strategy,
        sharing=sharing,
        replicas=replicas,
        nodes=inp.nodes,
        namespace=inp.namespace,
        version=version or None,
    )
    return inp.plan


def state_step(src, inp: Inputs, *, snapshot_dir: str = "", operator_logs: str = "") -> dict:
    """Step "Operator objects": DaemonSets, ClusterPolicy or GPUCluster, operand pods and labels of the operator
    namespace, and what was pasted (``gpu-operator-pods.txt`` / ``.json`` and ``logs/`` of the snapshot folder, the
    ``operator_logs`` file or folder)."""
    inp.state = operator_state(src, inp.namespace, snapshot_dir=snapshot_dir, operator_logs=operator_logs)
    return inp.state


def preflight_step(src, inp: Inputs) -> pd.DataFrame:
    """Step "Pre-flight": the nodes (when the install plan could not read them) as the pre-flight sees them."""
    if inp.nodes is None:
        inp.nodes = src.nodes()
    return node_table(inp.nodes, (inp.state or {}).get("runtimes"))


def scheduling_step(src, inp: Inputs) -> None:
    """Step "Scheduling checks": nodes, pods and pod specs for the GPU scheduling checks."""
    nodes = inp.nodes if inp.nodes is not None else src.nodes()
    inp.scheduling = (nodes, src.pods(), fleet.pod_specs_from(src))


def verification_step(src, inp: Inputs) -> None:
    """Step "Verification": the DCGM series of every GPU (and the exporter's scrape health where PromQL answers)."""
    inp.dcgm = dcgm_presence(src)


def scheduling_findings(inp: Inputs) -> list[Finding]:
    """The GPU scheduling checks over the gathered frames (none when the step could not read them)."""
    if inp.scheduling is None:
        return []
    nodes, pods, specs = inp.scheduling
    return fleet.check_scheduling(nodes, pods, pod_specs=specs)


def findings(inp: Inputs) -> list[Finding]:
    """Every finding of the run, in the order of the runbook's sections: pre-flight, GPU scheduling, post-install
    verification; each part only where its inputs were gathered."""
    out: list[Finding] = []
    state = inp.state or {}
    if inp.nodes is not None:
        out += preflight(
            inp.nodes,
            namespace_labels=state.get("namespace_labels"),
            runtimes=state.get("runtimes"),
            plan=inp.plan,
            namespace=inp.namespace,
        )
    out += scheduling_findings(inp)
    if inp.state is not None and inp.nodes is not None and inp.dcgm is not None:
        last, up = inp.dcgm
        out += verify(inp.state, inp.nodes, dcgm_last=last, dcgm_up=up, namespace=inp.namespace)
    return out


# ------------------------------------------------------------------------------------------------- the runbook
def gather_plan(c) -> None:
    c.plan = plan_step(
        c.src,
        c.inp,
        components=c.components,
        driver_preinstalled=c.driver_preinstalled,
        mig_strategy=c.mig_strategy,
        sharing=c.sharing,
        replicas=c.replicas,
        version=c.operator_version,
    )


def gather_state(c) -> None:
    c.state = state_step(
        c.src,
        c.inp,
        snapshot_dir=c.get("snapshot_dir") or "" if c.get("source") == "snapshot" else "",
        operator_logs=c.get("operator_logs") or "",
    )


def gather_preflight(c) -> None:
    c.preflight_table = preflight_step(c.src, c.inp)


def gather_scheduling(c) -> None:
    scheduling_step(c.src, c.inp)
    c.scheduling_fs = scheduling_findings(c.inp)


def gather_verification(c) -> None:
    verification_step(c.src, c.inp)


def _start(c) -> dict[str, Any]:
    return {"inp": Inputs(c.namespace), "state": None}


def _verdict(c) -> list[Finding]:
    return findings(c.inp)


_VIEW = "gpulib.gpu_operator.view:"
_COMPONENTS_HELP = (
    "comma list of: driver, toolkit, device_plugin, gfd, dcgm, dcgm_exporter, mig_manager, node_status_exporter, nfd"
)
RUNBOOK = Runbook(
    name="operator_install",
    domain="gpu_operator",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param(
            "snapshot_dir",
            "",
            "snapshot folder: nodes.json, pods.json, daemonsets.json, clusterpolicies.json, gpuclusters.json, "
            "gpu-operator-pods.txt, logs/<pod>.log",
            kind=DIR,
        ),
        Param("components", "driver,toolkit,device_plugin,gfd,dcgm_exporter,mig_manager,nfd", _COMPONENTS_HELP),
        Param("driver_preinstalled", False, "True when the nodes already run the NVIDIA driver on the host"),
        Param("mig_strategy", "none", "none | single | mixed"),
        Param("sharing", "none", "none | time-slicing | mps"),
        Param("replicas", 4, "GPU replicas per physical GPU when sharing"),
        Param("namespace", "gpu-operator", "operator namespace"),
        Param("operator_version", "", "chart version to pin, e.g. v24.6.2; empty for the latest"),
        Param(
            "demo_operator_state",
            "healthy",
            "demo only: healthy | driver_crashloop | gfd_missing | policy_not_ready | allocatable_zero | "
            "validator_stuck | mig_failed | secure_boot | deploy_disabled | gpucluster",
        ),
        Param(
            "operator_logs", "", "operand log file or folder (kubectl logs <pod> saved as <pod>.log)", kind=FILE_OR_DIR
        ),
    ),
    steps=(
        Step("Install plan", gather_plan, _VIEW + "show_plan", needs=("src",), inputs=("nodes",)),
        Step(
            "Operator objects",
            gather_state,
            None,
            needs=("src",),
            inputs=("DaemonSets", "ClusterPolicy", "GPUCluster", "operand pods", "namespace labels", "operand logs"),
        ),
        Step("Pre-flight", gather_preflight, _VIEW + "show_preflight", needs=("src",), inputs=("nodes",)),
        Step(
            "Scheduling checks",
            gather_scheduling,
            _VIEW + "show_scheduling",
            needs=("src",),
            inputs=("nodes", "pods", "pod specs"),
        ),
        # the DaemonSet table and chart come before the DCGM read, as in the notebook: shown even when that read
        # fails; the step shows nothing without operator objects (Verification then says why)
        Step("Operand DaemonSets", None, _VIEW + "show_daemonsets"),
        Step(
            "Verification",
            gather_verification,
            None,
            needs=("state",),
            inputs=("DCGM_FI_DEV_GPU_TEMP", "up{job=~.*dcgm.*}"),
        ),
        Step("End-to-end CUDA test pod", None, _VIEW + "show_cuda_test_pod"),
    ),
    findings=_verdict,
    start=_start,
)
