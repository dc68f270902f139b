"""gpulib/cost/totals.py: the report's totals from Prometheus give the same answer as the samples it pulled before.

A real Prometheus (tests/helpers/promharness.py) holds the demo fleet backfilled with promtool; a second one holds
the same TSDB plus the recording-rule series, made by evaluating the shipped rules over it with ``promtool tsdb
create-blocks-from rules`` (tests/helpers/promharness.py::backfill_rules). At several window ends: idle GPU-hours
of the rules path and of the raw (subquery) path within 1 % of the samples path, and the same zombie set."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
import yaml

import gpulib
from gpulib.cost import analyze_cost
from gpulib.cost import steps as report
from gpulib.cost.recording import recording_group
from gpulib.cost.report_frames import namespace_allocation
from gpulib.cost.usage import FB_USED, GR_ENGINE_ACTIVE
from gpulib.kube.dra import attribute_series
from tests.helpers.pinned import DEMO_END, SCRAPE, need_prometheus
from tests.helpers.promharness import PrometheusServer, backfill, backfill_rules

WINDOW = "4h"
#: window ends inside the 6 h backfill (rule series from its start): the pinned end and two earlier ones
ENDS = [DEMO_END, DEMO_END - timedelta(minutes=55), DEMO_END - timedelta(minutes=115)]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(raw-only Prometheus, Prometheus with the recording-rule series too, the demo source)."""
    need_prometheus()
    from gpulib.demo.simulator import FleetSimulator

    work = tmp_path_factory.mktemp("prom-totals")
    sim = FleetSimulator(end=DEMO_END, scrape_interval=SCRAPE)
    tsdb = backfill(sim, "6h", work)
    ruled_tsdb = work / "tsdb-rules"
    shutil.copytree(tsdb, ruled_tsdb)
    raw = PrometheusServer(tsdb, work)
    rules = work / "report-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [recording_group()]}))
    end = DEMO_END.timestamp()
    for block in backfill_rules(raw.url, rules, end - 6 * 3600, end, work / "rule-blocks"):
        shutil.move(str(block), ruled_tsdb / block.name)
    ruled_work = work / "ruled"
    ruled_work.mkdir()
    ruled = PrometheusServer(ruled_tsdb, ruled_work)
    yield raw, ruled
    raw.stop()
    ruled.stop()


def _reports(servers, end):
    raw, ruled = servers
    demo = gpulib.connect("demo", end=end, scrape_interval=SCRAPE)
    nodes, pods = demo.nodes(), demo.pods()
    step = report.series_step(WINDOW)
    out = {}
    for name, server in (("rules", ruled), ("raw", raw)):
        src = gpulib.connect("prometheus", url=server.url, end=end)
        totals = report._prometheus_totals(src, WINDOW, step, nodes, pods)
        assert totals.path == name
        out[name] = analyze_cost(nodes, pods, window=WINDOW, totals=totals)
        out[name].points = totals.points
    src = gpulib.connect("prometheus", url=raw.url, end=end)
    gr = src.series(GR_ENGINE_ACTIVE, WINDOW, step=step, agg="max")
    fb = src.series(FB_USED, WINDOW, step=step, agg="max")
    # as load_report_data does: the demo's DRA node exports no pod label, its ResourceClaims say who holds the GPUs
    gr, fb = attribute_series(gr, pods), attribute_series(fb, pods)
    out["samples"] = analyze_cost(nodes, pods, gr, fb, window=WINDOW)
    out["samples"].points = len(gr) + len(fb)
    return out


def _idle_hours(rep) -> float:
    return float(rep.usage["idle_allocated_gpu_hours"].sum())


def _zombie_set(rep) -> set:
    return set(zip(rep.zombies["namespace"].astype(str), rep.zombies["pod"].astype(str)))


