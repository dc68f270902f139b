"""vLLM deployment sizing (figures worked by hand from the model shapes, vllm-project/vllm: vllm/v1/worker/gpu_worker.py
and vllm/config/cache.py @ 002f10e0), manifests validated
with kubernetes-validate, bad parameters, and the live check on the demo fleet's simulated vllm: metrics."""

from __future__ import annotations

import math

import kubernetes_validate
import pandas as pd
import pytest

import gpulib.vllm as inf
import gpulib.vllm.memory as vllm
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity

GIB = 2**30
# project estimates from gpulib/data/vllm/model_memory_overheads.csv (flagged inferred there)
ACT_HIDDEN, ACT_INTER, LOGIT_B, NON_TORCH, NCCL, BLOCK = 4, 2, 4, 1.0, 0.5, 16


def kv_tokens_by_hand(kv_gib: float, bytes_per_token: int) -> int:
    return math.floor(kv_gib * GIB / bytes_per_token / BLOCK) * BLOCK


def test_qwen25_7b_on_a100_40gb_by_hand():
    p = inf.plan("Qwen2.5-7B", "A100-40GB", context_len=32768, concurrency=8)
    # Qwen2.5-7B: 7.62 B params, 28 layers, 4 KV heads, head_dim 128, hidden 3584, intermediate 18944, vocab 152064
    total = 40960 / 1024  # A100-40GB: 40960 MiB
    requested = 0.9 * total  # vLLM default gpu_memory_utilization (releases)
    weights = 7.62e9 * 2 / GIB  # BF16
    kv_per_token = 2 * 28 * 4 * 128 * 2  # K and V x layers x kv_heads x head_dim x 2 B = 57,344 B
    assert kv_per_token == 57344  # 2 x 28 layers x 4 KV heads x 128 x 2 B = 56 KiB

    # A100 (< 70 GiB): server defaults max_num_seqs 256, max_num_batched_tokens 2048; the plan then sets
    # max_num_seqs to the full-length requests that fit and re-profiles with it
    def kv_for(seqs):
        act = (2048 * (ACT_HIDDEN * 3584 + ACT_INTER * 18944) * 2 + min(2048, seqs) * 152064 * LOGIT_B) / GIB
        return requested - weights - act - NON_TORCH

    first = kv_tokens_by_hand(kv_for(256), kv_per_token)
    seqs = min(256, first // 32768)
    assert seqs == 11
    tokens = kv_tokens_by_hand(kv_for(seqs), kv_per_token)
    assert p.tp == 1 and p.fits and p.max_num_seqs == 11 and p.max_model_len == 32768
    assert p.budget.kv_bytes_per_token == kv_per_token
    assert p.budget.weights_gib == pytest.approx(14.19, abs=0.01)
    assert p.budget.kv_tokens == tokens
    assert p.budget.max_concurrency == pytest.approx(tokens / 32768)
    # 56 KiB x 32768 tokens = 1.75 GiB of KV per 32k request -> ~20.6 GiB of KV holds ~11.8 of them
    assert 11 < p.budget.max_concurrency < 12
    assert p.findings[0].severity == Severity.OK


def test_llama3_70b_on_4x_h100_80gb_by_hand():
    p = inf.plan("Llama-3-70B", "H100-80GB", gpus=4, context_len=8192, concurrency=32)
    total = 81559 / 1024  # H100 80GB HBM3 as nvidia-smi reports it
    requested = 0.9 * total
    weights = 70.55e9 * 2 / 4 / GIB  # BF16 split over TP=4: ~32.9 GiB (facts: ~33 GiB/GPU)
    kv_per_token = 2 * 80 * (8 // 4) * 128 * 2  # 8 KV heads / TP 4 = 2 per GPU -> 81,920 B = 80 KiB
    assert kv_per_token == 81920

    def kv_for(seqs):  # H100 (>= 70 GiB, not A100): 8192 batched tokens
        act = (8192 * (ACT_HIDDEN * 8192 + ACT_INTER * 28672 / 4) * 2 + min(8192, seqs) * 128256 * LOGIT_B) / GIB
        return requested - weights - act - NON_TORCH - NCCL

    seqs = min(1024, kv_tokens_by_hand(kv_for(1024), kv_per_token) // 8192)
    tokens = kv_tokens_by_hand(kv_for(seqs), kv_per_token)
    assert p.tp == 4 and p.fits and p.max_num_seqs == seqs == 57
    assert p.budget.weights_gib == pytest.approx(weights) and p.budget.weights_gib == pytest.approx(32.85, abs=0.01)
    assert p.budget.kv_tokens == tokens
    # worked by hand (80 layers x 8 KV heads / TP 4 x 128 x 2 x 2 B = 80 KiB per token per GPU): ~35 GiB/GPU KV ~= 460k
    # tokens; ours within 5 %
    assert p.budget.kv_gib == pytest.approx(35, rel=0.06) and tokens == pytest.approx(460_000, rel=0.05)
    # TP=2 was tried first and holds only a couple of 8k requests
    assert p.tried[0].startswith("TP=1") and p.tried[1].startswith("TP=2") and p.tried[2].startswith("TP=4")
    assert "--tensor-parallel-size 4" in " ".join(p.vllm_args())


def test_fp8_kv_cache_is_the_fallback_before_giving_up():
    p = inf.plan("Llama-3-70B", "H100-80GB", gpus=4, context_len=8192, concurrency=80)
    assert p.fits and p.tp == 4 and p.kv_cache_dtype == "fp8"
    assert p.budget.kv_bytes_per_token == 81920 / 2  # fp8 halves KV bytes
    args = p.vllm_args()
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"
    tgi = p.tgi_args()
    assert tgi[tgi.index("--kv-cache-dtype") + 1] == "fp8_e4m3fn" and tgi[tgi.index("--num-shard") + 1] == "4"


def test_does_not_fit_is_clear():
    p = inf.plan("Llama-3-70B", "A100-40GB", gpus=2, context_len=8192, concurrency=4)
    f = p.findings[0]
    assert not p.fits and f.severity == Severity.CRITICAL
    assert f.title == "Llama-3-70B does not fit 4 x 8,192-token requests on up to 2 x A100-40GB"
    assert "no memory for the KV cache" in f.summary  # weights alone (65.7 GiB/GPU at TP=2) exceed 36 GiB
    with pytest.raises(InvalidParameter, match="does not fit"):
        inf.manifests(p)
    with pytest.raises(inf.DoesNotFit):
        inf.plan("Llama-3-70B", "A100-40GB", gpus=2, context_len=8192, strict=True)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"model": "Llama-9-1T", "device": "H100-80GB"}, "not in the catalog; known:"),
        (
            {"model": "Llama-3-70B", "device": "H100-80GB", "gpus": 4, "context_len": 32768},
            "context_len 32,768 is longer than Llama-3-70B supports \\(8,192",
        ),
        (
            {"model": "Llama-3-70B", "device": "H100-80GB", "gpus": 4, "tp": 8},
            "tensor_parallel_size 8 is larger than the 4 GPU",
        ),
        ({"model": "Qwen2.5-7B", "device": "A100-40GB/3g.20gb", "gpus": 2}, "MIG instances have no NCCL"),
        ({"model": "Qwen2.5-7B", "device": "A100-40GB", "kv_cache_dtype": "int3"}, "kv_cache_dtype='int3'"),
        ({"model": "Qwen2.5-7B", "device": "B999"}, "device='B999'"),
    ],
)
def test_bad_parameters(kw, match):
    with pytest.raises(InvalidParameter, match=match):
        inf.plan(**kw)


