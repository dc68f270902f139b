"""The one list of runbook definitions: runbook name -> the module whose ``RUNBOOK`` defines it.

GPUd keeps one registration list of its checks (https://github.com/leptonai/gpud/blob/main/components/all/all.go);
this is ours. A definition is imported only when asked for, so ``gpuops list`` does not load every domain.
``context``: what a runbook's steps may read beyond its parameters that its domain may not import itself (the demo's
packaged captures, :mod:`gpulib.demo` sits above the domains; a function of a domain that builds on this one), each
``module:function`` returning a mapping of names, or ``name=module:attribute`` giving one name.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable, Mapping

# the notebook catalogue, re-exported: front ends reach it through the run layer (tests.run.test_record_rules)
from gpulib.catalogue import NotebookInfo as NotebookInfo
from gpulib.catalogue import catalogue as catalogue
from gpulib.catalogue import find_notebook as find_notebook
from gpulib.core.errors import InvalidParameter
from gpulib.core.runbook import Runbook


@dataclass(frozen=True)
class Entry:
    module: str
    context: tuple[str, ...] = ()


#: runbook name -> where its definition lives
RUNBOOKS: dict[str, Entry] = {
    "fleet_overview": Entry("gpulib.fleet.steps"),
    "xid_ecc_triage": Entry("gpulib.xid.steps"),
    "nccl_check": Entry("gpulib.nccl.steps", context=("gpulib.demo.artifacts:nccl_check_context",)),
    # catalog models are sized by the vLLM memory model, and the vllm domain builds on mig
    "mig_sizing": Entry(
        "gpulib.mig.steps", context=("model_workloads=gpulib.vllm.mig_workloads:workloads_from_models",)
    ),
    "operator_install": Entry("gpulib.gpu_operator.steps"),
    "vllm_deploy": Entry("gpulib.vllm.steps"),
    "node_health": Entry("gpulib.reliability.steps"),
    # the savings plan is vetoed by the vLLM serving check, and the vllm domain builds on cost
    "gpu_utilization_report": Entry(
        "gpulib.cost.steps", context=("serving_signals=gpulib.vllm.serving:serving_signals",)
    ),
    "gpu_reliability_report": Entry("gpulib.reliability.report_steps"),
}


#: lesson name -> where its definition lives (kind ``lesson``: no findings, so no fast verdict; :func:`defined` and
#: :func:`gpulib.run.verdict.supports` stay about runbooks, :func:`definition` finds both)
LESSONS: dict[str, Entry] = {
    "learn_cost": Entry("gpulib.learn.cost"),
    "learn_gpu_operator": Entry("gpulib.learn.gpu_operator"),
    "learn_inference": Entry("gpulib.learn.inference"),
    "learn_interview_prep": Entry("gpulib.learn.interview_prep"),
    "learn_k8s_gpu_resources": Entry("gpulib.learn.kube_resources"),
    "learn_monitoring": Entry("gpulib.learn.monitoring"),
    "learn_sharing": Entry("gpulib.learn.sharing"),
    "learn_storage": Entry("gpulib.learn.storage"),
    "learn_training": Entry("gpulib.learn.training"),
    "learn_troubleshooting": Entry("gpulib.learn.troubleshooting"),
}


def _load(ref: str) -> Any:
    mod, _, attr = ref.partition(":")
    return getattr(import_module(mod), attr)


def _defines(entry: Entry | None, name: str) -> bool:
    if entry is None:
        return False
    rb = getattr(import_module(entry.module), "RUNBOOK", None)
    return isinstance(rb, Runbook) and rb.name == name


def defined(name: str) -> bool:
    """Whether the runbook ``name`` has a definition (its module ends with a ``RUNBOOK`` of that name)."""
    return _defines(RUNBOOKS.get(name), name)


def lesson_defined(name: str) -> bool:
    """Whether the lesson ``name`` has a definition (:data:`LESSONS`)."""
    return _defines(LESSONS.get(name), name)


def definition(name: str) -> Runbook:
    """The :class:`~gpulib.core.runbook.Runbook` named ``name`` (a runbook's or a lesson's); InvalidParameter when
    none is defined."""
    if lesson_defined(name):
        return import_module(LESSONS[name].module).RUNBOOK
    if not defined(name):
        raise InvalidParameter(
            f"no runbook definition named {name!r}; defined: {', '.join(n for n in RUNBOOKS if defined(n))}",
            hint="`gpuops list` shows every runbook",
        )
    return import_module(RUNBOOKS[name].module).RUNBOOK


def context(name: str) -> Mapping[str, Any]:
    """What the steps of ``name`` read beyond its parameters (:attr:`Entry.context`), empty when nothing."""
    out: dict[str, Any] = {}
    for ref in RUNBOOKS[name].context if name in RUNBOOKS else ():
        key, eq, target = ref.partition("=")
        if eq:
            out[key] = _load(target)
        else:
            fn: Callable[[], Mapping[str, Any]] = _load(ref)
            out.update(fn())
    return out
