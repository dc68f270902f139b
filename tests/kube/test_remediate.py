"""Guarded remediation against the loopback API double (real kubernetes client).

Fleet in the fixture: 5 GPU nodes, of which ip-10-0-77-8 (H200) is already cordoned. With the
default policy share 0.25 the breaker allows max(1, floor(0.25 x 5)) = 1 unschedulable GPU node, so
cordoning a second one is refused; tests that want to act pass max_share=0.5 (allows 2).
"""

from __future__ import annotations

import json
import os
import stat

import pytest

import gpulib.kube as k8s
import gpulib.kube.remediate as remediate
from gpulib.core.errors import InvalidParameter, KubernetesError

DGX, H100, H200 = "dgx-a100-07", "ip-10-0-12-34.ec2.internal", "ip-10-0-77-8.us-west-2.compute.internal"


@pytest.fixture
def kc(k8s_double):
    return k8s.KubeCluster(kubeconfig=k8s_double.kubeconfig, sleep=lambda s: None)


@pytest.fixture
def log(tmp_path):
    return tmp_path / "audit" / "audit.jsonl"


def records(path) -> list[dict]:
    """The outcome records (each action also writes an ``intent`` record before it sends anything)."""
    return [r for r in (json.loads(line) for line in path.read_text().splitlines()) if r.get("phase") != "intent"]


def test_cordon_dry_run_sends_dryrun_all_and_changes_nothing(k8s_double, kc, log):
    res = remediate.cordon(DGX, cluster=kc, audit_log=log, max_share=0.5)
    (patch,) = k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")
    assert patch.param("dryRun") == "All"
    assert patch.body == {"spec": {"unschedulable": True}}
    assert "strategic-merge-patch" in patch.content_type
    assert "unschedulable" not in k8s_double.node(DGX)["spec"]
    assert (res.mode, res.dry_run, res.ok) == ("server-dry-run", True, True)
    assert res.kubectl == [f"kubectl cordon {DGX} --dry-run=server"]


def test_cordon_apply_sends_the_patch(k8s_double, kc, log):
    res = remediate.cordon(DGX, cluster=kc, apply=True, audit_log=log, max_share=0.5)
    (patch,) = k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")
    assert patch.param("dryRun") is None
    assert k8s_double.node(DGX)["spec"]["unschedulable"] is True
    assert (res.mode, res.dry_run) == ("applied", False) and res.kubectl == [f"kubectl cordon {DGX}"]


def test_uncordon_apply_clears_unschedulable(k8s_double, kc, log):
    remediate.uncordon(H200, cluster=kc, apply=True, audit_log=log)
    assert "unschedulable" not in k8s_double.node(H200)["spec"]
    assert k8s_double.requests_to("PATCH", f"/api/v1/nodes/{H200}")[0].body == {"spec": {"unschedulable": None}}


def test_circuit_breaker_refuses_second_cordon_and_audits_it(k8s_double, kc, log):
    with pytest.raises(remediate.RemediationRefused, match=r"2 of 5 GPU nodes unschedulable \(allowed 1"):
        remediate.cordon(DGX, cluster=kc, apply=True, audit_log=log)
    assert k8s_double.requests_to("PATCH", "/api/v1/nodes/*") == []
    (rec,) = records(log)
    assert (rec["action"], rec["result"], rec["target"]["name"]) == ("cordon", "refused", DGX)


def test_circuit_breaker_share_from_env(k8s_double, kc, log, monkeypatch):
    monkeypatch.setenv("GPUOPS_MAX_CORDON_SHARE", "0.4")  # floor(0.4 x 5) = 2 allowed
    assert remediate.cordon(DGX, cluster=kc, audit_log=log).ok


def test_cordoning_an_already_cordoned_node_is_not_refused(kc, log):
    assert remediate.cordon(H200, cluster=kc, audit_log=log).ok


