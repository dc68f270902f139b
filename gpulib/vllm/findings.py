"""vLLM results -> findings: a sized deployment fits or not (:func:`deployment_findings`), one memory budget
(:func:`budget_findings`), no tensor-parallel size fits (:func:`no_tp_fits`), and the live check's scale-up /
scale-down / retune verdict (:func:`assess`).

SOP text, commands and escalation come from ``gpulib/data/vllm/vllm_sop.csv`` (:func:`gpulib.core.sop.sop`); the
``vllm serve`` command of a fitting plan is built from the plan's own flags.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import sop
from gpulib.vllm.live import verdict

__all__ = ["deployment_findings", "budget_findings", "no_tp_fits", "assess"]

#: the vLLM domain's SOP table (gpulib/data/vllm/vllm_sop.csv)
_TABLE = "vllm_sop"


def deployment_findings(p) -> list[Finding]:
    """The verdict on a :class:`gpulib.vllm.sizing.DeploymentPlan`: OK with the ``vllm serve`` command when the KV
    cache holds the target concurrency, CRITICAL with the reason otherwise; the tries and the memory arithmetic are
    the evidence."""
    b, m, ctx = p.budget, p.model, p.max_model_len
    ev = p.tried + [f"{r.quantity}: {r.value:,} {r.unit}" for r in p.arithmetic().itertuples()]
    if p.fits:
        note = " (FP8 KV cache needed)" if p.kv_cache_dtype == "fp8" else ""
        t = sop(_TABLE, "deployment_fits", concurrency=p.concurrency, max_num_seqs=p.max_num_seqs)
        return [
            Finding(
                Severity.OK,
                f"{m.name} on {p.tp} x {p.device}: {b.kv_tokens:,} KV tokens, "
                f"{b.max_concurrency:.1f} requests at {ctx:,} tokens{note}",
                category="vllm",
                summary=t.summary,
                evidence=ev,
                sop_step=t.sop_step,
                commands=["vllm serve " + " ".join(p.vllm_args()[1:])],
                data={"fits": True, "tp": p.tp},
            )
        ]
    why = (
        b.reason
        if not b.fits
        else (f"the KV cache holds {b.max_concurrency:.2f} full-length requests, fewer than the {p.concurrency} wanted")
    )
    t = sop(_TABLE, "deployment_does_not_fit")
    return [
        Finding(
            Severity.CRITICAL,
            f"{m.name} does not fit {p.concurrency} x {ctx:,}-token requests on up to {p.gpus} x {p.device}",
            summary=why,
            category="vllm",
            evidence=ev,
            sop_step=t.sop_step,
            data={"fits": False},
        )
    ]


def budget_findings(b) -> list[Finding]:
    """One :class:`gpulib.vllm.memory.MemoryBudget` as a finding: fits (OK, WARNING below one full-length request)
    with the ``vllm serve`` flags, or CRITICAL with the reason."""
    ev = [
        f"requested {b.requested_gib:.1f} GiB = {b.gpu_memory_utilization} x {b.total_gib:.1f} GiB",
        f"weights {b.weights_gib:.1f} GiB/GPU (TP={b.tp})",
        f"activations {b.activation_gib:.1f} GiB + non-torch {b.non_torch_gib:.1f} GiB (estimates)",
        f"KV cache {b.kv_gib:.1f} GiB = {b.kv_tokens:,} tokens at {b.kv_bytes_per_token / 1024:.0f} KiB/token",
        f"max concurrency at {b.max_model_len} tokens: {b.max_concurrency:.2f}x",
    ]
    flags = (
        f"--tensor-parallel-size {b.tp} --gpu-memory-utilization {b.gpu_memory_utilization} "
        f"--max-model-len {b.max_model_len} --max-num-seqs {b.max_num_seqs}"
    )
    if b.fits:
        sev = Severity.OK if b.max_concurrency >= 1 else Severity.WARNING
        t = sop(_TABLE, "budget_fits")
        return [
            Finding(
                sev,
                f"{b.model} fits on {b.device}",
                summary=b.reason,
                evidence=ev,
                sop_step=t.sop_step,
                commands=[f"vllm serve {b.hf_id or b.model} {flags}"],
                category="vllm",
                data=b.as_dict(),
            )
        ]
    t = sop(_TABLE, "budget_does_not_fit")
    return [
        Finding(
            Severity.CRITICAL,
            f"{b.model} does not fit on {b.device}",
            summary=b.reason,
            evidence=ev,
            sop_step=t.sop_step,
            category="vllm",
            data=b.as_dict(),
        )
    ]


def no_tp_fits(model: str, device: str, gpus: int, concurrency: int, tried: list[str]) -> Finding:
    """CRITICAL: no tensor-parallel size up to ``gpus`` holds ``concurrency`` requests (:func:`gpulib.vllm.choose_tp`)."""
    t = sop(_TABLE, "no_tp_fits")
    return Finding(
        Severity.CRITICAL,
        f"{model} does not fit {concurrency} request(s) on up to {gpus} x {device}",
        summary=t.summary,
        evidence=tried,
        sop_step=t.sop_step,
        category="vllm",
    )


def assess(
    metrics: pd.DataFrame,
    *,
    max_num_seqs: int | None = None,
    latency_p99_s: float | None = None,
    dcgm: pd.DataFrame | None = None,
    workload: str = "vllm",
    replicas: int | None = None,
    namespace: str = "<namespace>",
) -> list[Finding]:
    """Scale up / scale down / retune verdict for one vLLM deployment from :func:`gpulib.vllm.live.vllm_metrics`
    (the rule: :func:`gpulib.vllm.live.verdict`).

    ``dcgm``: optional per-pod frame with ``pod``, ``fb_used_gib``, ``activity`` (p95) for the evidence.
    """
    v = verdict(metrics, max_num_seqs=max_num_seqs, latency_p99_s=latency_p99_s, replicas=replicas)
    n = v.replicas
    ev = [
        f"{r.pod}: running avg {r.running_avg:.1f} (max {r.running_max:.0f}), waiting max {r.waiting_max:.0f}, "
        f"KV max {r.kv_usage_max:.0%}, preemptions {r.preemptions:.0f}, TTFT p99 {r.ttft_p99_s:.2f} s, "
        f"e2e p99 {r.e2e_p99_s:.2f} s"
        for r in metrics.itertuples()
    ]
    if dcgm is not None and len(dcgm):
        ev += [
            f"{r.pod}: DCGM FB used {r.fb_used_gib:.1f} GiB, GR_ENGINE_ACTIVE p95 {r.activity:.0%}"
            for r in dcgm.itertuples()
        ]
    kv_max = metrics["kv_usage_max"].max()
    data = {"verdict": v.name, "workload": f"{namespace}/{workload}"}
    # an HPA's name is free and its spec.scaleTargetRef names the Deployment
    # (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/horizontal-pod-autoscaler-v2/):
    # list them with their targets rather than guess the name
    if v.name == "scale_up":
        t = sop(_TABLE, "scale_up", namespace=namespace, workload=workload, replicas=n + max(1, n // 2))
        return [
            Finding(
                Severity.CRITICAL if v.over_latency else Severity.WARNING,
                f"{workload}: scale up ({'; '.join(v.why)})",
                category="vllm",
                evidence=ev,
                summary=t.summary,
                sop_step=t.sop_step,
                commands=t.commands,
                runbook="vllm_deploy",
                data=data,
            )
        ]
    if v.name == "scale_down":
        hpa_of = f'{{.items[?(@.spec.scaleTargetRef.name=="{workload}")].metadata.name}}'
        t = sop(_TABLE, "scale_down", namespace=namespace, hpa_of=hpa_of, min_replicas=max(1, n - 1))
        return [
            Finding(
                Severity.INFO,
                f"{workload}: scale down (KV cache at most {kv_max:.0%}, no queue)",
                category="vllm",
                evidence=ev,
                summary=t.summary,
                sop_step=t.sop_step,
                commands=t.commands,
                runbook="vllm_deploy",
                data=data,
            )
        ]
    if v.name == "retune":
        t = sop(_TABLE, "retune")
        return [
            Finding(
                Severity.WARNING,
                f"{workload}: retune (KV cache {kv_max:.0%} full, no queue yet)",
                category="vllm",
                evidence=ev,
                sop_step=t.sop_step,
                runbook="vllm_deploy",
                data=data,
            )
        ]
    return [
        Finding(
            Severity.OK,
            f"{workload}: sized right (no queue, KV cache at most {kv_max:.0%})",
            category="vllm",
            evidence=ev,
            runbook="vllm_deploy",
            data=data,
        )
    ]
