"""The reliability report's data path (``gpu_reliability_report``) against a real Prometheus, with the floor of its
own PromQL and, in the same run, the same report by an older gpulib tree (``--compare DIR``: e.g. a checkout
before a change), so every figure is a ratio against a baseline measured on the same box at the same time.

Data: Debian's real ``prometheus`` over a TSDB of the node history as kube-state-metrics and dcgm-exporter write it
(:func:`gpulib.demo.history_series.write_history_openmetrics`: cordons, Ready conditions, restarts per container with
``kube_pod_info``, driver labels, the XID gauge and windowed count, the exporter's ``up``), over ``history_factor``
(3) x the report window (a 30-day report reads 90 days), one sample per ``--sample`` seconds. ``--nodes 0`` (default)
is the packaged demo fleet (7 nodes) and its planted history; ``--nodes N`` the generated fleet of
``benchmarks/fleet_scenario.py`` at N nodes of 8 GPUs with the demo history's background rates. Cached under
``benchmarks/.cache/`` (git-ignored).

Measured, each in a fresh subprocess (peak RSS = its ``VmHWM``):

* **report**: ``connect("live")`` (Prometheus + the Kubernetes API double serving the fleet's nodes) ->
  :func:`gpulib.reliability.report_steps.load` -> ``build`` -> ``report_findings``; the PromQL it sent, the
  number of queries and of points that came back (counted at ``PrometheusSource._range_arrays``);
* **floor**: those exact range queries replayed alone with ``requests`` one after the other (as the report sends
  them), timed until each body is read, no parsing: what the PromQL costs whatever the client does with it;
* **compare**: the report path again with ``PYTHONPATH`` at ``--compare`` (an older tree), when given.

``--rules-only``: the TSDB holds only the node history's recorded series (gpulib/sources/history_rules.py), written
straight from the demo history by :func:`gpulib.demo.history_recorded.write_recorded_openmetrics` (the raw series of
1,024 nodes x 90 days cannot be backfilled on a small box; what the rules record is sparse), so the report takes
its rules path (:func:`gpulib.sources.prom_history.history_path`).

Targets (issue: Done when): the report at 8,192 GPUs x 30 days < 60 s and < 1 GB.

    python benchmarks/bench_reliability_prometheus.py                         # demo fleet, 30-day report
    python benchmarks/bench_reliability_prometheus.py --nodes 16 --compare /tmp/base   # 128 GPUs, vs an old tree
    python benchmarks/bench_reliability_prometheus.py --nodes 1024 --rules-only        # 8,192 GPUs, recorded series
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):  # after PYTHONPATH: --compare's tree is imported before this one
    if p not in sys.path:
        sys.path.append(p)

#: the window end of the integration tests (2-hour aligned)
END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def _sim(nodes: int):
    from gpulib.demo.simulator import FleetSimulator

    if not nodes:
        return FleetSimulator(end=END)
    from fleet_scenario import make_scenario

    return FleetSimulator(make_scenario(nodes_total=nodes), end=END)


def build_recorded(cache: Path, nodes: int, history: str) -> Path:
    """A TSDB of the recorded series alone, one promtool run per 10-day OpenMetrics file (each deleted after)."""
    from gpulib.demo.history_recorded import write_recorded_openmetrics
    from tests.helpers.promharness import binaries

    tsdb = cache / "tsdb"
    if (cache / "READY.json").exists():
        return tsdb
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    files = write_recorded_openmetrics(_sim(nodes), cache / "om", history)
    t_gen, size = time.perf_counter() - t0, sum(f.stat().st_size for f in files)
    for om in files:
        subprocess.run(
            [
                binaries()[1],
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--max-block-duration=240h",
                str(om),
                str(tsdb),
            ],
            check=True,
            capture_output=True,
        )
        om.unlink()
    info = {"nodes": nodes, "history": history, "recorded_only": True, "om_mb": size / 1e6, "generate_s": t_gen}
    info["built_s"] = time.perf_counter() - t0
    (cache / "READY.json").write_text(json.dumps(info))
    return tsdb


def build(cache: Path, nodes: int, history: str, sample: float) -> Path:
    from gpulib.demo.history_series import write_history_openmetrics
    from tests.helpers.promharness import binaries

    tsdb = cache / "tsdb"
    if (cache / "READY.json").exists():
        return tsdb
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    om = cache / "history.om"
    write_history_openmetrics(_sim(nodes), om, history, sample)
    size = om.stat().st_size
    subprocess.run(
        [binaries()[1], "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=2160h", str(om), str(tsdb)],
        check=True,
        capture_output=True,
    )
    om.unlink()
    info = {
        "nodes": nodes,
        "history": history,
        "sample_s": sample,
        "om_mb": size / 1e6,
        "built_s": time.perf_counter() - t0,
    }
    (cache / "READY.json").write_text(json.dumps(info))
    return tsdb


def _vmhwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def path_report(window: str) -> dict:
    """One report as the notebook's first step runs it, with the PromQL it sent counted."""
    t0 = time.perf_counter()
    import kubernetes  # noqa: F401  (imported by the source's node list; 3-28 s on the loaded box: reported apart)

    import gpulib
    import gpulib.reliability.report_steps as R
    from gpulib.sources.prometheus import PrometheusSource

    sent, points = [], [0]
    inner = PrometheusSource._range_arrays

    def counted(self, promql, start, end, step):
        res = inner(self, promql, start, end, step)
        sent.append({"promql": promql, "start": start, "end": end, "step": step})
        points[0] += sum(len(r["ts"]) for r in res)
        return res

    PrometheusSource._range_arrays = counted
    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    src = gpulib.connect("live")
    rep = R.build(R.load(src, window), window)
    findings = R.report_findings(rep)
    return {
        "import_s": t_import,
        "data_path_s": time.perf_counter() - t1,
        "peak_rss_mib": _vmhwm_mib(),
        "queries": sent,
        "points": points[0],
        "incidents": len(rep.incidents),
        "offenders": rep.offenders[["node", "gpu"]].astype(str).values.tolist(),
        "regressions": sorted({(c.kind, c.scope, c.what) for c in rep.changes if c.regression}),
        "score": rep.score.score,
        "findings": len(findings),
        "events": len(rep.fh.events),
        "recorded": all("recorded" in v for v in rep.fh.read.values()),
    }


