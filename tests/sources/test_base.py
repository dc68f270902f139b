"""What only some backends have is a Source method (gpulib/sources/base.py): the default raises NotProvided (a
SourceError with a hint), the backends that have the data override it, and the domains ask for it instead of
checking which backend they were given."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

import gpulib
import gpulib.fleet.scheduling as scheduling
import gpulib.gpu_operator as op
import gpulib.vllm as vllm
from gpulib.core.errors import NotProvided, SourceError
from gpulib.demo.simulator import FleetSimulator
from gpulib.runbook import Runbook

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    """A snapshot folder of the demo fleet without operator objects: nodes, pods, one node's scrape."""
    d = tmp_path_factory.mktemp("snap")
    sim = FleetSimulator(end=END)
    (d / "nodes.json").write_text(json.dumps(sim.nodes_json()))
    (d / "pods.json").write_text(json.dumps(sim.pods_json()))
    (d / "metrics-a100-80-0.txt").write_text(sim.scrape_text(node="a100-80-0"))
    for f in d.iterdir():
        os.utime(f, (END.timestamp(), END.timestamp()))
    return gpulib.connect("snapshot", path=d)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.operator_objects("gpu-operator"),
        lambda s: s.pod_objects(),
        lambda s: s.instant_query("up"),
        lambda s: s.app_series("vllm", timedelta(hours=1)),
        lambda s: s.current_mig_config("gpu-operator"),
    ],
)
def test_defaults_raise_not_provided_with_a_hint(snap, call):
    with pytest.raises(NotProvided) as e:
        call(snap)
    assert isinstance(e.value, SourceError) and e.value.hint and snap.describe() in str(e.value)


def test_no_cluster_means_a_plan(snap):
    assert snap.kube_cluster() is None and gpulib.connect("demo", end=END).kube_cluster() is None


def test_demo_has_pod_specs_and_vllm_series_but_no_promql():
    demo = gpulib.connect("demo", end=END)
    pods = demo.pod_objects()
    assert pods and all(p["kind"] == "Pod" or "spec" in p for p in pods)
    assert [p["metadata"]["name"] for p in pods] == [p["metadata"]["name"] for p in demo.sim.pods_json()["items"]]
    series = demo.app_series("vllm", timedelta(hours=1))
    assert {name for name, _, _ in series} >= {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
    with pytest.raises(NotProvided):
        demo.app_series("triton", timedelta(hours=1))
    with pytest.raises(NotProvided):
        demo.instant_query("up")


def test_domains_ask_the_source(snap):
    # optional pod specs: none from a snapshot, the simulated ones from the demo
    assert scheduling.pod_specs_from(snap) == []
    assert len(scheduling.pod_specs_from(gpulib.connect("demo", end=END))) == len(
        FleetSimulator(end=END).pods_json()["items"]
    )
    # vLLM metrics need PromQL or simulated series: a snapshot has neither, and says so (INCOMPLETE, not OK)
    with pytest.raises(NotProvided, match="no vLLM metrics") as e:
        vllm.vllm_metrics(snap, "inference", "vllm-llama70b", "1h")
    assert "source='live'" in e.value.hint
    # operator state: the snapshot has no operator objects
    with pytest.raises(SourceError, match="not available"):
        op.operator_state(snap)
    last, up = op.dcgm_presence(snap)
    assert up is None and last is not None


def test_runbook_passes_the_demo_operator_scenario_to_connect(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", END.isoformat())
    rb = Runbook("operator_install", source="demo", demo_operator_state="allocatable_zero")
    fs = op.verify(op.operator_state(rb.src), rb.src.nodes(), check_metrics=False)
    assert [f.data.get("check") for f in fs] == ["allocatable_zero"]
    assert "-p demo_operator_state allocatable_zero" in rb.rerun_command()
    healthy = Runbook("operator_install", source="demo")
    assert [
        f.severity.name for f in op.verify(op.operator_state(healthy.src), healthy.src.nodes(), check_metrics=False)
    ] == ["OK"]
