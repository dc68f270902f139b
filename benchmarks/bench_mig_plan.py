"""Benchmark the MIG planner (results in benchmarks/RESULTS.md, section "MIG planner").

1. Fleet scale: ``gpulib.mig.plan`` (exact cutting-stock MILP, HiGHS) on ``--gpus`` GPUs (half A100-80GB, half
   H100-80GB) and ``--workloads`` single-replica workloads, against first-fit-decreasing (``plan_ffd``) on the same
   input, timed in the same run: time, GPUs used, unplaced replicas, and the ratios.
2. Optimality: on ``--random`` random instances of up to 8 GPUs (A100-40GB, A30-24GB, H100-80GB; 3-8 instances of
   random profiles, each instance pinned to its profile) the planner's GPU count must equal the brute-force optimum
   (every assignment of instances to k GPUs, smallest k whose groups are all valid layouts). Exits 1 on a mismatch.

    python benchmarks/bench_mig_plan.py                         # 1,000 GPUs, 5,000 workloads, 200 random instances
    python benchmarks/bench_mig_plan.py --gpus 100 --workloads 500 --random 30   # quick

Workload memory mix (GiB, uniform within a band): 80 % 1-9, 14 % 10-19, 5 % 20-38, 1 % 45-75; this needs ~90 % of
1,000 GPUs, so the comparison is about packing, not about running out.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpulib.mig as mig
import gpulib.mig.plan as mp

BANDS = [(0.80, 1, 9), (0.94, 10, 19), (0.99, 20, 38), (1.0, 45, 75)]


def fleet_workloads(n: int, seed: int = 0) -> list[mp.Workload]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        lo, hi = next((lo, hi) for cut, lo, hi in BANDS if r < cut)
        out.append(mp.Workload(f"w{i}", round(rng.uniform(lo, hi), 2)))
    return out


def brute_force_min_gpus(model: str, instances: list[str], max_gpus: int) -> int | None:
    """Fewest GPUs over all partitions of the instances into groups that are each a valid layout (exact search).

    Branch and bound over set partitions (instance i joins an existing group or opens the next one),
    cutting a branch as soon as a group is invalid: validity is hereditary (a subset of a valid layout is valid),
    so no valid partition is skipped. Validity itself is :func:`gpulib.mig.geometry.is_valid_layout` (exact placement
    search).
    """
    valid_cache: dict[tuple, bool] = {}

    def valid(group: list[str]) -> bool:
        key = tuple(sorted(group))
        if key not in valid_cache:
            valid_cache[key] = mig.is_valid_layout(model, list(key))
        return valid_cache[key]

    best = [None]

    def rec(i: int, groups: list[list[str]]):
        if best[0] is not None and len(groups) >= best[0]:
            return
        if i == len(instances):
            best[0] = len(groups)
            return
        for g in groups:
            g.append(instances[i])
            if valid(g):
                rec(i + 1, groups)
            g.pop()
        if len(groups) < max_gpus and valid([instances[i]]):
            groups.append([instances[i]])
            rec(i + 1, groups)
            groups.pop()

    rec(0, [])
    return best[0]


def fleet(gpus: int, workloads: int, time_limit: float) -> dict:
    ws = fleet_workloads(workloads)
    inv = {"A100-80GB": gpus // 2, "H100-80GB": gpus - gpus // 2}
    t0 = time.perf_counter()
    p = mp.plan_layout(ws, inv, time_limit=time_limit)
    t_milp = time.perf_counter() - t0
    t0 = time.perf_counter()
    f = mp.plan_ffd(ws, inv)
    t_ffd = time.perf_counter() - t0
    for g in p.gpus + f.gpus:
        assert mig.is_valid_layout(g.model, g.layout), g
    return {
        "milp_s": t_milp,
        "milp_gpus": p.gpus_used,
        "milp_unplaced": len(p.unplaced),
        "milp_status": p.status,
        "milp_gap": p.mip_gap,
        "milp_optimal": p.optimal,
        "ffd_s": t_ffd,
        "ffd_gpus": f.gpus_used,
        "ffd_unplaced": len(f.unplaced),
        "baseline": p.baseline_gpus,
    }


def optimality(n: int, seed: int = 1) -> tuple[int, int, float]:
    rng = random.Random(seed)
    checked = mismatches = 0
    t0 = time.perf_counter()
    for _ in range(n):
        model = rng.choice(["A100-40GB", "A30-24GB", "H100-80GB"])
        profs = [p.name for p in mig.profile_objects(model) if not p.media_ext]
        instances = [rng.choice(profs) for _ in range(rng.randint(3, 8))]
        want = brute_force_min_gpus(model, instances, 8)
        got = mp.plan_layout([mp.Workload(f"i{k}", 1.0, profile=pn) for k, pn in enumerate(instances)], {model: 8})
        checked += 1
        if got.gpus_used != want or got.unplaced:
            mismatches += 1
            print(f"MISMATCH {model} {instances}: planner {got.gpus_used}, optimum {want}")
    return checked, mismatches, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=5000)
    ap.add_argument("--random", type=int, default=200, help="random instances checked against brute force")
    ap.add_argument("--time-limit", type=float, default=120.0, help="HiGHS time limit, s")
    a = ap.parse_args(argv)
    r = fleet(a.gpus, a.workloads, a.time_limit)
    print(
        f"fleet: {a.gpus} GPUs (A100-80GB + H100-80GB), {a.workloads} workloads; whole-GPU placement {r['baseline']} GPUs"
    )
    print(
        f"  planner (MILP): {r['milp_s']:.1f} s, {r['milp_gpus']} GPUs, {r['milp_unplaced']} unplaced, "
        f"optimal={r['milp_optimal']}, gap {r['milp_gap']:.2%} ({r['milp_status']})"
    )
    print(f"  FFD baseline:   {r['ffd_s']:.1f} s, {r['ffd_gpus']} GPUs, {r['ffd_unplaced']} unplaced")
    print(
        f"  ratios: GPUs planner/FFD = {r['milp_gpus'] / r['ffd_gpus']:.3f} ({r['ffd_gpus'] - r['milp_gpus']} GPUs fewer), "
        f"time planner/FFD = {r['milp_s'] / r['ffd_s']:.1f}x"
    )
    checked, bad, t = optimality(a.random)
    print(
        f"optimality: {checked} random instances (<= 8 GPUs, 3-8 instances) vs brute force: "
        f"{checked - bad} equal, {bad} mismatches ({t:.1f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