def path_floor(queries: list[dict]) -> dict:
    """The report's range queries alone, in order, each body read whole (the source's chunking as it sent them)."""
    import requests

    from gpulib.sources.prometheus import MAX_POINTS

    url = os.environ["GPUOPS_PROMETHEUS_URL"].rstrip("/") + "/api/v1/query_range"
    t0 = time.perf_counter()
    size = 0
    with requests.Session() as http:
        for q in queries:
            t, span = q["start"], q["step"] * (MAX_POINTS - 1)
            while t <= q["end"]:
                stop = min(q["end"], t + span)
                r = http.post(url, data={"query": q["promql"], "start": t, "end": stop, "step": q["step"]}, timeout=600)
                size += len(r.content)
                t = stop + q["step"]
    return {"promql_s": time.perf_counter() - t0, "response_mib": size / 2**20}


def run_path(name: str, env: dict, arg: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", name, arg], env=env, capture_output=True, text=True, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"path {name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=0, help="0: the demo fleet; N: fleet_scenario at N nodes of 8 GPUs")
    ap.add_argument("--window", default="30d", help="report window (history read: 3x)")
    ap.add_argument("--sample", type=float, default=600.0, help="seconds between the written samples")
    ap.add_argument("--compare", type=Path, help="an older tree (its root: gpulib/ inside) measured in the same run")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rules-only", action="store_true", help="a TSDB of the history's recorded series alone")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("arg", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        fn = path_report if args.one == "report" else lambda a: path_floor(json.loads(Path(a).read_text()))
        print(json.dumps(fn(args.arg), default=str))
        return

    from gpulib.core.knowledge import settings
    from gpulib.core.timeutil import parse_window
    from tests.helpers.k8s_double import start_k8s_double
    from tests.helpers.promharness import PrometheusServer

    factor = int(settings("reliability_settings")["history_factor"])
    days = parse_window(args.window).days * factor
    if args.rules_only:
        cache = HERE / ".cache" / f"reliability-{args.nodes or 'demo'}n-{days}d-recorded-v1"
        tsdb = build_recorded(cache, args.nodes, f"{days}d")
    else:
        cache = HERE / ".cache" / f"reliability-{args.nodes or 'demo'}n-{days}d-{int(args.sample)}s-v1"
        tsdb = build(cache, args.nodes, f"{days}d", args.sample)
    sim = _sim(args.nodes)
    work = Path(tempfile.mkdtemp(prefix="bench-rel-"))
    server = PrometheusServer(tsdb, work)
    double = start_k8s_double(work, nodes=sim.nodes_json()["items"], pods=[])
    base_env = {
        **os.environ,
        "GPUOPS_PROMETHEUS_URL": server.url,
        "GPUOPS_PROMETHEUS_TIMEOUT": "600",
        "KUBECONFIG": str(double.kubeconfig),
        "GPUOPS_END": END.isoformat(),
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }
    trees = {"report": ROOT, **({"compare": args.compare.resolve()} if args.compare else {})}
    rows: dict[str, list] = {k: [] for k in (*trees, "floor")}
    try:
        for _ in range(args.repeat):
            for name, tree in trees.items():
                env = {**base_env, "PYTHONPATH": str(tree)}
                rows[name].append(run_path("report", env, args.window))
                print(name, {k: v for k, v in rows[name][-1].items() if k != "queries"}, flush=True)
            qfile = work / "queries.json"
            qfile.write_text(json.dumps(rows["report"][-1]["queries"]))
            rows["floor"].append(run_path("floor", {**base_env, "PYTHONPATH": str(ROOT)}, str(qfile)))
            print("floor", rows["floor"][-1], flush=True)
    finally:
        double.stop()
        server.stop()
    gpus = sum(1 for d in sim.devices if not d.is_instance)
    rep, floor = rows["report"][-1], rows["floor"][-1]
    rep["data_path_s_all"] = [r["data_path_s"] for r in rows["report"]]
    rep["floor_s_all"] = [f["promql_s"] for f in rows["floor"]]
    load = os.getloadavg()
    print(
        f"\n{gpus:,} GPUs, {args.window} report over {days} d of history "
        + ("(recorded series only) " if args.rules_only else f"at {args.sample:g} s samples ")
        + f"(TSDB {json.loads((cache / 'READY.json').read_text())}); load average {load[0]:.1f} / {load[1]:.1f}"
    )
    print(
        f"  report: {rep['data_path_s']:.2f} s (imports {rep['import_s']:.2f} s apart), peak RSS "
        f"{rep['peak_rss_mib']:.0f} MiB, {len(rep['queries'])} range queries, {rep['points']:,} points back; "
        f"incidents {rep['incidents']}, findings {rep['findings']}; every round {rep['data_path_s_all']}"
    )
    print(f"  floor every round: {rep['floor_s_all']}")
    print(f"  floor (its PromQL alone): {floor['promql_s']:.2f} s, {floor['response_mib']:.1f} MiB of JSON")
    print(f"  report / floor: {rep['data_path_s'] / floor['promql_s']:.2f}x")
    if "compare" in rows:
        old = rows["compare"][-1]
        print(
            f"  compare ({args.compare}): {old['data_path_s']:.2f} s, peak RSS {old['peak_rss_mib']:.0f} MiB, "
            f"{len(old['queries'])} range queries, {old['points']:,} points back; old / new time "
            f"{old['data_path_s'] / rep['data_path_s']:.2f}x, points {old['points'] / max(rep['points'], 1):.1f}x"
        )
        same = all(old[k] == rep[k] for k in ("incidents", "offenders", "regressions", "findings"))
        print(f"  same answer (incidents, offenders, regressions, findings): {same}")
    if args.json:
        args.json.write_text(json.dumps({"gpus": gpus, "load": load, **rows}, default=str, indent=1))


if __name__ == "__main__":
    main()
