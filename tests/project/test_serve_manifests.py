"""deploy/base/serve: the Deployment, Service, ServiceAccount and read-only RBAC validate against the Kubernetes
schema (kubernetes-validate, strict); the Deployment's arguments parse with the real CLI; the Alertmanager receiver
snippet passes amtool and points at the Service; the Service selects the Deployment's pods. The overlays as
rendered by kustomize: tests/project/test_kustomize.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "base" / "serve"
#: the ConfigMap the Deployment's environment (and the $(VAR)s of its args) come from
CONFIG = ROOT / "deploy" / "base" / "config.yaml"
SNIPPET = "alertmanager-receiver.yaml"
K8S_VERSION = "1.30.0"


def docs() -> list[dict]:
    return [
        d for p in sorted(DEPLOY.glob("*.yaml")) if p.name != SNIPPET for d in yaml.safe_load_all(p.read_text()) if d
    ]


def by_kind(kind: str) -> list[dict]:
    return [d for d in docs() if d["kind"] == kind]


def test_every_manifest_validates_strictly():
    kv = pytest.importorskip("kubernetes_validate")
    assert sorted(d["kind"] for d in docs()) == sorted(
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment",
            "PersistentVolumeClaim",
            "Service",
        ]
    )
    for d in docs():
        kv.validate(d, K8S_VERSION, strict=True)
    broken = yaml.safe_load(yaml.safe_dump(by_kind("Deployment")[0]))
    broken["spec"]["replica"] = broken["spec"].pop("replicas")
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, K8S_VERSION, strict=True)


def test_rbac_is_read_only():
    (role,) = by_kind("ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}
    assert not any("secrets" in rule["resources"] for rule in role["rules"])
    (binding,) = by_kind("ClusterRoleBinding")
    (sa,) = by_kind("ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]
    dep = by_kind("Deployment")[0]
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


def test_mig_sizing_may_get_the_mig_manager_configmap_and_nothing_more():
    """mig_sizing reads ClusterPolicy spec.migManager.config.name, then that ConfigMap in the operator namespace
    (gpulib.kube.client.KubeCluster.mig_parted_config): list/get clusterpolicies cluster-wide, get (not list)
    configmaps only in gpu-operator, bound to the serve identity."""
    (role,) = by_kind("ClusterRole")
    assert {"apiGroups": ["nvidia.com"], "resources": ["clusterpolicies"], "verbs": ["get", "list"]} in role["rules"]
    assert not any("configmaps" in rule["resources"] for rule in role["rules"])  # not cluster-wide
    (ns_role,) = by_kind("Role")
    assert ns_role["metadata"]["namespace"] == "gpu-operator"
    assert ns_role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    (rb,) = by_kind("RoleBinding")
    (sa,) = by_kind("ServiceAccount")
    assert rb["metadata"]["namespace"] == "gpu-operator"
    assert rb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": ns_role["metadata"]["name"],
    }
    assert rb["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]


def test_deployment_args_parse_with_the_real_cli_and_token_comes_from_a_secret():
    import typer.main

    from gpulib.cli import app

    (dep,) = by_kind("Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    config = yaml.safe_load(CONFIG.read_text())
    assert [e["configMapRef"]["name"] for e in c["envFrom"]] == [config["metadata"]["name"]]
    # $(VAR) in args is expanded by the kubelet from the container's env: each one is defined from the ConfigMap
    used = {m for a in c["args"] for m in re.findall(r"\$\((\w+)\)", a)}
    defined = {
        e["name"]: e["valueFrom"]["configMapKeyRef"] for e in c["env"] if "configMapKeyRef" in e.get("valueFrom", {})
    }
    assert used == {"GPUOPS_SOURCE", "GPUOPS_PUBLIC_URL"} and used <= set(defined)
    assert all(defined[v] == {"name": config["metadata"]["name"], "key": v} for v in used)
    args = [re.sub(r"\$\((\w+)\)", lambda m: config["data"][m.group(1)], a) for a in c["args"]]
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("gpuops", list(args), resilient_parsing=False)
    sub = cmd.get_command(ctx, args[0])
    sctx = sub.make_context("serve", list(args[1:]))
    assert sctx.params["host"] == "0.0.0.0" and sctx.params["port"] == 8080 and sctx.params["source"] == "live"
    assert sctx.params["public_url"] == config["data"]["GPUOPS_PUBLIC_URL"]
    env = {e["name"]: e for e in c["env"]}
    assert env["GPUOPS_SERVE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "gpuops-serve"
    assert "--token" not in c["args"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    port = c["ports"][0]
    assert port["containerPort"] == sctx.params["port"]
    (svc,) = by_kind("Service")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["ports"][0]["targetPort"] == port["name"]


def test_alertmanager_snippet_checks_and_targets_the_service():
    snip = yaml.safe_load((DEPLOY / SNIPPET).read_text())
    (svc,) = by_kind("Service")
    hook = next(r for r in snip["receivers"] if r["name"] == "gpuops-serve")["webhook_configs"][0]
    assert hook["url"] == (
        f"http://{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:"
        f"{svc['spec']['ports'][0]['port']}/alertmanager"
    )
    assert hook["http_config"]["authorization"]["type"] == "Bearer"
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and all(r["labels"].get("runbook") for r in alerts)  # the matcher sees every alert
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool (Debian prometheus-alertmanager) not installed")
    out = subprocess.run([amtool, "check-config", str(DEPLOY / SNIPPET)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
