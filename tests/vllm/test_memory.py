"""vLLM memory model: exact KV/weight arithmetic (worked by hand from config shapes) and vLLM's budget."""

from __future__ import annotations

import pytest

import gpulib.vllm.memory as vllm
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.vllm.findings import budget_findings

GIB = 1024**3


@pytest.mark.parametrize(
    "model,tp,kv_dtype,expected",
    [
        (
            "Qwen2.5-7B",
            1,
            "auto",
            2 * 28 * 4 * 128 * 2,
        ),  # 57,344 B (Qwen2.5-7B config.json: 28 layers, 4 KV heads, head_dim 128)
        ("Llama-3-8B", 1, "auto", 2 * 32 * 8 * 128 * 2),  # 131,072 B
        ("Llama-3-70B", 1, "bfloat16", 327_680),
        ("Llama-3-70B", 4, "auto", 81_920),  # 80 KiB per GPU at TP=4
        ("Llama-3-70B", 1, "fp8", 163_840),  # fp8 halves
        ("Qwen2.5-7B", 8, "auto", 2 * 28 * 1 * 128 * 2),  # 4 KV heads < TP 8: replicated, 1 per GPU
    ],
)
def test_kv_bytes_per_token(model, tp, kv_dtype, expected):
    assert vllm.kv_bytes_per_token(model, kv_dtype, tp) == expected


def test_catalog_param_counts_match_shapes():
    """params_b in models.csv equals the count computed from the config shape (untied embeddings, Qwen QKV bias)."""
    df = vllm.models()
    assert set(df["model"]) >= {
        "Qwen2.5-7B",
        "Qwen2.5-14B",
        "Qwen2.5-32B",
        "Qwen2.5-72B",
        "Llama-3-8B",
        "Llama-3.1-8B",
        "Llama-3-70B",
        "Llama-3.1-70B",
        "Llama-3.1-405B",
        "Mistral-7B",
        "Mixtral-8x7B",
    }
    for r in df.itertuples():
        h, hd = r.hidden, r.head_dim
        attn = 2 * h * r.attn_heads * hd + 2 * h * r.kv_heads * hd
        if r.qkv_bias == "yes":
            attn += (r.attn_heads + 2 * r.kv_heads) * hd
        mlp = 3 * h * r.intermediate * r.experts + (h * r.experts if r.experts > 1 else 0)
        total = r.layers * (attn + mlp + 2 * h) + h + 2 * r.vocab * h
        assert abs(total / 1e9 - r.params_b) < 0.01, r.model


def test_weights_match_published_cross_check():
    # cross-check: the kvplan tool reports 14.96 GiB for Llama-3.1-8B BF16; Llama-3-70B ~131 GiB
    assert vllm.weights_gib("Llama-3.1-8B") == pytest.approx(14.96, abs=0.01)
    assert vllm.weights_gib("Llama-3-70B") == pytest.approx(131.4, abs=0.5)
    assert vllm.weights_gib("Llama-3-70B", tp=4) == pytest.approx(131.4 / 4, abs=0.2)
    assert vllm.weights_gib("Llama-3-8B", "fp8") == pytest.approx(14.96 / 2, abs=0.01)


def test_budget_follows_vllm_accounting():
    b = vllm.budget("Llama-3-8B", "H100-80GB", gpu_memory_utilization=0.9, max_model_len=8192)
    assert b.total_gib == pytest.approx(81559 / 1024)
    assert b.requested_gib == pytest.approx(0.9 * 81559 / 1024)
    assert b.kv_gib == pytest.approx(b.requested_gib - b.weights_gib - b.activation_gib - b.non_torch_gib)
    assert b.kv_tokens % 16 == 0 and b.kv_tokens * 131_072 <= b.kv_gib * GIB
    assert b.max_concurrency == pytest.approx(b.kv_tokens / 8192)
    # worked by hand (0.9 x 79.1 GiB - 15 GiB weights - 2..4 GiB activations): ~52-54 GiB KV, ~420k tokens, ~51x at 8k
    # (overheads there are a range)
    assert 50 <= b.kv_gib <= 56 and 400_000 <= b.kv_tokens <= 460_000
    assert (b.max_num_seqs, b.max_num_batched_tokens) == (1024, 8192)  # >= 70 GiB, not A100


