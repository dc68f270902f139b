"""The utilization report's data path at fleet scale against a real Prometheus.

A real Prometheus (Debian's ``prometheus``/``promtool``) holds ``--nodes`` x 8 GPUs (default 128 nodes: 1,024 GPUs)
x ``--days`` days at a 60 s scrape interval (``benchmarks/fleet_scenario.py``: train, infer, idle, dev and zombie
personas, 1/32 of the nodes in MIG). Only the three fields the report reads are backfilled
(``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``).

The history is generated and backfilled one 2-hour block at a time (``FleetSimulator.write_openmetrics``
with ``start``/``end``, then ``promtool tsdb create-blocks-from openmetrics``), so neither disk nor
memory ever holds the whole text; Prometheus then compacts the blocks once. Then the report's recording rules
(group ``gpu-runbooks.report``, :mod:`gpulib.cost.recording`) are evaluated over that history with ``promtool tsdb
create-blocks-from rules``, one day at a time, and their blocks added (``--no-rules``: a TSDB without them, so the
report takes its raw subquery path). The TSDB is cached under ``benchmarks/.cache/`` (git-ignored).

``--rules-only`` (for fleets whose raw history is out of reach: 8,192 GPUs x 7 d is hours of backfill): the TSDB holds
the recording-rule series only, **generated directly** from the same scenario by :mod:`gpulib.demo.recorded` (the
rules' own arithmetic over the simulator's 60 s samples, at the group's 5 min interval, with the rules' output labels;
``tests/demo/test_recorded.py`` shows the report answers the same from it as from raw + ``create-blocks-from rules``),
one 2-hour block at a time through ``promtool tsdb create-blocks-from openmetrics``, plus the three raw fields' last
5 minutes (the report asks at the window end which activity field and GPU models the fleet exports). The naive path
(raw 60 s series) is then left out (``naive_s`` null); the report and the floor of its own PromQL still run.

Measured in one run, each path in a fresh subprocess (peak RSS = that process's ``VmHWM``):

* **report**: the report's real code path, as the notebook runs it: ``connect("live")`` (Prometheus +
  the Kubernetes API double from ``tests/helpers/k8s_double.py`` serving the scenario's nodes and pods through
  the official client) -> ``cost.load_report_data`` (totals: :mod:`gpulib.cost.totals`) -> ``cost.cost_report``
  -> ``executive_summary``, ``method_html``, ``node_time_matrix`` + heatmap, ``namespace_allocation`` + bars,
  ``idle_zombie_table``, ``savings_waterfall`` + waterfall (figures built, not serialised);
* **naive**: prometheus-api-client as its README shows: ``custom_query_range`` of the raw series at the
  60 s scrape step with the library's own JSON decode, turned into frames per series and aggregated in
  pandas by the same ``analyze_cost`` + frames;
* **floor**: the exact PromQL the report sent (instant and range queries, recorded in a warm-up run), replayed
  alone with ``requests``, side by side as the report sends them (time until every response body is read, no
  parsing), plus the time ``jupyter_client`` takes to start a python3 kernel (and, reported apart, to stop it).

Targets (benchmarks/RESULTS.md): at 1,024 GPUs x 7 d the report >= 20x faster than naive, <= 1.3x the floor, peak
RSS < 400 MB; at 8,192 GPUs x 7 d the report < 60 s and peak RSS < 1 GB. The floor ratio is
(kernel start + report data path) / (kernel start + PromQL alone). ``--json FILE`` writes ``gpus``, ``report_s``,
``floor_s``, ``naive_s`` (null when skipped), ``report_rss_mb`` and every round.

    python benchmarks/bench_fleet_prometheus.py              # build/reuse the TSDB, run everything
    python benchmarks/bench_fleet_prometheus.py --build-only # just backfill (first run: ~10 min + the rules)
    python benchmarks/bench_fleet_prometheus.py --repeat 1 --skip-naive
    python benchmarks/bench_fleet_prometheus.py --nodes 1024 --days 7 --skip-naive   # 8,192 GPUs
    python benchmarks/bench_fleet_prometheus.py --nodes 1024 --days 7 --rules-only --repeat 1   # rule series only
    python benchmarks/bench_fleet_prometheus.py --e2e        # also run the notebook via papermill
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

#: pinned window end (the integration tests' DEMO_END; 2-hour aligned so each chunk is one TSDB block)
END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
#: fleet size and window (--nodes, --days; passed to the measured subprocesses through the environment)
NODES = int(os.environ.get("BENCH_NODES", "128"))
DAYS = int(os.environ.get("BENCH_DAYS", "7"))
WINDOW = f"{DAYS}d"
SCRAPE_S = 60
CHUNK_S = 2 * 3600
FIELDS = ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"]
GIB = 1024**3


def default_cache(nodes: int, days: int) -> Path:
    return HERE / ".cache" / f"fleet-{nodes * 8}gpu-{days}d-60s-seed42-v1"


# ----------------------------------------------------------------------------------------------
# scenario and TSDB
# ----------------------------------------------------------------------------------------------
def simulator():
    from fleet_scenario import make_scenario

    from gpulib.demo.simulator import FleetSimulator

    return FleetSimulator(make_scenario(scrape_interval=f"{SCRAPE_S}s", nodes_total=NODES), end=END)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def build_tsdb(cache: Path, days: int) -> Path:
    """Backfill ``days`` of the scenario, one 2-hour chunk at a time (resumable), then compact once."""
    from tests.helpers.promharness import binaries

    tsdb = cache / "tsdb"
    done_file = cache / "chunks_done.txt"
    marker = cache / "READY.json"
    if marker.exists():
        return tsdb
    prom, promtool = binaries()
    if not (prom and promtool):
        sys.exit("Debian's prometheus/promtool are not installed (apt-get install prometheus)")
    cache.mkdir(parents=True, exist_ok=True)
    done = set(done_file.read_text().split()) if done_file.exists() else set()
    sim = simulator()
    end_s = END.timestamp()
    starts = [end_s - days * 86400 + k * CHUNK_S for k in range(days * 86400 // CHUNK_S)]
    om = cache / "chunk.om"
    t0 = time.perf_counter()
    for k, start in enumerate(starts):
        if str(int(start)) in done:
            continue
        # last chunk includes the window end itself; the others stop one scrape before the next chunk
        stop = end_s if k == len(starts) - 1 else start + CHUNK_S - SCRAPE_S
        sim.write_openmetrics(om, step=SCRAPE_S, start=start, end=stop, metrics=FIELDS)
        size = om.stat().st_size
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        om.unlink()
        with done_file.open("a") as fh:
            fh.write(f"{int(start)}\n")
        _log(
            f"chunk {k + 1}/{len(starts)} ({size / 1e6:.0f} MB OpenMetrics) backfilled; "
            f"{time.perf_counter() - t0:.0f} s so far"
        )
    _log("compacting (Prometheus merges the 2-hour blocks once; later runs reuse the result)")
    blocks = compact(tsdb, cache)
    marker.write_text(
        json.dumps(
            {
                "end": END.isoformat(),
                "days": days,
                "scrape_s": SCRAPE_S,
                "fields": FIELDS,
                "blocks_after_compaction": blocks,
                "built_s": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return tsdb


def build_rules_only(cache: Path, days: int) -> Path:
    """The recording-rule series alone, generated from the scenario (:mod:`gpulib.demo.recorded`) one 2-hour block
    at a time (resumable), plus the raw fields' last lookback (5 min) at the window end; then compact once."""
    from gpulib.demo.recorded import RuleGroup, write_recorded_openmetrics
    from tests.helpers.promharness import binaries

    tsdb = cache / "tsdb"
    done_file = cache / "chunks_done.txt"
    marker = cache / "READY.json"
    if marker.exists():
        return tsdb
    prom, promtool = binaries()
    if not (prom and promtool):
        sys.exit("Debian's prometheus/promtool are not installed (apt-get install prometheus)")
    cache.mkdir(parents=True, exist_ok=True)
    done = {}
    if done_file.exists():
        for line in done_file.read_text().split("\n"):
            if line.strip():
                start, series, samples = line.split()
                done[start] = (int(series), int(samples))
    sim, group = simulator(), RuleGroup()
    end_s = END.timestamp()
    data_start = end_s - days * 86400
    starts = [data_start + k * CHUNK_S for k in range(days * 86400 // CHUNK_S)]
    om = cache / "chunk.om"
    promtool_s = 0.0

    def backfill(path: Path) -> None:
        nonlocal promtool_s
        t = time.perf_counter()
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tsdb)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        promtool_s += time.perf_counter() - t

    t0 = time.perf_counter()
    for k, start in enumerate(starts):
        if str(int(start)) in done:
            continue
        stop = end_s if k == len(starts) - 1 else start + CHUNK_S - 0.001  # one block: [start, start + 2 h)
        series, samples = write_recorded_openmetrics(sim, om, start, stop, data_start=data_start, group=group)
        size = om.stat().st_size
        backfill(om)
        om.unlink()
        done[str(int(start))] = (series, samples)
        with done_file.open("a") as fh:
            fh.write(f"{int(start)} {series} {samples}\n")
        _log(
            f"rule chunk {k + 1}/{len(starts)}: {series:,} series, {samples:,} samples "
            f"({size / 1e6:.0f} MB OpenMetrics) backfilled; {time.perf_counter() - t0:.0f} s so far"
        )
    # the report's first question, `count by (modelName) (<activity field>)` at the window end, reads raw samples
    sim.write_openmetrics(om, step=SCRAPE_S, start=end_s - 300, end=end_s, metrics=FIELDS)
    backfill(om)
    om.unlink()
    generated_s = time.perf_counter() - t0
    _log("compacting (Prometheus merges the 2-hour blocks once; later runs reuse the result)")
    blocks = compact(tsdb, cache)
    marker.write_text(
        json.dumps(
            {
                "end": END.isoformat(),
                "days": days,
                "rules_only": True,
                "rule_interval_s": group.interval,
                "rule_series": max(v[0] for v in done.values()),
                "rule_samples": sum(v[1] for v in done.values()),
                "raw_tail_s": 300,
                "blocks_after_compaction": blocks,
                "generate_and_backfill_s": round(generated_s, 1),
                "promtool_s": round(promtool_s, 1),
                "built_s": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return tsdb


def build_rules(cache: Path, tsdb: Path, days: int) -> None:
    """Add the recording-rule series (group gpu-runbooks.report of deploy/prometheus/gpu-alerts.yaml) to the TSDB:
    ``promtool tsdb create-blocks-from rules`` evaluates the shipped rules over the raw history one day at a time
    (resumable) through a Prometheus serving it, and the blocks are moved into the TSDB."""
    import yaml

    from gpulib.cost import recording_group
    from tests.helpers.promharness import PrometheusServer, backfill_rules

    marker = cache / "RULES_READY.json"
    if marker.exists():
        return
    rules = cache / "report-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [recording_group()]}))
    done_file = cache / "rule_days_done.txt"
    done = set(done_file.read_text().split()) if done_file.exists() else set()
    work = cache / "rules-work"
    work.mkdir(exist_ok=True)
    server = PrometheusServer(tsdb, work)
    t0 = time.perf_counter()
    blocks = []
    try:
        end_s = END.timestamp()
        for d in range(days):
            start = end_s - (days - d) * 86400
            if str(int(start)) in done:
                continue
            blocks += backfill_rules(server.url, rules, start, start + 86400, work / f"day-{d}")
            with done_file.open("a") as fh:
                fh.write(f"{int(start)}\n")
            _log(f"recording rules: day {d + 1}/{days} ({time.perf_counter() - t0:.0f} s)")
    finally:
        server.stop()
    for day in sorted(work.glob("day-*")):
        for b in day.iterdir():
            if (b / "meta.json").exists():
                shutil.move(str(b), tsdb / b.name)
    _log("compacting the rule blocks into the history (they overlap its time ranges)")
    blocks = compact(tsdb, cache)
    marker.write_text(json.dumps({"rules_s": round(time.perf_counter() - t0, 1), "days": days, "blocks": blocks}))


def _metric(url: str, name: str) -> float:
    import requests

    for line in requests.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def compact(tsdb: Path, cache: Path, quiet_s: float = 150) -> int:
    """Run Prometheus on the TSDB until no compaction happened for ``quiet_s`` (it plans every minute)."""
    from tests.helpers.promharness import PrometheusServer

    server = PrometheusServer(tsdb, cache)
    try:
        last, since = None, time.time()
        while True:
            state = (
                _metric(server.url, "prometheus_tsdb_compactions_total"),
                _metric(server.url, "prometheus_tsdb_blocks_loaded"),
            )
            if state != last:
                last, since = state, time.time()
                _log(f"compactions {state[0]:.0f}, blocks loaded {state[1]:.0f}")
            elif time.time() - since > quiet_s:
                return int(state[1])
            time.sleep(5)
    finally:
        server.stop()


# ----------------------------------------------------------------------------------------------
# measured paths (each runs in its own subprocess: python bench_fleet_prometheus.py --one PATH)
# ----------------------------------------------------------------------------------------------
def _vmhwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _answer(rep, summary) -> dict:
    zombies = sorted(
        f"{ns}/{p}" for ns, p in rep.zombies[["namespace", "pod"]].drop_duplicates().itertuples(index=False)
    )
    return {
        "idle_gpu_hours": summary["idle_gpu_hours"],
        "active_pct": summary["active_pct"],
        "allocated_pct": summary["allocated_pct"],
        "saving": summary["potential_monthly_saving"],
        "zombies": zombies,
        "findings": len(rep.findings),
    }


def _frames(rep, data_step: str) -> tuple[dict, float]:
    """The report's frames and figures (what the notebook cells after the data load build)."""
    import gpulib.cost as cost

    t = time.perf_counter()
    summary = cost.executive_summary(rep, top_n=int(cost.report_policy("top_actions")))
    html = cost.kpi_tiles_html(summary) + cost.top_actions_html(summary)
    bucket = cost.heatmap_bucket(WINDOW, data_step)
    cost.heatmap_figure(cost.node_time_matrix(rep.samples, bucket), rep.activity_field, bucket)
    cost.namespace_figure(cost.namespace_allocation(rep))
    html += cost.idle_table_html(cost.idle_zombie_table(rep), rep.currency)
    cost.waterfall_figure(cost.savings_waterfall(rep), rep.currency)
    return summary, time.perf_counter() - t


def path_report() -> dict:
    t0 = time.perf_counter()
    import gpulib
    import gpulib.cost as cost
    from gpulib.kube.client import kubernetes_client
    from gpulib.sources.prometheus import PrometheusSource

    # connect("live") imports the official client as gpulib does, and the API classes nodes() and pods() use
    # (kubernetes 37 imports each on first use, kubernetes-client/python: kubernetes/client/__init__.py @02465849):
    # library imports, reported apart as the client's import always was
    client = kubernetes_client()
    client.CoreV1Api, client.ResourceV1Api
    t_import = time.perf_counter() - t0
    queries: list[dict] = []
    real = PrometheusSource._get_range  # the one HTTP call per range-query chunk

    def recording(self, promql, start, end, step):
        queries.append({"query": promql, "start": round(start), "end": round(end), "step": step})
        return real(self, promql, start, end, step)

    real_instant = PrometheusSource.query

    def recording_instant(self, promql):
        queries.append({"query": promql, "time": round(self.end.timestamp())})
        return real_instant(self, promql)

    PrometheusSource._get_range = recording
    PrometheusSource.query = recording_instant
    prof = None
    if os.environ.get("BENCH_PROFILE"):  # --profile FILE: cProfile of the data path (t1..t4) to FILE
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t1, c1 = time.perf_counter(), time.process_time()
    src = gpulib.connect("live")
    data = cost.load_report_data(src, WINDOW, step=os.environ.get("BENCH_REPORT_STEP") or None)
    t2 = time.perf_counter()
    rep = cost.cost_report(data)  # as the notebook calls it: analyze_cost over the totals (or samples)
    cost.method_section(rep, data)
    t3 = time.perf_counter()
    summary, t_frames = _frames(rep, data.step)
    t4, c4 = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["BENCH_PROFILE"])
    return {
        "import_s": t_import,
        "load_s": t2 - t1,
        "analyze_s": t3 - t2,
        "frames_s": t_frames,
        "data_path_s": t4 - t1,
        "data_path_cpu_s": c4 - c1,  # this process' CPU (all threads): what the client adds on a loaded box
        "samples": data.samples,
        "path": data.path,
        "step": data.step,
        "queries": queries,
        "peak_rss_mib": _vmhwm_mib(),
        **_answer(rep, summary),
    }


def path_naive() -> dict:
    """Raw 60 s series with prometheus-api-client, aggregated in pandas (the same analysis)."""
    t0 = time.perf_counter()
    import kubernetes  # noqa: F401  (as in the report path: imports are reported apart)
    import numpy as np
    import pandas as pd
    from prometheus_api_client import PrometheusConnect

    import gpulib.cost as cost
    from gpulib.core.schema import SERIES_COLUMNS
    from gpulib.kube.client import KubeCluster
    from gpulib.sources.dcgm import normalise_labels
    from gpulib.sources.signals import promql_any

    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    prom = PrometheusConnect(url=os.environ["GPUOPS_PROMETHEUS_URL"], disable_ssl=True)
    start = datetime.fromtimestamp(END.timestamp() - DAYS * 86400, tz=timezone.utc)
    frames, pulled = {}, 0
    for fld in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"):
        # the field under each exporter generation's name in its canonical unit (the scenario exports 4.10 names)
        result = prom.custom_query_range(promql_any(fld), start_time=start, end_time=END, step=f"{SCRAPE_S}s")
        parts = []
        for r in result:  # per series: labels once, values as arrays (kinder than one dict per sample)
            vals = np.array(r["values"], dtype=float)
            lab = normalise_labels(r["metric"])
            part = pd.DataFrame({"timestamp": pd.to_datetime(vals[:, 0], unit="s", utc=True), "value": vals[:, 1]})
            for c in SERIES_COLUMNS:
                if c not in ("timestamp", "value"):
                    part[c] = lab.get(c, "")
            parts.append(part)
            pulled += len(vals)
        del result
        frames[fld] = pd.concat(parts, ignore_index=True)
        del parts
    kube = KubeCluster(kubeconfig=os.environ["KUBECONFIG"])
    nodes, pods = kube.nodes(), kube.pods()
    t2 = time.perf_counter()
    rep = cost.analyze_cost(
        nodes, pods, frames["DCGM_FI_PROF_GR_ENGINE_ACTIVE"], frames["DCGM_FI_DEV_FB_USED"], window=WINDOW
    )
    t3 = time.perf_counter()
    summary, t_frames = _frames(rep, f"{SCRAPE_S}s")
    t4 = time.perf_counter()
    return {
        "import_s": t_import,
        "load_s": t2 - t1,
        "analyze_s": t3 - t2,
        "frames_s": t_frames,
        "data_path_s": t4 - t1,
        "samples": pulled,
        "peak_rss_mib": _vmhwm_mib(),
        **_answer(rep, summary),
    }


def path_floor(queries: list[dict]) -> dict:
    """The report's PromQL range queries alone, issued side by side as the report issues them: HTTP
    request until the whole body is read (no parsing)."""
    from concurrent.futures import ThreadPoolExecutor

    import requests

    url = os.environ["GPUOPS_PROMETHEUS_URL"]

    def one(q: dict) -> tuple[float, int]:
        t = time.perf_counter()
        if "time" in q:  # an instant query
            resp = requests.get(f"{url}/api/v1/query", params={"query": q["query"], "time": q["time"]})
        else:
            resp = requests.get(
                f"{url}/api/v1/query_range",
                params={"query": q["query"], "start": q["start"], "end": q["end"], "step": q["step"]},
            )
        resp.raise_for_status()
        return time.perf_counter() - t, len(resp.content)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        done = list(pool.map(one, queries))
    total = time.perf_counter() - t0
    return {
        "promql_s": total,
        "per_query_s": [d[0] for d in done],
        "response_mib": sum(d[1] for d in done) / 2**20,
        "peak_rss_mib": _vmhwm_mib(),
    }


def path_kernel() -> dict:
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    t0 = time.perf_counter()
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    t1 = time.perf_counter()
    kc.stop_channels()
    km.shutdown_kernel(now=False)
    t2 = time.perf_counter()
    return {"start_s": t1 - t0, "stop_s": t2 - t1}


def path_e2e() -> dict:
    """The whole notebook as ``gpuops report --source live`` runs it (papermill, kernel, HTML export)."""
    import resource

    from gpulib.catalogue import find_notebook
    from gpulib.execute import execute

    info = find_notebook("gpu_utilization_report")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        res = execute(info, {"window": WINDOW, "source": "live"}, Path(tmp), progress=False)
        wall = time.perf_counter() - t
    return {
        "e2e_s": wall,
        "failed": res.failed,
        "errors": res.errors,
        "children_peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def run_path(name: str, env: dict, arg: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--one", name] + ([arg] if arg else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"path {name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------------
def _med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=7, help="history to backfill and report window in days (default 7)")
    ap.add_argument("--nodes", type=int, default=128, help="nodes of 8 GPUs (default 128: 1,024 GPUs)")
    ap.add_argument("--cache", type=Path, help="TSDB cache directory (reused when READY.json is there)")
    ap.add_argument("--no-rules", action="store_true", help="leave the recording-rule series out (raw path)")
    ap.add_argument(
        "--rules-only",
        action="store_true",
        help="TSDB of the recording-rule series only, generated from the scenario (no raw history, no naive path)",
    )
    ap.add_argument("--rebuild", action="store_true", help="delete the cached TSDB and backfill again")
    ap.add_argument("--build-only", action="store_true", help="backfill and compact, measure nothing")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the report, floor and kernel paths (median)")
    ap.add_argument("--skip-naive", action="store_true", help="leave out the naive path (~1-2 min)")
    ap.add_argument("--e2e", action="store_true", help="also run the notebook through papermill (source=live)")
    ap.add_argument("--step", help="report series step instead of report_policy.csv's series_step (experiments)")
    ap.add_argument("--json", type=Path, help="write all figures to this JSON file")
    ap.add_argument(
        "--profile", type=Path, help="cProfile the report's data path of the warm-up run into this file (pstats)"
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("queries", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.one:
        fn = {
            "report": path_report,
            "naive": path_naive,
            "kernel": path_kernel,
            "e2e": path_e2e,
            "floor": lambda: path_floor(json.loads(Path(args.queries).read_text())),
        }[args.one]
        print(json.dumps(fn()))
        return

    global NODES, DAYS, WINDOW
    NODES, DAYS, WINDOW = args.nodes, args.days, f"{args.days}d"
    os.environ["BENCH_NODES"], os.environ["BENCH_DAYS"] = str(NODES), str(DAYS)
    args.cache = args.cache or default_cache(args.nodes, args.days)
    if args.no_rules and args.rules_only:
        ap.error("--no-rules and --rules-only exclude each other")
    if args.no_rules:
        args.cache = args.cache.with_name(args.cache.name + "-norules")
    if args.rules_only:
        args.cache = args.cache.with_name(args.cache.name + "-rulesonly")
        args.skip_naive = True  # the naive path reads the raw 60 s series, which this TSDB does not hold
    if args.rebuild and args.cache.exists():
        shutil.rmtree(args.cache)
    if args.rules_only:
        tsdb = build_rules_only(args.cache, args.days)
    else:
        tsdb = build_tsdb(args.cache, args.days)
        if not args.no_rules:
            build_rules(args.cache, tsdb, args.days)
    if args.build_only:
        _log(f"TSDB ready: {tsdb} ({json.loads((args.cache / 'READY.json').read_text())})")
        return
    measure(tsdb, args)


def measure(tsdb: Path, args) -> None:
    from tests.helpers.k8s_double import start_k8s_double
    from tests.helpers.promharness import PrometheusServer

    sim = simulator()
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    server = PrometheusServer(tsdb, work)
    double = start_k8s_double(work, nodes=sim.nodes_json()["items"], pods=sim.pods_json()["items"])
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1"]))
    env = {
        **os.environ,
        "GPUOPS_PROMETHEUS_URL": server.url,
        "KUBECONFIG": str(double.kubeconfig),
        "GPUOPS_END": END.isoformat(),
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        "BENCH_REPORT_STEP": args.step or "",
    }
    try:
        _log(
            f"Prometheus {server.url} on {tsdb}; {len(sim.node_specs)} nodes, "
            f"{sum(1 for d in sim.devices if not d.is_instance)} GPUs; warm-up report run (records the queries)"
        )
        warm = run_path("report", {**env, "BENCH_PROFILE": str(args.profile.resolve()) if args.profile else ""})
        qfile = work / "queries.json"
        qfile.write_text(json.dumps(warm["queries"]))
        kernel, floor, rep = [], [], []
        for i in range(args.repeat):
            kernel.append(run_path("kernel", env))
            floor.append(run_path("floor", env, str(qfile)))
            rep.append(run_path("report", env))
            _log(
                f"round {i + 1}/{args.repeat}: kernel start {kernel[-1]['start_s']:.2f} s, PromQL alone "
                f"{floor[-1]['promql_s']:.2f} s, report data path {rep[-1]['data_path_s']:.2f} s "
                f"(peak RSS {rep[-1]['peak_rss_mib']:.0f} MiB)"
            )
        naive = None
        if not args.skip_naive:
            _log("naive path (raw 60 s series through prometheus-api-client, pandas aggregation)")
            naive = run_path("naive", env)
            _log(f"naive: {naive['data_path_s']:.1f} s, peak RSS {naive['peak_rss_mib']:.0f} MiB")
        e2e = None
        if args.e2e:
            _log("notebook end to end (papermill, source=live)")
            e2e = run_path("e2e", env)
        gpus = sum(1 for d in sim.devices if not d.is_instance)
        report_table(warm, rep, floor, kernel, naive, e2e, args, gpus)
    finally:
        double.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def report_table(warm, rep, floor, kernel, naive, e2e, args, gpus: int) -> None:
    k_start, k_stop = _med(kernel, "start_s"), _med(kernel, "stop_s")
    r = {key: _med(rep, key) for key in ("import_s", "load_s", "analyze_s", "frames_s", "data_path_s", "peak_rss_mib")}
    promql = _med(floor, "promql_s")
    floor_total = k_start + promql
    report_total = k_start + r["data_path_s"]
    rss_mb = max(x["peak_rss_mib"] for x in rep) * 2**20 / 1e6
    rss_gb = rss_mb / 1e3
    last = rep[-1]
    print()
    print(
        f"fleet: {gpus:,} GPUs (+MIG instances), {WINDOW} at {SCRAPE_S} s; report path {last['path']}, step "
        f"{last['step']}; {len(warm['queries'])} PromQL queries; medians of {args.repeat} runs"
    )
    print(f"  kernel start (jupyter_client, python3):     {k_start:7.2f} s   (stop {k_stop:.2f} s, not counted)")
    print(
        f"  PromQL alone (report's queries, requests):  {promql:7.2f} s   ({floor[-1]['response_mib']:.0f} MiB of JSON)"
    )
    print(f"  floor = kernel start + PromQL:              {floor_total:7.2f} s")
    print(
        f"  report data path:                           {r['data_path_s']:7.2f} s   (load {r['load_s']:.2f}, analyze "
        f"{r['analyze_s']:.2f}, frames {r['frames_s']:.2f}; imports {r['import_s']:.2f} s not counted)"
    )
    print(f"  report = kernel start + data path:          {report_total:7.2f} s   samples {last['samples']:,}")
    print(
        f"  ... with the report's imports (gpulib, kubernetes client) counted: {report_total + r['import_s']:.2f} s "
        f"= {(report_total + r['import_s']) / floor_total:.2f}x the floor"
    )
    print(f"  report peak RSS (VmHWM):                    {r['peak_rss_mib']:7.0f} MiB (max {rss_gb:.2f} GB)")
    verdict = {}
    ratio_floor = report_total / floor_total
    if gpus <= 1024:
        verdict["<= 1.3x floor"] = ratio_floor <= 1.3
        verdict["peak RSS < 400 MB"] = rss_mb < 400
    else:
        verdict["report < 60 s"] = report_total < 60
        verdict["peak RSS < 1 GB"] = rss_gb < 1.0
    print(
        f"  report / floor:                             {ratio_floor:7.2f}x  (data path / PromQL alone: "
        f"{r['data_path_s'] / promql:.2f}x)"
    )
    if naive:
        naive_total = k_start + naive["data_path_s"]
        speedup = naive_total / report_total
        if gpus <= 1024:
            verdict[">= 20x faster than naive"] = speedup >= 20
        print(
            f"  naive data path:                            {naive['data_path_s']:7.2f} s   "
            f"(load {naive['load_s']:.1f}, analyze {naive['analyze_s']:.1f}, frames {naive['frames_s']:.1f}); "
            f"samples {naive['samples']:,}; "
            f"peak RSS {naive['peak_rss_mib']:.0f} MiB"
        )
        print(
            f"  naive / report:                             {speedup:7.2f}x  (data paths alone: "
            f"{naive['data_path_s'] / r['data_path_s']:.2f}x)"
        )
        same = set(naive["zombies"]) == set(last["zombies"])
        print(
            f"  answers: idle GPU-h report {last['idle_gpu_hours']:,.1f} vs naive {naive['idle_gpu_hours']:,.1f}; "
            f"active % {last['active_pct']:.1f} vs {naive['active_pct']:.1f}; zombie pods {len(last['zombies'])} vs "
            f"{len(naive['zombies'])} "
            f"({'same set' if same else 'differ: ' + str(sorted(set(naive['zombies']) ^ set(last['zombies'])))})"
        )
    if e2e:
        print(
            f"  notebook end to end (papermill, HTML):      {e2e['e2e_s']:7.2f} s   failed={e2e['failed']} "
            f"errors={e2e['errors']}; largest child peak RSS {e2e['children_peak_rss_mib']:.0f} MiB"
        )
    print("  targets: " + "; ".join(f"{k}: {'MET' if v else 'NOT MET'}" for k, v in verdict.items()))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "gpus": gpus,
                    "days": DAYS,
                    "path": last["path"],
                    "report_s": report_total,
                    "floor_s": floor_total,
                    "naive_s": (k_start + naive["data_path_s"]) if naive else None,
                    "report_rss_mb": rss_mb,
                    "rules_only": args.rules_only,
                    "tsdb": json.loads((args.cache / "READY.json").read_text()),
                    "warm": {k: v for k, v in warm.items() if k != "queries"},
                    "report": rep,
                    "floor": floor,
                    "kernel": kernel,
                    "naive": naive,
                    "e2e": e2e,
                    "verdict": verdict,
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
