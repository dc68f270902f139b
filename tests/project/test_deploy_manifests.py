"""The report's part of deploy/base (namespace, ConfigMap gpuops-env, report/): every manifest validates against
the Kubernetes schema (kubernetes-validate, strict), RBAC is read-only, the CronJob's arguments parse with the real
CLI, its env is what the Prometheus source reads, and the root Dockerfile (the one image of serve, report and
collect) copies paths that exist and runs as the manifests' user (docker cannot run here, so the image is not
built). The overlays as rendered by kustomize: tests/project/test_kustomize.py."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "base"
#: the files of the report in the base (the ConfigMap and the namespace are shared with gpuops serve)
FILES = [BASE / "namespace.yaml", BASE / "config.yaml", *sorted((BASE / "report").glob("*.yaml"))]
#: Kubernetes schema version the manifests must validate against (CronJob timeZone is GA since 1.27)
K8S_VERSION = "1.30.0"


def docs() -> list[tuple[str, dict]]:
    out = []
    for path in FILES:
        for d in yaml.safe_load_all(path.read_text()):
            if d:
                out.append((path.name, d))
    return out


def by_kind(kind: str) -> list[dict]:
    return [d for _, d in docs() if d["kind"] == kind]


def _weekly() -> list[dict]:
    """The weekly report's CronJob (the monthly reliability one, reliability-cronjob.yaml, sits beside it)."""
    return [d for d in by_kind("CronJob") if d["metadata"]["name"] == "gpuops-report"]


def test_every_manifest_validates_strictly():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    found = docs()
    kinds = sorted(d["kind"] for _, d in found)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "PersistentVolumeClaim",
            "CronJob",  # the weekly utilization report
            "CronJob",  # the monthly reliability report
        ]
    )
    for name, d in found:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)  # raises ValidationError naming the field


def test_validator_rejects_a_broken_cronjob():
    """The validation above can fail: a misspelt field and a wrong type are refused."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    cj = json.loads(json.dumps(by_kind("CronJob")[0]))
    cj["spec"]["schedul"] = cj["spec"].pop("schedule")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cj, K8S_VERSION, strict=True)
    cj = json.loads(json.dumps(by_kind("CronJob")[0]))
    cj["spec"]["jobTemplate"]["spec"]["backoffLimit"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cj, K8S_VERSION, strict=True)


def test_clusterrole_is_read_only_on_nodes_pods_namespaces():
    (role,) = by_kind("ClusterRole")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert granted == {("", r, v) for r in ("nodes", "pods", "namespaces") for v in ("get", "list")}
    (binding,) = by_kind("ClusterRoleBinding")
    (sa,) = by_kind("ServiceAccount")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]


def _pod_spec() -> dict:
    (cj,) = _weekly()
    return cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_cronjob_weekly_with_the_report_identity_and_output_volume():
    (cj,) = _weekly()
    fields = cj["spec"]["schedule"].split()
    assert len(fields) == 5 and fields[2:4] == ["*", "*"] and fields[4] not in ("*",)  # one day of the week
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"
    pod = _pod_spec()
    (sa,) = by_kind("ServiceAccount")
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert {cj["metadata"]["namespace"], sa["metadata"]["namespace"]} == {by_kind("Namespace")[0]["metadata"]["name"]}
    (c,) = pod["containers"]
    args = c["args"]
    out = args[args.index("--out") + 1]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    (pvc,) = by_kind("PersistentVolumeClaim")
    assert vols[mounts[out]]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert "emptyDir" in vols[mounts["/tmp"]]  # read-only root: Jupyter writes under HOME=/tmp
    assert c["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsNonRoot"] is True


def _args() -> list[str]:
    """The CronJob's args with ``$(VAR)`` expanded from the base ConfigMap, as the kubelet does."""
    (cm,) = by_kind("ConfigMap")
    return [
        re.sub(r"\$\((\w+)\)", lambda m: cm["data"].get(m.group(1), m.group(0)), a)
        for a in _pod_spec()["containers"][0]["args"]
    ]


