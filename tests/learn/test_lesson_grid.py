"""Lessons survive their own "what ifs" every lesson runs over a small grid of the parameters it invites,
in this process through the runbooks' Session (every step's gather and show, what it shows collected; no kernel, so
the grid stays fast). One point per lesson is rendered through papermill by
tests/runbooks/test_notebooks.py::test_notebook_runs_on_demo (the defaults) and the inference lesson's "does not
fit" points by tests/learn/test_inference_whatifs.py.

A value the data files do not know (a GPU without a memory size, a dtype not in model_dtypes.csv) is a usage error
of the step that needs it, named; never a crash and never a silently empty lesson."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml

from gpulib.run.notebook import FAILED
from tests.helpers.lesson_runs import run_lesson

ROOT = Path(__file__).resolve().parents[2]


def _scenario_without(tmp_path: Path, node: str) -> str:
    doc = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != node]
    p = tmp_path / f"without-{node}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _clean(run) -> None:
    assert run.errors == [], (run.name, run.errors)
    assert FAILED not in run.outcomes.values(), run.outcomes
    assert run.checks, f"{run.name}: no self-check shown"


# the models a newcomer tries (small, the 70B the runbook defaults to, the largest, a mixture of experts), on the
# GPUs of the demo fleet and a MIG instance, at the default and the longest context (models.csv max_context 8k..128k)
INFERENCE = list(
    itertools.product(
        ["Llama-3-8B", "Llama-3-70B", "Llama-3.1-405B", "Mixtral-8x7B"],
        ["H100-80GB", "H200", "A100-40GB/3g.20gb"],
        [8192, 131072],
    )
)


def test_the_inference_lesson_runs_for_every_model_device_and_context():
    for model, device, n in INFERENCE:
        run = run_lesson("learn_inference", model=model, device=device, max_model_len=n)
        _clean(run)
        text = run.text()
        # either the budget holds at least one request, or the lesson says it does not fit and what would
        assert run.figures["fits"] or "does not fit" in text, (model, device, n)
        if not run.figures["fits"]:
            assert "GPUs per replica" in text, (model, device, n)


def test_a_context_beyond_the_model_is_explained_and_the_budget_shown_at_its_own():
    run = run_lesson("learn_inference", model="Llama-3-70B", device="H200", max_model_len=131072)
    _clean(run)
    text = run.text()
    # models.csv: Llama-3-70B max_context 8192; Llama-3.1-70B and -8B take 131072
    assert "longer than Llama-3-70B's context (8,192 tokens" in text
    assert "Llama-3.1-70B" in text and "Llama-3.1-8B" in text


def test_a_gpu_the_data_files_do_not_size_is_a_named_usage_error():
    """gpu_models.csv has no memory size for an L4: the budget cannot be computed, and the lesson says which value."""
    run = run_lesson("learn_inference", device="L4")
    assert run.usage_errors and "L4" in run.usage_errors[0]
    assert run.outcomes["Memory budget"] == FAILED and run.outcomes["Flags"] == "not checked"


@pytest.mark.parametrize("name,window", [("learn_cost", "1h"), ("learn_cost", "7d"), ("learn_interview_prep", "1h")])
def test_the_cost_and_interview_lessons_run_over_their_windows(name, window):
    run = run_lesson(name, window=window)
    _clean(run)
    assert run.figures["idle_gpu_hours"] >= 0 and run.figures["monthly_cost"] > 0


@pytest.mark.parametrize("window", ["10m", "1h", "24h"])
def test_the_monitoring_lesson_runs_over_its_windows(window):
    run = run_lesson("learn_monitoring", window=window)
    _clean(run)
    assert run.figures["gpus_at_or_above_warn"] >= 0


@pytest.mark.parametrize(
    "name",
    [
        "learn_cost",
        "learn_gpu_operator",
        "learn_interview_prep",
        "learn_k8s_gpu_resources",
        "learn_monitoring",
        "learn_sharing",
        "learn_storage",
        "learn_inference",
    ],
)
def test_every_fleet_lesson_runs_on_another_scenario(name, tmp_path):
    """The demo scenario without the A100-80GB node that only holds an idle pod: each lesson that reads the fleet
    still runs (and the interview prep counts 8 GPUs fewer: demo_fleet.yaml a100-80-1 has 8)."""
    base = run_lesson(name)
    run = run_lesson(name, scenario=_scenario_without(tmp_path, "a100-80-1"))
    _clean(run)
    if name == "learn_interview_prep":
        assert run.figures["gpus"] == base.figures["gpus"] - 8


def test_the_storage_lesson_runs_for_every_model_and_dtype():
    models = [m for m in re.findall(r"^([A-Za-z][^,]*),", (ROOT / "gpulib/data/vllm/models.csv").read_text(), re.M)]
    for model, dtype in itertools.product(models[1:], ["bfloat16", "int4"]):
        run = run_lesson("learn_storage", model=model, dtype=dtype)
        _clean(run)
        assert run.figures["cold_load_s"] > 0
    for scale_out_s in (10, 120, 3600):
        _clean(run_lesson("learn_storage", scale_out_s=scale_out_s))


def test_a_dtype_the_data_files_do_not_know_is_a_named_usage_error():
    run = run_lesson("learn_storage", dtype="fp3")
    assert run.usage_errors and "fp3" in run.usage_errors[0] and run.outcomes["Load times"] == FAILED


@pytest.mark.parametrize("replicas", [2, 4, 10])
def test_the_sharing_lesson_runs_over_its_replicas(replicas):
    run = run_lesson("learn_sharing", replicas=replicas)
    _clean(run)
    assert f"replicas: {replicas}" in run.text()


@pytest.mark.parametrize("name", ["learn_training", "learn_troubleshooting"])
def test_the_capture_lessons_run(name):
    _clean(run_lesson(name))
