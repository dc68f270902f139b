"""The inference lesson's first "what ifs" Llama-3-70B on one H100 or H200 (it does not fit) and a
max_model_len longer than the model's context. Each is answered as a lesson (what would fit: how many GPUs, which
quantisation) instead of a crash, rendered through papermill as a newcomer runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpulib.catalogue import find_notebook

ROOT = Path(__file__).resolve().parents[2]


def _render(execute, tmp_path, monkeypatch, demo_end, **params):
    """``execute``: the kept-kernel run of tests/conftest.py (``kept_execute``)."""
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = execute(find_notebook("learn_inference"), params, tmp_path, progress=False)
    return res, res.html.read_text() if res.html and res.html.exists() else ""


@pytest.mark.notebook
@pytest.mark.parametrize("device", ["H100-80GB", "H200"])
def test_llama_3_70b_on_one_gpu_is_answered_with_what_would_fit(tmp_path, monkeypatch, demo_end, device, kept_execute):
    """Weights 131 GiB in BF16 (models.csv 70.55 B parameters x 2 bytes) exceed one H100's 80 GB and leave no KV
    cache on one H200's 141 GB at the default 0.9 utilisation: the lesson says so and names what fits."""
    res, html = _render(kept_execute, tmp_path, monkeypatch, demo_end, model="Llama-3-70B", device=device)
    assert res.failed is None, res.failed
    assert res.errors == [], res.errors
    assert "Traceback" not in html and "ZeroDivisionError" not in html
    assert "does not fit" in html
    figs = json.loads((res.out_dir / "figures.json").read_text())
    assert figs["fits"] is False
    # 2 bytes x 70.55e9 / 2**30 = 131.4 GiB of BF16 weights; on 2 GPUs (TP=2) each holds 65.7 GiB
    assert figs["fit_tp_bfloat16"] in (2, 4)
    # INT4 weights: 70.55e9 x 0.5 / 2**30 = 32.8 GiB, which one 80 GB GPU holds with room for a KV cache
    assert figs["fit_tp_int4"] == 1


@pytest.mark.notebook
def test_a_max_model_len_beyond_the_models_context_is_answered_not_a_name_error(
    tmp_path, monkeypatch, demo_end, kept_execute
):
    """Llama-3-8B's context is 8,192 tokens (models.csv max_context): 32,768 is refused by vLLM; the lesson says so,
    names catalogue models that take it, and shows the budget at the model's own context."""
    res, html = _render(kept_execute, tmp_path, monkeypatch, demo_end, model="Llama-3-8B", max_model_len=32768)
    assert res.failed is None, res.failed
    assert res.errors == [], res.errors
    assert "NameError" not in html and "Traceback" not in html
    assert "8,192" in html and "Llama-3.1-8B" in html
