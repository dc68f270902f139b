"""gpuops collect from the command line, and its RBAC manifest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import gpulib
from gpulib.cli import app
from gpulib.kube import collect as kc
from tests.helpers.collect_logs import demo_sections, framed
from tests.helpers.k8s_double import start_k8s_double

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "collect" / "rbac.yaml"
NODE = "dgx-h100-1"


def _docs():
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def test_rbac_manifest_validates_and_grants_exactly_what_collect_calls():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for d in _docs():
        kubernetes_validate.validate(d, "1.30.0", strict=True)
    role = next(d for d in _docs() if d["kind"] == "Role")
    ns = kc.settings()["namespace"]
    assert role["metadata"]["namespace"] == ns
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {("pods", "create"), ("pods", "get"), ("pods", "delete"), ("pods/log", "get")}
    cr = next(d for d in _docs() if d["kind"] == "ClusterRole")
    assert {(r, v) for rule in cr["rules"] for r in rule["resources"] for v in rule["verbs"]} == {
        (r, v) for r in ("nodes", "pods") for v in ("get", "list")
    }
    nsdoc = next(d for d in _docs() if d["kind"] == "Namespace")
    assert nsdoc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


@pytest.fixture
def double(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(filter(None, [os.environ.get(var, ""), "127.0.0.1"])))
    src = gpulib.connect("demo")
    d = start_k8s_double(tmp_path, nodes=src.nodes_json()["items"], pods=src.pods_json()["items"])
    d.pod_script.log = framed(demo_sections(src, NODE), token="{token}")
    monkeypatch.setenv("KUBECONFIG", str(d.kubeconfig))
    yield d
    d.stop()


def test_dry_run_prints_the_pod_and_creates_nothing(double):
    r = CliRunner().invoke(app, ["collect", NODE])
    assert r.exit_code == 0, r.output
    pod = yaml.safe_load(r.output.split("---\n", 1)[1])
    assert pod["kind"] == "Pod" and pod["spec"]["nodeName"] == NODE
    assert "dry run" in r.output and "--apply" in r.output and double.created == []


def test_diag_says_it_loads_the_gpu_and_is_refused_on_a_busy_node(double):
    r = CliRunner().invoke(app, ["collect", NODE, "--diag", "3"])
    assert r.exit_code == 0 and "loads" in r.output and "dcgmi diag -r 3 -j" in r.output
    r = CliRunner().invoke(app, ["collect", NODE, "--diag", "3", "--apply"])
    assert r.exit_code == 3 and "CollectRefused" in r.output and double.created == []
    r = CliRunner().invoke(app, ["collect", NODE, "--diag", "9"])
    assert r.exit_code == 2


def test_apply_writes_a_snapshot_and_leaves_no_pod(double, tmp_path):
    out = tmp_path / "incident"
    r = CliRunner().invoke(app, ["collect", NODE, "--apply", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / f"dmesg-{NODE}.txt").exists() and f"dmesg-{NODE}.txt" in r.output
    assert double.pods_in("gpuops-collect") == [] and double.deleted == double.created != []


def test_apply_failure_exits_3_naming_it(double, tmp_path):
    double.pod_script.waiting_reason = "ImagePullBackOff"
    r = CliRunner().invoke(
        app, ["collect", NODE, "--apply", "--out", str(tmp_path / "x"), "--image", "registry.invalid/none:1"]
    )
    assert r.exit_code == 3 and "ImagePullFailed" in r.output and "registry.invalid/none:1" in r.output
    assert double.pods_in("gpuops-collect") == []
