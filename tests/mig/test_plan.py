"""Planner: exact packing vs brute force, outputs (mig-parted YAML, labels, pod requests), sizing from usage."""

from __future__ import annotations

import itertools
import random

import pandas as pd
import pytest
import yaml

import gpulib.mig as mig
import gpulib.mig.plan as mp
import gpulib.mig.sizing as sz
from gpulib.core.findings import Severity


def brute_force_min_gpus(model, instances, max_gpus):
    """Smallest k such that the instances split into k groups that are each a valid layout (exhaustive)."""
    n = len(instances)
    for k in range(1, max_gpus + 1):
        for assign in itertools.product(range(k), repeat=n):
            if assign and assign[0] != 0:
                continue  # symmetry: first instance on GPU 0
            groups = [[instances[i] for i in range(n) if assign[i] == g] for g in range(k)]
            if all(g and mig.is_valid_layout(model, g) for g in groups):
                return k
    return None


def test_choose_profile_smallest_with_headroom():
    assert mp.choose_profile("A100-40GB", 4.0).name == "1g.5gb"  # 4.75 GiB
    assert mp.choose_profile("A100-40GB", 4.0, headroom=0.2).name == "1g.10gb"  # 4.8 > 4.75
    assert mp.choose_profile("A100-40GB", 9.0, compute_slices=2).name == "2g.10gb"
    assert mp.choose_profile("A100-40GB", 18.0, compute_slices=3).name == "3g.20gb"
    assert mp.choose_profile("A100-40GB", 45.0) is None


def test_plan_small_instance_hand_checked():
    ws = [
        mp.Workload("a", 4),
        mp.Workload("b", 9, replicas=3),
        mp.Workload("c", 18, compute_slices=3, replicas=2),
        mp.Workload("d", 35),
    ]
    p = mp.plan_layout(ws, {"A100-40GB": 10})
    # slots: 1g.5gb 1 + 3 x 1g.10gb 2 + 2 x 3g.20gb 4 + 7g.40gb 8 = 23 > 16 -> at least 3 GPUs; 3 suffice
    assert p.gpus_used == 3 and p.optimal and p.baseline_gpus == 7 and p.gpus_saved == 4
    for g in p.gpus:
        assert mig.is_valid_layout("A100-40GB", g.layout)
    lay = p.layouts()
    assert sorted(lay["workload"]) == sorted(["a", "b", "b", "b", "c", "c", "d"])
    assert mig.plan_findings(p)[0].severity is Severity.OK


@pytest.mark.parametrize("seed", range(6))
def test_planner_equals_brute_force_optimum(seed):
    rng = random.Random(seed)
    model = rng.choice(["A100-40GB", "A30-24GB"])
    profs = [p.name for p in mig.profile_objects(model) if not p.media_ext]
    instances = [rng.choice(profs) for _ in range(rng.randint(3, 7))]
    ws = [mp.Workload(f"w{i}", 1.0, profile=pn) for i, pn in enumerate(instances)]
    p = mp.plan_layout(ws, {model: 8})
    assert p.gpus_used == brute_force_min_gpus(model, instances, 8), instances
    assert not p.unplaced


def test_planner_never_worse_than_ffd_and_reports_unplaced():
    rng = random.Random(7)
    ws = [mp.Workload(f"w{i}", rng.choice([3, 8, 15, 30]), replicas=rng.randint(1, 3)) for i in range(12)]
    p, f = mp.plan_layout(ws, {"H100-80GB": 40}), mp.plan_ffd(ws, {"H100-80GB": 40})
    assert p.gpus_used <= f.gpus_used
    short = mp.plan_layout([mp.Workload("big", 30, replicas=5)], {"H100-80GB": 2})  # 3g.40gb: 2 per GPU -> 4 fit
    assert len(short.unplaced) == 1 and mig.plan_findings(short)[1].severity is Severity.WARNING