def test_unknown_model_is_the_catalog_error():
    with pytest.raises(vllm.UnknownModel):
        inf.plan("gpt-5", "H100-80GB")


def test_arithmetic_table_rows_add_up():
    p = inf.plan("Qwen2.5-7B", "A100-40GB", context_len=8192, concurrency=4)
    a = p.arithmetic().set_index("quantity")["value"]
    kv = (
        a["requested by vLLM"]
        - a["weights"]
        - a["activations (profiled peak, estimate)"]
        - a["non-torch (CUDA ctx, NCCL; estimate)"]
    )
    assert kv == pytest.approx(a["KV cache"], abs=0.005)
    assert a["concurrency at 8192 tokens"] == pytest.approx(a["tokens that fit"] / 8192, abs=0.001)


# ------------------------------------------------------------------ manifests
def test_manifests_validate_and_carry_probes_cache_and_gpus():
    p = inf.plan("Llama-3-70B", "H100-80GB", gpus=4, context_len=8192, concurrency=32)
    objs = inf.manifests(
        p, name="llama70b", namespace="inference", replicas=2, gpu_product="NVIDIA-H100-80GB-HBM3", cache_pvc="hf-cache"
    )
    assert [o["kind"] for o in objs] == ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"]
    for o in objs:
        kubernetes_validate.validate(o, "1.29", strict=True)
    dep = objs[0]["spec"]["template"]["spec"]
    c = dep["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert c["readinessProbe"]["httpGet"]["path"] == "/health" and c["startupProbe"]["failureThreshold"] >= 30
    assert {"name": "model-cache", "mountPath": "/root/.cache/huggingface"} in c["volumeMounts"]
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf-cache"}} in dep["volumes"]
    assert any(v.get("emptyDir", {}).get("medium") == "Memory" for v in dep["volumes"])
    assert dep["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert c["args"][c["args"].index("--max-num-seqs") + 1] == str(p.max_num_seqs)
    hpa = objs[3]["spec"]
    assert hpa["minReplicas"] == 2 and hpa["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert objs[2]["spec"]["maxUnavailable"] == 1
    assert not any("value" in e and e["name"] == "HF_TOKEN" for e in c["env"])  # token only via secretKeyRef


def test_mig_manifest_and_latency_hpa_validate():
    p = inf.plan("Qwen2.5-7B", "A100-40GB/3g.20gb", context_len=8192, concurrency=4, latency_p99_s=2.5)
    objs = inf.manifests(p)
    assert inf.validate_manifests(objs) == [
        f"{k}/vllm: valid for Kubernetes 1.29"
        for k in ("Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler")
    ]
    c = objs[0]["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/mig-3g.20gb": 1}
    target = objs[3]["spec"]["metrics"][0]["pods"]
    assert (
        target["metric"]["name"] == "vllm_e2e_request_latency_seconds_p99"
        and target["target"]["averageValue"] == "2500m"
    )
    assert "vllm_e2e_request_latency_seconds_p99" in inf.adapter_rules()


def test_invalid_manifest_is_reported_with_its_name():
    p = inf.plan("Qwen2.5-7B", "A100-40GB", context_len=8192, concurrency=4)
    objs = inf.manifests(p)
    objs[1]["spec"]["portz"] = []
    with pytest.raises(InvalidParameter, match="Service/vllm is not valid Kubernetes 1.29"):
        inf.validate_manifests(objs)


def test_tgi_flags_match_the_plan():
    p = inf.plan("Qwen2.5-7B", "A100-40GB", context_len=8192, concurrency=4)
    t = p.tgi_args(max_output_tokens=1024)
    get = lambda k: t[t.index(k) + 1]  # noqa: E731
    assert get("--model-id") == "Qwen/Qwen2.5-7B-Instruct" and get("--num-shard") == "1"
    assert get("--max-total-tokens") == "8192" and get("--max-input-tokens") == "7168"
    assert get("--cuda-memory-fraction") == "0.9" and get("--max-concurrent-requests") == str(p.max_num_seqs)
    with pytest.raises(InvalidParameter, match="max_output_tokens 9000"):
        p.tgi_args(max_output_tokens=9000)


# ------------------------------------------------------------------ live check
def test_histogram_quantile_like_prometheus():
    b = {0.1: 10, 0.5: 60, 1.0: 90, math.inf: 100}
    assert inf.histogram_quantile(0.5, b) == pytest.approx(0.1 + 0.4 * (50 - 10) / (60 - 10))  # 0.42
    assert inf.histogram_quantile(0.99, b) == 1.0  # rank in +Inf: the last finite bound
    assert math.isnan(inf.histogram_quantile(0.5, {1.0: 0, math.inf: 0}))
    with pytest.raises(InvalidParameter, match="\\+Inf"):
        inf.histogram_quantile(0.5, {1.0: 3})


def _frame(**over):
    row = {
        "pod": "vllm-a-1",
        "running_avg": 10.0,
        "running_max": 20.0,
        "waiting_avg": 0.0,
        "waiting_max": 0.0,
        "kv_usage_max": 0.5,
        "preemptions": 0.0,
        "ttft_p99_s": 0.3,
        "e2e_p99_s": 3.0,
    }
    return pd.DataFrame([{**row, **over}, {**row, "pod": "vllm-a-2", **over}])


@pytest.mark.parametrize(
    "over, verdict, sev",
    [
        ({"waiting_max": 30.0}, "scale_up", Severity.WARNING),
        ({"e2e_p99_s": 12.0}, "scale_up", Severity.CRITICAL),
        ({"kv_usage_max": 0.1, "running_avg": 2.0}, "scale_down", Severity.INFO),
        ({"kv_usage_max": 0.95}, "retune", Severity.WARNING),
        ({}, "ok", Severity.OK),
    ],
)
def test_assess_verdicts(over, verdict, sev):
    f = inf.assess(_frame(**over), max_num_seqs=64, latency_p99_s=10.0, workload="vllm-a")[0]
    assert f.data["verdict"] == verdict and f.severity == sev


def test_hpa_commands_find_the_hpa_by_its_target():
    """An HPA's name is free (its spec.scaleTargetRef names the Deployment) and a Deployment may have none, so the
    printed commands list the namespace's HPAs with their targets instead of ``get hpa <workload>`` (NotFound on
    the demo fleet, which has no HPA:
    tests/project/test_printed_commands.py::test_every_printed_command_runs_on_the_demo_cluster)."""
    listing = (
        "kubectl -n inference get hpa -o custom-columns=NAME:.metadata.name,"
        "TARGET:.spec.scaleTargetRef.name,MIN:.spec.minReplicas,MAX:.spec.maxReplicas"
    )
    up = inf.assess(_frame(waiting_max=30.0), max_num_seqs=64, workload="vllm-a", namespace="inference")[0]
    assert up.data["verdict"] == "scale_up" and listing in up.commands
    assert not any(c.startswith("kubectl -n inference get hpa vllm-a") for c in up.commands)
    down = inf.assess(
        _frame(kv_usage_max=0.1, running_avg=2.0), max_num_seqs=64, workload="vllm-a", namespace="inference"
    )[0]
    assert down.data["verdict"] == "scale_down" and down.commands[0] == listing
    assert "patch hpa vllm-a " not in down.commands[1] and '.spec.scaleTargetRef.name=="vllm-a"' in down.commands[1]


def test_demo_fleet_live_check(demo_pinned):
    """Demo fleet (pinned): vllm-llama70b's second pod runs hot (GPU activity above 45 %: full batch, queue,
    preemptions) -> scale up; vllm-qwen7b (infer_small, ~12 % activity) idles -> scale down."""
    llama = inf.vllm_metrics(demo_pinned, "inference", "vllm-llama70b", "1h")
    assert list(llama["pod"]) == ["vllm-llama70b-6d8f7c9b5-2xkqp", "vllm-llama70b-6d8f7c9b5-9wz4t"]
    assert (llama["kv_usage_max"] <= 0.99).all() and (llama["ttft_p99_s"] > 0).all()
    assert inf.assess(llama, max_num_seqs=64, workload="vllm-llama70b")[0].data["verdict"] == "scale_up"
    qwen = inf.vllm_metrics(demo_pinned, "inference", "vllm-qwen7b", "1h")
    assert (qwen["waiting_max"] == 0).all()
    assert inf.assess(qwen, max_num_seqs=256, workload="vllm-qwen7b")[0].data["verdict"] == "scale_down"
    with pytest.raises(Exception, match="no vllm: series"):
        inf.vllm_metrics(demo_pinned, "inference", "vllm-missing", "1h")
    running = demo_pinned.series("vllm:num_requests_running", "1h")
    assert set(running["pod"]) == {
        "vllm-llama70b-6d8f7c9b5-2xkqp",
        "vllm-llama70b-6d8f7c9b5-9wz4t",
        "vllm-qwen7b-5b7d9f8c4-hq6m2",
        "vllm-qwen7b-5b7d9f8c4-p8r7v",
    }
    assert set(running["node"]) == {"h200-infer-0"}


@pytest.mark.prometheus
def test_live_check_against_real_prometheus_matches_demo(live_env, demo_pinned):
    import gpulib

    live = gpulib.connect("live")
    for wl, seqs in (("vllm-llama70b", 64), ("vllm-qwen7b", 256)):
        a = inf.vllm_metrics(live, "inference", wl, "1h")
        b = inf.vllm_metrics(demo_pinned, "inference", wl, "1h")
        assert list(a["pod"]) == list(b["pod"])
        assert a["running_max"].tolist() == b["running_max"].tolist()
        assert a["kv_usage_max"].tolist() == pytest.approx(b["kv_usage_max"].tolist())
        assert a["e2e_p99_s"].tolist() == pytest.approx(b["e2e_p99_s"].tolist(), rel=0.05)
        assert (
            inf.assess(a, max_num_seqs=seqs)[0].data["verdict"] == inf.assess(b, max_num_seqs=seqs)[0].data["verdict"]
        )


def test_a_deployment_with_no_vllm_series_is_a_usage_error_naming_the_ones_that_have_them(demo_pinned):
    """A ``deployment`` that matches no vLLM pod is a bad parameter (exit 2, the known deployments listed), not
    missing data: the source does export ``vllm:`` series, for other deployments (developers' guide: a
    parameter that matches nothing is a usage error)."""
    from gpulib.core.errors import InvalidParameter

    for wl in ("vllm-missing", "triton-bert"):  # a typo; a real Deployment that is not vLLM
        with pytest.raises(InvalidParameter, match="no vllm: series") as exc:
            inf.vllm_metrics(demo_pinned, "inference", wl, "1h")
        assert "vllm-llama70b" in str(exc.value) and "vllm-qwen7b" in str(exc.value)
        assert "dcgm-exporter" not in str(exc.value)  # EmptyResult's DCGM hint does not apply to vLLM
    with pytest.raises(InvalidParameter, match="vllm-llama70b"):  # right name, wrong namespace
        inf.vllm_metrics(demo_pinned, "default", "vllm-llama70b", "1h")


def test_no_vllm_series_at_all_is_missing_data_with_a_vllm_hint():
    """Nothing scraped from any vLLM pod: the live check is INCOMPLETE (EmptyResult, exit 3), with vLLM's hint."""
    from gpulib.core.errors import EmptyResult, InvalidParameter

    class NoVllm:
        def instant_query(self, q):
            return []

        def describe(self):
            return "a Prometheus without vLLM"

    with pytest.raises(EmptyResult) as exc:
        inf.vllm_metrics(NoVllm(), "inference", "vllm-llama70b", "1h")
    assert not isinstance(exc.value, InvalidParameter)
    assert "/metrics" in str(exc.value) and "dcgm-exporter" not in str(exc.value)
