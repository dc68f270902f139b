"""The steps of the vllm_deploy runbook, one call per notebook step: size the deployment (:mod:`gpulib.vllm.sizing`),
write and validate its manifests (:mod:`gpulib.vllm.manifest`), and check the running deployment live
(:mod:`gpulib.vllm.live`, verdict :func:`gpulib.vllm.findings.assess`). The figures are :mod:`gpulib.vllm.view`;
this module only wires them to the parameters and a source, in :data:`RUNBOOK` (the runbook's one definition)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.core.runbook import DIR, Param, Runbook, Step
from gpulib.vllm.findings import assess
from gpulib.vllm.live import dcgm_for_pods, vllm_metrics, waiting_requests
from gpulib.vllm.manifest import adapter_rules, manifests, validate_manifests
from gpulib.vllm.sizing import DeploymentPlan, plan

__all__ = ["sizing_step", "LiveCheck", "live_step", "RUNBOOK"]


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


# ------------------------------------------------------------------------------------------------- the runbook
def gather_sizing(c) -> None:
    c.p = sizing_step(
        c.model,
        c.device,
        gpus=c.gpus,
        context_len=c.context_len,
        concurrency=c.concurrency,
        latency_p99_s=c.latency_p99_s,
        kv_cache_dtype=c.kv_cache_dtype,
    )
    c.fits = c.p.fits


def gather_manifests(c) -> None:
    """The Deployment, Service, PodDisruptionBudget and HPA of the plan, validated, the Prometheus Adapter rules
    for the HPA metric and the equivalent TGI flags (:func:`gpulib.vllm.view.manifests_text` prints them)."""
    c.manifest_objs = manifests(c.p, name=c.deployment, namespace=c.namespace, replicas=c.replicas)
    c.validated = validate_manifests(c.manifest_objs)
    c.adapter_rules = adapter_rules()
    c.tgi_args = c.p.tgi_args()


def gather_live(c) -> None:
    c.live = live_step(
        c.src,
        namespace=c.namespace,
        deployment=c.deployment,
        window=c.window,
        max_num_seqs=c.deployed_max_num_seqs,
        latency_p99_s=c.latency_p99_s,
    )
    c.waiting = waiting_requests(c.src, c.namespace, c.deployment, c.window)


def _start(c) -> dict:
    return {"p": None, "fits": None, "live": None}


def _findings(c) -> list[Finding]:
    """The sizing's findings, then the live check's, in the order the steps add them."""
    return (list(c.p.findings) if c.p is not None else []) + (list(c.live.findings) if c.live is not None else [])


_VIEW = "gpulib.vllm.view:"
RUNBOOK = Runbook(
    name="vllm_deploy",
    domain="vllm",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param(
            "snapshot_dir",
            "",
            "unused by the sizing; the live check needs Prometheus (live) or the demo fleet",
            kind=DIR,
        ),
        Param("model", "Llama-3-70B", "catalog model (gpulib.vllm.memory.models()) or its Hugging Face id"),
        Param(
            "device",
            "H100-80GB",
            "GPU model (H100-80GB, A100-40GB, H200-141GB...) or MIG profile (A100-40GB/3g.20gb)",
        ),
        Param("gpus", 4, "GPUs per replica available (tensor parallel up to this)"),
        Param("context_len", 8192, "max tokens per request (prompt + output)"),
        Param("concurrency", 32, "concurrent full-length requests one replica must hold"),
        Param(
            "latency_p99_s",
            10.0,
            "end-to-end p99 latency target in seconds for the HPA, 0 to scale on waiting requests",
        ),
        Param("kv_cache_dtype", "auto", "auto (falls back to fp8 if needed) | fp8"),
        Param("replicas", 2, "minimum replicas (HPA minReplicas)"),
        Param("namespace", "inference", "namespace of the deployment (generated and checked)"),
        Param("deployment", "vllm-llama70b", "running deployment to check live (pods <deployment>-*)"),
        Param("deployed_max_num_seqs", 64, "--max-num-seqs of the running deployment"),
        Param("window", "1h", "window of the live check"),
    ),
    steps=(
        Step("Sizing", gather_sizing, _VIEW + "show_sizing", inputs=("model catalog",)),
        Step(
            "Manifests",
            gather_manifests,
            _VIEW + "show_manifests",
            needs=("p", "fits"),
            why="the model does not fit on these GPUs (see the sizing above): no manifest to deploy.",
        ),
        Step(
            "Live check",
            gather_live,
            _VIEW + "show_live",
            needs=("src",),
            inputs=("vllm: metrics", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ),
    ),
    findings=_findings,
    start=_start,
)
