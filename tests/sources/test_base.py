"""What only some backends have is a Source method (gpulib/sources/base.py): the default raises NotProvided (a
SourceError with a hint), the backends that have the data override it, and the domains ask for it instead of
checking which backend they were given."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

import gpulib
import gpulib.fleet.scheduling as scheduling
import gpulib.gpu_operator as op
import gpulib.vllm as vllm
from gpulib.core.errors import NotProvided, SourceError
from gpulib.demo.simulator import FleetSimulator
from gpulib.mig import current_mig_config
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
        lambda s: s.objects("daemonsets", "gpu-operator"),
        lambda s: s.objects("clusterpolicies"),
        lambda s: s.objects("namespaces", "gpu-operator"),
        lambda s: s.objects("mig-parted-config", "gpu-operator"),
        lambda s: s.query("up"),
        lambda s: op.operator_objects(s, "gpu-operator"),
        lambda s: current_mig_config(s, "gpu-operator"),
    ],
)
def test_defaults_raise_not_provided_with_a_hint(snap, call):
    with pytest.raises(NotProvided) as e:
        call(snap)
    assert isinstance(e.value, SourceError) and e.value.hint and snap.describe() in str(e.value)


def test_objects_checks_its_kind_and_namespace_before_asking_the_backend(snap):
    from gpulib.core.errors import InvalidParameter

    with pytest.raises(InvalidParameter, match="kind"):
        snap.objects("secrets")
    with pytest.raises(InvalidParameter, match="namespace"):
        snap.objects("pods", "Bad_NS")
    with pytest.raises(InvalidParameter, match="needs a namespace"):
        snap.objects("daemonsets")


def test_no_cluster_means_a_plan(snap):
    assert snap.kube_cluster() is None and gpulib.connect("demo", end=END).kube_cluster() is None


def test_demo_has_pod_specs_and_vllm_series_but_no_promql():
    demo = gpulib.connect("demo", end=END)
    pods = demo.objects("pods")
    assert pods and all(p["kind"] == "Pod" or "spec" in p for p in pods)
    assert [p["metadata"]["name"] for p in pods] == [p["metadata"]["name"] for p in demo.sim.pods_json()["items"]]
    series = demo.query('{__name__=~"vllm:.+"}[3600s]')
    assert {r["metric"]["__name__"] for r in series} >= {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
    assert {len(r["values"]) for r in series} == {3600 // 30 + 1}  # every 30 s scrape of the hour, both ends
    with pytest.raises(NotProvided):
        demo.query('{__name__=~"triton:.+"}[3600s]')
    with pytest.raises(NotProvided):
        demo.query("up")


def test_domains_ask_the_source(snap):
    # optional pod specs: the snapshot's pods.json (kubectl get pods -A -o json), the simulated ones from the demo
    assert [p["metadata"]["name"] for p in scheduling.pod_specs_from(snap)] == [
        p["metadata"]["name"] for p in FleetSimulator(end=END).pods_json()["items"]
    ]
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


def test_preflight_findings_take_their_sop_text_from_sources_sop():
    """The preflight's SOP text is the rows of gpulib/data/sources/sources_sop.csv, literal braces rendered once."""
    from gpulib.sources.base import capabilities_from

    (none,) = capabilities_from([], []).findings
    assert none.title == "No DCGM metrics found"
    assert none.summary == "The metrics backend holds no DCGM_* series in the window."
    assert none.commands[-1] == 'curl -s "$GPUOPS_PROMETHEUS_URL/api/v1/query?query=up{job=~\\".*dcgm.*\\"}"'
    by_title = {f.title: f for f in capabilities_from(["DCGM_FI_DEV_GPU_TEMP"], [{"Hostname": "n1"}]).findings}
    no_pod = by_title["DCGM series carry no pod labels"]
    assert no_pod.commands == [
        "kubectl -n gpu-operator get ds nvidia-dcgm-exporter -o jsonpath='{.spec.template.spec.containers[0].env}'"
    ]
    assert no_pod.sop_step.startswith("Run dcgm-exporter with Kubernetes mapping (DCGM_EXPORTER_KUBERNETES=true")
    assert by_title["Host label is 'Hostname' (dcgm-exporter before PR #655)"].summary == (
        "Newer exporters write 'hostname'; queries here accept both."
    )
    fields = next(f for t, f in by_title.items() if t.endswith("useful DCGM field(s) not exported"))
    assert fields.commands[1].endswith("--reuse-values --set dcgmExporter.config.name=dcgm-metrics")
    exported = capabilities_from(["DCGM_FI_DEV_GPU_TEMP"], [{"hostname": "n1", "exported_pod": "p"}]).findings
    assert [f.sop_step for f in exported if "exported_pod" in f.title] == [
        "Optionally set honorLabels: true on the dcgm-exporter ServiceMonitor."
    ]


