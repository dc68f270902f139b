"""The base of a generated mig-parted config is the cluster's MIG Manager ConfigMap (Source.current_mig_config):
the live source reads the ClusterPolicy's ``spec.migManager.config.name`` (NVIDIA/gpu-operator
api/nvidia/v1/clusterpolicy_types.go ``MIGPartedConfigSpec`` @a22dbf67) and that ConfigMap's ``config.yaml`` through
the real kubernetes client against the loopback API double; a snapshot reads ``mig-parted-config.yaml`` or
``configmaps.json``; the demo its own. Where the ConfigMap cannot be read the base is mig-parted's default set and
the result says so (with the commands to check), and a 403 keeps its RBAC error: never a silent default."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

import gpulib
import gpulib.mig.plan as mp
from gpulib.core.errors import KubernetesError, MigConfigRefused, NotProvided
from gpulib.mig.parted_merge import config_for_cluster, configs_in_use, default_configs
from tests.helpers.k8s_double import load_items, start_k8s_double

#: a config only the cluster's ConfigMap defines (not in mig-parted's default set), and the node labelled with it
CUSTOM = "site-a100-3g-plus-4x1g"
NODE = "dgx-a100-07"
SITE_CM = "site-mig-parted-config"


def _site_config() -> str:
    doc = default_configs()
    doc["mig-configs"][CUSTOM] = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 1, "1g.5gb": 4}}]
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A double whose ClusterPolicy names a custom ConfigMap holding CUSTOM, with NODE labelled CUSTOM."""
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1")
    policies = load_items("clusterpolicies.json")
    policies[0]["spec"]["migManager"]["config"]["name"] = SITE_CM
    nodes = load_items("nodes.json")
    node = next(n for n in nodes if n["metadata"]["name"] == NODE)
    node["metadata"]["labels"]["nvidia.com/mig.config"] = CUSTOM
    cms = [
        {"metadata": {"name": SITE_CM, "namespace": "gpu-operator"}, "data": {"config.yaml": _site_config()}},
        *load_items("configmaps-gpu-operator.json"),
    ]
    double = start_k8s_double(tmp_path, nodes=nodes, cluster_policies=policies, configmaps=cms)
    yield double
    double.stop()


def _live(double):
    # Prometheus is never asked: the ConfigMap and the nodes come from the Kubernetes API
    return gpulib.connect("live", prometheus_url="http://127.0.0.1:9", kubeconfig=str(double.kubeconfig))


def _plan():
    return mp.plan_layout(
        [mp.Workload("a", 4), mp.Workload("b", 9, replicas=2)],
        {"A100-40GB": 1},
        nodes={"A100-40GB": ["dgx-a100-07"]},
        gpus_per_node=8,
    )


def test_live_source_reads_the_configmap_the_cluster_policy_names(cluster):
    cur = _live(cluster).current_mig_config()
    assert CUSTOM in yaml.safe_load(cur.text)["mig-configs"]
    assert (cur.configmap, cur.namespace) == (SITE_CM, "gpu-operator")
    assert f"gpu-operator/{SITE_CM}" in cur.where and "spec.migManager.config.name" in cur.where
    assert [r.path for r in cluster.requests_to("GET", "/api/v1/namespaces/*/configmaps/*")] == [
        f"/api/v1/namespaces/gpu-operator/configmaps/{SITE_CM}"
    ]


