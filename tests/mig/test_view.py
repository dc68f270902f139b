"""mig_view frames and figures, and the planner/SOP glue the MIG sizing runbook needs (mig_plan, mig).

Expected values are worked out by hand from NVIDIA's A100/H100 MIG tables
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html: A100-40GB 1g.5gb = 4.75 GiB
on 1 of 8 memory slots, 1g.10gb = 9.62 GiB on 2, 2g.10gb = 9.75 GiB on 2, 3g.20gb = 19.62 GiB on 4; 7g.40gb = 39.5 GiB,
as tests/fixtures/mig/a100_40gb_lgip.txt prints them)
and from gpulib/data/cost/gpu_prices.csv (A100-40GB on-demand 21.957642 USD/h per p4d.24xlarge / 8 = 2.7447
USD/GPU-hour) and cost_policy.csv (730 h/month).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gpulib.mig as mig
import gpulib.mig.inventory as inventory
import gpulib.mig.plan as mp
import gpulib.mig.plan_cost as plan_cost
import gpulib.mig.sizing as sz
import gpulib.mig.view as mv
import gpulib.vllm as vllm
from gpulib.core.errors import InvalidParameter, UnknownNode
from gpulib.core.findings import Severity


def _node(name, product, count, mig_capacity=None):
    return {
        "node": name,
        "gpu_product": product,
        "gpu_count": count,
        "gpu_memory_mib": 40960,
        "mig_capacity": mig_capacity or {},
        "mig_strategy": "mixed" if mig_capacity else "",
        "mig_config": "",
        "mig_config_state": "",
        "labels": {},
    }


def _fb(rows):
    cols = [
        "node",
        "gpu",
        "uuid",
        "model",
        "pod",
        "namespace",
        "container",
        "gpu_i_profile",
        "gpu_i_id",
        "stat",
        "value",
    ]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows], columns=cols)


NODES = pd.DataFrame(
    [
        _node("mig-a", "NVIDIA-A100-SXM4-40GB", 1),
        _node("plain", "NVIDIA-A100-SXM4-40GB", 1),
        _node("labels-only", "NVIDIA-A100-SXM4-40GB", 2, {"nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-1g.5gb": 4}),
        _node("l4", "NVIDIA-L4", 1),
    ]
)
FB = _fb(
    [
        ("mig-a", "0", "u", "NVIDIA A100-SXM4-40GB", "svc-1", "prod", "c", "3g.20gb", "1", "max", 8192.0),
        ("mig-a", "0", "u", "NVIDIA A100-SXM4-40GB", "", "", "", "2g.10gb", "2", "max", 4.0),
        ("mig-a", "0", "u", "NVIDIA A100-SXM4-40GB", "svc-2", "prod", "c", "1g.5gb", "3", "max", 2048.0),
        ("mig-a", "0", "u", "NVIDIA A100-SXM4-40GB", "", "", "", "1g.5gb", "4", "max", 3000.0),
        ("plain", "0", "v", "NVIDIA A100-SXM4-40GB", "train", "ml", "c", "", "", "max", 30000.0),
    ]
)


# ---------------------------------------------------------------------------------------- current layout
def test_current_layout_from_dcgm_instances_and_whole_gpus():
    cur = inventory.current_layout(NODES[NODES["node"].isin(["mig-a", "plain"])], FB)
    a = cur[cur["node"] == "mig-a"]
    assert sorted(a["profile"]) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert mig.is_valid_layout("A100-40GB", list(a["profile"]))
    occupied = sorted(s for r in a.itertuples() for s in range(r.start, r.start + r.size))
    assert occupied == list(range(8))  # 4 + 2 + 1 + 1 slots, no overlap
    assert a.set_index("profile").loc["3g.20gb", "workload"] == "prod/svc-1"
    assert set(a.loc[a["profile"] == "1g.5gb", "workload"]) == {"prod/svc-2", ""}
    whole = cur[cur["node"] == "plain"].iloc[0]
    assert (whole["profile"], whole["start"], whole["size"], whole["workload"]) == ("whole GPU", 0, 8, "ml/train")
    assert whole["used_gib"] == pytest.approx(30000 / 1024)


def test_current_layout_falls_back_to_node_mig_resources():
    cur = inventory.current_layout(NODES[NODES["node"] == "labels-only"], None)
    # capacity 2 x 3g.20gb + 4 x 1g.5gb over 2 GPUs -> per GPU 3g.20gb + 2 x 1g.5gb
    assert len(cur) == 6 and set(cur["gpu"]) == {"0", "1"}
    assert sorted(cur[cur["gpu"] == "0"]["profile"]) == ["1g.5gb", "1g.5gb", "3g.20gb"]
    assert set(cur["where"]) == {"node nvidia.com/mig-* resources"}


def test_select_nodes_and_target_model_errors():
    assert list(inventory.select_nodes(NODES, "")["node"]) == ["mig-a", "plain", "labels-only"]  # L4 has no MIG
    with pytest.raises(UnknownNode, match="nope"):
        inventory.select_nodes(NODES, "nope")
    with pytest.raises(mig.UnknownGPUModel, match="Z100"):
        inventory.target_model("Z100-999GB", NODES)
    with pytest.raises(mig.UnknownGPUModel, match="does not support MIG"):
        inventory.target_model("", NODES[NODES["node"] == "l4"])
    assert inventory.target_model("", NODES[NODES["node"] == "mig-a"]) == "A100-40GB"
    mixed = pd.DataFrame([_node("x", "NVIDIA-A100-SXM4-40GB", 1), _node("y", "NVIDIA-H100-80GB-HBM3", 8)])
    with pytest.raises(InvalidParameter, match="2 GPU models"):
        inventory.target_model("", mixed)


# ---------------------------------------------------------------------------------------- proposed layout
def _small_plan():
    ws = [mp.Workload("a", 8.0), mp.Workload("b", 8.0), mp.Workload("c", 4.0), mp.Workload("d", 4.0)]
    return ws, mp.plan_layout(ws, {"A100-40GB": 4}, nodes={"A100-40GB": ["gpu-node"]}, gpus_per_node=4)


def test_proposed_layout_headroom_and_savings():
    ws, p = _small_plan()
    # 8 GiB -> 1g.10gb (9.62), 4 GiB -> 1g.5gb (4.75): 2+2+1+1 = 6 slots -> 1 GPU instead of 4
    assert p.gpus_used == 1 and p.baseline_gpus == 4
    lay = mv.proposed_layout(p, {w.name: w.memory_gib for w in ws})
    head = mv.headroom_table(lay).set_index("workload")
    assert head.loc["a", "profile"] == "1g.10gb" and head.loc["a", "headroom_gib"] == pytest.approx(1.62)
    assert head.loc["c", "headroom_gib"] == pytest.approx(0.75)
    assert head.loc["c", "headroom_pct"] == pytest.approx(round(0.75 / 4.75 * 100, 1))
    sv = plan_cost.savings(p, "A100-40GB", current_gpus=3).set_index("placement")
    assert sv.loc["whole GPU per replica", "usd_per_hour"] == pytest.approx(4 * 2.7447)
    assert sv.loc["proposed MIG plan", "usd_per_month"] == pytest.approx(2.7447 * 730)
    assert sv.loc["proposed MIG plan", "usd_saved_per_month_vs_whole"] == pytest.approx(3 * 2.7447 * 730)
    assert sv.loc["current", "gpus"] == 3
    req = mv.pod_requests_table(p).set_index("workload")
    assert req.loc["a", "mixed"] == "nvidia.com/mig-1g.10gb: 1"
    assert "mixed strategy" in req.loc["a", "single"]  # node mixes 1g.10gb and 1g.5gb


def test_savings_without_a_price_is_nan_not_zero():
    p = mp.plan_layout([mp.Workload("a", 5.0)], {"A30-24GB": 1})
    sv = plan_cost.savings(p, "A30-24GB")
    assert math.isnan(sv.attrs["price_per_gpu_hour"]) and sv["usd_per_hour"].isna().all()


def test_slot_diagram_draws_one_box_per_instance():
    ws, p = _small_plan()
    lay = mv.proposed_layout(p, {w.name: w.memory_gib for w in ws})
    fig = mv.slot_diagram(lay, "Proposed")
    assert len(fig.layout.shapes) == 4
    assert sorted(round(s.x0 - 0.04, 6) for s in fig.layout.shapes) == [0, 2, 4, 5]  # starts of 1g.10gb x2, 1g.5gb x2
    texts = [a.text for a in fig.layout.annotations]
    assert "<b>1g.10gb</b><br>a" in texts and "<b>1g.5gb</b><br>d" in texts
    assert fig.layout.xaxis.title.text.startswith("memory slot") and fig.layout.yaxis.title.text.startswith("GPU")
    assert fig.layout.xaxis.range == (0, 8)
    chart = mv.savings_chart(plan_cost.savings(p, "A100-40GB"))
    assert chart.layout.yaxis.title.text == "GPUs (count)"


# ---------------------------------------------------------------------------------------- planner glue
def test_ffd_falls_back_to_the_next_gpu_model_when_the_first_is_full():
    ws = [mp.Workload("x", 35.0), mp.Workload("y", 35.0)]
    # A100-40GB: 7g.40gb (39.5 GiB), only one GPU; the second goes to the H100 (3g.40gb, 39.5 GiB)
    f = mp.plan_ffd(ws, {"A100-40GB": 1, "H100-80GB": 1})
    assert not f.unplaced and sorted(g.model for g in f.gpus) == ["A100-40GB", "H100-80GB"]


def test_ffd_first_fit_decreasing_by_hand():
    # profiles on A100-40GB: 3g.20gb x2 (4 slots each), 2g.10gb x1, 1g.5gb x3.
    # Decreasing: 3g, 3g -> GPU0 full; 2g -> GPU1; 1g x3 -> GPU1 (2 + 3 = 5 slots).
    ws = [
        mp.Workload("big", 18, compute_slices=3, replicas=2),
        mp.Workload("mid", 9, compute_slices=2),
        mp.Workload("small", 4, replicas=3),
    ]
    f = mp.plan_ffd(ws, {"A100-40GB": 5})
    assert [g.layout for g in f.gpus] == [{"3g.20gb": 2}, {"2g.10gb": 1, "1g.5gb": 3}]
    assert all(mig.is_valid_layout("A100-40GB", g.layout) for g in f.gpus)


def test_workloads_from_sizing_keep_skip_and_multi_gpu():
    sizing = pd.DataFrame(
        [
            {
                "namespace": "a",
                "pod": "small",
                "need_gib": 3.0,
                "compute_slices": 1,
                "profile": "1g.5gb",
                "preallocated": False,
                "current_profile": "3g.20gb",
                "device_gib": 19.5,
                "gpus": 1,
                "fb_max_gib": 2.5,
            },
            {
                "namespace": "a",
                "pod": "vllm",
                "need_gib": 18.0,
                "compute_slices": 1,
                "profile": "3g.20gb",
                "preallocated": True,
                "current_profile": "3g.20gb",
                "device_gib": 19.5,
                "gpus": 1,
                "fb_max_gib": 18.0,
            },
            {
                "namespace": "a",
                "pod": "train",
                "need_gib": 70.0,
                "compute_slices": 7,
                "profile": None,
                "preallocated": False,
                "current_profile": "",
                "device_gib": 40.0,
                "gpus": 2,
                "fb_max_gib": 38.0,
            },
        ]
    )
    skip = {w.name: w for w in sz.workloads_from_sizing(sizing)}
    assert set(skip) == {"a/small", "a/train"}
    keep = {w.name: w for w in sz.workloads_from_sizing(sizing, preallocated="keep")}
    assert keep["a/vllm"].profile == "3g.20gb"
    assert keep["a/train"].isolation == "whole" and keep["a/train"].memory_gib == 80.0
    p = mp.plan_layout(list(keep.values()), {"A100-40GB": 4})
    assert p.baseline_gpus == 4 and p.gpus_used == 3  # 1g.5gb + 3g.20gb share a GPU; train keeps 2
    with pytest.raises(InvalidParameter, match="preallocated"):
        sz.workloads_from_sizing(sizing, preallocated="maybe")


def test_workloads_from_models_vllm_need():
    ws, table = vllm.workloads_from_models("Qwen2.5-7B", max_model_len=4096, concurrency=8, replicas=2)
    # weights 7.62e9 x 2 B = 14.19 GiB; KV 2 x 28 layers x 4 kv heads x 128 x 2 B = 56 KiB/token x 32768 = 1.75 GiB
    assert 14.19 + 1.75 < ws[0].memory_gib < 14.19 + 1.75 + 3.0
    assert ws[0].replicas == 2 and table.loc[0, "model"] == "Qwen2.5-7B"
    with pytest.raises(InvalidParameter, match="empty"):
        vllm.workloads_from_models(" , ", max_model_len=4096, concurrency=8)


def test_sizing_on_demo_a100_80_node(demo_pinned):
    """a100-80-0: ab-test-scorer x2 (idle: a ~0.5 GiB CUDA context) -> 1g.10gb on one GPU; forecast and recsys keep 2
    GPUs each;
    jupyter-alice (pre-allocated, 59 GiB flat) keeps its GPU -> 6 GPUs against 7 whole."""
    fb = pd.concat([demo_pinned.summary("DCGM_FI_DEV_FB_USED", "6h", st, node="a100-80-0") for st in ("p95", "max")])
    act = demo_pinned.summary("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "6h", "p95", node="a100-80-0")
    sizing = sz.size_from_usage(fb, act, gpu_model="A100-80GB", headroom=0.2)
    assert dict(zip(sizing["pod"], sizing["gpus"]))["recsys-train-0"] == 2
    ws = sz.workloads_from_sizing(sizing, preallocated="keep")
    p = mp.plan_layout(ws, {"A100-80GB": 8})
    assert (p.gpus_used, p.baseline_gpus) == (6, 7)
    assert [g.layout for g in p.gpus] == [{"1g.10gb": 2}]


# ---------------------------------------------------------------------------------------- SOP pre-check
def test_outside_kubernetes_clients_and_sop_precheck():
    fb = _fb(
        [
            ("n1", "0", "u", "m", "", "", "", "", "", "max", 5000.0),  # held, no pod -> flagged
            ("n1", "1", "u", "m", "", "", "", "1g.5gb", "3", "max", 4.0),  # empty instance -> not
            ("n1", "2", "u", "m", "p", "ns", "c", "", "", "max", 9000.0),  # a pod -> not
            ("n2", "0", "u", "m", "", "", "", "", "", "max", 9000.0),
        ]
    )  # another node -> not
    assert mig.outside_kubernetes_clients(fb, "n1") == ["GPU 0: 5000 MiB used, no pod"]
    fs = mig.mig_change_sop("n1", "cfg", fb_used=fb)
    warn = [f for f in fs if f.severity is Severity.WARNING]
    assert warn and warn[0].title == "GPU memory held outside Kubernetes on n1"
    assert mig.outside_kubernetes_clients(None, "n1") == []


def test_merged_classes_still_place_every_named_replica():
    ws = [mp.Workload(f"w{i}", [3.0, 4.5, 8.0, 18.0][i % 4], replicas=1 + i % 2) for i in range(24)]
    p = mp.plan_layout(ws, {"A100-40GB": 40})
    placed = sorted(x for x in p.layouts()["workload"] if x)
    assert placed == sorted(w.name for w in ws for _ in range(w.replicas)) and not p.unplaced
    # by hand: 3.0/4.5 GiB -> 1g.5gb (1 slot), 6 + 12 = 18 replicas; 8.0 -> 1g.10gb (2 slots), 6; 18.0 -> 3g.20gb
    # (4 slots, at most 2 per GPU), 12 -> 6 full GPUs. Left: 18 + 12 = 30 slots -> >= 4 GPUs, and 4 suffice
    # (3 x [1g.10gb@0, 1g.5gb@2..5, 1g.10gb@6] + 1 x 6 x 1g.5gb). Optimum 10.
    assert p.gpus_used == 10 and all(mig.is_valid_layout("A100-40GB", g.layout) for g in p.gpus)