@pytest.mark.parametrize("end", ENDS, ids=lambda e: e.strftime("%H%M"))
def test_totals_paths_give_the_same_answer(servers, end):
    reps = _reports(servers, end)
    raw = _idle_hours(reps["raw"])
    assert raw > 1.0  # the demo fleet has idle allocated GPUs in every window
    assert _idle_hours(reps["rules"]) == pytest.approx(raw, rel=0.01)
    assert _zombie_set(reps["rules"]) == _zombie_set(reps["raw"]) == _zombie_set(reps["samples"])
    assert _zombie_set(reps["raw"])  # the demo's zombie pod is in every window
    for col in ("gpu_hours", "allocated_gpu_hours"):
        assert float(reps["rules"].usage[col].sum()) == pytest.approx(float(reps["raw"].usage[col].sum()), rel=0.01)
    # the samples path counts one step more per series (49 points of 5 min in a 4 h window: both ends); the totals
    # count the window's 48 steps, so they are lower by that step (and the rules' evaluation phase)
    hours = float(reps["raw"].usage["gpu_hours"].sum())
    assert float(reps["samples"].usage["gpu_hours"].sum()) == pytest.approx(hours * 49 / 48, rel=0.01)
    assert _idle_hours(reps["samples"]) == pytest.approx(raw * 49 / 48, rel=0.03)
    # the totals count whole steps of the window: no series is seen for more than the window
    assert (reps["raw"].usage["samples"] <= 48).all() and (reps["samples"].usage["samples"] == 49).any()


def test_zombie_runs_keep_their_start_and_length(servers):
    reps = _reports(servers, DEMO_END)
    z = {p: reps[p].zombies.sort_values(["namespace", "pod", "start"]) for p in ("rules", "raw", "samples")}
    assert len(z["samples"]) >= 1  # the demo's zombie pod
    for p in ("rules", "raw"):
        assert len(z[p]) == len(z["samples"])
        for a, b in zip(z[p].itertuples(), z["samples"].itertuples()):
            assert abs((a.start - b.start).total_seconds()) <= 300, p  # the rule's 5-minute resolution
            assert a.duration_s == pytest.approx(b.duration_s, abs=600), p


def test_the_method_section_says_which_path_ran(servers):
    raw, ruled = servers
    demo = gpulib.connect("demo", end=DEMO_END, scrape_interval=SCRAPE)
    nodes, pods = demo.nodes(), demo.pods()
    notes = {}
    for name, server in (("rules", ruled), ("raw", raw)):
        src = gpulib.connect("prometheus", url=server.url, end=DEMO_END)
        totals = report._prometheus_totals(src, WINDOW, report.series_step(WINDOW), nodes, pods)
        data = report.ReportData(window=WINDOW, step="5m", nodes=nodes, pods=pods, totals=totals)
        notes[name] = report.method_section(report.cost_report(data), data)
    assert "recording rules (group gpu-runbooks.report)" in notes["rules"]
    assert "Install the recording rules" not in notes["rules"]
    assert "subqueries of the raw DCGM fields" in notes["raw"] and "Install the recording rules" in notes["raw"]
    # a source without PromQL pulls samples, as before
    data = report.load_report_data(demo, WINDOW)
    assert data.path == "samples" and "Data path" not in report.method_section(report.cost_report(data), data)


def test_the_activity_field_and_models_are_read_under_every_name(servers):
    """The demo exports dcgm-exporter 4.10 names (GR_ENGINE_ACTIVE as DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO): the report
    still reads its activity as GR_ENGINE_ACTIVE, sees the fleet's GPU models (for the MIG shares) and the run's
    evidence has the activity field present, so the run can be OK (it asked for the <= 4.8 names only before)."""
    from gpulib.run import evidence

    _raw, ruled = servers
    demo = gpulib.connect("demo", end=DEMO_END, scrape_interval=SCRAPE)
    nodes, pods = demo.nodes(), demo.pods()
    src = gpulib.connect("prometheus", url=ruled.url, end=DEMO_END)
    names = {r["metric"]["__name__"] for r in src.query('count by (__name__) ({__name__=~"DCGM_FI_PROF_GR_ENGINE.*"})')}
    assert names == {"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"}
    models = {r["metric"]["modelName"] for r in src.query("count by (modelName) (DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO)")}
    assert len(models) >= 2  # the demo fleet mixes GPU models
    reads = evidence.watch(src)
    totals = report._prometheus_totals(src, WINDOW, report.series_step(WINDOW), nodes, pods)
    assert totals.activity_field == GR_ENGINE_ACTIVE
    assert GR_ENGINE_ACTIVE in reads.present
    assert evidence.missing("gpu_utilization_report", reads) == []
    from gpulib.cost.totals import activity_of, fetch_totals

    got = fetch_totals(src, 4 * 3600.0, 3600.0)
    field, seen = activity_of(got.probes)
    assert field == GR_ENGINE_ACTIVE and set(seen) == models