def test_every_sources_sop_row_is_used_and_every_key_asked_for_exists():
    from pathlib import Path

    import gpulib.sources
    from gpulib.core.sop import keys
    from tests.helpers.sopcheck import scan, unknown_keys, unused_rows

    pkg, rows = Path(gpulib.sources.__file__).parent, set(keys("sources_sop"))
    assert scan(pkg, "sources_sop")[0] == rows
    assert unknown_keys(pkg, "sources_sop", rows) == [] and unused_rows(pkg, "sources_sop", rows) == []


#: what a built-in backend offers beside the interface: its own plumbing, never a domain's question
BACKEND_EXTRAS = {
    "PrometheusSource": {"http", "kube", "query_range"},
    "LiveSource": {"http", "kube", "query_range"},
    "DemoSource": {"nodes_json", "pods_json"},
    "SnapshotSource": set(),
}


def _public_members(cls) -> set[str]:
    """Public methods and properties ``cls`` and its bases up to (and including) Source define."""
    from gpulib.sources.base import Source

    out = set()
    for klass in cls.__mro__[: cls.__mro__.index(Source) + 1]:
        out |= {
            n
            for n, v in vars(klass).items()
            if not n.startswith("_") and (callable(v) or isinstance(v, (property, staticmethod, classmethod)))
        }
    return out


def interface_problems(classes) -> list[str]:
    """Public members beyond :data:`gpulib.sources.base.PUBLIC_METHODS` (and a backend's listed extras)."""
    from gpulib.sources.base import PUBLIC_METHODS

    out = []
    for cls in classes:
        extra = _public_members(cls) - set(PUBLIC_METHODS) - BACKEND_EXTRAS.get(cls.__name__, set())
        out += [f"{cls.__name__}.{n}" for n in sorted(extra)]
    return out


def _builtin_backends():
    from gpulib.sources.base import Source
    from gpulib.sources.registry import BUILTIN, get_source_class

    return [Source] + [get_source_class(name) for name in BUILTIN]


def test_the_source_interface_is_the_fixed_list_and_every_backend_keeps_to_it():
    """Source offers the core questions and generic objects()/query() only (PUBLIC_METHODS); a domain's reader
    (a MIG config, vLLM series, GPU Operator objects) is a function of its domain over them."""
    from gpulib.sources.base import PUBLIC_METHODS, Source

    assert _public_members(Source) == set(PUBLIC_METHODS) - {"name"}
    assert {c.__name__ for c in _builtin_backends()} >= set(BACKEND_EXTRAS)
    assert interface_problems(_builtin_backends()) == []


def test_the_interface_check_catches_a_domain_method_planted_on_a_backend_or_the_base():
    from gpulib.demo.source import DemoSource
    from gpulib.sources.base import Source

    class PlantedDemo(DemoSource):
        def current_mig_config(self, namespace="gpu-operator"):
            return None

    class PlantedBase(Source):
        @property
        def operator_objects(self):
            return {}

    PlantedDemo.__name__ = "DemoSource"  # even under a listed backend's name
    assert interface_problems([PlantedDemo]) == ["DemoSource.current_mig_config"]
    assert interface_problems([PlantedBase]) == ["PlantedBase.operator_objects"]
