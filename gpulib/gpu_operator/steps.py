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
from typing import Any, Callable, ContextManager

import pandas as pd

import gpulib.fleet as fleet
from gpulib.core.findings import Finding
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
    "decide",
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


def state_step(src, inp: Inputs) -> dict:
    """Step "Operator objects": DaemonSets, ClusterPolicy, operand pods and labels of the operator namespace."""
    inp.state = operator_state(src, inp.namespace)
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


def decide(
    src,
    step: Callable[[str], ContextManager],
    *,
    namespace: str,
    components,
    driver_preinstalled: bool,
    mig_strategy: str,
    sharing: str,
    replicas: int,
    operator_version: str = "",
    **_: Any,
) -> list[Finding] | None:
    """What ``runbooks/operator_install.ipynb`` hands to ``rb.finish``, without a kernel and without its tables and
    charts: the same steps, each inside ``step(name)`` (the Runbook's guard: a step without data makes the run
    INCOMPLETE as in the notebook), in its order and under its conditions, then :func:`findings`."""
    if src is None:  # the notebook's rb.ready(): no data source, no step runs
        return None
    inp = Inputs(namespace)
    with step("Install plan"):
        plan_step(
            src,
            inp,
            components=components,
            driver_preinstalled=driver_preinstalled,
            mig_strategy=mig_strategy,
            sharing=sharing,
            replicas=replicas,
            version=operator_version,
        )
    with step("Operator objects"):
        state_step(src, inp)
    with step("Pre-flight"):
        preflight_step(src, inp)
    with step("Scheduling checks"):
        scheduling_step(src, inp)
        scheduling_findings(inp)
    if inp.state:  # the notebook's rb.ready(inp.state)
        with step("Verification"):
            verification_step(src, inp)
    return findings(inp)
