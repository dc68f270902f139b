"""gpulib/demo/recorded.py: the recording-rule series generated from the simulator are the ones Prometheus records.

Two real Prometheus servers (tests/helpers/promharness.py) per scenario, both from one simulated day at 60 s:

* **raw + rules**: the raw DCGM fields backfilled with promtool, then the shipped rule group evaluated over them with
  ``promtool tsdb create-blocks-from rules`` (as ``benchmarks/bench_fleet_prometheus.py`` builds its TSDB);
* **rules only**: the series :func:`write_recorded_openmetrics` generates, plus the raw fields' last 5 minutes (what
  ``benchmarks/bench_fleet_prometheus.py --rules-only`` builds at 8,192 GPUs), twice: at the evaluation phase
  Prometheus chose for the rule group (read from the raw + rules TSDB) and at the generator's default phase (the
  benchmark's).

The generated values equal Prometheus' own evaluation of each rule expression over the raw TSDB at the same
timestamps. At Prometheus' phase the report (totals path, :func:`gpulib.cost.totals.load_totals`) answers exactly the
same from both TSDBs: idle GPU-hours, idle cost, zombie runs, the per-namespace and per-node tables. At the default
phase (the raw samples fall into the 5-minute steps differently) idle GPU-hours and idle cost agree within 1 % and the
zombie set is the same. The scenarios: the packaged demo fleet (MIG, a GPU fallen off the bus, a DBE crash, a zombie
notebook) and the benchmark's fleet (``benchmarks/fleet_scenario.py``) at 4 nodes, i.e. one node of every node
group.
"""

from __future__ import annotations

import importlib.util
import shutil
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
import yaml

import gpulib
from gpulib.cost import analyze_cost, namespace_allocation, recording_group, rollup
from gpulib.cost import steps as report
from gpulib.demo import DemoSource, FleetSimulator
from gpulib.demo.recorded import RuleGroup, recorded_series, write_recorded_openmetrics
from tests.helpers.pinned import ROOT, need_prometheus
from tests.helpers.promharness import PrometheusServer, backfill_rules, blocks_from_openmetrics

pytestmark = pytest.mark.prometheus

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
WINDOW, WINDOW_S = "1d", 86400
FIELDS = ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"]


