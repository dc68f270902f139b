"""The verdict written back to the cluster (gpulib/kube/publish.py): an events.k8s.io/v1 Event on the Node, one
series per verdict (re-runs count up ``series.count``), the node condition ``GpuRunbooksVerdict`` only when asked;
against the Kubernetes API double driven by the real ``kubernetes`` client (tests/helpers/k8s_double.py), the Event
and the RBAC of deploy/components/publish-* against the strict Kubernetes schemas (kubernetes-validate), the printed
``kubectl`` commands through the real kubectl (tests/helpers/commandcheck.py), and ``gpuops serve --publish events``
end to end."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.kube.client import KubeCluster
from gpulib.kube.publish import (
    CONDITION,
    event_body,
    kubectl_commands,
    parse_what,
    publish,
    publish_run,
)
from gpulib.run.record import findings_file
from tests.helpers.commandcheck import Checker
from tests.project.test_kustomize import cli_params, copy_tree, needs_kubectl, one, render_dir, schema_problems

NODE = "dgx-a100-07"  # a node of the double's fixtures (tests/fixtures/k8s/nodes.json)


def _doc(tmp_path, severity=Severity.CRITICAL, title="XID 79 on dgx-a100-07 GPU 5: hardware (RESET_GPU)", errors=None):
    f = Finding(
        severity,
        title,
        node=NODE,
        gpu="5",
        sop_step="Cordon the node, drain the GPU's workloads, reset the GPU",
        commands=[f"kubectl cordon {NODE}"],
        data={"bucket": "RESET_GPU"},
    )
    save_findings([f], tmp_path / "findings.json", runbook="xid_ecc_triage", errors=errors)
    return json.loads((tmp_path / "findings.json").read_text())


def _cluster(double) -> KubeCluster:
    return KubeCluster(kubeconfig=str(double.kubeconfig))


def test_a_rerun_bumps_one_event_series_on_the_node(tmp_path, k8s_double):
    doc = _doc(tmp_path)
    cluster = _cluster(k8s_double)
    first = publish(cluster, doc, "https://gpuops.example.com/runs/r1")
    second = publish(cluster, doc, "https://gpuops.example.com/runs/r2")
    assert "created (count 1)" in first[0] and "series (count 2)" in second[0], (first, second)
    (ev,) = k8s_double.events.values()
    assert ev["series"]["count"] == 2 and ev["series"]["lastObservedTime"]
    assert ev["type"] == "Warning" and ev["reason"] == "GpuRunbooksCritical"
    assert ev["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE}
    assert ev["metadata"]["namespace"] == "default"
    assert "XID 79 on dgx-a100-07 GPU 5" in ev["note"] and "Next: Cordon the node" in ev["note"]
    assert ev["note"].endswith("Run: https://gpuops.example.com/runs/r2")
    other = _doc(tmp_path, Severity.INFO, "GPU 5 idle")  # another verdict: an Event of its own, Normal
    publish(cluster, other, "")
    assert len(k8s_double.events) == 2
    assert {e["type"] for e in k8s_double.events.values()} == {"Warning", "Normal"}
    assert CONDITION not in json.dumps(k8s_double.nodes), "the node condition is off by default"


def test_the_event_passes_the_strict_schema(tmp_path):
    body = event_body(NODE, _doc(tmp_path), "https://gpuops.example.com/runs/r1")
    for version in ("1.30.0", "1.32.0"):
        kubernetes_validate.validate(body, version, strict=True)
    assert len(body["note"].encode()) <= 1024
    long = event_body(NODE, _doc(tmp_path, title="x" * 3000), "https://gpuops.example.com/runs/r1")
    assert len(long["note"]) <= 1024 and long["note"].endswith("Run: https://gpuops.example.com/runs/r1")


def test_an_incomplete_run_is_unknown_and_normal(tmp_path):
    body = event_body(NODE, _doc(tmp_path, errors=["DCGM: no data"]), "")
    assert body["reason"] == "GpuRunbooksUnknown" and body["type"] == "Normal"


def test_the_condition_when_asked_keeps_kubelets(tmp_path, k8s_double):
    cluster = _cluster(k8s_double)
    lines = publish(cluster, _doc(tmp_path), "https://gpuops.example.com/runs/r1", ("events", "condition"))
    assert any(f"{CONDITION}=True" in line for line in lines), lines
    node = k8s_double.node(NODE)
    types = {c["type"]: c for c in node["status"]["conditions"]}
    assert types[CONDITION]["status"] == "True" and types[CONDITION]["reason"] == "GpuRunbooksCritical"
    assert "Ready" in types, "the strategic merge kept kubelet's conditions"
    patch = [r for r in k8s_double.requests if r.path.endswith(f"/nodes/{NODE}/status")]
    assert patch and patch[-1].method == "PATCH"


def test_publish_values_are_checked(tmp_path):
    assert parse_what("events,condition") == ("events", "condition") and parse_what(None) == ()
    with pytest.raises(InvalidParameter):
        parse_what("events,taint")
    with pytest.raises(InvalidParameter):
        event_body("Node; rm -rf /", _doc(tmp_path), "")


RUN_LINK = "https://gpuops.example.com/runs/r1"


def test_printed_kubectl_commands_pass_the_real_kubectl(tmp_path, k8s_double):
    lines = publish_run(findings_file(tmp_path), ("events",), RUN_LINK, _cluster(k8s_double))
    _doc(tmp_path)
    lines = publish_run(findings_file(tmp_path), ("events",), RUN_LINK, _cluster(k8s_double))
    shown = [line.split("see it: ", 1)[1] for line in lines if line.startswith("see it: ")]
    assert shown == kubectl_commands(NODE)
    checker = Checker(tmp_path / "kubectl")
    assert [p for cmd in shown for p in checker.check(cmd, live=False)] == []


def test_serve_publish_events_leaves_one_series_per_verdict(tmp_path, k8s_double, monkeypatch):
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app
    from tests.serve.test_app import AUTH, TOKEN, StubRunner, payload, xid

    monkeypatch.setenv("KUBECONFIG", str(k8s_double.kubeconfig))
    for n in (1, 2):  # two servers (a restart), each running the incident once
        cfg = ServeConfig.build(out=tmp_path / f"runs{n}", token=TOKEN, publish="events")
        app = create_app(cfg, StubRunner(delay=0))
        c = TestClient(app)
        rid = c.post("/alertmanager", json=payload([xid(NODE, "5")]), headers=AUTH).json()["runs"][0]
        assert app.state.service.join(10)
        rec = c.get(f"/runs/{rid}/run.json").json()
        assert any(f"count {n}" in line for line in rec["published"]), rec.get("published")
    (ev,) = k8s_double.events.values()
    assert ev["series"]["count"] == 2 and ev["regarding"]["name"] == NODE
    with pytest.raises(InvalidParameter):
        ServeConfig.build(out=tmp_path / "x", token=TOKEN, publish="taints")


@needs_kubectl
def test_the_publish_components_grant_only_that(tmp_path):
    tree = copy_tree(tmp_path)
    k = tree / "overlays" / "live" / "kustomization.yaml"
    k.write_text(k.read_text() + "components:\n  - ../../components/publish-events\n")
    objs = render_dir(tree / "overlays" / "live")
    assert not schema_problems(objs)
    role = one(objs, "Role", "gpuops-serve-publish-events")
    rights = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert rights == {("events.k8s.io", "events", v) for v in ("create", "get", "update")}
    assert role["metadata"]["namespace"] == "default"
    (c,) = one(objs, "Deployment", "gpuops-serve")["spec"]["template"]["spec"]["containers"]
    assert cli_params(c["args"])["publish"] == "events"
    assert not [o for o in objs if o["kind"] == "ClusterRole" and "publish" in o["metadata"]["name"]]
    k.write_text(k.read_text() + "  - ../../components/publish-condition\n")
    objs = render_dir(tree / "overlays" / "live")
    assert not schema_problems(objs)
    cr = one(objs, "ClusterRole", "gpuops-serve-publish-condition")
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in cr["rules"]] == [([""], ["nodes/status"], ["patch"])]
    (c,) = one(objs, "Deployment", "gpuops-serve")["spec"]["template"]["spec"]["containers"]
    assert cli_params(c["args"])["publish"] == "events,condition"


@pytest.mark.notebook
def test_gpuops_run_publish_events_twice_is_one_series_on_the_node(tmp_path, k8s_double, monkeypatch, capsys):
    """The XID 79 incident of the demo fleet (dgx-h100-1 GPU 5), run twice with ``--publish events``: one Event."""
    from tests.helpers.gpuops_cli import gpuops
    from tests.helpers.pinned import DEMO_END, ROOT

    env = {"GPUOPS_END": DEMO_END.isoformat(), "KUBECONFIG": str(k8s_double.kubeconfig), "PYTHONPATH": str(ROOT)}
    argv = ["run", "xid_ecc_triage", "-p", "node=dgx-h100-1", "-p", "gpu=5"]
    for n in (1, 2):
        _, out, err = gpuops(
            monkeypatch,
            capsys,
            argv + ["-q", "-o", str(tmp_path / f"out{n}"), "--publish", "events"],
            env=env,
            unset=["GPUOPS_KUBE_CONTEXT"],
        )
        assert f"on node dgx-h100-1: {'created' if n == 1 else 'series'} (count {n})" in out, out + err
        assert "see it: kubectl describe node dgx-h100-1" in out
    (ev,) = k8s_double.events.values()
    assert ev["series"]["count"] == 2 and ev["reason"] == "GpuRunbooksCritical" and "XID 79" in ev["note"]