def test_label_mig_config_dry_run_then_apply(k8s_double, kc, log):
    dry = remediate.set_mig_config(DGX, "all-1g.5gb", cluster=kc, audit_log=log)
    assert k8s_double.node(DGX)["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert dry.kubectl == [f"kubectl label node {DGX} nvidia.com/mig.config=all-1g.5gb --overwrite --dry-run=server"]
    remediate.set_mig_config(DGX, "all-1g.5gb", cluster=kc, audit_log=log, apply=True)
    assert k8s_double.node(DGX)["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.5gb"
    p1, p2 = k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")
    assert (p1.param("dryRun"), p2.param("dryRun")) == ("All", None)
    assert p2.body == {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.5gb"}}}


def test_label_removal(k8s_double, kc, log):
    res = remediate.label(DGX, "nvidia.com/gpu.deploy.dcgm-exporter", None, cluster=kc, apply=True, audit_log=log)
    assert "nvidia.com/gpu.deploy.dcgm-exporter" not in k8s_double.node(DGX)["metadata"]["labels"]
    assert res.kubectl == [f"kubectl label node {DGX} nvidia.com/gpu.deploy.dcgm-exporter- --overwrite"]


def test_taint_add_keeps_other_taints_and_remove(k8s_double, kc, log):
    remediate.taint(
        H200, "gpu.example.com/xid", "79", "NoExecute", cluster=kc, apply=True, audit_log=log, bypass_pdb=True
    )
    taints = k8s_double.node(H200)["spec"]["taints"]
    assert [(t["key"], t.get("value", ""), t["effect"]) for t in taints] == [
        ("node.kubernetes.io/unschedulable", "", "NoSchedule"),
        ("nvidia.com/gpu", "true", "NoSchedule"),
        ("gpu.example.com/xid", "79", "NoExecute"),
    ]
    res = remediate.taint(
        H200, "gpu.example.com/xid", effect="NoExecute", remove=True, cluster=kc, apply=True, audit_log=log
    )
    assert [t["key"] for t in k8s_double.node(H200)["spec"]["taints"]] == [
        "node.kubernetes.io/unschedulable",
        "nvidia.com/gpu",
    ]
    assert res.kubectl == [f"kubectl taint node {H200} gpu.example.com/xid:NoExecute-"]


def test_taint_dry_run_changes_nothing(k8s_double, kc, log):
    res = remediate.taint(DGX, "nvidia.com/gpu", "present", cluster=kc, audit_log=log)
    assert "taints" not in k8s_double.node(DGX)["spec"]
    assert k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")[0].param("dryRun") == "All"
    assert res.kubectl == [f"kubectl taint node {DGX} nvidia.com/gpu=present:NoSchedule --overwrite --dry-run=server"]


def test_drain_dry_run_evicts_only_gpu_pods_and_skips_daemonsets(k8s_double, kc, log):
    res = remediate.drain(H100, cluster=kc, audit_log=log, max_share=0.5)
    (ev,) = k8s_double.requests_to("POST", "/api/v1/namespaces/*/pods/*/eviction")
    assert ev.path == "/api/v1/namespaces/training/pods/llm-train-worker-0/eviction"
    assert ev.param("dryRun") == "All" and ev.body["deleteOptions"] == {"dryRun": ["All"]}
    assert ev.body["kind"] == "Eviction" and ev.body["apiVersion"] == "policy/v1"
    skipped = {c["pod"]: c["outcome"] for c in res.changes if c["op"] == "skip"}
    assert "DaemonSet" in skipped["gpu-operator/nvidia-device-plugin-daemonset-q8k2m"]
    assert "gpu_only" in skipped["inference/embed-api-7c6d9f8b4-mm2lp"]
    assert any(p["metadata"]["name"] == "llm-train-worker-0" for p in k8s_double.pods)  # nothing deleted
    assert "unschedulable" not in k8s_double.node(H100)["spec"]
    assert res.ok and "would evict 1 pod" in res.message
    assert res.kubectl[0] == f"kubectl cordon {H100} --dry-run=server"
    assert "kubectl create --raw /api/v1/namespaces/training/pods/llm-train-worker-0/eviction -f -" in res.kubectl[1]


def test_drain_apply_cordons_and_evicts(k8s_double, kc, log):
    res = remediate.drain(H100, cluster=kc, apply=True, audit_log=log, max_share=0.5)
    assert k8s_double.node(H100)["spec"]["unschedulable"] is True
    names = {p["metadata"]["name"] for p in k8s_double.pods}
    assert "llm-train-worker-0" not in names and "nvidia-device-plugin-daemonset-q8k2m" in names
    assert "embed-api-7c6d9f8b4-mm2lp" in names  # not a GPU pod
    assert res.ok and res.mode == "applied"


def test_drain_all_pods_when_gpu_only_false(k8s_double, kc, log):
    remediate.drain(H100, cluster=kc, apply=True, gpu_only=False, audit_log=log, max_share=0.5)
    names = {p["metadata"]["name"] for p in k8s_double.pods}
    assert "embed-api-7c6d9f8b4-mm2lp" not in names and "nvidia-device-plugin-daemonset-q8k2m" in names


def test_drain_blocked_by_pdb_is_not_ok(k8s_double, kc, log):
    k8s_double.block_eviction("training", "llm-train-worker-0", pdb="llm-train-pdb")
    res = remediate.drain(H100, cluster=kc, apply=True, audit_log=log, max_share=0.5)
    assert not res.ok and "blocked by PodDisruptionBudget" in res.message
    (ev,) = [c for c in res.changes if c["op"] == "evict"]
    assert "llm-train-pdb" in ev["outcome"]
    assert len(k8s_double.requests_to("POST", "/api/v1/namespaces/training/pods/llm-train-worker-0/eviction")) == 1
    assert records(log)[-1]["result"] == "partial"


def test_drain_bare_pod_needs_force(k8s_double, kc, log):
    res = remediate.drain(H200, cluster=kc, apply=True, audit_log=log)
    assert "force=True" in next(c["outcome"] for c in res.changes if c.get("pod") == "default/gpu-burn-h200")
    assert any(p["metadata"]["name"] == "gpu-burn-h200" for p in k8s_double.pods)
    remediate.drain(H200, cluster=kc, apply=True, force=True, audit_log=log)
    assert not any(p["metadata"]["name"] == "gpu-burn-h200" for p in k8s_double.pods)


def test_plan_without_cluster_prints_and_sends_nothing(capsys, log):
    res = remediate.drain(H100, audit_log=log)
    out = capsys.readouterr().out
    assert res.mode == "plan" and "PLAN" in out and f"kubectl cordon {H100}" in out
    assert remediate.cordon(DGX, audit_log=log).kubectl == [f"kubectl cordon {DGX}"]  # no --dry-run without a cluster
    assert [r["mode"] for r in records(log)] == ["plan", "plan"]


def test_apply_without_cluster_is_refused(log):
    with pytest.raises(InvalidParameter, match="apply=True needs a cluster"):
        remediate.cordon(DGX, apply=True, audit_log=log)


def test_audit_records_who_what_and_no_token(k8s_double, kc, log):
    remediate.cordon(DGX, cluster=kc, audit_log=log, max_share=0.5, reason="XID 79 on GPU 3")
    remediate.label(DGX, "team", "ml-infra", cluster=kc, apply=True, audit_log=log)
    text = log.read_text()
    assert k8s_double.token not in text and "Bearer" not in text
    r1, r2 = records(log)
    assert r1["who"]["context"] == "double" and r1["who"]["k8s_user"] == "oncall"
    assert r1["who"]["server"] == k8s_double.url and r1["who"]["os_user"]
    assert (r1["action"], r1["dry_run"], r1["result"], r1["reason"]) == ("cordon", True, "ok", "XID 79 on GPU 3")
    assert (r2["action"], r2["dry_run"], r2["mode"]) == ("label", False, "applied")
    assert r2["target"] == {"kind": "Node", "name": DGX} and r2["ts"].endswith("+00:00")
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600


def test_audit_path_from_env(kc, tmp_path, monkeypatch):
    target = tmp_path / "env-audit.jsonl"
    monkeypatch.setenv("GPUOPS_AUDIT_LOG", str(target))
    res = remediate.uncordon(H200, cluster=kc)
    assert res.audit_log == str(target) and records(target)[0]["action"] == "uncordon"


def test_api_error_is_audited_and_raised(k8s_double, kc, log):
    k8s_double.fail("/api/v1/nodes/*", 403, method="PATCH")
    with pytest.raises(KubernetesError) as ei:
        remediate.label(DGX, "team", "a", cluster=kc, apply=True, audit_log=log)
    assert ei.value.status == 403 and "cannot patch nodes" in str(ei.value)
    assert records(log)[0]["result"] == "error"


def test_unwritable_audit_log_stops_before_acting(k8s_double, kc, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(Exception, match="cannot write the remediation audit log"):
        remediate.cordon(H200, cluster=kc, audit_log=blocker / "audit.jsonl")
    assert k8s_double.requests_to("PATCH", "/api/v1/nodes/*") == []


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: remediate.taint(DGX, "k", "v", "NoPanic"), "effect 'NoPanic'"),
        (lambda: remediate.label(DGX, "bad key!", "v"), "label key 'bad key!'"),
        (lambda: remediate.label(DGX, "team", "has space"), "label value 'has space'"),
        (lambda: remediate.cordon("Bad_Node"), "node 'Bad_Node'"),
        (lambda: remediate.cordon(DGX, cluster="prod"), "cluster must be a gpulib.kube.client.KubeCluster"),
    ],
)
def test_bad_parameters(call, match, log, monkeypatch):
    monkeypatch.setenv("GPUOPS_AUDIT_LOG", str(log))
    with pytest.raises(InvalidParameter, match=match):
        call()


def test_a_source_is_asked_for_its_cluster_through_kube_cluster(k8s_double, kc, log):
    """A Source passed as ``cluster`` is asked through its capability (``Source.kube_cluster()``), not by
    looking for a ``kube`` attribute: a source without a cluster gives a plan, one with a cluster acts."""
    from gpulib.sources.base import Source

    abstract = {m: (lambda self, *a, **k: None) for m in ("_inventory", "_nodes", "_pods", "_series", "_summary")}
    WithCluster = type("WithCluster", (Source,), {**abstract, "name": "with-cluster", "kube_cluster": lambda self: kc})
    WithoutCluster = type("WithoutCluster", (Source,), {**abstract, "name": "without-cluster", "kube": kc})
    # (an attribute named kube is not the capability: nothing may be sent through it)   # an attribute named kube is not
    # the capability: nothing may be sent through it

    res = remediate.cordon(DGX, cluster=WithCluster(), audit_log=log, max_share=0.5)
    assert res.mode == "server-dry-run" and len(k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")) == 1
    plan = remediate.cordon(DGX, cluster=WithoutCluster(), audit_log=log, max_share=0.5)
    assert plan.mode == "plan" and len(k8s_double.requests_to("PATCH", f"/api/v1/nodes/{DGX}")) == 1


def test_an_object_holding_a_cluster_attribute_is_not_a_cluster(kc, log, monkeypatch):
    """Not a Source and not a KubeCluster: refused, even with a ``kube`` attribute (no backend sniffing)."""
    monkeypatch.setenv("GPUOPS_AUDIT_LOG", str(log))

    class Holder:
        kube = kc

    with pytest.raises(InvalidParameter, match="cluster must be a gpulib.kube.client.KubeCluster"):
        remediate.cordon(DGX, cluster=Holder())
