"""vllm_deploy runbook executed with papermill: sizing + manifests + live verdict on demo and on a real
Prometheus (backfilled vllm: series), and an unknown model recorded as an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulib.catalogue import find_notebook

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path, monkeypatch, demo_end, kept_execute):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())

    def go(params, sub="out"):
        res = kept_execute(find_notebook("vllm_deploy"), params, tmp_path / sub, progress=False)
        assert res.failed is None, res.failed
        return res, json.loads((res.out_dir / "findings.json").read_text())

    return go


def verdict(doc, wl="vllm-llama70b"):
    return next(f["data"]["verdict"] for f in doc["findings"] if f["data"].get("verdict") and f["title"].startswith(wl))


@pytest.mark.notebook
def test_demo_sizing_manifests_and_scale_up(shared_runs):
    res = shared_runs.run("vllm_deploy")
    assert res.failed is None, res.failed
    doc = res.doc
    assert doc["errors"] == []
    size = next(f for f in doc["findings"] if f["data"].get("fits") is not None)
    # every finding lists the inputs its decision rested on (data["inputs"]); the sizing's own data is unchanged
    sized = {k: v for k, v in size["data"].items() if k != "inputs"}
    assert sized == {"fits": True, "tp": 4} and "479,504 KV tokens" in size["title"]
    assert verdict(doc) == "scale_up"
    html = res.html.read_text()
    assert "Deployment/vllm-llama70b: valid for Kubernetes 1.29" in html and "text-generation-launcher" in html
    assert "memory per GPU (GiB)" in html


@pytest.mark.notebook
def test_unknown_model_is_an_error_the_notebook_survives(run):
    res, doc = run({"model": "Llama-9-1T"}, "bad")
    assert any("Sizing" in e and "Llama-9-1T" in e and "not in the catalog" in e for e in doc["errors"])
    assert verdict(doc) == "scale_up"  # the live check still ran


@pytest.mark.notebook
@pytest.mark.prometheus
def test_live_same_verdict(live_env, run):
    _, doc = run({"source": "live"}, "live")
    assert doc["errors"] == []
    assert verdict(doc) == "scale_up"
    _, qwen = run(
        {
            "source": "live",
            "deployment": "vllm-qwen7b",
            "deployed_max_num_seqs": 256,
            "model": "Qwen2.5-7B",
            "device": "A100-40GB",
            "gpus": 1,
            "context_len": 32768,
            "concurrency": 8,
        },
        "live-qwen",
    )
    assert verdict(qwen, "vllm-qwen7b") == "scale_down"