def _fleet_scenario(nodes: int) -> dict:
    spec = importlib.util.spec_from_file_location("fleet_scenario", ROOT / "benchmarks" / "fleet_scenario.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_scenario(scrape_interval="60s", nodes_total=nodes)


@pytest.fixture(scope="module", params=["demo-fleet", "bench-fleet-4-nodes"])
def built(request, tmp_path_factory):
    """(simulator, scenario, raw+rules Prometheus, rules-only Prometheus, raw-only Prometheus)."""
    need_prometheus()
    scenario = None if request.param == "demo-fleet" else _fleet_scenario(4)
    sim = FleetSimulator(scenario, end=END, scrape_interval="60s")
    work = tmp_path_factory.mktemp(request.param)
    end = END.timestamp()
    start = end - WINDOW_S
    raw_tsdb = work / "raw"
    sim.write_openmetrics(work / "raw.om", start=start, end=end, metrics=FIELDS)
    blocks_from_openmetrics(work / "raw.om", raw_tsdb)
    ruled_tsdb = work / "ruled"
    shutil.copytree(raw_tsdb, ruled_tsdb)
    (work / "raw-run").mkdir()
    raw = PrometheusServer(raw_tsdb, work / "raw-run")
    rules = work / "report-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [recording_group()]}))
    for block in backfill_rules(raw.url, rules, start, end, work / "rule-blocks"):
        shutil.move(str(block), ruled_tsdb / block.name)
    (work / "ruled-run").mkdir()
    servers = {"ruled": PrometheusServer(ruled_tsdb, work / "ruled-run")}
    phase = _phase(servers["ruled"])
    for name, ph in (("only", phase), ("only-default", None)):
        tsdb = work / name
        series, samples = write_recorded_openmetrics(sim, work / "rules.om", start, end, data_start=start, phase=ph)
        assert series > 0 and samples > series
        blocks_from_openmetrics(work / "rules.om", tsdb)
        sim.write_openmetrics(work / "tail.om", start=end - 300, end=end, metrics=FIELDS)
        blocks_from_openmetrics(work / "tail.om", tsdb)
        (work / f"{name}-run").mkdir()
        servers[name] = PrometheusServer(tsdb, work / f"{name}-run")
    yield sim, scenario, servers, raw, phase
    for s in (*servers.values(), raw):
        s.stop()


def _phase(server) -> float:
    """Seconds after a multiple of the rule interval at which Prometheus evaluated the group (ms resolution)."""
    src = gpulib.connect("prometheus", url=server.url, end=END)
    ts = {
        round(float(r["value"][1]) * 1000) for r in src.query(f"timestamp({recording_group()['rules'][0]['record']})")
    }
    assert len(ts) == 1, ts
    return ts.pop() % round(RuleGroup().interval * 1000) / 1000


def _key(metric: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


@pytest.mark.parametrize("phase", [0.0, None], ids=["phase-0", "default-phase"])
def test_generated_values_are_prometheus_own_evaluation_of_each_rule(built, phase):
    """Phase 0: each step's range holds 6 scrapes (both ends); the default phase: 5."""
    sim, _, _, raw, _ = built
    end = END.timestamp()
    start = end - 6 * 3600  # six hours of rule points (72 per series per rule, 73 at phase 0)
    src = gpulib.connect("prometheus", url=raw.url, end=END)
    g = RuleGroup()
    times = g.eval_times(start, end, phase)
    assert len(times) == (73 if phase == 0 else 72) and times[0] == start + (0 if phase == 0 else 151)
    mine = {key: {} for key in g.names}
    for lab, evals, values in recorded_series(sim, start, end, data_start=end - WINDOW_S, phase=phase):
        for key, v in values.items():
            ok = ~np.isnan(v)
            if ok.any():
                mine[key][_key(lab)] = (evals[ok], v[ok])
    rules = {r["record"]: r["expr"] for r in recording_group()["rules"]}
    compared = 0
    for key, record in g.names.items():
        theirs = {
            _key(r["metric"]): (np.asarray(r["ts"], float), np.asarray(r["v"], float))
            for r in src.range_query(rules[record], times[0], times[-1], g.interval)
        }
        assert set(theirs) == set(mine[key]), record
        for series, (t, v) in theirs.items():
            mt, mv = mine[key][series]
            np.testing.assert_array_equal(mt, t, err_msg=f"{record} {series}")
            np.testing.assert_array_equal(mv, v, err_msg=f"{record} {series}")
            compared += len(v)
    assert compared > 1000
    assert any(v.max() == 1 for _, v in mine["held"].values())  # a zombie is held idle in the last six hours
    assert any(v.max() == 1 for _, v in mine["idle"].values()) and any(v.min() == 0 for _, v in mine["idle"].values())


def _report(server, scenario):
    demo = DemoSource(scenario, end=END, scrape_interval="60s")
    nodes, pods = demo.nodes(), demo.pods()
    src = gpulib.connect("prometheus", url=server.url, end=END)
    totals = report._prometheus_totals(src, WINDOW, report.series_step(WINDOW), nodes, pods)
    assert totals.path == "rules"
    return analyze_cost(nodes, pods, window=WINDOW, totals=totals)


def _zombies(rep) -> set:
    return set(zip(rep.zombies["namespace"].astype(str), rep.zombies["pod"].astype(str)))


def _same_table(a: pd.DataFrame, b: pd.DataFrame, key: str, cols: list[str], rtol: float, atol: float) -> None:
    m = a.merge(b, on=key, how="outer", suffixes=("_ruled", "_only"), indicator=True)
    assert (m["_merge"] == "both").all(), m.loc[m["_merge"] != "both", key].tolist()
    for c in cols:
        np.testing.assert_allclose(m[f"{c}_only"], m[f"{c}_ruled"], rtol=rtol, atol=atol, err_msg=f"{key} {c}")


def test_at_prometheus_phase_the_report_answers_exactly_the_same_from_the_rules_only_tsdb(built):
    _, scenario, servers, _, phase = built
    assert 0 < phase < 300  # a hash of the group's name and file: not on the minute, so the test shows it is honoured
    a, b = _report(servers["ruled"], scenario), _report(servers["only"], scenario)
    idle = float(a.usage["idle_allocated_gpu_hours"].sum())
    assert idle > 5.0  # idle reservations and the zombie notebook in every scenario
    assert float(b.usage["idle_allocated_gpu_hours"].sum()) == pytest.approx(idle, rel=1e-9)
    ns_a, ns_b = namespace_allocation(a), namespace_allocation(b)
    assert float(ns_a["idle_cost"].sum()) > 0
    assert float(ns_b["idle_cost"].sum()) == pytest.approx(float(ns_a["idle_cost"].sum()), rel=1e-9)
    assert _zombies(a) and _zombies(a) == _zombies(b)
    za, zb = (r.zombies.sort_values(["namespace", "pod", "start"]).reset_index(drop=True) for r in (a, b))
    assert list(za["start"]) == list(zb["start"]) and list(za["duration_s"]) == list(zb["duration_s"])
    ns_cols = ["allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours", "idle_cost"]
    _same_table(ns_a, ns_b, "namespace", ns_cols, rtol=1e-9, atol=0)
    cols = ["gpu_hours", "allocated_gpu_hours", "idle_allocated_gpu_hours", "unallocated_gpu_hours"]
    _same_table(rollup(a.usage, "node"), rollup(b.usage, "node"), "node", cols, rtol=1e-9, atol=0)


def test_at_the_default_phase_the_report_agrees_within_1_percent_and_finds_the_same_zombies(built):
    _, scenario, servers, _, _ = built
    a, b = _report(servers["ruled"], scenario), _report(servers["only-default"], scenario)
    idle = float(a.usage["idle_allocated_gpu_hours"].sum())
    assert float(b.usage["idle_allocated_gpu_hours"].sum()) == pytest.approx(idle, rel=0.01)
    cost_a, cost_b = (float(namespace_allocation(r)["idle_cost"].sum()) for r in (a, b))
    assert cost_b == pytest.approx(cost_a, rel=0.01)
    assert _zombies(a) and _zombies(a) == _zombies(b)
    # the same rows; GPU-hours per node exactly (a step is seen whichever phase), idle hours within a few steps
    cols = ["gpu_hours", "allocated_gpu_hours", "unallocated_gpu_hours"]
    _same_table(rollup(a.usage, "node"), rollup(b.usage, "node"), "node", cols, rtol=1e-9, atol=0)
    _same_table(namespace_allocation(a), namespace_allocation(b), "namespace", ["idle_allocated_gpu_hours"], 0.05, 1.0)
