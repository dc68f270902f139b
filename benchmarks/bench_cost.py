"""Benchmark gpulib.cost.analysis at fleet size (1,024 GPUs x 7 days at 60 s, as in benchmarks/RESULTS.md).

Builds a synthetic fleet in-process (no Prometheus: this measures the analytics only), runs
``analyze_cost`` + the report frames, and times a naive baseline in the same run: a per-series
Python loop over samples (what a hand-written notebook does: ``for row in df.itertuples()``
accumulating idle hours and zombie runs). The naive loop is timed on ``--naive-gpus`` GPUs and
scaled linearly to the fleet (it is linear in samples); pass ``--naive-gpus 1024`` to run it whole.

    python benchmarks/bench_cost.py                      # 1024 GPUs, 7 d, 60 s
    python benchmarks/bench_cost.py --gpus 128 --days 1  # quick
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpulib.cost as cost
from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS
from gpulib.cost.usage import Thresholds

GPUS_PER_NODE = 8


def synth_fleet(gpus: int, days: float, step_s: int, seed: int = 0):
    """Activity + FB_USED series (categorical labels), nodes and pods for ``gpus`` GPUs.

    Per GPU: 70 % allocated to a pod for the whole window. Profiles: busy training (~0.8), diurnal
    inference (0.05..0.5), idle notebook (0.01), and a zombie in the last third (0 activity, 20 GiB held).
    """
    rng = np.random.default_rng(seed)
    n_t = int(days * 86400 // step_s)
    t = pd.date_range("2026-01-01", periods=n_t, freq=f"{step_s}s", tz="UTC")
    nodes_n = max(1, gpus // GPUS_PER_NODE)
    node_of = np.arange(gpus) // GPUS_PER_NODE
    kind = rng.choice(4, size=gpus, p=[0.35, 0.35, 0.2, 0.1])  # 0 train, 1 infer, 2 idle, 3 zombie
    alloc = rng.random(gpus) < 0.7
    kind = np.where(alloc, kind, 4)  # 4 = unallocated
    hours = (np.arange(n_t) * step_s / 3600.0) % 24
    diurnal = 0.05 + 0.45 * (0.5 + 0.5 * np.sin(hours / 24 * 2 * np.pi))
    base = np.stack(
        [
            np.full(n_t, 0.8),
            diurnal,
            np.full(n_t, 0.01),
            np.where(np.arange(n_t) < 2 * n_t // 3, 0.6, 0.0),
            np.zeros(n_t),
        ]
    )
    act = (base[kind] + rng.normal(0, 0.02, size=(gpus, n_t))).clip(0, 1).astype(np.float32)
    fbv = np.array([60000.0, 16000.0, 3000.0, 20000.0, 0.0])[kind][:, None] * np.ones(n_t, dtype=np.float32)

    node_names = [f"gpu-node-{i:04d}" for i in range(nodes_n)]
    pod_names = np.array(
        [f"{['train', 'infer', 'nb', 'stuck', ''][k]}-{i}" if k < 4 else "" for i, k in enumerate(kind)]
    )
    ns_names = np.array([["ml", "serve", "research", "research", ""][k] for k in kind])
    n = gpus * n_t
    rep_idx = np.repeat(np.arange(gpus), n_t)

    node_cat = pd.Categorical.from_codes(node_of[rep_idx], categories=node_names)
    gpu_cat = pd.Categorical.from_codes(
        (np.arange(gpus) % GPUS_PER_NODE)[rep_idx], categories=[str(i) for i in range(GPUS_PER_NODE)]
    )
    pod_u, pod_codes = np.unique(pod_names, return_inverse=True)
    ns_u, ns_codes = np.unique(ns_names, return_inverse=True)
    frame = pd.DataFrame(
        {
            "timestamp": pd.Series(np.tile(t.tz_convert(None).to_numpy(), gpus)).dt.tz_localize("UTC"),
            "node": node_cat,
            "gpu": gpu_cat,
            "uuid": pd.Categorical.from_codes(rep_idx, categories=[f"GPU-{i:08d}" for i in range(gpus)]),
            "model": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["NVIDIA H100 80GB HBM3"]),
            "pod": pd.Categorical.from_codes(pod_codes[rep_idx], categories=pod_u),
            "namespace": pd.Categorical.from_codes(ns_codes[rep_idx], categories=ns_u),
            "container": pd.Categorical.from_codes(np.where(kind < 4, 1, 0)[rep_idx], categories=["", "main"]),
            "gpu_i_profile": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[""]),
            "gpu_i_id": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[""]),
        }
    )
    activity = frame.assign(value=act.reshape(-1))
    fb = frame[["timestamp", "node", "gpu", "gpu_i_id"]].assign(value=fbv.reshape(-1))
    nodes = pd.DataFrame(
        [
            dict(
                node=nm,
                gpu_product="NVIDIA-H100-80GB-HBM3",
                gpu_count=8,
                gpu_memory_mib=81559,
                gpu_capacity=8,
                gpu_allocatable=8,
                mig_capacity={},
                mig_allocatable={},
                mig_strategy="none",
                mig_config="",
                mig_config_state="",
                gpu_replicas=1,
                sharing_strategy="none",
                taints=[],
                schedulable=True,
                ready=True,
                spot=(i % 4 == 0),
                instance_type="p5.48xlarge",
                kernel="",
                os_image="",
                labels={},
            )
            for i, nm in enumerate(node_names)
        ],
        columns=NODE_COLUMNS,
    )
    owner = {0: ("Job", "train"), 1: ("Deployment", "infer"), 2: ("StatefulSet", "nb"), 3: ("Deployment", "stuck")}
    pods = pd.DataFrame(
        [
            dict(
                namespace=ns_names[i],
                pod=pod_names[i],
                node=node_names[node_of[i]],
                phase="Running",
                gpu_request=1,
                gpu_limit=1,
                mig_requests={},
                mig_limits={},
                owner_kind=owner[k][0],
                owner_name=f"{owner[k][1]}-{i // 16}",
                workload=f"{owner[k][1]}-{i // 16}",
                start_time=t[0],
                tolerations=[],
                node_selector={},
                labels={},
                containers=[],
            )
            for i, k in enumerate(kind)
            if k < 4
        ],
        columns=POD_COLUMNS,
    )
    return activity, fb, nodes, pods


def naive(activity: pd.DataFrame, fb: pd.DataFrame, th: Thresholds, price: float) -> dict:
    """Row-by-row baseline: per series, walk samples in Python accumulating idle GPU-h, $ and zombie runs."""
    fbmap = {(r.node, r.gpu, r.timestamp): r.value for r in fb.itertuples(index=False)}
    idle_h = idle_cost = 0.0
    zombies = 0
    for _, grp in activity.groupby(["node", "gpu", "pod"], observed=True, sort=False):
        grp = grp.sort_values("timestamp")
        prev_t = None
        run_start = None
        step = None
        for r in grp.itertuples(index=False):
            if prev_t is not None and step is None:
                step = (r.timestamp - prev_t).total_seconds()
            dt = step or 60.0
            if r.pod and r.value < th.idle_activity_max:
                idle_h += dt / 3600
                idle_cost += dt / 3600 * price
            held = (
                r.pod
                and fbmap.get((r.node, r.gpu, r.timestamp), 0.0) >= th.zombie_fb_used_min_mib
                and r.value < th.zombie_activity_max
            )
            if held and run_start is None:
                run_start = r.timestamp
            if not held and run_start is not None:
                zombies += (prev_t - run_start).total_seconds() + dt >= th.zombie_min_duration_s
                run_start = None
            prev_t = r.timestamp
        if run_start is not None:
            zombies += (prev_t - run_start).total_seconds() + (step or 60.0) >= th.zombie_min_duration_s
    return {"idle_gpu_hours": idle_h, "idle_cost": idle_cost, "zombie_runs": int(zombies)}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--step", type=int, default=60, help="sample interval, seconds")
    ap.add_argument("--naive-gpus", type=int, default=16, help="GPUs the naive loop runs on (scaled to --gpus)")
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    act, fb, nodes, pods = synth_fleet(a.gpus, a.days, a.step)
    t_gen = time.perf_counter() - t0
    rss_gen = peak_rss_mib()
    print(
        f"fleet: {a.gpus} GPUs x {a.days:g} d at {a.step} s = {len(act):,} samples per field "
        f"(generated in {t_gen:.1f} s, RSS {rss_gen:.0f} MiB)"
    )

    t0 = time.perf_counter()
    rep = cost.analyze_cost(nodes, pods, act, fb, window=f"{int(a.days * 24)}h", price_overrides={"H100-80GB": 12.29})
    t_analyze = time.perf_counter() - t0
    t0 = time.perf_counter()
    summary = cost.executive_summary(rep)
    frames = (
        cost.namespace_allocation(rep),
        cost.top_idle_workloads(rep),
        cost.savings_waterfall(rep),
        cost.node_time_matrix(rep.samples, "1h"),
    )
    t_frames = time.perf_counter() - t0
    fast = t_analyze + t_frames
    rss = peak_rss_mib()
    print(
        f"vectorised: analyze_cost {t_analyze:.2f} s + report frames {t_frames:.2f} s = {fast:.2f} s; "
        f"peak RSS {rss:.0f} MiB; {len(rep.findings)} findings, {len(rep.zombies)} zombie runs; "
        f"heatmap {len(frames[3]):,} cells"
    )

    # naive on a subset of GPUs, same data
    keep_nodes = nodes["node"].iloc[: max(1, a.naive_gpus // GPUS_PER_NODE)]
    sub_a = act[act["node"].isin(keep_nodes)]
    sub_f = fb[fb["node"].isin(keep_nodes)]
    sub_n, sub_p = nodes[nodes["node"].isin(keep_nodes)], pods[pods["node"].isin(keep_nodes)]
    sub_gpus = len(keep_nodes) * GPUS_PER_NODE
    th = rep.thresholds
    t0 = time.perf_counter()
    nv = naive(sub_a, sub_f, th, 12.29)
    t_naive_sub = time.perf_counter() - t0
    t0 = time.perf_counter()
    sub_rep = cost.analyze_cost(
        sub_n, sub_p, sub_a, sub_f, window=f"{int(a.days * 24)}h", price_overrides={"H100-80GB": 12.29}
    )
    t_fast_sub = time.perf_counter() - t0
    s_sub = cost.executive_summary(sub_rep)
    agree = abs(nv["idle_gpu_hours"] - s_sub["idle_gpu_hours"]) < 1e-6 * max(1, nv["idle_gpu_hours"]) and nv[
        "zombie_runs"
    ] == len(sub_rep.zombies)
    t_naive = t_naive_sub * a.gpus / sub_gpus
    print(
        f"naive loop: {t_naive_sub:.2f} s on {sub_gpus} GPUs -> {t_naive:.0f} s scaled to {a.gpus} GPUs "
        f"(vectorised on the same {sub_gpus} GPUs: {t_fast_sub:.2f} s; results agree: {agree})"
    )
    print(f"speed-up vs naive: {t_naive / fast:.0f}x (fleet), {t_naive_sub / t_fast_sub:.0f}x (subset)")
    print(
        f"summary: allocated {summary['allocated_pct']:.1f} %, active {summary['active_pct']:.1f} %, "
        f"idle {summary['idle_gpu_hours']:.0f} GPU-h = {summary['idle_cost']:,.0f} USD"
    )


if __name__ == "__main__":
    main()
