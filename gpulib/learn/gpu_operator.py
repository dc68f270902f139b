"""Lesson ``learn_gpu_operator``: what each component of the GPU Operator does, the node labels, the install plan
with its contradiction checks, and verifying an install with the project's own code
(:func:`gpulib.gpu_operator.verify`) on the demo fleet, healthy and broken; defined once in :data:`RUNBOOK`,
rendered by ``runbooks/learn/learn_gpu_operator.ipynb``."""

from __future__ import annotations

import gpulib.gpu_operator as operator
from gpulib.core.runbook import LESSON, Runbook, Step
from gpulib.demo import demo_objects
from gpulib.kube.frames import nodes_frame
from gpulib.kube.labels import LABEL_PRODUCT
from gpulib.learn.lessons import md_table, question, show_md
from gpulib.learn.session import next_step, source_params

__all__ = ["RUNBOOK", "SCENARIOS"]

#: the demo's GPU Operator states the lesson verifies (gpulib.demo.operator_objects.SCENARIOS)
SCENARIOS = ("healthy", "driver_crashloop", "validator_stuck")


def gather_components(c) -> None:
    c.comp = operator.components()


def show_components(c, ui) -> None:
    comp = c.comp
    show_md(
        md_table(
            comp,
            {
                "component": "component",
                "daemonset": "DaemonSet",
                "deploy_label": "deploy label",
                "validator_init": "validator init container",
                "ready_file": "ready-file",
                "default_enabled": "on by default",
            },
        )
    )
    r = comp.set_index("component").loc["toolkit"]
    question(
        "On a new GPU node the dcgm-exporter pod stays in Init. Which component do you look at first, and why?",
        f"The container toolkit and the driver before it: dcgm-exporter waits for {r['ready_file']}, which the "
        f"validator's {r['validator_init']} init container writes only once the toolkit works.",
        "Operands start in a chain of ready-files under /run/nvidia/validations/ (operator_components.csv): a later "
        "operand stuck in Init usually means an earlier stage never validated, so read the chain from its start.",
    )


def gather_labels(c) -> None:
    c.nodes = c.src.nodes()
    row = c.nodes.iloc[0]
    c.node_labels = {
        k: v for k, v in row["labels"].items() if k.startswith(("nvidia.com/", "feature.node.kubernetes.io/pci-10de"))
    }
    c.label_node = row["node"]


def show_labels(c, ui) -> None:
    show_md(
        f"Node `{c.label_node}`:\n\n" + md_table([{"label": k, "value": v} for k, v in sorted(c.node_labels.items())])
    )
    question(
        "An inference Deployment must run only on nodes with a given GPU model. What do you select on, and why not "
        "the node names?",
        f"The label {LABEL_PRODUCT} (on {c.label_node}: {c.node_labels.get(LABEL_PRODUCT, 'absent')}) in a node "
        "selector or affinity: new nodes of that model match without editing the Deployment.",
        "GPU Feature Discovery sets the label from the hardware it finds; node names change with every node pool "
        "and autoscaler, the product label follows the GPU.",
    )


def gather_plan(c) -> None:
    c.plan = operator.install_plan(mig_strategy="mixed", nodes=c.get("nodes"))
    try:
        operator.install_plan(driver_preinstalled=True)
        c.clash = "accepted"
    except operator.ContradictoryChoice as exc:
        c.clash = str(exc).split(" (hint:")[0]


def show_plan(c, ui) -> None:
    show_md("```\n" + "\n".join(c.plan.commands()) + "\n```")
    question(
        "Someone enables the operator's driver container on nodes that already run a host driver. What should "
        "happen, and why is it better to hear it now?",
        f"The plan refuses: {c.clash}",
        "Two drivers on one node fight over the kernel module; gpulib.gpu_operator.plan.install_plan rejects the "
        "contradiction before anything is installed, where a cluster would only show crash-looping driver pods.",
    )


def gather_verify(c) -> None:
    nj = c.src.nodes_json()
    for scen in SCENARIOS:
        objs = demo_objects(nj, scen)
        state = operator.state_from_objects(objs)
        fs = operator.verify(state, nodes_frame({"items": objs.get("nodes", nj["items"])}), check_metrics=False)
        c.figures[f"verify_{scen}"] = [f.title for f in fs]
        c[f"verify_{scen}"] = fs


def show_verify(c, ui) -> None:
    for scen in SCENARIOS:
        show_md(f"**{scen}**: " + "; ".join(f"{f.severity.value}: {f.title}" for f in c[f"verify_{scen}"]))
    crash = c.figures["verify_driver_crashloop"]
    blamed = [t for t in crash if "pod" in t.lower()] or crash
    question(
        "After a kernel upgrade the driver pods crash-loop. What do you read first, and why does the whole GPU "
        "stack report not ready?",
        f"The driver pod verify names ({blamed[0] if blamed else 'none named'}): its logs say whether a driver "
        "could be built or found for the new kernel. Every later operand waits for the driver's ready-file, so the "
        "ClusterPolicy turns notReady (OperandNotReady) until the driver runs.",
        "gpulib.gpu_operator.post_install.verify on demo_objects(..., 'driver_crashloop'): fix the first broken "
        "stage, not the operands that wait for it.",
    )


RUNBOOK = Runbook(
    name="learn_gpu_operator",
    domain="learn",
    kind=LESSON,
    params=source_params(),
    steps=(
        Step("Components", gather_components, show_components, inputs=("operator_components.csv",)),
        Step("Labels", gather_labels, show_labels, needs=("src",), inputs=("nodes",)),
        Step("Install plan", gather_plan, show_plan),
        Step("Verify", gather_verify, show_verify, needs=("src",), inputs=("nodes",)),
        next_step("operator_install"),
    ),
)