#: the demo's DRA node (gpulib/data/demo/demo_fleet.yaml h100-dra-0): its exporter maps no pod, its ResourceClaims do
DRA_PODS = {
    ("research", "dra-train-worker-0"),
    ("search", "dra-embed-7b9c4d6f8-k2m4p"),
    ("notebooks", "dra-notebook-0"),
}
DRA_IDLE = ("notebooks", "dra-notebook-0")  # persona idle: holds GPU 3 and does nothing


def _ns_idle(rep) -> dict:
    u = rep.usage
    return u.groupby(u["namespace"].astype(str))["idle_allocated_gpu_hours"].sum().round(6).to_dict()


@pytest.mark.parametrize("path", ["rules", "raw"])
def test_dra_held_gpus_reach_their_pod_on_the_totals_path_as_on_the_frames_path(servers, path):
    """The report on a live Prometheus (totals) gives a DRA-held GPU to the pod its ResourceClaim names, as the
    frames path (``load_report_data(totals=False)``: gpulib.kube.dra.attribute_series) does: same pods, same zombies,
    same idle-held GPU-hours per namespace (the frames path counts one step more: 49 points of 5 min in 4 h)."""
    raw, ruled = servers
    demo = gpulib.connect("demo", end=DEMO_END, scrape_interval=SCRAPE)
    src = gpulib.connect("prometheus", url=(ruled if path == "rules" else raw).url, end=DEMO_END)
    src.nodes, src.pods = demo.nodes, demo.pods  # the cluster's Kubernetes objects, ResourceClaims included
    reps = {}
    for name, totals in (("totals", True), ("frames", False)):
        data = report.load_report_data(src, WINDOW, totals=totals)
        assert data.path == (path if totals else "samples")
        reps[name] = report.cost_report(data)
    tot, frm = reps["totals"], reps["frames"]
    held = {(r.namespace, r.pod) for r in tot.usage[["namespace", "pod"]].astype(str).itertuples()}
    assert DRA_PODS <= held
    assert held == {(r.namespace, r.pod) for r in frm.usage[["namespace", "pod"]].astype(str).itertuples()}
    assert _zombie_set(tot) == _zombie_set(frm)  # (the DRA notebook holds 0.5 GiB: idle-held, not a zombie)
    # GPUs 0-3 of the DRA node are held (train 0, 1; embed 2; notebook 3), 4-7 are free
    dra_rows = tot.usage[tot.usage["node"].astype(str) == "h100-dra-0"]
    assert sorted(dra_rows.loc[dra_rows["pod"].astype(str) != "", "gpu"].astype(int)) == [0, 1, 2, 3]
    assert float(tot.usage.loc[tot.usage["pod"].astype(str) == DRA_IDLE[1], "idle_allocated_gpu_hours"].sum()) > 3.5
    # idle-held GPU-hours per DRA pod and per namespace, allocated GPU-hours per namespace: as the frames path
    # counts them. abs: one 5-minute step. The rules path's idle steps are the rule's, evaluated at its own phase
    # (a GPU near the idle threshold flips a step or two there), so its per-namespace idle is held to the DRA pods'
    # own hours only; the raw path's to every namespace.
    for ns, pod in DRA_PODS:
        t_idle, f_idle = (
            float(r.usage.loc[r.usage["pod"].astype(str) == pod, "idle_allocated_gpu_hours"].sum()) for r in (tot, frm)
        )
        assert t_idle == pytest.approx(f_idle * 48 / 49, rel=0.03, abs=0.09 if path == "raw" else 0.25), pod
    t_ns, f_ns = _ns_idle(tot), _ns_idle(frm)
    assert set(t_ns) == set(f_ns) and DRA_IDLE[0] in t_ns
    if path == "raw":
        for ns, hours in f_ns.items():
            assert t_ns[ns] == pytest.approx(hours * 48 / 49, rel=0.03, abs=0.09), ns
    t_alloc = namespace_allocation(tot).set_index("namespace")["allocated_gpu_hours"]
    f_alloc = namespace_allocation(frm).set_index("namespace")["allocated_gpu_hours"]
    assert set(t_alloc.index) == set(f_alloc.index)
    for ns in f_alloc.index:
        assert t_alloc[ns] == pytest.approx(f_alloc[ns] * 48 / 49, rel=0.03, abs=0.09), ns
