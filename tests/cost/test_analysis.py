"""Cost/utilisation analytics on small hand-built frames; every expected number is worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gpulib.cost as cost
from gpulib.core.errors import InvalidParameter, InvalidWindow
from gpulib.core.findings import Finding, Severity
from gpulib.cost.usage import GPU_UTIL, GR_ENGINE_ACTIVE, mig_share
from tests.helpers.cost_frames import T0, frames, node, pod, series

HPM = 730.0  # cost_policy.csv hours_per_month


def run(act, fb, nodes, pods, **kw):
    kw.setdefault("window", f"{int(act['timestamp'].nunique())}h")
    return cost.analyze_cost(nodes, pods, act, fb, **kw)


# ---------------------------------------------------------------------------------------------
# idle hours and money
# ---------------------------------------------------------------------------------------------
def test_gpu_idle_3_of_6_hours_at_2_dollars_is_6_dollars():
    act = series("n1", "0", [0.9, 0.9, 0.9, 0.02, 0.02, 0.02], pod="train-0", ns="ml")
    fb = act.assign(value=500.0)  # below the zombie memory threshold (1024 MiB): idle, not zombie
    nodes, pods = frames([node("n1")], [pod("ml", "train-0", "n1", kind="Job", workload="train")])
    rep = run(act, fb, nodes, pods, price_overrides={"H100-80GB": 2.0})
    s = cost.executive_summary(rep)
    assert s["idle_gpu_hours"] == pytest.approx(3.0)
    assert s["idle_cost"] == pytest.approx(6.0)
    assert s["window_cost"] == pytest.approx(12.0)  # 6 h x $2
    # active = allocated time at or above the idle threshold (active + idle = allocated); busy = mean activity
    assert s["active_pct"] == pytest.approx(50.0)
    assert s["busy_pct"] == pytest.approx(100 * (3 * 0.9 + 3 * 0.02) / 6)
    assert s["allocated_pct"] == pytest.approx(100.0)
    assert s["activity_metric"] == GR_ENGINE_ACTIVE
    assert s["zombie_pods"] == 0
    assert s["monthly_cost"] == pytest.approx(12.0 * HPM / 6)


def test_unallocated_gpu_is_costed_and_summary_percentages():
    act = pd.concat([series("n1", "0", [0.9] * 6, pod="a", ns="ml"), series("n1", "1", [0.0] * 6)])
    nodes, pods = frames([node("n1", gpus=2)], [pod("ml", "a", "n1")])
    rep = run(act, None, nodes, pods, price_overrides={"H100-80GB": 2.0})
    s = cost.executive_summary(rep)
    assert s["allocated_pct"] == pytest.approx(50.0)
    assert s["allocated_pct_now"] == pytest.approx(50.0)  # 1 of 2 allocatable GPUs requested
    assert s["active_pct"] == pytest.approx(100.0)
    assert s["busy_pct"] == pytest.approx(90.0)
    assert s["unallocated_gpu_hours"] == pytest.approx(6.0)
    assert s["unallocated_cost"] == pytest.approx(12.0)
    titles = [f.title for f in rep.findings]
    assert any(t.startswith("Unallocated GPUs on 1 partly used node") for t in titles)


def test_gpu_util_fallback_is_percent_and_is_named():
    util = series("n1", "0", [50.0] * 4, pod="a", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "a", "n1")])
    rep = cost.analyze_cost(nodes, pods, None, None, gpu_util=util, window="4h", price_overrides={"H100-80GB": 1.0})
    s = cost.executive_summary(rep)
    assert s["activity_metric"] == GPU_UTIL
    assert s["busy_pct"] == pytest.approx(50.0)


def test_gr_engine_active_preferred_over_gpu_util():
    gr = series("n1", "0", [0.2] * 4, pod="a", ns="ml")
    util = series("n1", "0", [100.0] * 4, pod="a", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "a", "n1")])
    rep = cost.analyze_cost(nodes, pods, gr, None, gpu_util=util, window="4h")
    assert rep.activity_field == GR_ENGINE_ACTIVE
    assert cost.executive_summary(rep)["busy_pct"] == pytest.approx(20.0)


def test_no_activity_data_raises_with_both_field_names():
    nodes, pods = frames([node("n1")], [])
    empty = series("n1", "0", [])
    with pytest.raises(InvalidParameter, match="GR_ENGINE_ACTIVE.*GPU_UTIL"):
        cost.analyze_cost(nodes, pods, empty, None, gpu_util=None, window="1h")


def test_bad_window_and_missing_column_are_named():
    act = series("n1", "0", [0.5] * 2, pod="a", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "a", "n1")])
    with pytest.raises(InvalidWindow, match="6hours"):
        cost.analyze_cost(nodes, pods, act, None, window="6hours")
    with pytest.raises(InvalidParameter, match="gpu_i_id"):
        cost.analyze_cost(nodes, pods, act.drop(columns=["gpu_i_id"]), None, window="2h")


# ---------------------------------------------------------------------------------------------
# zombies on the time series
# ---------------------------------------------------------------------------------------------
def _zombie_case(acts, fbs, step="10min", kind="Deployment"):
    act = series("n1", "0", acts, pod="stuck", ns="ml", step=step)
    fb = series("n1", "0", fbs, pod="stuck", ns="ml", step=step)
    nodes, pods = frames([node("n1")], [pod("ml", "stuck", "n1", kind=kind)])
    return cost.analyze_cost(nodes, pods, act, fb, window="2h", price_overrides={"H100-80GB": 6.0})


def test_bare_zombie_pod_is_deleted():
    rep = _zombie_case([0.8] * 9 + [0.0] * 3, [4096.0] * 12, kind="")
    [zf] = [f for f in rep.findings if f.title.startswith("Zombie pod ml/stuck")]
    assert "kubectl -n ml delete pod stuck" in zf.commands


def test_zombie_exactly_at_30_minutes_is_detected():
    # 10-minute samples; the last 3 (30 min = threshold) hold 4 GiB at 0 % activity
    rep = _zombie_case([0.8] * 9 + [0.0] * 3, [4096.0] * 12)
    z = rep.zombies
    assert len(z) == 1
    assert z.loc[0, "duration_s"] == pytest.approx(1800.0)
    assert z.loc[0, "gpu_hours"] == pytest.approx(0.5)
    assert z.loc[0, "cost"] == pytest.approx(3.0)  # 0.5 GPU-h x $6
    zf = [f for f in rep.findings if f.title.startswith("Zombie pod ml/stuck")]
    assert len(zf) == 1 and zf[0].severity == Severity.WARNING
    # the run reaches the window end: freeing the GPU saves its whole price from now on ($6 x 730 h);
    # the window's zombie hours are the "so far" figure
    assert zf[0].data["monthly_saving"] == pytest.approx(6.0 * HPM, rel=1e-3)
    assert zf[0].data["window_cost"] == pytest.approx(3.0)
    # a Deployment's pod comes back when deleted: its owner is scaled instead
    assert "kubectl -n ml scale deployment/stuck --replicas=0" in zf[0].commands
    assert not any("delete pod" in c for c in zf[0].commands)


def test_zombie_shorter_than_threshold_is_not_reported():
    rep = _zombie_case([0.8] * 10 + [0.0] * 2, [4096.0] * 12)  # 20 min
    assert rep.zombies.empty
    assert not [f for f in rep.findings if f.title.startswith("Zombie")]


def test_memory_below_threshold_is_idle_not_zombie():
    rep = _zombie_case([0.0] * 12, [900.0] * 12)  # < 1024 MiB: a bare CUDA context
    assert rep.zombies.empty
    idle = [f for f in rep.findings if f.title.startswith("Idle allocated GPUs")]
    assert len(idle) == 1
    # whole 2 h idle at $6 -> $12 in the window -> 12 x 730 / 2 per month
    assert idle[0].data["monthly_saving"] == pytest.approx(12.0 * HPM / 2)


def test_activity_at_zombie_threshold_breaks_the_run():
    # 0.05 is not < zombie_activity_max (0.05): the run is 0,0 | 0.05 | 0,0 -> two 20-min runs, none >= 30 min
    rep = _zombie_case([0.8] * 7 + [0.0, 0.0, 0.05, 0.0, 0.0], [4096.0] * 12)
    assert rep.zombies.empty


def test_gap_in_scrapes_breaks_a_zombie_run():
    a = series("n1", "0", [0.0, 0.0], pod="stuck", ns="ml", step="10min")
    b = series("n1", "0", [0.0, 0.0], pod="stuck", ns="ml", step="10min", start=T0 + pd.Timedelta("1h"))
    act = pd.concat([a, b])
    fb = act.assign(value=4096.0)
    nodes, pods = frames([node("n1")], [pod("ml", "stuck", "n1")])
    rep = cost.analyze_cost(nodes, pods, act, fb, window="2h")
    assert rep.zombies.empty  # two 20-min stretches with a 40-min hole, not one 80-min run


def test_fully_zombie_workload_is_not_double_counted_as_idle():
    rep = _zombie_case([0.0] * 12, [4096.0] * 12)  # 2 h zombie
    reclaim = rep.actions[rep.actions["action"] == "reclaim"]
    assert reclaim["monthly_saving"].sum() == pytest.approx(12.0 * HPM / 2)  # $12 window, once


# ---------------------------------------------------------------------------------------------
# MIG and time-slicing shares
# ---------------------------------------------------------------------------------------------
def test_mig_share_by_compute_slices():
    got = mig_share(pd.Series(["3g.40gb", "1g.10gb", "7g.80gb", "1c.3g.20gb", "", "1g.10gb+me"]))
    assert got.tolist() == pytest.approx([3 / 7, 1 / 7, 1.0, 3 / 7, 1.0, 1 / 7])


def test_mig_instance_costed_by_its_share():
    # a 3g.40gb instance for 7 h at $7/GPU-h: 7 h x 3/7 = 3 GPU-h = $21
    act = series("n1", "0", [0.5] * 7, pod="inf", ns="serve", profile="3g.40gb", gi="2")
    nodes, pods = frames(
        [node("n1", mig_allocatable={"nvidia.com/mig-3g.40gb": 2})],
        [
            pod(
                "serve",
                "inf",
                "n1",
                req=0,
                lim=0,
                mig_req={"nvidia.com/mig-3g.40gb": 1},
                mig_lim={"nvidia.com/mig-3g.40gb": 1},
            )
        ],
    )
    rep = run(act, None, nodes, pods, price_overrides={"H100-80GB": 7.0})
    u = rep.usage.iloc[0]
    assert u["allocated_gpu_hours"] == pytest.approx(3.0)
    assert u["allocated_cost"] == pytest.approx(21.0)
    inv = rep.nodes.iloc[0]
    assert inv["gpu_equiv_allocatable"] == pytest.approx(6 / 7)
    assert inv["gpu_equiv_requested"] == pytest.approx(3 / 7)
    assert rep.request_limit.empty


def test_time_sliced_replica_costed_by_one_over_replicas():
    # 4 replicas per GPU; two pods on GPU 0 for 4 h at $4: each 4 h x 1/4 = 1 GPU-h = $4
    act = pd.concat([series("n1", "0", [0.3] * 4, pod="a", ns="dev"), series("n1", "0", [0.3] * 4, pod="b", ns="dev")])
    nodes, pods = frames(
        [node("n1", replicas=4, sharing="time-slicing")], [pod("dev", "a", "n1"), pod("dev", "b", "n1")]
    )
    rep = run(act, None, nodes, pods, price_overrides={"H100-80GB": 4.0})
    per_pod = rep.usage.set_index("pod")["allocated_cost"]
    assert per_pod["a"] == pytest.approx(4.0) and per_pod["b"] == pytest.approx(4.0)
    assert rep.nodes.iloc[0]["gpu_equiv_requested"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------
# savings actions
# ---------------------------------------------------------------------------------------------
def test_spot_saving_uses_on_demand_minus_spot_from_the_aws_table():
    # gpu_prices.csv: p5.48xlarge 55.04 USD/h / 8 = 6.88 USD/GPU-h on demand; spot = 6.88 x the 2025-01 snapshot's
    # own spot/on-demand ratio ((14.3773+30.326)/2 / 98.32 = 0.22733) = 1.5641 USD/GPU-h
    act = series("n1", "0", [0.8] * 6, pod="train-0", ns="ml")
    nodes, pods = frames([node("n1")], [pod("ml", "train-0", "n1", kind="Job", workload="train")])
    rep = run(act, None, nodes, pods)
    spot = rep.actions[rep.actions["action"] == "spot"]
    assert len(spot) == 1
    assert spot.iloc[0]["monthly_saving"] == pytest.approx(6 * (6.88 - 1.5641) * HPM / 6)


def test_spot_node_is_priced_at_spot_and_not_recommended_again():
    act = series("n1", "0", [0.8] * 6, pod="train-0", ns="ml")
    nodes, pods = frames([node("n1", spot=True)], [pod("ml", "train-0", "n1", kind="Job", workload="train")])
    rep = run(act, None, nodes, pods)
    assert rep.usage.iloc[0]["price_per_gpu_hour"] == pytest.approx(1.5641)
    assert "spot" not in set(rep.actions["action"])
    assert cost.executive_summary(rep)["spot_share_pct"] == pytest.approx(100.0)


def test_consolidate_small_inference_pod_onto_1g_mig():
    # 8 GiB peak on an 80 GiB GPU: 8 x 1.2 headroom = 9.6 GiB <= 1/8 of 80 GiB (10 GiB); p95 0.12 <= 1/7
    act = series("n1", "0", [0.12] * 7, pod="chat", ns="serve")
    fb = act.assign(value=8192.0)
    nodes, pods = frames([node("n1", mem_mib=81920)], [pod("serve", "chat", "n1")])
    rep = run(act, fb, nodes, pods, price_overrides={"H100-80GB": 7.0})
    c = rep.actions[rep.actions["action"] == "consolidate"]
    assert len(c) == 1
    assert "1g MIG" in c.iloc[0]["detail"]
    # window cost $49; keeps 1/7 -> saves 6/7 x 49 = $42 per 7 h -> 42 x 730 / 7 per month
    assert c.iloc[0]["monthly_saving"] == pytest.approx(42.0 * HPM / 7)


def test_consolidate_on_gpu_without_mig_uses_time_slicing():
    # L4 has no MIG: p95 0.2, memory 4.8 of 24 GiB x 1.2 = 0.24 -> floor(1/0.24) = 4 replicas -> keeps 1/4
    act = series("n1", "0", [0.2] * 4, pod="ocr", ns="serve", model="NVIDIA L4")
    fb = act.assign(value=0.2 * 24576)
    nodes, pods = frames([node("n1", product="NVIDIA-L4", mem_mib=24576)], [pod("serve", "ocr", "n1")])
    rep = run(act, fb, nodes, pods, price_overrides={"L4": 1.0})
    c = rep.actions[rep.actions["action"] == "consolidate"]
    assert "time-slicing with 4 replicas" in c.iloc[0]["detail"]
    assert c.iloc[0]["monthly_saving"] == pytest.approx(4.0 * 0.75 * HPM / 4)


def test_rightsize_four_gpus_at_30_percent_need_two():
    act = pd.concat([series("n1", str(i), [0.3] * 5, pod=f"emb-{i}", ns="serve") for i in range(4)])
    fb = act.assign(value=60000.0)
    nodes, pods = frames([node("n1", gpus=4)], [pod("serve", f"emb-{i}", "n1", workload="emb") for i in range(4)])
    rep = run(act, fb, nodes, pods, price_overrides={"H100-80GB": 3.0})
    r = rep.actions[rep.actions["action"] == "rightsize"]
    assert len(r) == 1
    # sum activity 1.2 GPUs / 0.6 target = 2 GPUs needed -> 2 surplus x $3 x 730 h
    assert r.iloc[0]["monthly_saving"] == pytest.approx(2 * 3.0 * HPM)
    assert "quantise" not in set(rep.actions["action"])


def test_quantise_memory_bound_two_gpu_inference():
    act = pd.concat([series("n1", str(i), [0.4] * 5, pod=f"llm-{i}", ns="serve") for i in range(2)])
    fb = act.assign(value=70000.0)  # 85 % of 81920 MiB >= 70 %
    nodes, pods = frames([node("n1", gpus=2)], [pod("serve", f"llm-{i}", "n1", workload="llm") for i in range(2)])
    rep = run(act, fb, nodes, pods, price_overrides={"H100-80GB": 3.0})
    q = rep.actions[rep.actions["action"] == "quantise"]
    assert len(q) == 1
    assert q.iloc[0]["monthly_saving"] == pytest.approx(
        1 * 3.0 * HPM
    )  # 0.8 GPUs busy -> needs 2 at 60 %; 8-bit frees 1
    assert q.iloc[0]["confidence"] == pytest.approx(0.5)


def test_never_allocated_node_gets_scale_down():
    act = pd.concat(
        [series("n1", "0", [0.9] * 6, pod="a", ns="ml"), series("n2", "0", [0.0] * 6), series("n2", "1", [0.0] * 6)]
    )
    nodes, pods = frames([node("n1"), node("n2", gpus=2)], [pod("ml", "a", "n1")])
    rep = run(act, None, nodes, pods, price_overrides={"H100-80GB": 2.0})
    sd = rep.actions[rep.actions["action"] == "scale_down"]
    assert sd["node"].tolist() == ["n2"]
    assert sd.iloc[0]["monthly_saving"] == pytest.approx(24.0 * HPM / 6)  # 2 GPUs x 6 h x $2
    f = [f for f in rep.findings if f.title == "GPU node n2 was never allocated"][0]
    assert "kubectl cordon n2" in f.commands


# ---------------------------------------------------------------------------------------------
# Kubernetes hygiene
# ---------------------------------------------------------------------------------------------
def test_request_limit_issues():
    act = series("n1", "0", [0.9] * 2, pod="ok", ns="ml")
    nodes, pods = frames(
        [node("n1", gpus=4)],
        [
            pod("ml", "ok", "n1"),
            pod("ml", "nolimit", "n1", lim=None),
            pod("ml", "differs", "n1", req=2, lim=1),
            pod("ml", "cpu", "n1", req=None, lim=None),
            pod(
                "ml",
                "mig",
                "n1",
                req=0,
                lim=0,
                mig_req={"nvidia.com/mig-1g.10gb": 2},
                mig_lim={"nvidia.com/mig-1g.10gb": 1},
            ),
        ],
    )
    rep = run(act, None, nodes, pods, price_overrides={"H100-80GB": 2.0})
    got = dict(zip(rep.request_limit["pod"], rep.request_limit["problem"]))
    assert got == {
        "nolimit": "GPU request without a limit",
        "differs": "GPU request != limit",
        "mig": "MIG request != limit",
    }
    # the one request/limit check (gpulib.kube.requests): the API server rejects such a spec, so CRITICAL
    f = [
        f
        for f in rep.findings
        if f.title == "GPU request without a limit: ml/nolimit (nvidia.com/gpu request 1, no limit)"
    ][0]
    assert f.severity == Severity.CRITICAL
    assert f.data["monthly_cost"] == pytest.approx(1 * 2.0 * HPM)


def test_non_gpu_pods_on_gpu_nodes():
    act = series("g1", "0", [0.9] * 2, pod="train", ns="ml")
    nodes, pods = frames(
        [node("g1")],
        [
            pod("ml", "train", "g1"),
            pod("web", "nginx", "g1", req=0, lim=0),
            pod("web", "exporter", "g1", kind="DaemonSet", req=0, lim=0),
            pod("kube-system", "coredns", "g1", req=0, lim=0),
            pod("web", "api", "cpu-1", req=0, lim=0),
            pod("web", "done", "g1", req=0, lim=0, phase="Succeeded"),
        ],
    )
    rep = run(act, None, nodes, pods)
    assert rep.non_gpu_pods[["namespace", "pod"]].values.tolist() == [["web", "nginx"]]
    f = [f for f in rep.findings if "non-GPU pod" in f.title][0]
    assert "kubectl taint nodes g1 nvidia.com/gpu=present:NoSchedule" in f.commands


# ---------------------------------------------------------------------------------------------
# report frames
# ---------------------------------------------------------------------------------------------
def _fleet():
    act = pd.concat(
        [
            series("n1", "0", [0.0] * 6, pod="stuck", ns="research"),
            series("n1", "1", [0.02] * 6, pod="nb", ns="research"),
            series("n2", "0", [0.9, 0.9, 0.5, 0.5, 0.1, 0.1], pod="train", ns="ml"),
            series("n2", "1", [0.0] * 6),
        ]
    )
    fb = act.assign(value=[4096.0] * 6 + [500.0] * 6 + [30000.0] * 6 + [0.0] * 6)
    nodes, pods = frames(
        [node("n1", gpus=2), node("n2", gpus=2)],
        [
            pod("research", "stuck", "n1"),
            pod("research", "nb", "n1", kind="StatefulSet"),
            pod("ml", "train", "n2", kind="Job"),
        ],
    )
    return cost.analyze_cost(nodes, pods, act, fb, window="6h", price_overrides={"H100-80GB": 2.0})


def test_namespace_allocation_vs_activity():
    ns = cost.namespace_allocation(_fleet()).set_index("namespace")
    assert ns.loc["research", "allocated_gpu_hours"] == pytest.approx(12.0)
    assert ns.loc["research", "idle_allocated_gpu_hours"] == pytest.approx(12.0)
    # active = time at/above the idle threshold (0.10): all six ml GPU-hours
    assert ns.loc["ml", "active_gpu_hours"] == pytest.approx(6.0)
    assert ns.loc["ml", "active_pct"] == pytest.approx(100.0)
    assert ns.loc["ml", "idle_allocated_gpu_hours"] == pytest.approx(0.0)  # 0.1 is not < 0.1


def test_top_idle_workloads_flags_the_zombie():
    t = cost.top_idle_workloads(_fleet(), n=5)
    assert t["workload"].tolist()[:2] in (["stuck", "nb"], ["nb", "stuck"])
    by = t.set_index("workload")
    assert bool(by.loc["stuck", "zombie"]) and by.loc["stuck", "zombie_hours"] == pytest.approx(6.0)
    assert not bool(by.loc["nb", "zombie"])
    assert by.loc["stuck", "idle_cost"] == pytest.approx(12.0)


def test_executive_summary_and_waterfall_agree():
    rep = _fleet()
    s = cost.executive_summary(rep)
    assert s["idle_gpu_hours"] == pytest.approx(12.0)
    assert s["idle_cost"] == pytest.approx(24.0)
    assert s["zombie_pods"] == 1
    assert 1 <= len(s["top_actions"]) <= 5
    savings = [a["monthly_saving"] for a in s["top_actions"]]
    assert savings == sorted(savings, reverse=True)
    wf = cost.savings_waterfall(rep)
    assert wf.iloc[0]["measure"] == "absolute" and wf.iloc[-1]["measure"] == "total"
    assert wf.iloc[0]["value"] == pytest.approx(48.0 * HPM / 6)  # 4 GPUs x 6 h x $2
    assert wf.iloc[-1]["value"] == pytest.approx(
        wf.iloc[0]["value"] + wf.loc[wf["measure"] == "relative", "value"].sum()
    )
    assert s["potential_monthly_saving"] == pytest.approx(-wf.loc[wf["measure"] == "relative", "value"].sum())


def test_node_time_matrix_buckets():
    m = cost.node_time_matrix(_fleet().samples, freq="3h")
    n2 = m[m["node"] == "n2"].sort_values("time")
    # n2 first 3 h: GPU0 0.9,0.9,0.5 and GPU1 0 -> mean (2.3)/6 ; second: 0.5,0.1,0.1 -> 0.7/6
    assert n2["active_pct"].tolist() == pytest.approx([100 * 2.3 / 6, 100 * 0.7 / 6])
    assert n2["allocated_pct"].tolist() == pytest.approx([50.0, 50.0])
    with pytest.raises(InvalidParameter):
        cost.node_time_matrix(_fleet().samples, freq="fortnightly")


def test_every_action_finding_carries_saving_and_commands():
    rep = _fleet()
    act = [f for f in rep.findings if f.data.get("action") in cost.ACTIONS]
    assert act and all(isinstance(f, Finding) for f in act)
    for f in act:
        assert f.data["monthly_saving"] > 0 and f.data["currency"] == "USD"
        assert f.commands and f.sop_step
        assert any("saving" in e for e in f.evidence)
    levels = {lvl: cost.gpu_utilization(rep, lvl) for lvl in ("gpu", "node", "namespace", "workload", "pod")}
    assert levels["node"].set_index("node").loc["n1", "idle_allocated_gpu_hours"] == pytest.approx(12.0)
    assert len(levels["gpu"]) == 4
    with pytest.raises(InvalidParameter, match="cluster"):
        cost.gpu_utilization(rep, "cluster")


def test_namespaces_filter_keeps_only_those_pods():
    rep = cost.analyze_cost(*_fleet_inputs(), window="6h", namespaces=["ml"])
    assert set(rep.usage.loc[rep.usage["pod"] != "", "namespace"]) == {"ml"}


def _fleet_inputs():
    act = pd.concat(
        [series("n1", "0", [0.0] * 6, pod="stuck", ns="research"), series("n2", "0", [0.9] * 6, pod="t", ns="ml")]
    )
    nodes, pods = frames([node("n1"), node("n2")], [pod("research", "stuck", "n1"), pod("ml", "t", "n2")])
    return nodes, pods, act, None


def test_unpriced_model_is_reported_not_crashed():
    act = series("n1", "0", [0.5] * 3, pod="a", ns="ml", model="NVIDIA Quantum Widget")
    nodes, pods = frames([node("n1", product="NVIDIA-Quantum-Widget")], [pod("ml", "a", "n1")])
    rep = run(act, None, nodes, pods)
    f = [f for f in rep.findings if f.title == "GPU models without a price"]
    assert len(f) == 1 and "NVIDIA Quantum Widget" in f[0].data["models"]
    assert math.isnan(rep.usage.iloc[0]["price_per_gpu_hour"])


def test_every_cost_sop_row_is_used_and_every_key_asked_for_exists():
    """cost_sop.csv and the cost domain agree: no finding asks for a row the table lacks, no row is dead text."""
    from pathlib import Path

    from gpulib.core.sop import keys
    from tests.helpers.sopcheck import scan, unknown_keys, unused_rows

    pkg, rows = Path(cost.__file__).parent, set(keys("cost_sop"))
    assert len(scan(pkg, "cost_sop")[0]) >= 3  # the literal keys found (unallocated_gpus, unpriced_models, ...)
    assert unknown_keys(pkg, "cost_sop", rows) == []
    assert unused_rows(pkg, "cost_sop", rows) == []


def test_sop_check_catches_a_missing_row_and_a_dead_row(tmp_path):
    """The check above can fail: a key asked for that the table lacks, and a row no code names."""
    from tests.helpers.sopcheck import unknown_keys, unused_rows

    (tmp_path / "findings.py").write_text(
        'T = "x_sop"\n\n\ndef f():\n    return sop(T, "gone"), sop("x_sop", "here")\n'
    )
    assert unknown_keys(tmp_path, "x_sop", {"here", "dead"}) == ["gone"]
    assert unused_rows(tmp_path, "x_sop", {"here", "dead"}) == ["dead"]
