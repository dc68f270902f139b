"""Benchmark the utilization report's data path on the demo fleet: coarse step vs raw scrape-interval series.

The report (``reports/gpu_utilization_report.ipynb``) pulls DCGM range series at the step in
``gpulib/data/cost/report_policy.csv`` (``series_step``) instead of every scrape. This times, in one run and
each in a fresh subprocess (so peak RSS is per configuration), the report's whole data path:

    load_report_data (source .series pulls) -> analyze_cost -> executive_summary, node_time_matrix,
    namespace_allocation, idle_zombie_table, savings_waterfall -> HTML tiles/tables + figure JSON

for the raw series (step = the demo's scrape interval, 30 s: the in-run baseline) and coarser steps, and
checks what the coarse step changes in the answer: zombie pods found (vs raw), idle GPU-hours, potential
monthly saving. Optionally (``--e2e``) it also times the whole notebook through papermill + HTML export
(kernel start included) at the policy step.

    python benchmarks/bench_report.py                 # 7d, steps raw,1m,5m,15m
    python benchmarks/bench_report.py --e2e           # plus papermill end-to-end
    python benchmarks/bench_report.py --steps raw,5m --window 24h

This is the demo fleet (7 nodes, 48 GPUs), not the 1,024-GPU Prometheus benchmark
(benchmarks/bench_fleet_prometheus.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: pinned window end so runs are comparable (the integration tests' DEMO_END)
DEMO_END = "2026-11-29T12:00:00+00:00"


def one(step: str, window: str) -> dict:
    """Run the data path once at ``step`` ('raw' = scrape interval) and return timings and results."""
    import gpulib
    import gpulib.cost as cost
    from gpulib.core.timeutil import format_duration

    t0 = time.perf_counter()
    src = gpulib.connect("demo", end=DEMO_END)
    st = format_duration(src.sim.scrape_interval) if step == "raw" else step
    t1 = time.perf_counter()
    data = cost.load_report_data(src, window, step=st)
    t2 = time.perf_counter()
    rep = cost.analyze_cost(
        data.nodes, data.pods, data.gr_engine_active, data.fb_used, gpu_util=data.gpu_util, window=window
    )
    t3 = time.perf_counter()
    summary = cost.executive_summary(rep)
    bucket = cost.heatmap_bucket(window, st)
    figs = [
        cost.heatmap_figure(cost.node_time_matrix(rep.samples, bucket), rep.activity_field, bucket),
        cost.namespace_figure(cost.namespace_allocation(rep)),
        cost.waterfall_figure(cost.savings_waterfall(rep), rep.currency),
    ]
    page = (
        cost.kpi_tiles_html(summary)
        + cost.top_actions_html(summary)
        + cost.idle_table_html(cost.idle_zombie_table(rep), rep.currency)
        + cost.method_section(rep, data)
    )
    fig_bytes = sum(len(f.to_json()) for f in figs)
    t4 = time.perf_counter()
    zombies = sorted(
        f"{ns}/{p}" for ns, p in rep.zombies[["namespace", "pod"]].drop_duplicates().itertuples(index=False)
    )
    return {
        "step": st,
        "samples": data.samples,
        "pull_s": t2 - t1,
        "analyze_s": t3 - t2,
        "render_s": t4 - t3,
        "data_path_s": t4 - t1,
        "connect_s": t1 - t0,
        "html_kib": len(page) / 1024,
        "figure_json_kib": fig_bytes / 1024,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "idle_gpu_hours": summary["idle_gpu_hours"],
        "saving": summary["potential_monthly_saving"],
        "active_pct": summary["active_pct"],
        "zombies": zombies,
    }


def e2e(window: str) -> dict:
    """Whole notebook via the CLI's papermill path (kernel start, execution, HTML export)."""
    import tempfile

    from gpulib.catalogue import find_notebook
    from gpulib.execute import execute

    os.environ["GPUOPS_END"] = DEMO_END
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    info = find_notebook("gpu_utilization_report")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        res = execute(info, {"window": window, "source": "demo"}, Path(tmp), progress=False)
        wall = time.perf_counter() - t
        size = res.html.stat().st_size / 1024 if res.html else 0.0
    return {"e2e_s": wall, "html_kib": size, "failed": res.failed, "errors": res.errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", default="7d")
    ap.add_argument("--steps", default="raw,1m,5m,15m", help="comma list; 'raw' = the demo scrape interval (baseline)")
    ap.add_argument("--e2e", action="store_true", help="also run the notebook end to end through papermill")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.window)))
        return

    rows = []
    for step in args.steps.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--one", step, "--window", args.window],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]
    print(f"demo fleet, window {args.window}; baseline = {base['step']} (first of --steps)\n")
    print(
        f"{'step':>5} {'samples':>10} {'pull s':>7} {'analyze s':>9} {'render s':>8} {'total s':>7} {'speed-up':>8} "
        f"{'peak RSS MiB':>12} {'idle GPU-h':>10} {'saving/mo':>10} {'zombies +/-':>11}"
    )
    for r in rows:
        extra = sorted(set(r["zombies"]) - set(base["zombies"]))
        lost = sorted(set(base["zombies"]) - set(r["zombies"]))
        r["zombies_extra"], r["zombies_missed"] = extra, lost
        print(
            f"{r['step']:>5} {r['samples']:>10,} {r['pull_s']:>7.2f} {r['analyze_s']:>9.2f} {r['render_s']:>8.2f} "
            f"{r['data_path_s']:>7.2f} {base['data_path_s'] / r['data_path_s']:>7.1f}x {r['peak_rss_mib']:>12.0f} "
            f"{r['idle_gpu_hours']:>10.1f} {r['saving']:>10,.0f} {'+' + str(len(extra)) + '/-' + str(len(lost)):>11}"
        )
    for r in rows[1:]:
        if r["zombies_extra"] or r["zombies_missed"]:
            print(f"  {r['step']}: extra zombies {r['zombies_extra']}, missed {r['zombies_missed']}")
    if args.e2e:
        e = e2e(args.window)
        print(
            f"\nend to end (papermill + HTML export, kernel start included): {e['e2e_s']:.1f} s, HTML {e['html_kib']:,.0f} KiB"
            + (f", FAILED: {e['failed']}" if e["failed"] else "")
            + (f", errors: {e['errors']}" if e["errors"] else "")
        )


if __name__ == "__main__":
    main()