def test_outputs_validate():
    p = mp.plan_layout([mp.Workload("svc", 9, replicas=7)], {"H100-80GB": 2}, nodes={"H100-80GB": ["gpu-node-a"]})
    assert p.gpus_used == 1  # 7 x 1g.10gb (9.75 GiB) on one GPU
    text = p.mig_parted_config()
    assert mig.validate_mig_parted_config(text, "H100-80GB") == []
    cfg = yaml.safe_load(text)["mig-configs"]
    assert list(cfg.values())[0][0]["mig-devices"] == {"1g.10gb": 7}
    assert p.label_commands() == ["kubectl label node gpu-node-a nvidia.com/mig.config=gpuops-plan-1 --overwrite"]
    assert p.pod_requests("single")["svc"]["limits"] == {"nvidia.com/gpu": 1}
    assert p.pod_requests("mixed")["svc"]["limits"] == {"nvidia.com/mig-1g.10gb": 1}


def test_partly_mig_node_lists_its_whole_gpus_with_mig_disabled():
    # 7 x 9 GiB -> 7 x 1g.10gb fill ONE H100; the node has 4 GPUs (gpus_per_node=4), so GPUs 1-3 stay whole
    # and the config must say so (NVIDIA/mig-parted: deployments/systemd/config-default.yaml @ bd7160f4: a selector with
    # `mig-enabled: false`), or MIG Manager would
    # leave them in whatever mode they were in.
    p = mp.plan_layout(
        [mp.Workload("svc", 9, replicas=7)], {"H100-80GB": 4}, nodes={"H100-80GB": ["gpu-node-a"]}, gpus_per_node=4
    )
    text = p.mig_parted_config()
    assert mig.validate_mig_parted_config(text, "H100-80GB") == []
    assert yaml.safe_load(text)["mig-configs"] == {
        "gpuops-plan-1": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": [1, 2, 3], "mig-enabled": False},
        ]
    }
    # first-fit-decreasing knows the node's GPUs too
    f = mp.plan_ffd(
        [mp.Workload("svc", 9, replicas=7)], {"H100-80GB": 4}, nodes={"H100-80GB": ["gpu-node-a"]}, gpus_per_node=4
    )
    assert f.node_configs()["gpu-node-a"][1][-1] == {"devices": [1, 2, 3], "mig-enabled": False}


