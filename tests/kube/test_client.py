"""KubeCluster driven through the REAL kubernetes client against the loopback API double."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gpulib.kube as k8s
from gpulib.core.errors import KubeconfigMissing, KubernetesError
from gpulib.kube.client import KubeCluster, in_pod
from gpulib.mig import current_mig_config
from tests.helpers.k8s_double import KubeApiDouble, free_port

FIX = Path(__file__).parents[1] / "fixtures" / "k8s"


def _no_sleep(_s: float) -> None:
    pass


def cluster(double, **kw) -> k8s.KubeCluster:
    kw.setdefault("sleep", _no_sleep)
    return k8s.KubeCluster(kubeconfig=double.kubeconfig, **kw)


def test_pods_in_three_pages_return_every_item(k8s_double):
    c = cluster(k8s_double, page_size=4)
    pods = c.pods()
    assert len(pods) == 11  # pods.json holds 11
    reqs = k8s_double.requests_to("GET", "/api/v1/pods")
    assert len(reqs) == 3  # 4 + 4 + 3
    assert [r.param("limit") for r in reqs] == ["4", "4", "4"]
    assert reqs[0].param("continue") is None and reqs[1].param("continue") and reqs[2].param("continue")
    assert reqs[1].param("continue") != reqs[2].param("continue")
    assert pods["pod"].is_unique


def test_nodes_through_client_match_the_file_converter(k8s_double):
    live = cluster(k8s_double, page_size=5).nodes().sort_values("node").reset_index(drop=True)
    offline = k8s.nodes_frame(k8s.read_list(FIX / "nodes.json")).sort_values("node").reset_index(drop=True)
    assert live["node"].tolist() == offline["node"].tolist()
    assert live["gpu_capacity"].sum() == 80  # 0 + 56 + 8 + 8 + 8 + 0
    assert live[["gpu_allocatable", "spot", "schedulable", "ready"]].equals(
        offline[["gpu_allocatable", "spot", "schedulable", "ready"]]
    )
    assert live.set_index("node").loc["dgx-a100-07", "mig_capacity"]["nvidia.com/mig-3g.20gb"] == 8


def test_bearer_token_from_kubeconfig_is_sent(k8s_double):
    cluster(k8s_double).nodes()
    assert k8s_double.requests[-1].authorization == f"Bearer {k8s_double.token}"


def test_namespaced_pods_daemonsets_and_cluster_policy(k8s_double):
    c = cluster(k8s_double, page_size=2)
    assert sorted(c.pods("inference")["pod"]) == [
        "embed-api-7c6d9f8b4-mm2lp",
        "triton-0",
        "vllm-llama3-8b-6d5f7c9b8d-x7k2p",
    ]
    ds = c.daemonsets("gpu-operator").set_index("daemonset")
    assert len(ds) == 7 and ds.loc["nvidia-device-plugin-daemonset", "ready"] == 4
    assert len(k8s_double.requests_to("GET", "/apis/apps/v1/namespaces/gpu-operator/daemonsets")) == 4  # 2+2+2+1
    assert k8s.cluster_policy_status(c.cluster_policy())["state"] == "notReady"


def test_cluster_policy_absent_and_crd_missing(tmp_path):
    with KubeApiDouble(cluster_policies=[]) as d:
        d.write_kubeconfig(tmp_path / "kc")
        assert cluster(d).cluster_policy() is None
    with KubeApiDouble(crd_installed=False) as d:
        d.write_kubeconfig(tmp_path / "kc2")
        with pytest.raises(KubernetesError, match="clusterpolicies.nvidia.com") as ei:
            cluster(d).cluster_policy()
        assert ei.value.status == 404 and "GPU Operator" in ei.value.hint


def test_403_names_resource_verb_url_and_rbac_rule(k8s_double):
    k8s_double.fail("/api/v1/nodes", 403)
    with pytest.raises(KubernetesError) as ei:
        cluster(k8s_double).nodes()
    err = ei.value
    assert err.status == 403
    assert "cannot list nodes" in str(err) and f"{k8s_double.url}/api/v1/nodes" in str(err)
    assert "kubectl auth can-i list nodes" in err.hint and 'apiGroups: [""]' in err.hint
    assert len(k8s_double.requests_to("GET", "/api/v1/nodes")) == 1  # 403 is not retried


def test_403_on_namespaced_daemonsets_names_group_and_namespace(k8s_double):
    k8s_double.fail("/apis/apps/v1/namespaces/*/daemonsets", 403)
    with pytest.raises(KubernetesError) as ei:
        cluster(k8s_double).daemonsets("gpu-operator")
    assert "apiGroups: [apps]" in ei.value.hint and "-n gpu-operator" in ei.value.hint


def test_500_is_retried_then_reported_with_url(k8s_double):
    k8s_double.fail("/api/v1/pods", 500)
    sleeps: list[float] = []
    with pytest.raises(KubernetesError) as ei:
        k8s.KubeCluster(kubeconfig=k8s_double.kubeconfig, retries=3, backoff_s=0.25, sleep=sleeps.append).pods()
    assert ei.value.status == 500
    assert f"{k8s_double.url}/api/v1/pods" in str(ei.value) and "after 3 attempt(s)" in str(ei.value)
    assert len(k8s_double.requests_to("GET", "/api/v1/pods")) == 3
    assert sleeps == [0.25, 0.5]  # exponential backoff between the 3 attempts


def test_transient_503_recovers(k8s_double):
    k8s_double.fail("/api/v1/nodes", 503, times=2)
    assert len(cluster(k8s_double, retries=4).nodes()) == 6
    assert len(k8s_double.requests_to("GET", "/api/v1/nodes")) == 3


def test_unreachable_server_names_the_server(tmp_path):
    port = free_port()
    kc = KubeApiDouble().write_kubeconfig(tmp_path / "kc", server=f"http://127.0.0.1:{port}")
    with pytest.raises(KubernetesError) as ei:
        k8s.KubeCluster(kubeconfig=kc, retries=2, sleep=_no_sleep).nodes()
    assert ei.value.status is None
    assert f"127.0.0.1:{port}" in str(ei.value) and "Connection refused" in str(ei.value)
    assert "after 2 attempt(s)" in str(ei.value)


def test_missing_kubeconfig_names_path(tmp_path):
    missing = tmp_path / "nope" / "config"
    with pytest.raises(KubeconfigMissing, match=str(missing)):
        k8s.KubeCluster(kubeconfig=missing)


def test_missing_kubeconfig_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "a") + os.pathsep + str(tmp_path / "b"))
    with pytest.raises(KubeconfigMissing) as ei:
        k8s.KubeCluster()
    assert str(tmp_path / "a") in str(ei.value) and str(tmp_path / "b") in str(ei.value)
    assert "KUBECONFIG" in ei.value.hint


def test_unknown_context_lists_the_known_ones(k8s_double):
    with pytest.raises(KubeconfigMissing, match=r"context 'prod-east' is not in kubeconfig .*contexts: double"):
        k8s.KubeCluster(kubeconfig=k8s_double.kubeconfig, context="prod-east")


def test_in_cluster_outside_a_pod(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeconfigMissing, match="in-cluster configuration not available"):
        k8s.KubeCluster(in_cluster=True)


def test_dump_writes_kubectl_shaped_snapshot(k8s_double, tmp_path):
    written = cluster(k8s_double, page_size=3).dump(tmp_path / "snap")
    names = sorted(p.name for p in written)
    assert names == [
        "clusterpolicies.json",
        "daemonsets.json",
        "mig-parted-config.yaml",
        "nodes.json",
        "pods.json",
        "resourceclaims.json",  # DRA: the double serves resource.k8s.io/v1 (none here)
        "resourceslices.json",
    ]
    doc = k8s.read_list(tmp_path / "snap" / "pods.json")
    assert doc["kind"] == "List" and len(doc["items"]) == 11
    assert len(k8s.nodes_frame(k8s.read_list(tmp_path / "snap" / "nodes.json"))) == 6
    # the snapshot answers current_mig_config(src) with the ConfigMap the ClusterPolicy names, as the live API does
    import gpulib

    cur = current_mig_config(gpulib.connect("snapshot", path=tmp_path / "snap"))
    assert cur.text == k8s_double.configmaps[0]["data"]["config.yaml"] and cur.configmap == "default-mig-parted-config"


def test_dump_skips_forbidden_operator_objects(k8s_double, tmp_path):
    k8s_double.fail("/apis/nvidia.com/v1/clusterpolicies", 403)
    written = cluster(k8s_double).dump(tmp_path / "snap")
    assert "clusterpolicies.json" not in [p.name for p in written] and (tmp_path / "snap" / "nodes.json").exists()
    k8s_double.clear_failures()
    k8s_double.fail("/api/v1/namespaces/gpu-operator/configmaps/*", 403)
    written = cluster(k8s_double).dump(tmp_path / "snap2")
    assert "mig-parted-config.yaml" not in [p.name for p in written] and "clusterpolicies.json" in [
        p.name for p in written
    ]


def test_bad_page_size():
    with pytest.raises(Exception, match="page_size must be >= 1"):
        k8s.KubeCluster(kubeconfig="/nonexistent", page_size=0)


def test_expired_continue_token_restarts_the_list_once(k8s_double):
    k8s_double.expire_next_continue()
    pods = cluster(k8s_double, page_size=4).pods()
    assert len(pods) == 11 and pods["pod"].is_unique
    reqs = k8s_double.requests_to("GET", "/api/v1/pods")
    # page 1, page 2 -> 410, then a fresh list of 3 pages
    assert [r.param("continue") is None for r in reqs] == [True, False, True, False, False]


def test_a_server_in_a_pod_uses_its_service_account_unless_a_kubeconfig_is_named(k8s_double, monkeypatch, tmp_path):
    """gpuops serve's claims and render Jobs build their cluster from the environment: in a pod (the kubelet sets
    KUBERNETES_SERVICE_HOST) without a kubeconfig named, the service account; otherwise the kubeconfig."""
    monkeypatch.setenv("KUBECONFIG", str(k8s_double.kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert not in_pod()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert not in_pod()  # a kubeconfig is named in $KUBECONFIG
    assert KubeCluster.from_environment().server == k8s_double.url
    monkeypatch.delenv("KUBECONFIG")
    assert in_pod() and not in_pod(tmp_path / "kubeconfig")
    with pytest.raises(KubeconfigMissing, match="in-cluster configuration not available"):
        KubeCluster.from_environment()  # no token file here: the in-cluster path was taken, and says what is missing
