"""mig_sizing runbook: on the demo fleet and on live data (real Prometheus + Kubernetes API double) the proposed
layout is valid per GPU, smaller than whole-GPU placement, and its mig-parted YAML validates; bad input renders.

Expected numbers, worked out by hand from gpulib/data/demo/demo_fleet.yaml and the A100 MIG tables (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
node a100-40-mig-0 runs 4 GPU pods on MIG instances. FB_USED max: triton-bert x2 ~7.4 GiB (36 % of a 3g.20gb)
-> x 1.2 headroom = 8.9 GiB -> 1g.10gb (9.62 GiB, 2 slots); whisper-api ~3.7 GiB -> 4.4 GiB -> 1g.5gb (4.75 GiB,
1 slot); dev-bob (idle: a CUDA context, <= 560 MiB) on a 1g.5gb, flat but ~11 % of the instance (an idle pod, not a
pre-allocated pool: that needs >= 70 % of the device, below JAX's 75 % default pool) -> 0.7 GiB -> 1g.5gb. 2 + 2 + 1 + 1
= 6 of 8 memory slots and 4 of 7
compute slices -> ONE GPU, against 4 whole GPUs; the node's other 3 GPUs stay whole (`mig-enabled: false`).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

import gpulib.mig as mig
from gpulib.catalogue import find_notebook

pytestmark = pytest.mark.notebook


def _run(execute, tmp_path, params, monkeypatch=None, demo_end=None):
    """``execute``: the kept-kernel run of tests/conftest.py (``kept_execute``)."""
    if monkeypatch is not None:
        monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())
    return execute(find_notebook("mig_sizing"), params, tmp_path, progress=False)


def _mig_parted_text(res) -> str:
    nb = json.loads(res.notebook.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", ""))
            if text.startswith("version: v1"):
                return text.split("\n\n")[0]
    raise AssertionError("no mig-parted config printed")


def _plan_finding(res):
    hits = [f for f in res.findings if f.title.startswith("MIG plan:")]
    assert len(hits) == 1, [f.title for f in res.findings]
    return hits[0]


def _check_plan(res, gpu_model, used, whole):
    assert res.failed is None and res.errors == [], (res.failed, res.errors)
    plan = _plan_finding(res)
    m = re.match(r"MIG plan: (\d+) GPU\(s\) instead of (\d+)", plan.title)
    assert (int(m.group(1)), int(m.group(2))) == (used, whole)
    text = _mig_parted_text(res)
    doc = yaml.safe_load(text)
    # the printed file keeps the configs in use (mig-parted's defaults + the node's current one) and parses
    from gpulib.mig.parted_merge import schema_problems

    assert schema_problems(doc) == [] and {"all-disabled", "a100-40gb-mixed-3-2-1-1"} <= set(doc["mig-configs"])
    plan_cfgs = {k: v for k, v in doc["mig-configs"].items() if k.startswith("gpuops-plan-")}
    assert plan_cfgs
    assert mig.validate_mig_parted_config(mig.mig_parted_config(plan_cfgs), gpu_model) == []
    for sels in plan_cfgs.values():
        for sel in sels:
            assert not sel["mig-enabled"] or mig.is_valid_layout(gpu_model, sel["mig-devices"]), sel
    return text


def test_demo_mig_node_packs_four_pods_onto_one_gpu(shared_runs):
    res = shared_runs.run("mig_sizing")
    text = _check_plan(res, "A100-40GB", used=1, whole=4)
    sels = yaml.safe_load(text)["mig-configs"]["gpuops-plan-1"]
    assert sels == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "1g.5gb": 2}},
        {"devices": [1, 2, 3], "mig-enabled": False},
    ]
    titles = [f.title for f in res.findings]
    assert not any("pre-allocated" in t for t in titles)  # dev-bob-0 is idle, not a pool
    assert "notebooks/dev-bob-0: fits MIG 1g.5gb on A100-40GB" in titles
    assert "4 GPU pod(s) still running on a100-40-mig-0" in titles  # pre-check from live pods
    sop = next(f for f in res.findings if f.title.startswith("Guided MIG change on a100-40-mig-0"))
    assert "kubectl label node a100-40-mig-0 nvidia.com/mig.config=gpuops-plan-1 --overwrite" in sop.commands
    html = res.html.read_text()
    assert "Current layout on a100-40-mig-0" in html and "Proposed layout on A100-40GB: 1 GPU(s)" in html
    assert "PLAN (no cluster; nothing sent): cordon a100-40-mig-0" in html  # dry-run remediation, nothing applied


@pytest.mark.prometheus
def test_live_source_gives_the_same_plan(live_env, tmp_path, kept_execute):
    # RBAC forbids reading the MIG Manager ConfigMap: the run records the 403 with its RBAC hint, says it fell
    # back to mig-parted's default set, and that set lacks the node's a100-40gb-mixed-3-2-1-1: it refuses
    cm = "/api/v1/namespaces/gpu-operator/configmaps/default-mig-parted-config"
    live_env.fail(
        cm,
        403,
        message='configmaps "default-mig-parted-config" is forbidden: User "oncall" cannot get '
        'resource "configmaps" in API group "" in the namespace "gpu-operator"',
    )
    refused = _run(kept_execute, tmp_path / "forbidden", {"source": "live"})
    assert any(
        e.startswith("MIG Manager configs in use: forbidden")
        and "configmaps in the operator namespace gpu-operator" in e
        for e in refused.errors
    ), refused.errors
    assert any("refusing to emit" in e and "a100-40gb-mixed-3-2-1-1" in e for e in refused.errors), refused.errors
    assert any(f.title.startswith("mig-parted config built on mig-parted's default set") for f in refused.findings)
    assert (
        "check it against the cluster&#x27;s ConfigMap" in refused.html.read_text()
        or "check it against the cluster's ConfigMap" in refused.html.read_text()
    )
    assert live_env.requests_to("PATCH", "/api/v1/nodes/a100-40-mig-0") == []  # refused: nothing labelled
    assert live_env.token not in refused.html.read_text() and live_env.token not in json.dumps(refused.errors)
    # readable: the ConfigMap the ClusterPolicy names is the base, and the plan goes through as on the demo
    live_env.clear_failures()
    res = _run(kept_execute, tmp_path / "readable", {"source": "live"})
    _check_plan(res, "A100-40GB", used=1, whole=4)
    html = res.html.read_text()
    assert (
        "Base config: the GPU Operator&#x27;s default MIG Manager ConfigMap gpu-operator/default-mig-parted-config"
        in html
        or "Base config: the GPU Operator's default MIG Manager ConfigMap gpu-operator/default-mig-parted-config"
        in html
    )
    assert not any("default set" in f.title for f in res.findings)
    assert "DRY RUN (server-side, nothing changed)" in html
    patches = live_env.requests_to("PATCH", "/api/v1/nodes/a100-40-mig-0")
    assert len(patches) == 2 and all(r.param("dryRun") == "All" for r in patches)  # cordon + label, both dry runs
    node = live_env.node("a100-40-mig-0")
    assert (
        not node["spec"].get("unschedulable") and node["metadata"]["labels"]["nvidia.com/mig.config"] != "gpuops-plan-1"
    )


def test_models_sized_with_vllm_memory_model(tmp_path, monkeypatch, demo_end, kept_execute):
    # Qwen2.5-7B: 7.62e9 x 2 B = 14.2 GiB weights + 8 x 4096 tokens x 56 KiB KV (1.75 GiB) + runtime ~ 17 GiB;
    # Llama-3.1-8B ~ 20 GiB. x 1.2 headroom > 19.5 GiB (2g.20gb) -> 3g.40gb each; two 3g.40gb share one A100-80GB.
    res = _run(
        kept_execute, tmp_path, {"node": "a100-80-0", "models": "Qwen2.5-7B,Llama-3.1-8B"}, monkeypatch, demo_end
    )
    text = _check_plan(res, "A100-80GB", used=1, whole=2)
    assert yaml.safe_load(text)["mig-configs"]["gpuops-plan-1"][0]["mig-devices"] == {"3g.40gb": 2}


def test_bad_gpu_model_renders_error_and_records_it(tmp_path, monkeypatch, demo_end, kept_execute):
    res = _run(kept_execute, tmp_path, {"gpu_model": "Z100-999GB"}, monkeypatch, demo_end)
    assert res.failed is None, res.failed  # the notebook still completes
    assert any("Z100-999GB" in e and "Current layout" in e for e in res.errors), res.errors
    doc = json.loads((res.out_dir / "findings.json").read_text())
    assert doc["errors"] and doc["findings"][0]["title"].startswith("Runbook incomplete")
    html = res.html.read_text()
    assert "could not run" in html and "What to check" in html