def test_fully_mig_node_has_no_disabled_selector():
    # 4 x 30 GiB -> 3g.40gb (39.5 GiB), two per H100: both GPUs of the 2-GPU node are MIG
    p = mp.plan_layout(
        [mp.Workload("big", 30, replicas=4)], {"H100-80GB": 2}, nodes={"H100-80GB": ["n"]}, gpus_per_node=2
    )
    sels = yaml.safe_load(p.mig_parted_config())["mig-configs"]["gpuops-plan-1"]
    assert sels == [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def test_whole_gpu_workloads_and_prices():
    p = mp.plan_layout(
        [mp.Workload("train", 70, isolation="whole", replicas=2), mp.Workload("s", 9)],
        {"H100-80GB": 4},
        prices={"H100-80GB": 3.0},
    )
    assert p.whole_gpus[0]["gpus"] == 2 and p.gpus_used == 3
    assert p.pod_requests()["train"]["limits"] == {"nvidia.com/gpu": 1}
    # money is written by gpulib.core.money (currency code, no "$" that Markdown reads as math)
    assert any(" USD" in e for e in mig.plan_findings(p)[0].evidence)


def _summary(rows):
    base = {"node": "n1", "gpu": "0", "uuid": "GPU-1", "container": "c", "gpu_i_id": ""}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_size_from_usage_picks_profile_and_flags_preallocation():
    fb = _summary(
        [
            {
                "model": "NVIDIA A100-SXM4-40GB",
                "pod": "small",
                "namespace": "ml",
                "gpu_i_profile": "",
                "stat": "p95",
                "value": 3000,
            },
            {
                "model": "NVIDIA A100-SXM4-40GB",
                "pod": "small",
                "namespace": "ml",
                "gpu_i_profile": "",
                "stat": "max",
                "value": 3500,
            },
            {
                "model": "NVIDIA A100-SXM4-40GB",
                "pod": "vllm",
                "namespace": "ml",
                "gpu_i_profile": "",
                "stat": "p95",
                "value": 36800,
            },
            {
                "model": "NVIDIA A100-SXM4-40GB",
                "pod": "vllm",
                "namespace": "ml",
                "gpu_i_profile": "",
                "stat": "max",
                "value": 36864,
            },
        ]
    )
    act = _summary(
        [
            {
                "model": "NVIDIA A100-SXM4-40GB",
                "pod": "small",
                "namespace": "ml",
                "gpu_i_profile": "",
                "stat": "p95",
                "value": 0.25,
            }
        ]
    )
    df = sz.size_from_usage(fb, act, headroom=0.2)
    fs = mig.sizing_findings(fb, df, headroom=0.2)
    small = df.set_index("pod").loc["small"]
    # 3500 MiB = 3.42 GiB x 1.2 = 4.10 GiB <= 4.75 -> 1g.5gb; activity 25 % of 7 slices = 1.75 -> 2 slices -> 2g.10gb
    assert small["need_gib"] == pytest.approx(3500 / 1024 * 1.2)
    assert small["compute_slices"] == 2 and small["profile"] == "2g.10gb"
    vl = df.set_index("pod").loc["vllm"]
    assert bool(vl["preallocated"])  # 36 GiB of 40 GiB = 90 % >= 85 %
    assert any("pre-allocated" in f.title and f.severity is Severity.WARNING for f in fs)
    ws = sz.workloads_from_sizing(df)
    assert [w.name for w in ws] == ["ml/small"]


def _fb(pod, profile, p95_mib, max_mib, model="NVIDIA A100-SXM4-40GB"):
    return [
        {"model": model, "pod": pod, "namespace": "ml", "gpu_i_profile": profile, "stat": "p95", "value": p95_mib},
        {"model": model, "pod": pod, "namespace": "ml", "gpu_i_profile": profile, "stat": "max", "value": max_mib},
    ]


def test_idle_dev_pod_flat_at_half_an_instance_is_not_preallocated():
    # an idle dev pod: 2.6 GiB (2662 MiB), flat, on a 1g.5gb (4.75 GiB) = 55 % of the instance. Flat but
    # below the 70 % pre-allocation share (JAX pools 75 %, vLLM 90 %): size it from usage (2.6 x 1.2 = 3.12 GiB ->
    # 1g.5gb).
    fb = _summary(_fb("dev-bob-0", "1g.5gb", 2662, 2662))
    df = sz.size_from_usage(fb, headroom=0.2)
    fs = mig.sizing_findings(fb, df, headroom=0.2)
    row = df.set_index("pod").loc["dev-bob-0"]
    assert not bool(row["preallocated"]) and row["profile"] == "1g.5gb"
    assert not any("pre-allocated" in f.title for f in fs)
    assert [w.name for w in sz.workloads_from_sizing(df)] == ["ml/dev-bob-0"]


def test_preallocation_needs_flat_memory_at_a_high_share():
    fb = _summary(
        _fb("vllm-flat", "3g.20gb", 18000, 18010)  # 17.6 GiB of 19.62 GiB = 90 %, flat: vLLM-style
        + _fb("train-peaky", "", 20480, 36864)  # peaks at 36 GiB of 40 GiB but p95 is 20 GiB: a real need
        + _fb("flat-low", "", 16384, 16384)
    )  # flat at 16 GiB of 40 GiB: a real, steady need
    df = sz.size_from_usage(fb, headroom=0.2)
    fs = mig.sizing_findings(fb, df, headroom=0.2)
    pre = df.set_index("pod")["preallocated"].astype(bool).to_dict()
    assert pre == {"vllm-flat": True, "train-peaky": False, "flat-low": False}
    assert [f.title for f in fs if "pre-allocated" in f.title] == [
        "ml/vllm-flat: memory looks pre-allocated; size from the model, not FB_USED"
    ]


def test_size_from_usage_empty_frame():
    df = sz.size_from_usage(pd.DataFrame())
    fs = mig.sizing_findings(pd.DataFrame(), df)
    assert df.empty and fs[0].severity is Severity.INFO and fs[0].title == "No FB_USED data to size from"


def test_pod_on_a_gpu_without_mig_keeps_a_whole_gpu_next_to_one_that_fits():
    """A frame holds the missing profile of the L4 pod as NaN once another row has one: still 'keep a whole GPU'."""
    fb = _summary(_fb("small", "", 3000, 3500) + _fb("l4-pod", "", 20000, 22000, model="NVIDIA L4"))
    df = sz.size_from_usage(fb, headroom=0.2)
    titles = {f.title for f in mig.sizing_findings(fb, df, headroom=0.2)}
    assert titles == {"ml/small: fits MIG 1g.5gb on A100-40GB", "ml/l4-pod: keep a whole GPU"}
