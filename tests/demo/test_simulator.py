"""The demo fleet simulator: deterministic, with the incidents the scenario injects."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.dcgm import parse_scrape
from gpulib.sources.reduce import summarise_frame
from gpulib.xid.kernel_log import parse_kernel_log

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def sim():
    return FleetSimulator(end=END)


def test_deterministic_by_seed():
    a = FleetSimulator(end=END).frame("DCGM_FI_DEV_GPU_UTIL", END.timestamp() - 3600, END.timestamp())
    b = FleetSimulator(end=END).frame("DCGM_FI_DEV_GPU_UTIL", END.timestamp() - 3600, END.timestamp())
    c = FleetSimulator(end=END, seed=8).frame("DCGM_FI_DEV_GPU_UTIL", END.timestamp() - 3600, END.timestamp())
    assert a.equals(b)
    assert not np.array_equal(a["value"].to_numpy(), c["value"].to_numpy())
    assert a["uuid"].tolist() != c["uuid"].tolist()


def test_xid79_gpu_stops_reporting_but_keeps_sticky_xid(sim):
    t = sim.grid(END.timestamp() - 3 * 3600, END.timestamp())
    dev = next(d for d in sim.devices if d.node == "dgx-h100-1" and d.index == 5)
    xid = sim.sample("DCGM_FI_DEV_XID_ERRORS", dev, t)
    temp = sim.sample("DCGM_FI_DEV_GPU_TEMP", dev, t)
    at = END.timestamp() - 2 * 3600  # scenario: "-2h"
    assert set(xid[t < at]) == {0.0} and set(xid[t >= at]) == {79.0}
    assert not np.isnan(temp[t < at]).any() and np.isnan(temp[t >= at + 60]).all()


def test_dbe_gpu_has_remap_failure_and_kernel_log_lines(sim):
    dev = next(d for d in sim.devices if d.node == "a100-80-0" and d.index == 1)
    t = np.array([END.timestamp()])
    assert sim.sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", dev, t)[0] == 1
    assert sim.sample("DCGM_FI_DEV_XID_ERRORS", dev, t)[0] == 64
    events = parse_kernel_log(sim.kernel_log("a100-80-0"))
    assert events["xid"].tolist() == [48, 64]
    assert set(events["pci_bus_id"]) == {dev.pci_bus_id[4:].lower()}


def test_zombie_holds_memory_at_zero_activity(sim):
    dev = next(d for d in sim.devices if d.pod == "jupyter-alice-0")
    t = sim.grid(END.timestamp() - 6 * 3600, END.timestamp())
    assert sim.sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dev, t).max() == 0.0
    assert sim.sample("DCGM_FI_DEV_FB_USED", dev, t).min() > 0.7 * 81920


def test_mig_instances_have_no_gpu_util_but_profiling_fields(sim):
    inst = [d for d in sim.devices if d.node == "a100-40-mig-0" and d.is_instance]
    assert len(inst) == 16
    t = np.array([END.timestamp()])
    assert all(np.isnan(sim.sample("DCGM_FI_DEV_GPU_UTIL", d, t)[0]) for d in inst)
    assert all(not np.isnan(sim.sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", d, t)[0]) for d in inst)
    parent = next(d for d in sim.devices if d.node == "a100-40-mig-0" and not d.is_instance)
    assert np.isnan(sim.sample("DCGM_FI_DEV_GPU_UTIL", parent, t)[0])


def test_default_counters_drop_ecc_and_sm_active():
    s = FleetSimulator(end=END, counters="default")
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in s.metric_names()
    assert "DCGM_FI_PROF_SM_ACTIVE" not in s.metric_names()
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in s.metric_names()


def test_scrape_text_round_trips_through_the_parser(sim):
    df = parse_scrape(sim.scrape_text(node="a100-40-mig-0"))
    assert df.attrs["skipped_lines"] == 0
    assert set(df["node"]) == {"a100-40-mig-0"}
    fb = df[df["metric"] == "DCGM_FI_DEV_FB_USED"]
    assert len(fb) == 16 and set(fb["gpu_i_profile"]) == {"3g.20gb", "2g.10gb", "1g.5gb"}


def test_openmetrics_is_time_ordered_per_series_and_ends_with_eof(sim, tmp_path):
    path = sim.write_openmetrics(tmp_path / "x.om", "10m", 60)
    lines = path.read_text().splitlines()
    assert lines[-1] == "# EOF"
    series: dict[str, list[int]] = {}
    for ln in lines:
        if ln.startswith("#"):
            continue
        head, _, ts = ln.rpartition(" ")
        series.setdefault(head.rsplit(" ", 1)[0], []).append(int(ts))
    assert all(v == sorted(v) and len(v) == 11 for v in series.values())


def test_pod_spec_matches_incidents(sim):
    pods = {p["metadata"]["name"]: p for p in sim.pods_json()["items"]}
    legacy = pods["legacy-transcoder-0"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in legacy["resources"]["limits"]
    assert legacy["env"][0]["name"] == "NVIDIA_VISIBLE_DEVICES"
    spot = [n for n in sim.nodes_json()["items"] if n["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"]
    assert [n["metadata"]["name"] for n in spot] == ["l4-spot-0"]


def test_bad_options_are_rejected():
    with pytest.raises(InvalidParameter):
        FleetSimulator(label_style="fancy")
    with pytest.raises(InvalidParameter) as e:
        FleetSimulator("/nonexistent/scenario.yaml")
    assert "/nonexistent/scenario.yaml" in str(e.value)


def _om_samples(path, name):
    """{labels text: [values]} of metric ``name`` in an OpenMetrics file (``name{labels} value ts`` lines)."""
    out: dict[str, list[float]] = {}
    for ln in path.read_text().splitlines():
        if ln.startswith(name + "{"):
            head, value, _ts = ln.rsplit(" ", 2)
            out.setdefault(head[len(name) :], []).append(float(value))
    return out


def test_openmetrics_has_an_up_series_per_node_exporter(sim, tmp_path):
    up = _om_samples(sim.write_openmetrics(tmp_path / "x.om", "10m", 60), "up")
    nodes = [s["name"] for s in sim.node_specs]
    assert len(up) == len(nodes) == 8  # demo_fleet.yaml has 8 nodes (with the DRA node h100-dra-0)
    for node in nodes:
        (labels,) = [lab for lab in up if f'node="{node}"' in lab]
        assert 'job="nvidia-dcgm-exporter"' in labels
        assert re.search(r'instance="10\.\d+\.\d+\.\d+:9400"', labels)  # dcgm-exporter listens on :9400
        assert up[labels] == [1.0] * 11  # every scrape of 10 min at 60 s


def test_exporter_down_node_has_up_0_and_no_dcgm_series(tmp_path):
    sim = FleetSimulator(end=END, exporter_down=["l4-spot-0"])
    path = sim.write_openmetrics(tmp_path / "x.om", "10m", 60)
    up = _om_samples(path, "up")
    assert {lab: set(v) for lab, v in up.items() if 'node="l4-spot-0"' in lab}.popitem()[1] == {0.0}
    assert all(set(v) == {1.0} for lab, v in up.items() if 'node="l4-spot-0"' not in lab)
    text = path.read_text()
    assert 'hostname="l4-spot-0"' not in text  # the failed scrapes stored nothing
    assert 'hostname="a100-80-0"' in text
    with pytest.raises(InvalidParameter, match="gpu-node-99"):
        FleetSimulator(end=END, exporter_down=["gpu-node-99"])


def test_openmetrics_chunks_tile_the_window_with_only_the_named_metrics(tmp_path):
    """Two back-to-back slices (start/end inclusive) hold exactly the samples of the one-file window."""
    sim = FleetSimulator(end=END, exporter="4.8")  # the names below are those of dcgm-exporter <= 4.8
    names = ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"]
    end = END.timestamp()

    def samples(path):
        lines = path.read_text().splitlines()
        assert lines[-1] == "# EOF"
        return [ln for ln in lines if not ln.startswith("#")]

    whole = samples(sim.write_openmetrics(tmp_path / "w.om", "10m", 60, metrics=names))
    a = samples(sim.write_openmetrics(tmp_path / "a.om", step=60, start=end - 600, end=end - 360, metrics=names))
    b = samples(
        sim.write_openmetrics(tmp_path / "b.om", step=60, start=END - timedelta(minutes=5), end=END, metrics=names)
    )
    assert sorted(a + b) == sorted(whole)
    # first slice: END-10m .. END-6m at 60 s = 5 timestamps, second: END-5m .. END = 6
    assert {int(ln.rsplit(" ", 1)[1]) for ln in a} == {int(end) - 600 + 60 * k for k in range(5)}
    assert {int(ln.rsplit(" ", 1)[1]) for ln in b} == {int(end) - 300 + 60 * k for k in range(6)}
    assert {ln.split("{", 1)[0] for ln in whole} == set(names)  # no GPU_UTIL, no vllm: series
    zombie = [ln for ln in b if ln.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and 'pod="jupyter-alice-0"' in ln]
    assert len(zombie) == 6 and all(ln.split(" ")[-2] == "0" for ln in zombie)  # zombie since -20h: 0 % active


def test_openmetrics_slice_rejects_unknown_metric_and_reversed_range(sim, tmp_path):
    with pytest.raises(InvalidParameter) as e:
        sim.write_openmetrics(tmp_path / "x.om", metrics=["DCGM_FI_DEV_NOPE"])
    assert "DCGM_FI_DEV_NOPE" in str(e.value)
    with pytest.raises(InvalidParameter):
        sim.write_openmetrics(tmp_path / "x.om", start=END.timestamp(), end=END.timestamp() - 60)


def test_pod_owner_references_name_the_owners_api_group():
    """An ownerReference's apiVersion is the owner's group/version: a Job is batch/v1, a PyTorchJob kubeflow.org/v1,
    ReplicaSets, StatefulSets and DaemonSets apps/v1 (gpulib/data/kube/owner_kinds.csv); the demo said apps/v1 for
    all."""
    from gpulib.demo.simulator import FleetSimulator

    refs = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"]["ownerReferences"][0]
        for p in FleetSimulator().pods_json()["items"]
    }
    assert refs[("search", "embed-batch-7f9c2-xk2lq")]["apiVersion"] == "batch/v1"
    assert refs[("ads", "forecast-train-worker-0")]["apiVersion"] == "kubeflow.org/v1"
    assert refs[("ads", "recsys-train-0")]["apiVersion"] == "apps/v1"
    assert refs[("logging", "fluent-bit-x8k2p")]["apiVersion"] == "apps/v1"
    assert refs[("ads", "ab-test-scorer-84c6d7f5b9-m2xw8")] | {"uid": ""} == {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "ab-test-scorer-84c6d7f5b9",
        "controller": True,
        "uid": "",
    }


def _scenario_personas() -> dict[str, str]:
    """namespace/pod -> persona of every workload in the demo scenario file (the expected values)."""
    from pathlib import Path

    import yaml

    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "gpulib/data/demo/demo_fleet.yaml").read_text())
    return {f"{w['namespace']}/{w['pod']}": w["persona"] for node in spec["nodes"] for w in node.get("workloads", [])}


@pytest.mark.parametrize("window", ["24h", "7d"])
def test_idle_persona_pods_are_idle_and_the_zombie_persona_a_zombie(window):
    """The scenario's ``idle`` pods (allocated but idle: a CUDA context at most, thresholds.csv
    zombie_fb_used_min_mib's note) are classified idle, not zombie, by the one rule; its ``zombie`` pod a zombie."""
    import gpulib
    from gpulib.cost import classify_idle, idle_samples

    personas = _scenario_personas()
    expected = {p: {"idle": "idle", "zombie": "zombie"}[v] for p, v in personas.items() if v in ("idle", "zombie")}
    # 5 idle: dra-notebook-0 on the DRA node h100-dra-0 too (its exporter labels no pod: the claim names it)
    assert list(expected.values()).count("idle") == 5 and list(expected.values()).count("zombie") == 1
    samples, _ = idle_samples(gpulib.connect("demo", end=END), window)
    v = classify_idle(samples)
    got = dict(zip(v["namespace"] + "/" + v["pod"], v["state"]))
    assert {p: got.get(p) for p in expected} == expected


