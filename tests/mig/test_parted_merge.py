"""A generated mig-parted config keeps the configs in use: it passes mig-parted's v1 schema (the rules of
NVIDIA/mig-parted api/spec/v1/spec.go @bd7160f4, encoded in gpulib.mig.parted_merge.schema_problems) and
refuses, with the reason, to drop a config name a node's nvidia.com/mig.config label references."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import gpulib
import gpulib.mig.plan as mp
from gpulib.mig.parted_merge import MigConfigRefused, default_configs, missing_references, schema_problems


@pytest.fixture(scope="module")
def demo():
    return gpulib.connect("demo", end="2026-12-01T06:45:00Z")


def _plan():
    return mp.plan_layout(
        [mp.Workload("a", 4), mp.Workload("b", 9, replicas=3)],
        {"A100-40GB": 2},
        nodes={"A100-40GB": ["a100-40-mig-0"]},
        gpus_per_node=4,
    )


def test_mig_parted_default_set_passes_the_schema():
    doc = default_configs()
    assert schema_problems(doc) == []
    assert {"all-disabled", "all-enabled", "all-balanced"} <= set(doc["mig-configs"])


@pytest.mark.parametrize(
    "doc,needle",
    [
        ({"mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}}, "missing 'version'"),
        ({"version": "v2", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}}, "unknown version"),
        ({"version": "v1", "mig-configs": {}}, "at least one entry in 'mig-configs'"),
        ({"version": "v1", "mig-configs": {"x": []}}, "at least one entry in 'x'"),
        ({"version": "v1", "mig-configs": {"x": [{"devices": "some", "mig-enabled": False}]}}, "devices must be"),
        (
            {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True}]}},
            "missing required field 'mig-devices'",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 7}}]},
            },
            "MIG devices included",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {"x": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": "7"}}]},
            },
            "error validating values",
        ),
        (
            {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "extra": 1}]}},
            "unexpected field",
        ),
    ],
)
def test_schema_catches_what_mig_parted_rejects(doc, needle):
    assert any(needle in p for p in schema_problems(doc)), schema_problems(doc)


def test_plan_only_config_drops_names_the_demo_nodes_reference(demo):
    """The old output (only gpuops-plan-N) leaves every node labelled all-disabled pointing at nothing."""
    nodes = demo.nodes()
    old = yaml.safe_load(_plan().mig_parted_config())
    missing = missing_references(old, nodes)
    assert any("'all-disabled'" in m for m in missing) and any("a100-40gb-mixed-3-2-1-1" in m for m in missing)


def test_refuses_with_the_reason_when_the_current_layout_is_not_in_the_base(demo):
    nodes = demo.nodes()
    with pytest.raises(MigConfigRefused, match="a100-40gb-mixed-3-2-1-1.*a100-40-mig-0"):
        _plan().safe_mig_parted_config(nodes)  # mig-parted's default set lacks the node's custom config


def test_merged_with_the_clusters_configmap_keeps_every_referenced_name(demo):
    nodes = demo.nodes()
    p = _plan()
    text = p.safe_mig_parted_config(nodes, demo.current_mig_config().text)
    doc = yaml.safe_load(text)
    assert schema_problems(doc) == []
    assert missing_references(doc, nodes, {n: [n] for n in []}) == []
    for name, _ in p.node_configs().values():
        assert name in doc["mig-configs"]
    assert set(default_configs()["mig-configs"]) <= set(doc["mig-configs"])


def test_plan_name_that_exists_with_another_layout_is_refused():
    base = default_configs()
    base["mig-configs"]["gpuops-plan-1"] = [{"devices": "all", "mig-enabled": False}]
    with pytest.raises(MigConfigRefused, match="gpuops-plan-1.*different layout"):
        _plan().safe_mig_parted_config(None, base)


@settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(st.tuples(st.sampled_from([3.0, 4.0, 9.0, 18.0, 35.0]), st.integers(1, 3)), min_size=1, max_size=5),
    st.sampled_from(["all-disabled", "all-balanced", "all-1g.5gb", "custom-x"]),
)
def test_every_generated_config_parses_and_keeps_referenced_names(ws, other_label):
    nodes = pd.DataFrame({"node": ["a100-40-mig-0", "other-0"], "mig_config": ["", other_label]})
    p = mp.plan_layout(
        [mp.Workload(f"w{i}", m, replicas=r) for i, (m, r) in enumerate(ws)],
        {"A100-40GB": 4},
        nodes={"A100-40GB": ["a100-40-mig-0"]},
        gpus_per_node=4,
        time_limit=5,
    )
    if not p.gpus:
        return
    if other_label == "custom-x":
        with pytest.raises(MigConfigRefused, match="custom-x"):
            p.safe_mig_parted_config(nodes)
        return
    doc = yaml.safe_load(p.safe_mig_parted_config(nodes))
    assert schema_problems(doc) == []
    assert missing_references(doc, nodes) == []