def test_llama3_70b_on_4_h100_and_qwen_on_a100():
    b = vllm.budget("Llama-3-70B", "H100-80GB", tp=4, max_model_len=8192)
    assert b.weights_gib == pytest.approx(32.85, abs=0.1) and b.kv_bytes_per_token == 81_920
    assert 33 <= b.kv_gib <= 38 and 430_000 <= b.kv_tokens <= 500_000  # facts: ~35 GiB, ~460k tokens
    q = vllm.budget("Qwen2.5-7B", "A100-40GB", max_model_len=8192)
    assert q.fits and (q.max_num_seqs, q.max_num_batched_tokens) == (256, 2048)  # A100 keeps the small defaults


def test_does_not_fit_cases_are_explicit():
    small = vllm.budget("Qwen2.5-7B", "A100-40GB/1g.5gb", max_model_len=4096)
    assert not small.fits and "no memory for the KV cache" in small.reason
    f = budget_findings(small)[0]
    assert f.severity is Severity.CRITICAL and "does not fit" in f.title
    tight = vllm.budget("Llama-3.1-8B", "A100-40GB/3g.20gb", max_model_len=131072)
    assert not tight.fits and "fewer than max_model_len" in tight.reason


def test_max_fit_and_required_utilisation():
    r = vllm.max_fit("Qwen2.5-7B", "A100-40GB", max_model_len=8192, concurrency=64)
    b = r["budget"]
    assert r["max_num_seqs"] == b.kv_tokens // 8192
    assert r["max_model_len"] == min(32768, b.kv_tokens // 64)
    u = vllm.gpu_memory_utilization_for("Qwen2.5-7B", "A100-40GB", max_model_len=4096, concurrency=8)
    need = vllm.memory_needed("Qwen2.5-7B", max_model_len=4096, concurrency=8)
    assert need == pytest.approx(14.19 + 8 * 4096 * 57344 / GIB + need - 14.19 - 8 * 4096 * 57344 / GIB)
    assert u * 40 >= need and (u - 0.01) * 40 < need


def test_choose_tp_picks_smallest_that_fits():
    f = vllm.choose_tp("Llama-3-70B", "H100-80GB", max_model_len=8192, concurrency=16)[0]
    # TP=2: 0.9 x 79.6 = 71.7 GiB requested - 65.7 GiB weights - ~2 GiB overhead = ~4 GiB KV at 160 KiB/token
    # = ~25k tokens < 16 x 8192 = 131k; TP=4 leaves ~36 GiB = ~470k tokens. So 4 is the smallest.
    assert f.severity is Severity.OK and "tensor-parallel size 4" in f.title
    assert f.commands[0].startswith("vllm serve meta-llama/Meta-Llama-3-70B-Instruct --tensor-parallel-size 4")
    assert any(e.startswith("TP=2:") for e in f.evidence)
    nofit = vllm.choose_tp("Llama-3.1-405B", "H100-80GB", max_model_len=8192)[0]
    assert nofit.severity is Severity.CRITICAL  # 405.85e9 x 2 B / 8 = 94.5 GiB per GPU > 80 GiB
    assert vllm.choose_tp("Llama-3.1-405B", "H100-80GB", dtype="fp8", max_model_len=8192)[0].severity is Severity.OK


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(vllm.UnknownModel, match="not in the catalog"):
        vllm.budget("GPT-5", "H100-80GB")
    with pytest.raises(InvalidParameter, match="8192"):
        vllm.budget("Llama-3-8B", "H100-80GB", max_model_len=16384)
    with pytest.raises(InvalidParameter, match="tensor_parallel_size 3"):
        vllm.budget("Llama-3-8B", "H100-80GB", tp=3)
    with pytest.raises(InvalidParameter, match="gpu_memory_utilization"):
        vllm.budget("Llama-3-8B", "H100-80GB", gpu_memory_utilization=1.5)
    with pytest.raises(InvalidParameter):
        vllm.dtype_bytes("fp3")


def test_every_vllm_sop_row_is_used_and_every_key_asked_for_exists():
    """vllm_sop.csv and the vLLM domain agree: every key a finding asks for is a row, every row is asked for."""
    from pathlib import Path

    from gpulib.core.sop import keys
    from tests.helpers.sopcheck import scan, unknown_keys, unused_rows

    pkg, rows = Path(vllm.__file__).parent, set(keys("vllm_sop"))
    assert scan(pkg, "vllm_sop")[0] == rows  # every key is asked for by name
    assert unknown_keys(pkg, "vllm_sop", rows) == [] and unused_rows(pkg, "vllm_sop", rows) == []
