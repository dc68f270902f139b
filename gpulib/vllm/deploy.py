"""vLLM deployment sizing and checking (runbook ``vllm_deploy``), on top of :mod:`gpulib.vllm.memory`'s memory model.

* :func:`plan` — choose tensor-parallel size, ``--gpu-memory-utilization``, ``--max-model-len``,
  ``--max-num-seqs`` and KV-cache dtype for a model on a GPU model or MIG profile, with the memory arithmetic
  (:meth:`DeploymentPlan.arithmetic`) and a clear "does not fit" (:class:`DoesNotFit` Finding, CRITICAL).
* :func:`manifests` — Deployment (probes, model cache volume, /dev/shm), Service, PodDisruptionBudget and
  HPA (autoscaling/v2 on a Prometheus-Adapter per-pod metric), plus :meth:`DeploymentPlan.tgi_args`.
* :func:`vllm_metrics` / :func:`assess` — live check of a running deployment from vLLM's own ``vllm:``
  metrics (running / waiting requests, KV-cache usage, TTFT and end-to-end p99, preemptions) joined with
  the DCGM memory and activity of its pods, ending in a scale-up / scale-down / retune recommendation.

Without PromQL the live check reads the source's ``app_series("vllm", window)`` (the demo backend serves
simulated ``vllm:`` series there, :mod:`gpulib.demo.vllm_series`).
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

import gpulib.vllm.memory as vllm
from gpulib.core.errors import DoesNotFit, EmptyResult, InvalidParameter, NotProvided
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings

KV_DTYPES = ("auto", "fp8")


def setting(key: str) -> str:
    """A value of ``gpulib/data/vllm_deploy.csv`` as written there (:func:`gpulib.core.knowledge.settings`)."""
    return settings("vllm_deploy").text(key)


def _f(key: str) -> float:
    return settings("vllm_deploy").number(key)


# --------------------------------------------------------------------------------------------
# sizing
# --------------------------------------------------------------------------------------------
@dataclass
class DeploymentPlan:
    """A sized vLLM deployment: the flags, the memory budget behind them, and the verdict."""

    model: vllm.ModelSpec
    device: str
    gpus: int
    tp: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    dtype: str
    concurrency: int
    latency_p99_s: float | None
    budget: vllm.MemoryBudget
    fits: bool
    tried: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def mig_resource(self) -> str | None:
        return f"nvidia.com/mig-{self.device.split('/', 1)[1]}" if "/" in self.device else None

    def vllm_args(self) -> list[str]:
        """``vllm serve`` arguments (also the container args of the Deployment)."""
        args = ["--model", self.model.hf_id or self.model.name, "--tensor-parallel-size", str(self.tp),
                "--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}", "--max-model-len", str(self.max_model_len),
                "--max-num-seqs", str(self.max_num_seqs), "--max-num-batched-tokens", str(self.max_num_batched_tokens),
                "--dtype", self.dtype]
        if self.kv_cache_dtype != "auto":
            args += ["--kv-cache-dtype", self.kv_cache_dtype]
        return args

    def tgi_args(self, *, max_output_tokens: int | None = None) -> list[str]:
        """Equivalent text-generation-launcher flags (``tgi_flags.csv``): same GPUs, context and memory share."""
        out_budget = max_output_tokens if max_output_tokens is not None else max(1, self.max_model_len // 4)
        if not 0 < out_budget < self.max_model_len:
            raise InvalidParameter(f"max_output_tokens {out_budget} must be within 1..{self.max_model_len - 1}")
        args = ["--model-id", self.model.hf_id or self.model.name, "--num-shard", str(self.tp),
                "--max-total-tokens", str(self.max_model_len), "--max-input-tokens", str(self.max_model_len - out_budget),
                "--max-batch-prefill-tokens", str(max(self.max_num_batched_tokens, self.max_model_len - out_budget)),
                "--max-concurrent-requests", str(self.max_num_seqs),
                "--cuda-memory-fraction", f"{self.gpu_memory_utilization:g}"]
        if self.kv_cache_dtype.startswith("fp8"):
            args += ["--kv-cache-dtype", "fp8_e4m3fn"]
        return args

    def arithmetic(self) -> pd.DataFrame:
        """The memory arithmetic, per GPU, the way vLLM accounts it (vllm-project/vllm: vllm/v1/worker/gpu_worker.py determine_available_memory @ 002f10e0)."""
        b = self.budget
        m = self.model
        rows = [
            ("GPU memory", b.total_gib, "GiB", f"{self.device}"),
            ("requested by vLLM", b.requested_gib, "GiB", f"gpu_memory_utilization {b.gpu_memory_utilization:g} x total"),
            ("weights", b.weights_gib, "GiB", f"{m.params_b:g} B params x {vllm.dtype_bytes(self.dtype):g} B / TP {b.tp}"),
            ("activations (profiled peak, estimate)", b.activation_gib, "GiB",
             f"{b.max_num_batched_tokens} batched tokens, {b.max_num_seqs} seqs"),
            ("non-torch (CUDA ctx, NCCL; estimate)", b.non_torch_gib, "GiB", "model_memory_overheads.csv"),
            ("KV cache", b.kv_gib, "GiB", "requested - weights - activations - non-torch"),
            ("KV bytes per token per GPU", b.kv_bytes_per_token, "B",
             f"2 x {m.layers} layers x {max(1, m.kv_heads // b.tp)} KV heads x {m.head_dim} x "
             f"{vllm.dtype_bytes(self.kv_cache_dtype):g} B"),
            ("tokens that fit", b.kv_tokens, "tokens", f"KV cache / bytes per token, in blocks of {int(vllm.overhead('block_size'))}"),
            (f"concurrency at {b.max_model_len} tokens", b.max_concurrency, "requests", "tokens that fit / max_model_len"),
        ]
        df = pd.DataFrame(rows, columns=["quantity", "value", "unit", "how"])
        df["value"] = [round(float(v), 3) for v in df["value"]]
        return df


def _check_device(device: str) -> tuple[str, bool]:
    d = str(device).strip()
    try:
        vllm.device_memory_gib(d)
    except Exception as exc:  # noqa: BLE001 - re-raised with the parameter named
        raise InvalidParameter(f"device={device!r}: {exc}",
                               hint="a GPU model (H100-80GB, A100-40GB, H200) or GPU/MIG profile (A100-40GB/3g.20gb)") from exc
    return d, "/" in d


def plan(model: str | vllm.ModelSpec, device: str, *, gpus: int = 1, context_len: int | None = None,
         concurrency: int = 8, latency_p99_s: float | None = None, tp: int | None = None,
         kv_cache_dtype: str = "auto", dtype: str = "bfloat16", gpu_memory_utilization: float | None = None,
         strict: bool = False) -> DeploymentPlan:
    """Size a vLLM deployment of ``model`` on up to ``gpus`` x ``device`` for ``concurrency`` requests at
    ``context_len`` tokens (default: the model's context).

    Tries tensor-parallel sizes 1, 2, 4, 8 (dividing the attention heads, <= ``gpus``) or the given ``tp``; with
    ``kv_cache_dtype="auto"`` it falls back to an FP8 KV cache before giving up. ``max_num_seqs`` is set to the
    full-length requests the KV cache holds (capped at vLLM's default), so no request is preempted at full
    context. The plan's ``findings`` say fits / does not fit with the arithmetic as evidence.
    """
    m = vllm.get_model(model)
    device, is_mig = _check_device(device)
    gpus = int(gpus)
    if gpus < 1:
        raise InvalidParameter(f"gpus={gpus}: need at least one GPU")
    if is_mig and gpus != 1:
        raise InvalidParameter(f"gpus={gpus} with MIG profile {device}: MIG instances have no NCCL/P2P between "
                               "them, so vLLM runs on one instance (gpus=1)")
    ctx = m.max_context if context_len is None else int(context_len)
    if ctx > m.max_context:
        raise InvalidParameter(f"context_len {ctx:,} is longer than {m.name} supports ({m.max_context:,} tokens, "
                               "max_position_embeddings)", hint="lower context_len or pick a long-context variant "
                               "(e.g. Llama-3.1 has 131,072)")
    if ctx < 1 or int(concurrency) < 1:
        raise InvalidParameter(f"context_len ({ctx}) and concurrency ({concurrency}) must be >= 1")
    if kv_cache_dtype not in KV_DTYPES:
        raise InvalidParameter(f"kv_cache_dtype={kv_cache_dtype!r}; use one of {', '.join(KV_DTYPES)}")
    if tp is not None:
        if int(tp) > gpus:
            raise InvalidParameter(f"tensor_parallel_size {tp} is larger than the {gpus} GPU(s) available",
                                   hint="raise gpus (GPUs per node) or lower tp")
        candidates = [int(tp)]
    else:
        candidates = [t for t in vllm.TP_SIZES if t <= gpus and m.attn_heads % t == 0]
    kv_options = [kv_cache_dtype] if kv_cache_dtype != "auto" else ["auto", "fp8"]
    tried: list[str] = []
    best = None
    for kv in kv_options:
        for t in candidates:
            b = vllm.budget(m, device, tp=t, max_model_len=ctx, kv_cache_dtype=kv, dtype=dtype,
                            gpu_memory_utilization=gpu_memory_utilization)
            tried.append(f"TP={t}, KV {kv}: {b.kv_tokens:,} KV tokens = {b.max_concurrency:.2f}x at {ctx:,} tokens")
            best = (t, kv, b)
            if b.fits and b.max_concurrency >= concurrency:
                return _finish(m, device, gpus, t, kv, dtype, ctx, int(concurrency), latency_p99_s, b, tried, True)
    t, kv, b = best
    p = _finish(m, device, gpus, t, kv, dtype, ctx, int(concurrency), latency_p99_s, b, tried, False)
    if strict:
        raise DoesNotFit(p.findings[0].title + ": " + p.findings[0].summary)
    return p


def _finish(m, device, gpus, tp, kv, dtype, ctx, concurrency, latency, b, tried, fits) -> DeploymentPlan:
    default_seqs, tokens = vllm.default_batch(device, b.total_gib)
    seqs = max(1, min(default_seqs, b.kv_tokens // ctx)) if fits else b.max_num_seqs
    if fits and seqs != b.max_num_seqs:  # the profiled activations depend on max_num_seqs: recompute
        b = vllm.budget(m, device, tp=tp, max_model_len=ctx, kv_cache_dtype=kv, dtype=dtype,
                        gpu_memory_utilization=b.gpu_memory_utilization, max_num_seqs=seqs)
    p = DeploymentPlan(m, device, gpus, tp, b.gpu_memory_utilization, ctx, seqs, b.max_num_batched_tokens, kv, dtype,
                       concurrency, latency, b, fits, tried)
    ev = tried + [f"{r.quantity}: {r.value:,} {r.unit}" for r in p.arithmetic().itertuples()]
    if fits:
        note = " (FP8 KV cache needed)" if kv == "fp8" else ""
        p.findings = [Finding(Severity.OK, f"{m.name} on {tp} x {device}: {b.kv_tokens:,} KV tokens, "
                              f"{b.max_concurrency:.1f} requests at {ctx:,} tokens{note}", category="vllm",
                              summary=f"Holds the target {concurrency} concurrent full-length requests; --max-num-seqs "
                                      f"{seqs} keeps every admitted request in the KV cache.",
                              evidence=ev, sop_step="Deploy the generated manifests; compare vLLM's start-up line "
                              "'GPU KV cache size: N tokens' with the tokens that fit here.",
                              commands=["vllm serve " + " ".join(p.vllm_args()[1:])], data={"fits": True, "tp": tp})]
    else:
        why = b.reason if not b.fits else (f"the KV cache holds {b.max_concurrency:.2f} full-length requests, "
                                           f"fewer than the {concurrency} wanted")
        p.findings = [Finding(Severity.CRITICAL, f"{m.name} does not fit {concurrency} x {ctx:,}-token requests on "
                              f"up to {gpus} x {device}", summary=why, category="vllm", evidence=ev,
                              sop_step="Lower context_len or concurrency, use FP8 weights (a quantised checkpoint), "
                                       "more GPUs (tensor parallel up to 8, pipeline parallel across nodes) or a larger GPU.",
                              data={"fits": False})]
    return p


# --------------------------------------------------------------------------------------------
# manifests
# --------------------------------------------------------------------------------------------
def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "vllm"}


def manifests(p: DeploymentPlan, *, name: str = "vllm", namespace: str = "inference", replicas: int = 1,
              gpu_product: str | None = None, cache_pvc: str | None = None, hf_token_secret: str | None = "hf-token",
              image: str | None = None) -> list[dict]:
    """Deployment, Service, PodDisruptionBudget and HorizontalPodAutoscaler for a plan.

    ``gpu_product``: the GFD ``nvidia.com/gpu.product`` label to pin (nodeSelector). ``cache_pvc``: a PVC for
    the model cache (else an emptyDir, re-downloaded on every start). ``hf_token_secret``: Secret with key
    ``token`` for gated models (None: no token). The HPA scales on waiting requests, or on p99 end-to-end
    latency when the plan has ``latency_p99_s`` (both served by Prometheus Adapter, see :func:`adapter_rules`).
    """
    from gpulib.core import validate
    validate.object_name(name, param="name", kind="Deployment/Service")
    if len(name) > 63:  # the Service of the same name is a DNS-1035 label
        raise InvalidParameter(f"name={name[:70]!r}... is longer than 63 characters (a Service name is a DNS label)")
    validate.namespace(namespace)
    if not p.fits:
        raise InvalidParameter(f"no manifests for a plan that does not fit: {p.findings[0].title}")
    if int(replicas) < 1:
        raise InvalidParameter(f"replicas={replicas}: need at least 1")
    port = int(setting("vllm_port"))
    labels = _labels(name)
    resource = p.mig_resource or "nvidia.com/gpu"
    count = 1 if p.mig_resource else p.tp
    probe = {"httpGet": {"path": setting("vllm_health_path"), "port": "http"}, "periodSeconds": int(_f("probe_period_s"))}
    env = [{"name": "HF_HOME", "value": setting("model_cache_path")}]
    if hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "token", "optional": True}}})
    container = {
        "name": "vllm", "image": image or setting("vllm_image"), "args": p.vllm_args() + ["--port", str(port)],
        "ports": [{"name": "http", "containerPort": port}], "env": env,
        "resources": {"limits": {resource: count}, "requests": {resource: count}},
        "startupProbe": {**probe, "failureThreshold": int(_f("startup_failure_threshold"))},
        "readinessProbe": probe, "livenessProbe": {**probe, "failureThreshold": int(_f("liveness_failure_threshold"))},
        "volumeMounts": [{"name": "model-cache", "mountPath": setting("model_cache_path")},
                         {"name": "dshm", "mountPath": "/dev/shm"}]}
    cache = {"name": "model-cache", **({"persistentVolumeClaim": {"claimName": cache_pvc}} if cache_pvc else {"emptyDir": {}})}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [cache, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": setting("shm_size")}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    if gpu_product:
        pod_spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu_product}
    meta = lambda kind_suffix="": {"name": name + kind_suffix, "namespace": namespace, "labels": labels}  # noqa: E731
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
                  "spec": {"replicas": int(replicas), "selector": {"matchLabels": labels},
                           "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                           "template": {"metadata": {"labels": labels, "annotations": {
                               "prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                               "prometheus.io/path": setting("vllm_metrics_path")}}, "spec": pod_spec}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta(),
               "spec": {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": "http"}]}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(),
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}}
    if p.latency_p99_s:
        metric = {"name": "vllm_e2e_request_latency_seconds_p99"}
        target = {"type": "AverageValue", "averageValue": f"{int(round(p.latency_p99_s * 1000))}m"}
    else:
        metric = {"name": "vllm_num_requests_waiting"}
        target = {"type": "AverageValue", "averageValue": str(int(_f("hpa_waiting_target")))}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta(),
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "minReplicas": int(replicas), "maxReplicas": int(replicas * _f("hpa_max_replicas_factor")),
                    "metrics": [{"type": "Pods", "pods": {"metric": metric, "target": target}}],
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}}}
    return [deployment, service, pdb, hpa]


def adapter_rules() -> str:
    """Prometheus Adapter rules exposing the HPA metrics per pod (``vllm_num_requests_waiting``,
    ``vllm_e2e_request_latency_seconds_p99``)."""
    return """rules:
- seriesQuery: 'vllm:num_requests_waiting{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "vllm:num_requests_waiting", as: "vllm_num_requests_waiting"}
  metricsQuery: 'avg_over_time(vllm:num_requests_waiting{<<.LabelMatchers>>}[2m])'
- seriesQuery: 'vllm:e2e_request_latency_seconds_bucket{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "vllm:e2e_request_latency_seconds_bucket", as: "vllm_e2e_request_latency_seconds_p99"}
  metricsQuery: 'histogram_quantile(0.99, sum by (le, <<.GroupBy>>) (rate(vllm:e2e_request_latency_seconds_bucket{<<.LabelMatchers>>}[5m])))'
"""


def validate_manifests(objs: Iterable[dict], version: str = "1.29") -> list[str]:
    """Validate with kubernetes-validate (strict); returns ``["Deployment/vllm: ok", ...]`` or raises InvalidParameter."""
    import kubernetes_validate

    out = []
    for o in objs:
        where = f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise InvalidParameter(f"{where} is not valid Kubernetes {version}: {str(exc).splitlines()[0]}") from exc
        out.append(f"{where}: valid for Kubernetes {version}")
    return out


# --------------------------------------------------------------------------------------------
# vLLM metrics: fetch, assess
# --------------------------------------------------------------------------------------------
def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' ``histogram_quantile`` over cumulative bucket counts {upper bound: count} (+Inf included)."""
    les = sorted(buckets)
    if not les or not math.isinf(les[-1]):
        raise InvalidParameter("histogram buckets need a +Inf bucket")
    total = buckets[les[-1]]
    if total <= 0:
        return float("nan")
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if math.isinf(le):
                return prev_le  # Prometheus returns the upper bound of the last finite bucket
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c) if c > prev_c else le
        prev_le, prev_c = le, c
    return prev_le


def _selector(namespace: str, workload: str) -> str:
    """Label matchers with both values escaped (the workload is matched literally, then ``-<suffix>``)."""
    from gpulib.core.validate import promql_string
    return f'namespace={promql_string(namespace)},pod=~{promql_string(re.escape(str(workload)) + "-.*")}'


def vllm_metrics(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """Per pod of ``workload``: running/waiting (avg, max), KV usage max, preemptions, TTFT and e2e p99 (s)."""
    from gpulib.core.timeutil import parse_window

    w = parse_window(window)
    cols = ["pod", "running_avg", "running_max", "waiting_avg", "waiting_max", "kv_usage_max", "preemptions",
            "ttft_p99_s", "e2e_p99_s"]
    series = None
    try:   # PromQL where the source has it, else the source's own (simulated) vllm: series
        rows = _prometheus_rows(src, _selector(namespace, workload), f"{int(w.total_seconds())}s")
    except NotProvided:
        try:
            series = src.app_series("vllm", w)
        except NotProvided:
            raise NotProvided(f"source {src.describe()} has no vLLM metrics",
                              hint="use source='live' (the Prometheus that scrapes vLLM's /metrics) or the demo fleet") from None
        rows = _series_rows(series, namespace, workload)
    df = pd.DataFrame(rows, columns=cols)
    if df.empty:
        raise _no_series(src, namespace, workload, window, series)
    return df.sort_values("pod").reset_index(drop=True)


def _no_series(src, namespace: str, workload: str, window: str, series) -> Exception:
    """Why :func:`vllm_metrics` found nothing: other pods export ``vllm:`` series, so ``workload``/``namespace``
    name no vLLM deployment (a usage error, exit 2); or no pod does (missing data: vLLM's /metrics is not scraped)."""
    from gpulib.core.timeutil import parse_window

    what = f"no vllm: series for pods {workload}-* in namespace {namespace} in the last {window}"
    if series is None:
        q = f"count by (namespace, pod) (last_over_time(vllm:num_requests_running[{int(parse_window(window).total_seconds())}s]))"
        pods = {(r["metric"].get("namespace", ""), r["metric"].get("pod", "")) for r in src.instant_query(q)}
    else:
        pods = {(lab["namespace"], lab["pod"]) for name, lab, _ in series if name == "vllm:num_requests_running"}
    if pods:
        known = sorted(f"{ns}/{pod}" for ns, pod in pods)
        return InvalidParameter(f"{what}; pods exporting vllm: series: {', '.join(known[:12])}"
                                + (f" and {len(known) - 12} more" if len(known) > 12 else ""),
                                hint="set namespace and deployment to a vLLM deployment's (its pods are <deployment>-*)")
    return EmptyResult(what, query=f"vllm:num_requests_running{{{_selector(namespace, workload)}}}",
                       hint="no pod exports vllm: series: check that Prometheus scrapes vLLM's /metrics endpoint "
                            "(https://docs.vllm.ai/en/latest/usage/metrics.html) in this window")


def _series_rows(series, namespace: str, workload: str) -> list[dict]:
    """The rows of :func:`vllm_metrics` from raw ``(metric, labels, values)`` series of the window."""
    per: dict[str, dict] = {}
    for name, lab, v in series:
        if lab["namespace"] != namespace or not lab["pod"].startswith(workload + "-"):
            continue
        r = per.setdefault(lab["pod"], {"pod": lab["pod"], "_ttft": {}, "_e2e": {}})
        if name == "vllm:num_requests_running":
            r["running_avg"], r["running_max"] = float(v.mean()), float(v.max())
        elif name == "vllm:num_requests_waiting":
            r["waiting_avg"], r["waiting_max"] = float(v.mean()), float(v.max())
        elif name == "vllm:kv_cache_usage_perc":
            r["kv_usage_max"] = float(v.max())
        elif name == "vllm:num_preemptions_total":
            r["preemptions"] = float(v[-1] - v[0])
        elif name.endswith("_bucket"):
            key = "_ttft" if "first_token" in name else "_e2e"
            r[key][float(lab["le"])] = float(v[-1] - v[0])
    for r in per.values():
        r["ttft_p99_s"] = histogram_quantile(0.99, r.pop("_ttft"))
        r["e2e_p99_s"] = histogram_quantile(0.99, r.pop("_e2e"))
    return list(per.values())


def _prometheus_rows(src, sel: str, w: str) -> list[dict]:
    queries = {
        "running_avg": f"avg_over_time(vllm:num_requests_running{{{sel}}}[{w}])",
        "running_max": f"max_over_time(vllm:num_requests_running{{{sel}}}[{w}])",
        "waiting_avg": f"avg_over_time(vllm:num_requests_waiting{{{sel}}}[{w}])",
        "waiting_max": f"max_over_time(vllm:num_requests_waiting{{{sel}}}[{w}])",
        "kv_usage_max": f"max_over_time(vllm:kv_cache_usage_perc{{{sel}}}[{w}]) or max_over_time(vllm:gpu_cache_usage_perc{{{sel}}}[{w}])",
        "preemptions": f"increase(vllm:num_preemptions_total{{{sel}}}[{w}])",
        "ttft_p99_s": f"histogram_quantile(0.99, sum by (pod, le) (increase(vllm:time_to_first_token_seconds_bucket{{{sel}}}[{w}])))",
        "e2e_p99_s": f"histogram_quantile(0.99, sum by (pod, le) (increase(vllm:e2e_request_latency_seconds_bucket{{{sel}}}[{w}])))",
    }
    per: dict[str, dict] = {}
    for col, q in queries.items():
        for r in src.instant_query(q):
            pod = r["metric"].get("pod", "")
            per.setdefault(pod, {"pod": pod})[col] = float(r["value"][1])
    return list(per.values())


def assess(metrics: pd.DataFrame, *, max_num_seqs: int | None = None, latency_p99_s: float | None = None,
           dcgm: pd.DataFrame | None = None, workload: str = "vllm", replicas: int | None = None,
           namespace: str = "<namespace>") -> list[Finding]:
    """Scale up / scale down / retune verdict for one vLLM deployment from :func:`vllm_metrics`.

    ``dcgm``: optional per-pod frame with ``pod``, ``fb_used_gib``, ``activity`` (p95) for the evidence.
    """
    n = replicas or len(metrics)
    ev = [f"{r.pod}: running avg {r.running_avg:.1f} (max {r.running_max:.0f}), waiting max {r.waiting_max:.0f}, "
          f"KV max {r.kv_usage_max:.0%}, preemptions {r.preemptions:.0f}, TTFT p99 {r.ttft_p99_s:.2f} s, "
          f"e2e p99 {r.e2e_p99_s:.2f} s" for r in metrics.itertuples()]
    if dcgm is not None and len(dcgm):
        ev += [f"{r.pod}: DCGM FB used {r.fb_used_gib:.1f} GiB, GR_ENGINE_ACTIVE p95 {r.activity:.0%}" for r in dcgm.itertuples()]
    over_latency = latency_p99_s is not None and (metrics["e2e_p99_s"] > latency_p99_s).any()
    queueing = (metrics["waiting_max"] > _f("hpa_waiting_target")).any()
    kv_full = (metrics["kv_usage_max"] >= _f("kv_usage_high")).any()
    preempting = (metrics["preemptions"] > 0).any()
    scale = f"kubectl -n {namespace} scale deployment {workload} --replicas={n + max(1, n // 2)}"
    # an HPA's name is free and its spec.scaleTargetRef names the Deployment
    # (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/horizontal-pod-autoscaler-v2/):
    # list them with their targets rather than guess the name
    hpas = (f"kubectl -n {shlex.quote(namespace)} get hpa -o custom-columns=NAME:.metadata.name,"
            "TARGET:.spec.scaleTargetRef.name,MIN:.spec.minReplicas,MAX:.spec.maxReplicas")
    hpa_of = shlex.quote(f'{{.items[?(@.spec.scaleTargetRef.name=="{workload}")].metadata.name}}')
    if queueing or over_latency or (kv_full and preempting):
        why = []
        if queueing:
            why.append(f"requests queue (waiting max {metrics['waiting_max'].max():.0f})")
        if over_latency:
            why.append(f"e2e p99 {metrics['e2e_p99_s'].max():.2f} s > target {latency_p99_s:g} s")
        if kv_full:
            why.append(f"KV cache {metrics['kv_usage_max'].max():.0%} full")
        if preempting:
            why.append(f"{metrics['preemptions'].sum():.0f} preemptions")
        sev = Severity.CRITICAL if over_latency else Severity.WARNING
        return [Finding(sev, f"{workload}: scale up ({'; '.join(why)})", category="vllm", evidence=ev,
                        summary="The running batch is full: new requests wait and, with the KV cache full, running ones are preempted.",
                        sop_step="Add replicas (or let the HPA do it: check its metric and maxReplicas). If one replica's "
                                 "KV cache is the limit, re-size with a larger GPU, more TP or an FP8 KV cache.",
                        commands=[scale, hpas], runbook="vllm_deploy",
                        data={"verdict": "scale_up", "workload": f"{namespace}/{workload}"})]
    run_ratio = metrics["running_avg"].mean() / max_num_seqs if max_num_seqs else None
    if (metrics["kv_usage_max"] < _f("kv_usage_low")).all() and (run_ratio is None or run_ratio < _f("running_low_ratio")) and n > 1:
        return [Finding(Severity.INFO, f"{workload}: scale down (KV cache at most {metrics['kv_usage_max'].max():.0%}, "
                        f"no queue)", category="vllm", evidence=ev,
                        summary="Replicas idle most of the window: fewer replicas (or a smaller GPU / MIG slice) would serve the load.",
                        sop_step="Lower the HPA minReplicas by one and watch waiting requests and p99 latency for a day.",
                        commands=[hpas, f"kubectl -n {namespace} patch hpa $(kubectl -n {namespace} get hpa -o jsonpath={hpa_of}) "
                                        f"-p '{{\"spec\":{{\"minReplicas\":{max(1, n - 1)}}}}}'"],
                        runbook="vllm_deploy", data={"verdict": "scale_down", "workload": f"{namespace}/{workload}"})]
    if kv_full:
        return [Finding(Severity.WARNING, f"{workload}: retune (KV cache {metrics['kv_usage_max'].max():.0%} full, no queue yet)",
                        category="vllm", evidence=ev, sop_step="Raise --gpu-memory-utilization a little or use "
                        "--kv-cache-dtype fp8 before traffic grows.", runbook="vllm_deploy", data={"verdict": "retune", "workload": f"{namespace}/{workload}"})]
    return [Finding(Severity.OK, f"{workload}: sized right (no queue, KV cache at most {metrics['kv_usage_max'].max():.0%})",
                    category="vllm", evidence=ev, runbook="vllm_deploy", data={"verdict": "ok", "workload": f"{namespace}/{workload}"})]


def dcgm_for_pods(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """DCGM FB used (GiB, max) and activity (p95) per pod of ``workload`` (empty frame when unavailable)."""
    from gpulib.core.errors import SourceError

    try:
        fb = src.summary("DCGM_FI_DEV_FB_USED", window, "max")
        act = src.summary("DCGM_FI_PROF_GR_ENGINE_ACTIVE", window, "p95")
    except SourceError:
        return pd.DataFrame(columns=["pod", "fb_used_gib", "activity"])
    sel = lambda df: df[(df["namespace"] == namespace) & df["pod"].str.startswith(workload + "-")]  # noqa: E731
    f = sel(fb).groupby("pod")["value"].sum() / 1024
    a = sel(act).groupby("pod")["value"].mean()
    return pd.DataFrame({"fb_used_gib": f, "activity": a}).reset_index().rename(columns={"index": "pod"})



def waiting_requests(src, namespace: str, workload: str, window: str = "1h") -> pd.DataFrame:
    """``vllm:num_requests_waiting`` series of the pods of ``workload`` in ``namespace`` (the live check's chart)."""
    s = src.series("vllm:num_requests_waiting", window)
    return s[(s["namespace"] == namespace) & s["pod"].str.startswith(workload + "-")].reset_index(drop=True)