def test_cronjob_args_parse_with_the_real_cli():
    import typer.main

    from gpulib import cli

    args = _args()
    assert "$(" not in " ".join(args)  # every variable is in the ConfigMap
    assert args[:1] == ["report"]
    group = typer.main.get_command(cli.app)
    cmd = group.commands["report"]
    ctx = cmd.make_context("report", list(args[1:]))
    assert ctx.params["window"] == "7d" and ctx.params["source"] == "live" and ctx.params["quiet"] is True
    with pytest.raises(Exception):
        cmd.make_context("report", ["--windw", "7d"])  # the parse above is not vacuous


def test_prometheus_settings_come_from_configmap_and_secret_env_only():
    from gpulib.sources.prometheus import load_settings

    pod = _pod_spec()
    (c,) = pod["containers"]
    (cm,) = by_kind("ConfigMap")
    assert [e["configMapRef"]["name"] for e in c["envFrom"]] == [cm["metadata"]["name"]]
    assert not [e for e in c["env"] if "value" in e and e["name"] != "HOME"]  # values come from the ConfigMap
    token = [e for e in c["env"] if e["name"] == "GPUOPS_PROMETHEUS_TOKEN"]
    assert token and "value" not in token[0] and token[0]["valueFrom"]["secretKeyRef"]["key"] == "token"
    # what the container sees, fed to the code that reads it
    env = {**cm["data"], "GPUOPS_PROMETHEUS_TOKEN": "s3cr3t"}
    s = load_settings(env=env)
    assert s.url == cm["data"]["GPUOPS_PROMETHEUS_URL"] and s.token == "s3cr3t"
    assert s.timeout == float(cm["data"]["GPUOPS_PROMETHEUS_TIMEOUT"])
    # no secret material anywhere in the manifests or the Dockerfile
    assert not by_kind("Secret")
    text = "\n".join(p.read_text() for p in [*FILES, ROOT / "Dockerfile"])
    assert not re.search(r"(?i)(token|password)\s*[:=]\s*['\"]?[A-Za-z0-9+/]{12,}", text)


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) pairs with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            ins, _, rest = line.partition(" ")
            out.append((ins.upper(), rest.strip()))
    return out


def test_dockerfile_copies_existing_paths_and_runs_gpuops_as_the_manifests_user():
    steps = _dockerfile()
    copied = []
    for ins, rest in steps:
        if ins == "COPY":
            *srcs, _dest = shlex.split(rest)
            for s in srcs:
                assert list(ROOT.glob(s)), f"Dockerfile COPY {s}: not in the repository (build context = repo root)"
                copied.append(s)
    # what gpuops runs in the pods: the notebooks of the runbooks and of the report (GPUOPS_HOME holds them)
    assert {"gpulib", "runbooks", "reports/gpu_utilization_report.ipynb"} <= set(copied)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not [s for s in copied if s.split("/")[0] in ignored], "a COPY source is excluded by .dockerignore"
    entry = json.loads(next(r for i, r in steps if i == "ENTRYPOINT"))
    cmd = json.loads(next(r for i, r in steps if i == "CMD"))
    assert entry == ["gpuops"] and cmd == ["--help"]
    # one image for several commands: the CronJob says what it runs instead of relying on the image default
    assert _pod_spec()["containers"][0]["args"][0] == "report"
    users = [r for i, r in steps if i == "USER"]
    assert users and users[-1] not in ("0", "root")
    assert int(users[-1]) == _pod_spec()["securityContext"]["runAsUser"]  # the uid the pods run as
    envs = " ".join(r for i, r in steps if i == "ENV")
    assert "GPUOPS_HOME=" in envs and "TOKEN" not in envs and "PROMETHEUS_URL" not in envs
    run = " ".join(r for i, r in steps if i == "RUN")
    assert ('pip install ".[all]"' in run or "pip install ." in run) and "ipykernel install" in run