@pytest.mark.parametrize("name", ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
def test_a_frame_holds_each_devices_samples_under_its_own_labels(sim, name):
    t0, t1 = sim.end_s - 3600, sim.end_s
    df = sim.frame(name, t0, t1, 60.0)
    grid = sim.grid(t0, t1, 60.0)
    seen = 0
    for d in sim.devices:
        v = sim.sample(name, d, grid)
        rows = df[(df["node"] == d.node) & (df["uuid"] == d.uuid) & (df["gpu_i_id"] == d.gi_id)]
        ok = ~np.isnan(v)
        assert len(rows) == ok.sum(), d
        if not ok.any():
            continue
        seen += 1
        assert list(rows["value"]) == list(v[ok])
        assert list(rows["timestamp"]) == list(pd.to_datetime(grid[ok], unit="s", utc=True))
        first = rows.iloc[0]
        assert (first["gpu"], first["pci_bus_id"], first["model"], first["pod"]) == (
            str(d.index),
            d.pci_bus_id,
            d.model_name,
            d.pod,
        )
    assert seen and len(df) == sum(int((~np.isnan(sim.sample(name, d, grid))).sum()) for d in sim.devices)
    assert str(df["timestamp"].dt.tz) == "UTC" and df.index.equals(pd.RangeIndex(len(df)))


@pytest.mark.parametrize("stat", ["max", "min", "last", "increase", "avg", "p95"])
def test_a_summary_reduced_per_device_is_the_groupby_of_the_long_frame(sim, stat):
    """summary_frame is a shortcut for the stats it reduces exactly: the same frame as summarise_frame over
    frame(), for every metric, one node and all of them; the others it leaves to summarise_frame (None)."""
    t1 = sim.end_s
    node = [d for d in sim.devices if d.node == "dgx-h100-1"]
    for name in sim.metric_names():
        for devs, t0 in ((node, t1 - 6 * 3600), (None, t1 - 1800)):
            got = sim.summary_frame(name, t0, t1, stat, devs)
            if stat in ("avg", "p95"):
                assert got is None
                continue
            long = sim.frame(name, t0, t1, None, devs)
            if long.empty:
                assert got.empty
            else:
                pd.testing.assert_frame_equal(got, summarise_frame(long, stat))