def test_default_configmap_when_the_cluster_policy_names_none(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    policies = load_items("clusterpolicies.json")
    del policies[0]["spec"]["migManager"]["config"]["name"]
    double = start_k8s_double(tmp_path, cluster_policies=policies)
    try:
        cur = _live(double).current_mig_config()
    finally:
        double.stop()
    assert cur.configmap == "default-mig-parted-config" and "all-balanced" in yaml.safe_load(cur.text)["mig-configs"]
    assert "default MIG Manager ConfigMap" in cur.where and "<node>-mig-config" in cur.where  # generated configs


def test_merged_config_keeps_the_clusters_custom_name_a_node_references(cluster):
    live = _live(cluster)
    base = configs_in_use(live)
    assert not base.fallback and base.findings() == [] and SITE_CM in base.note()[0]
    doc = yaml.safe_load(config_for_cluster(_plan(), live, base))
    assert CUSTOM in doc["mig-configs"] and "gpuops-plan-1" in doc["mig-configs"]
    assert doc["mig-configs"][CUSTOM] == yaml.safe_load(_site_config())["mig-configs"][CUSTOM]


def test_refuses_when_the_base_would_drop_the_clusters_custom_name(cluster):
    cluster.configmaps = [c for c in cluster.configmaps if c["metadata"]["name"] != SITE_CM]  # ConfigMap gone: 404
    live = _live(cluster)
    base = configs_in_use(live)
    assert base.fallback and base.text is None and base.error is None
    assert "mig-parted's default config set" in base.where and "not found" in base.where
    with pytest.raises(MigConfigRefused, match=f"{CUSTOM}.*{NODE}"):
        config_for_cluster(_plan(), live, base)


def test_403_on_the_configmap_is_an_rbac_error_and_a_loud_fallback(cluster):
    cluster.fail(
        f"/api/v1/namespaces/gpu-operator/configmaps/{SITE_CM}",
        403,
        message=f'configmaps "{SITE_CM}" is forbidden: User "oncall" cannot get resource "configmaps" in API '
        'group "" in the namespace "gpu-operator"',
    )
    live = _live(cluster)
    with pytest.raises(KubernetesError) as e:
        live.current_mig_config()
    assert e.value.status == 403 and "get configmaps" in str(e.value)
    assert "configmaps in the operator namespace gpu-operator" in e.value.hint
    assert f"kubectl auth can-i get configmaps/{SITE_CM} -n gpu-operator" in e.value.hint
    base = configs_in_use(live)
    assert base.fallback and isinstance(base.error, KubernetesError)
    text, level = base.note()
    assert level == "warning" and "NOT read" in text and "kubectl -n gpu-operator get configmap" in text
    (f,) = base.findings()
    assert f.severity.name == "WARNING" and "default set" in f.title
    assert "kubectl -n gpu-operator get configmap default-mig-parted-config -o yaml" in f.commands
    with pytest.raises(KubernetesError):
        base.raise_error()  # the runbook step records it: INCOMPLETE, not OK
    token = cluster.token
    for s in (str(e.value), e.value.hint, text, json.dumps(f.to_dict(), default=str)):
        assert token not in s


def test_operator_namespace_is_validated_before_any_request(cluster):
    from gpulib.core.errors import InvalidParameter

    live = _live(cluster)
    with pytest.raises(InvalidParameter, match="operator_namespace"):
        live.current_mig_config("gpu operator; rm -rf /")
    with pytest.raises(InvalidParameter, match="operator_namespace"):
        configs_in_use(live, namespace="Bad_NS")
    assert cluster.requests_to("GET", "/api/v1/namespaces/*/configmaps/*") == []


def test_snapshot_reads_the_saved_configmap_and_says_so_without_one(tmp_path):
    sim_nodes = {"apiVersion": "v1", "kind": "List", "items": load_items("nodes.json")}
    (tmp_path / "nodes.json").write_text(json.dumps(sim_nodes))
    snap = gpulib.connect("snapshot", path=tmp_path)
    with pytest.raises(NotProvided) as e:
        snap.current_mig_config()
    assert "mig-parted-config.yaml" in e.value.hint and "configmaps.json" in e.value.hint
    base = configs_in_use(snap)
    assert base.fallback and base.error is None and "kubectl" in base.note()[0]
    # kubectl -n gpu-operator get configmap default-mig-parted-config -o json
    cm = copy.deepcopy(load_items("configmaps-gpu-operator.json")[0])
    cm["data"]["config.yaml"] = _site_config()
    (tmp_path / "configmaps.json").write_text(json.dumps(dict(cm, apiVersion="v1", kind="ConfigMap")))
    cur = gpulib.connect("snapshot", path=tmp_path).current_mig_config()
    assert CUSTOM in cur.text and "configmaps.json" in cur.where and cur.configmap == "default-mig-parted-config"
    # the config.yaml itself wins (kubectl ... -o jsonpath='{.data.config\.yaml}' > mig-parted-config.yaml)
    (tmp_path / "mig-parted-config.yaml").write_text(
        "version: v1\nmig-configs:\n  only-this:\n    - devices: all\n      mig-enabled: false\n"
    )
    cur = gpulib.connect("snapshot", path=tmp_path).current_mig_config()
    assert "only-this" in cur.text and "mig-parted-config.yaml" in cur.where


def test_demo_routes_its_configs_through_the_same_method():
    demo = gpulib.connect("demo", end="2026-12-01T06:45:00Z")
    base = configs_in_use(demo)
    assert not base.fallback and "a100-40gb-mixed-3-2-1-1" in yaml.safe_load(base.text)["mig-configs"]
    assert "demo fleet" in base.where


def test_a_configmap_name_that_is_no_kubernetes_name_is_refused_not_requested(tmp_path):
    """The name comes from the cluster and ends up in a URL and in printed commands: it is validated first."""
    from gpulib.core.errors import MalformedKubernetesObject

    policies = load_items("clusterpolicies.json")
    policies[0]["spec"]["migManager"]["config"]["name"] = "x; kubectl delete ns gpu-operator"
    (tmp_path / "clusterpolicies.json").write_text(json.dumps({"kind": "List", "items": policies}))
    (tmp_path / "configmaps.json").write_text(
        json.dumps({"kind": "List", "items": load_items("configmaps-gpu-operator.json")})
    )
    snap = gpulib.connect("snapshot", path=tmp_path)
    with pytest.raises(MalformedKubernetesObject, match="spec.migManager.config.name"):
        snap.current_mig_config()
    base = configs_in_use(snap)
    assert base.fallback and isinstance(base.error, MalformedKubernetesObject)  # loud: the run is incomplete
