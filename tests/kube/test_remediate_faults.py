"""Remediation: audited before the change, a failed audit stops it, partial drains are audited with what they
did, and the cordon/taint cap holds under concurrency (a Lease in coordination.k8s.io)."""

from __future__ import annotations

import copy
import json
import multiprocessing as mp
import threading

import pytest

import gpulib.kube.client as k8s
import gpulib.kube.remediate as remediate
from gpulib.core.errors import GpulibError, InvalidParameter

DGX, SPOT, H100, L4 = (
    "dgx-a100-07",
    "aks-a100spot-31415926-vmss000002",
    "ip-10-0-12-34.ec2.internal",
    "gke-inference-l4-pool-7c9e2f1a-x2bd",
)
SCHEDULABLE = [DGX, SPOT, H100, L4]  # the 5th GPU node of the fixture is already cordoned


def _kc(double):
    return k8s.KubeCluster(kubeconfig=double.kubeconfig, sleep=lambda s: None, retries=1)


def _applied_patches(double):
    return [r for r in double.requests_to("PATCH", "/api/v1/nodes/*") if r.param("dryRun") is None]


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_audit_on_a_full_disk_stops_the_change(k8s_double):
    for action in (
        lambda kc: remediate.cordon(DGX, cluster=kc, apply=True, audit_log="/dev/full", max_share=0.5),
        lambda kc: remediate.drain(DGX, cluster=kc, apply=True, audit_log="/dev/full", max_share=0.5),
    ):
        with pytest.raises(GpulibError) as e:
            action(_kc(k8s_double))
        assert "audit" in str(e.value)
    assert _applied_patches(k8s_double) == [] and not k8s_double.requests_to("POST", "*/eviction")
    assert "unschedulable" not in k8s_double.node(DGX)["spec"]


def test_audit_intent_is_on_disk_before_the_change(k8s_double, tmp_path, monkeypatch):
    log = tmp_path / "audit.jsonl"
    seen = []
    real = k8s.KubeCluster.patch_node

    def spy(self, name, patch, *, dry_run=True):
        seen.append(_lines(log))
        return real(self, name, patch, dry_run=dry_run)

    monkeypatch.setattr(k8s.KubeCluster, "patch_node", spy)
    remediate.cordon(DGX, cluster=_kc(k8s_double), apply=True, audit_log=log, max_share=0.5)
    (before,) = seen
    assert [r["phase"] for r in before] == ["intent"] and before[0]["action"] == "cordon"
    assert [r["phase"] for r in _lines(log)] == ["intent", "done"]
    assert _lines(log)[1]["id"] == before[0]["id"]


def test_drain_failing_at_its_third_eviction_is_audited_with_its_changes(k8s_double, tmp_path):
    base = next(p for p in k8s_double.pods if p["metadata"]["name"] == "llm-train-worker-0")
    for i in range(3):
        p = copy.deepcopy(base)
        p["metadata"]["name"] = f"w-{i}"
        p["spec"]["nodeName"] = DGX
        k8s_double.pods.append(p)
    k8s_double.fail("/api/v1/namespaces/training/pods/w-2/eviction", 500, method="POST")
    log = tmp_path / "audit.jsonl"
    with pytest.raises(GpulibError):
        remediate.drain(DGX, cluster=_kc(k8s_double), apply=True, audit_log=log, max_share=0.5)
    done = [r for r in _lines(log) if r["phase"] == "done"][-1]
    assert done["result"] == "error"
    ops = [(c["op"], c.get("pod"), c.get("outcome")) for c in done["changes"] if c["op"] != "skip"]
    assert ops[0][0] == "patch" and [o for o in ops if o[0] == "evict" and o[1].startswith("training/w-")] == [
        ("evict", "training/w-0", "evicted"),
        ("evict", "training/w-1", "evicted"),
    ]


def _cordon_all_at_once_threads(double, nodes):
    barrier = threading.Barrier(len(nodes))
    out = {}

    def go(n):
        kc = _kc(double)
        barrier.wait()
        try:
            remediate.cordon(
                n, cluster=kc, apply=True, audit_log=double.kubeconfig.parent / f"a-{n}.jsonl", max_share=0.5
            )
            out[n] = "ok"
        except GpulibError as exc:
            out[n] = type(exc).__name__

    ts = [threading.Thread(target=go, args=(n,)) for n in nodes]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out


def test_cordon_cap_holds_under_threads(k8s_double):
    out = _cordon_all_at_once_threads(k8s_double, SCHEDULABLE)
    cordoned = [n for n in SCHEDULABLE if k8s_double.node(n)["spec"].get("unschedulable")]
    assert len(cordoned) == 1 and list(out.values()).count("ok") == 1, out
    assert not k8s_double.leases  # released


def _proc_cordon(kubeconfig, node, barrier, q):
    kc = k8s.KubeCluster(kubeconfig=kubeconfig, sleep=lambda s: None, retries=1)
    barrier.wait()
    try:
        remediate.cordon(node, cluster=kc, apply=True, audit_log=f"{kubeconfig}.{node}.audit", max_share=0.5)
        q.put((node, "ok"))
    except GpulibError as exc:
        q.put((node, type(exc).__name__))


def test_cordon_cap_holds_across_processes(k8s_double):
    ctx = mp.get_context("fork")
    barrier, q = ctx.Barrier(len(SCHEDULABLE)), ctx.Queue()
    ps = [ctx.Process(target=_proc_cordon, args=(str(k8s_double.kubeconfig), n, barrier, q)) for n in SCHEDULABLE]
    [p.start() for p in ps]
    [p.join(60) for p in ps]
    out = dict(q.get(timeout=5) for _ in ps)
    cordoned = [n for n in SCHEDULABLE if k8s_double.node(n)["spec"].get("unschedulable")]
    assert len(cordoned) == 1 and list(out.values()).count("ok") == 1, out


def test_taints_count_against_the_cap(k8s_double, tmp_path):
    kc = _kc(k8s_double)
    remediate.taint(
        DGX,
        "gpuops/maintenance",
        "xid79",
        "NoSchedule",
        cluster=kc,
        apply=True,
        audit_log=tmp_path / "a.jsonl",
        max_share=0.5,
    )
    with pytest.raises(remediate.RemediationRefused):
        remediate.taint(
            H100,
            "gpuops/maintenance",
            "xid79",
            "NoSchedule",
            cluster=kc,
            apply=True,
            audit_log=tmp_path / "a.jsonl",
            max_share=0.5,
        )
    with pytest.raises(remediate.RemediationRefused):
        remediate.cordon(L4, cluster=kc, apply=True, audit_log=tmp_path / "a.jsonl", max_share=0.5)


def test_noexecute_taint_needs_the_pdb_bypass_flag(k8s_double, tmp_path):
    kc = _kc(k8s_double)
    with pytest.raises(InvalidParameter) as e:
        remediate.taint(
            DGX, "gpuops/evict", "", "NoExecute", cluster=kc, apply=True, audit_log=tmp_path / "a.jsonl", max_share=0.5
        )
    assert "PodDisruptionBudget" in str(e.value) and _applied_patches(k8s_double) == []
    res = remediate.taint(
        DGX,
        "gpuops/evict",
        "",
        "NoExecute",
        cluster=kc,
        apply=True,
        audit_log=tmp_path / "a.jsonl",
        max_share=0.5,
        bypass_pdb=True,
    )
    assert res.ok and any(t["effect"] == "NoExecute" for t in k8s_double.node(DGX)["spec"]["taints"])
