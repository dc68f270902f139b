"""The steps of the vllm_deploy runbook, one call per notebook step: size the deployment (:mod:`gpulib.vllm.sizing`),
write and validate its manifests (:mod:`gpulib.vllm.manifest`), and check the running deployment live
(:mod:`gpulib.vllm.live`, verdict :func:`gpulib.vllm.findings.assess`). The figures are :mod:`gpulib.vllm.view`;
this module only wires them to the parameters and a source."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

import gpulib.vllm.view as view
from gpulib.core.findings import Finding
from gpulib.vllm.findings import assess
from gpulib.vllm.live import dcgm_for_pods, vllm_metrics, waiting_requests
from gpulib.vllm.manifest import adapter_rules, manifests, validate_manifests
from gpulib.vllm.sizing import DeploymentPlan, plan

__all__ = ["sizing_step", "manifests_step", "LiveCheck", "live_step", "waiting_step"]


def sizing_step(
    model: str,
    device: str,
    *,
    gpus: int,
    context_len: int,
    concurrency: int,
    latency_p99_s: float | None,
    kv_cache_dtype: str,
) -> DeploymentPlan:
    """Step "Sizing": :func:`gpulib.vllm.sizing.plan`; a latency target of 0 means none (the HPA scales on waiting
    requests)."""
    return plan(
        model,
        device,
        gpus=gpus,
        context_len=context_len,
        concurrency=concurrency,
        latency_p99_s=latency_p99_s or None,
        kv_cache_dtype=kv_cache_dtype,
    )


def manifests_step(p: DeploymentPlan, *, name: str, namespace: str, replicas: int) -> str:
    """Step "Manifests": the validated Deployment, Service, PodDisruptionBudget and HPA of ``p``, the Prometheus
    Adapter rules for the HPA metric and the equivalent TGI flags, as the text the runbook prints."""
    objs = manifests(p, name=name, namespace=namespace, replicas=replicas)
    return view.manifests_text(validate_manifests(objs), objs, adapter_rules(), p.tgi_args())


@dataclass
class LiveCheck:
    """Step "Live check": the ``vllm:`` metrics per pod and the verdict on them."""

    metrics: pd.DataFrame
    findings: list[Finding] = field(default_factory=list)


def live_step(
    src, *, namespace: str, deployment: str, window: str, max_num_seqs: int, latency_p99_s: float | None
) -> LiveCheck:
    """Step "Live check": the ``vllm:`` metrics of the pods ``<deployment>-*`` in ``namespace`` over ``window``, their
    DCGM memory and activity as evidence, and the scale-up / scale-down / retune verdict (a latency target of 0
    means none)."""
    m = vllm_metrics(src, namespace, deployment, window)
    dc = dcgm_for_pods(src, namespace, deployment, window)
    return LiveCheck(
        m,
        assess(
            m,
            max_num_seqs=max_num_seqs,
            latency_p99_s=latency_p99_s or None,
            dcgm=dc,
            workload=deployment,
            namespace=namespace,
        ),
    )


def waiting_step(src, *, namespace: str, deployment: str, window: str):
    """The live check's chart: waiting requests per pod of ``deployment`` over ``window``."""
    return view.waiting_chart(waiting_requests(src, namespace, deployment, window), deployment)
