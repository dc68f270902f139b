"""deploy/ as one kustomize tree: every overlay renders with the real ``kubectl kustomize``, every rendered object
passes kubernetes-validate (strict) or, for the one custom resource (the PrometheusRule), its metadata does and its
rules pass ``promtool check rules`` and equal what ``gpuops alerts`` generates for the overlay's public URL; one
image per overlay, the one its ``images:`` names; the live overlay's values reach every object that uses them, and
a replacement whose target is gone is reported (kustomize itself says nothing); no Secret value is committed.

``kubectl apply -k --dry-run=client`` needs a cluster (kubectl maps every kind through the API's discovery before
it prints anything), so the apply is checked against the Kubernetes API double instead
(``tests/helpers/kubectl_double.py``, ``--dry-run=server``): the demo overlay applies to a cluster that has only the
built-in API (kind, minikube), the live one needs prometheus-operator's PrometheusRule kind and a gpu-operator
namespace.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gpulib.serve.jobs import RenderTarget, job_manifest
from tests.helpers import kubectl_double
from tests.helpers.kubectl_double import KubectlDouble

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
KUBECTL = shutil.which("kubectl")
PROMTOOL = shutil.which("promtool")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) not on PATH")
#: the Kubernetes schemas every rendered object must pass: the oldest and the newest minor the manifests aim at
#: (CronJob timeZone is GA since 1.27; kubectl v1.32 talks to 1.31-1.33 API servers)
K8S_VERSIONS = ("1.30.0", "1.32.0")
#: API groups kubernetes-validate has no schema for; each is checked another way below
CUSTOM_GROUPS = {"monitoring.coreos.com"}
#: where a pod's environment comes from in these manifests (values resolved from the rendered ConfigMaps)
_VAR = re.compile(r"\$\((\w+)\)")


# ----------------------------------------------------------------------------------------------- rendering
def render_dir(path: Path) -> list[dict]:
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kubectl kustomize {path}: {out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@functools.lru_cache(maxsize=None)
def _render_committed(overlay: str) -> str:
    return yaml.safe_dump_all(render_dir(DEPLOY / "overlays" / overlay))


def render(overlay: str) -> list[dict]:
    """The committed overlay as ``kubectl kustomize`` renders it (fresh objects on each call)."""
    return list(yaml.safe_load_all(_render_committed(overlay)))


def kustomization(overlay_dir: Path) -> dict:
    return yaml.safe_load((overlay_dir / "kustomization.yaml").read_text())


def copy_tree(tmp_path: Path) -> Path:
    """A copy of deploy/ (relative paths between its kustomizations intact) to plant changes in."""
    dst = tmp_path / "deploy"
    shutil.copytree(DEPLOY, dst, ignore=shutil.ignore_patterns("tests"))
    return dst


def one(objs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} objects"
    return found[0]


def group_of(obj: dict) -> str:
    api = obj["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def pod_specs(objs: list[dict]) -> dict[str, dict]:
    """``Kind/name`` -> pod spec of every workload (Deployment-like, Job, CronJob)."""
    out = {}
    for o in objs:
        spec = o.get("spec") or {}
        if o["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        tpl = spec.get("template") if isinstance(spec.get("template"), dict) else None
        if tpl and "spec" in tpl and "containers" in tpl["spec"]:
            out[f"{o['kind']}/{o['metadata']['name']}"] = tpl["spec"]
    return out


def container_env(objs: list[dict], container: dict) -> dict[str, str]:
    """The environment a container starts with, ConfigMap values resolved (Secrets left out: none is committed)."""
    cms = {o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        env.update(cms[src["configMapRef"]["name"]])
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = e["value"]
        elif "configMapKeyRef" in (e.get("valueFrom") or {}):
            ref = e["valueFrom"]["configMapKeyRef"]
            env[e["name"]] = cms[ref["name"]][ref["key"]]
    return env


def expanded_args(objs: list[dict], container: dict) -> list[str]:
    """``args`` with ``$(VAR)`` replaced as the kubelet does; an unknown variable stays as written (as there)."""
    env = container_env(objs, container)
    return [_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in container["args"]]


def cli_params(args: list[str]) -> dict:
    """What the real ``gpuops`` CLI parses from a container's args."""
    import typer.main

    from gpulib.cli import app

    group = typer.main.get_command(app)
    return group.commands[args[0]].make_context(args[0], list(args[1:])).params


# ------------------------------------------------------------------------------------------ the checks
def schema_problems(objs: list[dict]) -> list[str]:
    """Every object of a built-in kind against the Kubernetes schemas (strict: an unknown field is an error)."""
    import kubernetes_validate as kv

    out = []
    for o in objs:
        if group_of(o) in CUSTOM_GROUPS:
            continue
        for version in K8S_VERSIONS:
            try:
                kv.validate(o, version, strict=True)
            except kv.ValidationError as exc:
                out.append(f"{o['kind']}/{o['metadata']['name']} ({version}): {exc}")
    return out


def image_problems(objs: list[dict], kust: dict) -> list[str]:
    """Every container of every workload runs the one image the kustomization's ``images:`` entry names."""
    (entry,) = kust["images"]
    want = f"{entry.get('newName', entry['name'])}:{entry['newTag']}"
    out = []
    for where, spec in pod_specs(objs).items():
        for c in spec.get("initContainers", []) + spec["containers"]:
            if c["image"] != want:
                out.append(f"{where} container {c['name']}: image {c['image']}, not {want}")
    return out


def _path_values(node, parts: list[str]):
    """The values a kustomize fieldPath (``a.b``, ``*``, ``[k=v]``, a list index) reaches in ``node``."""
    if not parts:
        yield node
        return
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        if head == "*":
            items = node
        elif m := re.fullmatch(r"\[(.+?)=(.*)\]", head):
            items = [i for i in node if isinstance(i, dict) and str(i.get(m.group(1))) == m.group(2)]
        elif head.isdigit():
            items = node[int(head) : int(head) + 1]
        else:
            items = []
        for i in items:
            yield from _path_values(i, rest)
    elif isinstance(node, dict):
        if head == "*":
            for v in node.values():
                yield from _path_values(v, rest)
        elif head in node:
            yield from _path_values(node[head], rest)


def _source_value(rep: dict, kust: dict) -> str:
    src = rep["source"]
    (gen,) = [g for g in kust.get("configMapGenerator", []) if g["name"] == src["name"]]
    values = dict(lit.split("=", 1) for lit in gen["literals"])
    value = values[src["fieldPath"].removeprefix("data.")]
    opts = src.get("options") or {}
    if opts.get("delimiter"):
        value = value.split(opts["delimiter"])[opts.get("index", 0)]
    return value


def replacement_gaps(kust: dict, objs: list[dict]) -> list[str]:
    """Every replacement of ``kust`` reaches something in the rendered ``objs``: each target selects at least one
    object and each of its fieldPaths a value there holding the source value. kustomize renders without a word
    when a ``select`` matches nothing, or a wildcard path nothing, so this is the check that notices."""
    gaps = []
    for rep in kust.get("replacements", []):
        value = _source_value(rep, kust)
        for tgt in rep["targets"]:
            sel = tgt["select"]
            chosen = [
                o
                for o in objs
                if o["kind"] == sel["kind"]
                and sel.get("name") in (None, o["metadata"]["name"])
                and sel.get("namespace") in (None, o["metadata"].get("namespace"))
            ]
            if not chosen:
                gaps.append(f"{sel['kind']} {sel.get('name', '*')}: no such object in the render")
            for o in chosen:
                for fp in tgt["fieldPaths"]:
                    got = list(_path_values(o, fp.split(".")))
                    if not got:
                        gaps.append(f"{sel['kind']} {o['metadata']['name']}: {fp} reaches nothing")
                    elif not all(isinstance(v, str) and value in v for v in got):
                        gaps.append(f"{sel['kind']} {o['metadata']['name']}: {fp} does not hold {value!r}: {got[:3]}")
    return gaps


#: a credential written out: "token: <long value>", "password=<value>", a private key, a bearer header
_SECRET_TEXT = re.compile(
    r"(?i)((token|password|secret|credentials)\s*[:=]\s*['\"]?[A-Za-z0-9+/_.-]{12,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY|authorization:\s*bearer\s+\S{8,})"
)


def secret_problems(objs: list[dict]) -> list[str]:
    """No Secret object, no credential-named env var with a literal value, every secret read through a reference."""
    out = [
        f"Secret/{o['metadata']['name']} is rendered (the user creates Secrets)" for o in objs if o["kind"] == "Secret"
    ]
    for where, spec in pod_specs(objs).items():
        for c in spec["containers"]:
            for e in c.get("env") or []:
                if re.search(r"TOKEN|PASSWORD|SECRET", e["name"]) and "value" in e:
                    out.append(f"{where}: env {e['name']} has a literal value")
            for a in c.get("args") or []:
                if re.search(r"--token\b|--password\b", a):
                    out.append(f"{where}: {a} passed as an argument")
    return out


def secret_names(objs: list[dict]) -> set[str]:
    return {
        e["valueFrom"]["secretKeyRef"]["name"]
        for spec in pod_specs(objs).values()
        for c in spec["containers"]
        for e in c.get("env") or []
        if "secretKeyRef" in (e.get("valueFrom") or {})
    }


# ------------------------------------------------------------------------------------------------ tests
def test_there_are_a_demo_and_a_live_overlay_on_one_base():
    assert OVERLAYS == ["demo", "live"]
    for o in OVERLAYS:
        assert "../../base" in kustomization(DEPLOY / "overlays" / o)["resources"]


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_builtin_object_validates_strictly(overlay):
    pytest.importorskip("kubernetes_validate")
    objs = render(overlay)
    assert not schema_problems(objs)
    custom = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs if group_of(o) in CUSTOM_GROUPS)
    assert custom == ({"demo": [], "live": ["PrometheusRule/gpu-runbooks"]}[overlay])  # the rest: next test
    kinds = {o["kind"] for o in objs}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "PersistentVolumeClaim",
        "Deployment",
        "CronJob",
    } <= kinds
    # the values object of the live overlay is read by kustomize and left out (config.kubernetes.io/local-config)
    assert not [o for o in objs if o["metadata"]["name"] == "gpuops-values"]


@needs_kubectl
def test_the_schema_check_fails_on_a_misspelt_field_or_a_wrong_type():
    pytest.importorskip("kubernetes_validate")
    objs = render("live")
    dep = one(objs, "Deployment", "gpuops-serve")
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "IfNotPresent"
    cj = one(objs, "CronJob", "gpuops-report")
    cj["spec"]["jobTemplate"]["spec"]["backoffLimit"] = "one"
    ing = one(objs, "Ingress", "gpuops-serve")
    ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = 7
    problems = schema_problems(objs)
    assert {p.split(" (")[0] for p in problems} == {
        "Deployment/gpuops-serve",
        "CronJob/gpuops-report",
        "Ingress/gpuops-serve",
    }, problems


@needs_kubectl
@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/system-deps installs it)")
def test_the_prometheusrule_is_the_generators_for_the_public_url_and_passes_promtool(tmp_path):
    """kubernetes-validate has no schema for custom resources (it raises SchemaNotFoundError): the PrometheusRule's
    metadata is validated on a ConfigMap of the same metadata, its rules with promtool, and the whole spec must
    equal what ``gpuops alerts --base-url <public URL>`` generates (gpulib.xid.alerts), so the replacement of the
    runbook_url prefix changes nothing else."""
    kv = pytest.importorskip("kubernetes_validate")
    from gpulib.xid import alerts

    objs = render("live")
    rule = one(objs, "PrometheusRule", "gpu-runbooks")
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"} and rule["apiVersion"] == "monitoring.coreos.com/v1"
    with pytest.raises(kv.SchemaNotFoundError):
        kv.validate(rule, K8S_VERSIONS[0], strict=True)
    kv.validate(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": rule["metadata"], "data": {}},
        K8S_VERSIONS[0],
        strict=True,
    )
    public = _source_value(
        {"source": {"name": "gpuops-values", "fieldPath": "data.publicURL"}},
        kustomization(DEPLOY / "overlays" / "live"),
    )
    assert rule["spec"] == alerts.rules_document(public)
    assert rule == alerts.prometheus_rule(public)
    spec = tmp_path / "rules.yaml"
    spec.write_text(yaml.safe_dump(rule["spec"]))
    out = subprocess.run([PROMTOOL, "check", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    rule["spec"]["groups"][0]["rules"][0]["expr"] = "up{job= == 0"  # the check can fail
    spec.write_text(yaml.safe_dump(rule["spec"]))
    out = subprocess.run([PROMTOOL, "check", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_image_in_every_workload_the_one_images_names(overlay):
    import tomllib

    objs = render(overlay)
    kust = kustomization(DEPLOY / "overlays" / overlay)
    assert not image_problems(objs, kust)
    assert {"Deployment/gpuops-serve", "CronJob/gpuops-report"} <= set(pod_specs(objs))
    # the entry names the placeholder every base workload uses, and the tag is the package version it builds
    (entry,) = kust["images"]
    base = [
        c["image"]
        for spec in pod_specs(
            [
                d
                for p in (DEPLOY / "base").rglob("*.yaml")
                for d in yaml.safe_load_all(p.read_text())
                if d and "kind" in d
            ]
        ).values()
        for c in spec["containers"]
    ]
    assert base and set(base) == {entry["name"]}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert entry["newTag"] == version


@needs_kubectl
def test_an_image_the_images_entry_does_not_name_is_caught(tmp_path):
    tree = copy_tree(tmp_path)
    cj = tree / "base" / "report" / "cronjob.yaml"
    cj.write_text(cj.read_text().replace("image: gpu-runbooks\n", "image: gpu-runbooks-report:0.1.0\n"))
    problems = image_problems(render_dir(tree / "overlays" / "demo"), kustomization(tree / "overlays" / "demo"))
    assert problems == [
        "CronJob/gpuops-report container report: image gpu-runbooks-report:0.1.0, not gpu-runbooks:0.1.0"
    ]


def _with_values(tree: Path, **values: str) -> None:
    k = tree / "overlays" / "live" / "kustomization.yaml"
    text = k.read_text()
    for key, value in values.items():
        text, n = re.subn(rf"(- {key}=)\S+", lambda m: m.group(1) + value, text)
        assert n == 1, key
    k.write_text(text)


@needs_kubectl
def test_the_live_values_set_once_reach_every_object_that_uses_them(tmp_path):
    """New values in the live overlay's gpuops-values: each lands where it is used, as the programs read it, and no
    default of the base is left anywhere in the render."""
    from gpulib.sources.prometheus import load_settings
    from gpulib.xid import alerts

    prom, public, group = "http://thanos-query.observability.svc:10902", "https://gpu-portal.corp.test", "sre-gpu"
    tree = copy_tree(tmp_path)
    _with_values(tree, prometheusURL=prom, publicURL=public, oncallGroup=group)
    objs = render_dir(tree / "overlays" / "live")

    serve = pod_specs(objs)["Deployment/gpuops-serve"]["containers"][0]
    p = cli_params(expanded_args(objs, serve))
    assert p["public_url"] == public and p["source"] == "live"
    report = pod_specs(objs)["CronJob/gpuops-report"]["containers"][0]
    assert cli_params(expanded_args(objs, report))["source"] == "live"
    for c in (serve, report):  # what the Prometheus source reads from the pod's environment
        s = load_settings(env={**container_env(objs, c), "GPUOPS_PROMETHEUS_TOKEN": "t" * 20})
        assert s.url == prom
    assert one(objs, "PrometheusRule")["spec"] == alerts.rules_document(public)
    ing = one(objs, "Ingress", "gpuops-serve")
    host = urlsplit(public).hostname
    assert [r["host"] for r in ing["spec"]["rules"]] == [host] and ing["spec"]["tls"][0]["hosts"] == [host]
    for kind, name in (("RoleBinding", "gpuops-collect"), ("ClusterRoleBinding", "gpuops-collect-read")):
        assert [s["name"] for s in one(objs, kind, name)["subjects"] if s["kind"] == "Group"] == [group]
    text = yaml.safe_dump_all(objs)
    for default in ("gpuops.example.com", "prometheus-k8s.monitoring.svc", "gpu-oncall"):
        assert default not in text, default
    assert not replacement_gaps(kustomization(tree / "overlays" / "live"), objs)


@needs_kubectl
def test_the_committed_live_values_are_well_formed_and_reach_every_target():
    from gpulib.xid.alerts import check_base_url

    kust = kustomization(DEPLOY / "overlays" / "live")
    objs = render("live")
    assert not replacement_gaps(kust, objs)
    (gen,) = [g for g in kust["configMapGenerator"] if g["name"] == "gpuops-values"]
    values = dict(lit.split("=", 1) for lit in gen["literals"])
    assert check_base_url(values["publicURL"]) == values["publicURL"]  # scheme://host, no trailing slash
    assert urlsplit(values["publicURL"]).path == "" and urlsplit(values["prometheusURL"]).scheme in ("http", "https")
    assert gen["options"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
    # every replacement reads from the values object, so a value is set in one place only
    assert {r["source"]["name"] for r in kust["replacements"]} == {"gpuops-values"}


@needs_kubectl
def test_a_replacement_whose_target_is_gone_is_reported(tmp_path):
    """kustomize renders without a word when a target's select matches nothing (here: the Ingress and the env
    ConfigMap renamed), so the values would silently stay the base's defaults."""
    tree = copy_tree(tmp_path)
    for rel, old, new in (
        ("overlays/live/ingress.yaml", "  name: gpuops-serve\n  namespace", "  name: gpuops-web\n  namespace"),
        ("base/config.yaml", "  name: gpuops-env\n", "  name: gpuops-config\n"),
    ):
        f = tree / rel
        assert old in f.read_text()
        f.write_text(f.read_text().replace(old, new))
    objs = render_dir(tree / "overlays" / "live")  # renders without complaint
    gaps = replacement_gaps(kustomization(tree / "overlays" / "live"), objs)
    assert gaps == ["ConfigMap gpuops-env: no such object in the render"] * 2 + [
        "Ingress gpuops-serve: no such object in the render"
    ], gaps


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_value_is_rendered_or_committed(overlay):
    objs = render(overlay)
    assert not secret_problems(objs)
    # the Secrets the pods read are the two the README tells the user to create
    assert secret_names(objs) == {"gpuops-serve", "gpuops-prometheus"}
    readme = (ROOT / "README.md").read_text()
    assert all(f"create secret generic {n}" in readme for n in secret_names(objs))
    assert not _SECRET_TEXT.search(yaml.safe_dump_all(objs))
    for p in DEPLOY.rglob("kustomization.yaml"):
        assert "secretGenerator" not in yaml.safe_load(p.read_text()), p
    files = [p for p in DEPLOY.rglob("*") if p.is_file()] + [ROOT / "Dockerfile"]
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files for m in _SECRET_TEXT.finditer(p.read_text())]
    assert not hits, hits


def test_the_secret_checks_catch_what_they_should():
    assert _SECRET_TEXT.search("token: 3f9a0c5e7b1d2f4a6c8e") and _SECRET_TEXT.search("password=hunter2hunter2")
    assert _SECRET_TEXT.search("-----BEGIN " + "RSA PRIVATE KEY-----")  # built here, so no key header is committed
    assert not _SECRET_TEXT.search("credentials_file: /etc/alertmanager/secrets/gpuops-serve/token")
    pod = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "i",
                            "args": ["serve", "--token", "abc"],
                            "env": [{"name": "GPUOPS_SERVE_TOKEN", "value": "abc"}],
                        }
                    ]
                }
            }
        },
    }
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    assert len(secret_problems([pod, secret])) == 3


# --------------------------------------------------------------- applying it: the API double, server dry run
#: what a bare cluster serves beyond the double's own kinds (kubectl api-resources on a kind v1.32 node)
BUILTIN = [
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"], []),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ["pvc"], ["status"]),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, [], []),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, [], []),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, [], []),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, [], []),
    ("batch", "v1", "cronjobs", "CronJob", True, ["cj"], ["status"]),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True, ["ing"], ["status"]),
]
#: prometheus-operator's rule kind (prometheus-operator/prometheus-operator:
#: example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml)
PROMETHEUSRULE = ("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True, ["promrule"], [])
#: the namespaces of a new kind cluster (https://kind.sigs.k8s.io/: local-path-provisioner's included)
KIND_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "local-path-storage")


def _apply(
    tmp_path, monkeypatch, overlay: str, extra_kinds: list, namespaces
) -> tuple[subprocess.CompletedProcess, list]:
    """``kubectl apply -k <overlay> --dry-run=server`` against the double serving the built-in kinds plus
    ``extra_kinds``, holding ``namespaces`` and the ones the overlay creates (a server dry run stores nothing, so
    the objects of a Namespace created in the same apply would not find it; a real apply creates it first)."""
    monkeypatch.setattr(kubectl_double, "RESOURCES", kubectl_double.RESOURCES + BUILTIN + extra_kinds)
    own = [o["metadata"]["name"] for o in render(overlay) if o["kind"] == "Namespace"]
    ns = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in (*namespaces, *own)]
    with KubectlDouble(ns, token=None) as double:
        kubeconfig = double.write_kubeconfig(tmp_path / "kubeconfig")
        # --validate=false: the double serves no OpenAPI document; the schemas are checked above
        out = subprocess.run(
            [
                KUBECTL,
                "--kubeconfig",
                str(kubeconfig),
                "apply",
                "-k",
                str(DEPLOY / "overlays" / overlay),
                "--dry-run=server",
                "--validate=false",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return out, list(double.dry_runs)


@needs_kubectl
def test_the_demo_overlay_applies_to_a_bare_cluster(tmp_path, monkeypatch):
    out, writes = _apply(tmp_path, monkeypatch, "demo", [], KIND_NAMESPACES)
    assert out.returncode == 0, out.stderr
    # one create per object (the Namespaces exist already, so they are patched)
    plural = {r[3]: r[2] for r in BUILTIN}
    plural.update({"ConfigMap": "configmaps", "Service": "services", "Deployment": "deployments"})
    want = {f"{plural[o['kind']]}/{o['metadata']['name']}" for o in render("demo") if o["kind"] != "Namespace"}
    assert {path for verb, path in writes if verb == "POST"} == want


@needs_kubectl
def test_the_live_overlay_needs_prometheus_operator_and_the_gpu_operator_namespace(tmp_path, monkeypatch):
    out, _ = _apply(tmp_path, monkeypatch, "live", [], KIND_NAMESPACES)
    assert out.returncode != 0
    assert 'no matches for kind "PrometheusRule"' in out.stderr and 'namespaces "gpu-operator" not found' in out.stderr
    out, writes = _apply(
        tmp_path, monkeypatch, "live", [PROMETHEUSRULE], (*KIND_NAMESPACES, "monitoring", "gpu-operator")
    )
    assert out.returncode == 0, out.stderr
    assert ("POST", "prometheusrules/gpu-runbooks") in writes and ("POST", "ingresses/gpuops-serve") in writes
    assert ("POST", "rolebindings/gpuops-serve-mig-config") in writes


@needs_kubectl
def test_the_demo_overlay_needs_nothing_but_the_built_in_api():
    """What a kind or minikube cluster lacks: no custom kind, no namespace the overlay does not create, the demo
    source in every run."""
    objs = render("demo")
    assert not [o for o in objs if group_of(o) in CUSTOM_GROUPS]
    own = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    used = {o["metadata"]["namespace"] for o in objs if "namespace" in o["metadata"]}
    used |= {s["namespace"] for o in objs for s in o.get("subjects") or [] if "namespace" in s}
    assert used <= own, used - own
    for where, spec in pod_specs(objs).items():
        assert cli_params(expanded_args(objs, spec["containers"][0]))["source"] == "demo", where


@needs_kubectl
def test_the_alertmanager_receiver_is_a_snippet_next_to_the_service_it_targets():
    """Not a Kubernetes object (no kustomization lists it), aimed at the rendered Service, its token read from the
    file where prometheus-operator mounts the Secret gpuops-serve, the Secret gpuops serve reads."""
    snippet = DEPLOY / "base" / "serve" / "alertmanager-receiver.yaml"
    listed = [r for p in DEPLOY.rglob("kustomization.yaml") for r in yaml.safe_load(p.read_text()).get("resources", [])]
    assert not [r for r in listed if r.endswith("alertmanager-receiver.yaml")]
    objs = render("live")
    svc = one(objs, "Service", "gpuops-serve")
    hook = next(r for r in yaml.safe_load(snippet.read_text())["receivers"] if r["name"] == "gpuops-serve")[
        "webhook_configs"
    ][0]
    assert hook["url"] == (
        f"http://{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:"
        f"{svc['spec']['ports'][0]['port']}/alertmanager"
    )
    serve = pod_specs(objs)["Deployment/gpuops-serve"]["containers"][0]
    ref = next(e for e in serve["env"] if e["name"] == "GPUOPS_SERVE_TOKEN")["valueFrom"]["secretKeyRef"]
    assert (
        hook["http_config"]["authorization"]["credentials_file"]
        == f"/etc/alertmanager/secrets/{ref['name']}/{ref['key']}"
    )
    assert "credentials" not in hook["http_config"]["authorization"]


@needs_kubectl
def test_the_scale_out_component_gives_replicas_one_shared_store_claims_and_render_jobs(tmp_path):
    """deploy/components/scale-out added to the live overlay (as its comment says): the objects still validate, the
    server runs as 3 replicas with --claims kubernetes --renders kubernetes on a ReadWriteMany store, may do what
    gpulib/serve/jobs.py and the incident Leases do (and no more), and the render Job of gpulib/data/serve/ names the
    server's service account, ConfigMap, Secret and claim as the rendered objects have them."""
    pytest.importorskip("kubernetes_validate")
    tree = copy_tree(tmp_path)
    k = tree / "overlays" / "live" / "kustomization.yaml"
    k.write_text(k.read_text() + "components:\n  - ../../components/scale-out\n")
    objs = render_dir(tree / "overlays" / "live")
    assert not schema_problems(objs)
    dep = one(objs, "Deployment", "gpuops-serve")
    assert dep["spec"]["replicas"] == 3 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    args = " ".join(c["args"])
    assert "--claims kubernetes" in args and "--renders kubernetes" in args
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == env["GPUOPS_LOCK_NAMESPACE"]
    mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "runs")
    claim = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "runs")
    pvc = one(objs, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    role = one(objs, "Role", "gpuops-serve-scale-out")
    rights = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert {("batch", "jobs", "create"), ("batch", "jobs/status", "get"), ("batch", "jobs", "delete")} <= rights
    assert {("coordination.k8s.io", "leases", v) for v in ("create", "get", "update", "delete")} <= rights
    assert not {r for r in rights if r[2] in ("list", "watch", "patch") or r[1] == "secrets"}
    # the render Job as the server would create it, against these objects
    job = job_manifest(
        RenderTarget(dep["metadata"]["namespace"], c["image"], pvc["metadata"]["name"], mount), "r-1", "nccl_check", 600
    )
    assert not schema_problems([job])
    spec = job["spec"]["template"]["spec"]
    sa = one(objs, "ServiceAccount", spec["serviceAccountName"])
    binding = one(objs, "ClusterRoleBinding", "gpuops-render-read")
    assert (
        binding["subjects"][0]["name"] == sa["metadata"]["name"] and binding["roleRef"]["name"] == "gpuops-serve-read"
    )
    (jc,) = spec["containers"]
    assert {e["configMapRef"]["name"] for e in jc["envFrom"]} == {e["configMapRef"]["name"] for e in c["envFrom"]}
    secret_of = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in jc["env"] if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secret_of == {"GPUOPS_PROMETHEUS_TOKEN": "gpuops-prometheus"}
    assert "GPUOPS_SERVE_TOKEN" not in {e["name"] for e in jc["env"]}  # a render never holds the webhook token


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_monthly_reliability_report_is_scheduled(overlay):
    """The monthly reliability report has its CronJob next to the weekly one (failed before: no object ran
    gpu_reliability_report): the 1st of each month over the last 30 days, into the same PVC, with the report's
    read-only identity, as arguments the real ``gpuops run`` parses; a critical finding in the report is its
    content, not a failed Job (``--fail-on never``)."""
    objs = render(overlay)
    cj = one(objs, "CronJob", "gpuops-reliability-report")
    weekly = one(objs, "CronJob", "gpuops-report")
    assert cj["spec"]["schedule"] == "0 6 1 * *" and cj["spec"]["timeZone"] == "Etc/UTC"
    pod = pod_specs(objs)["CronJob/gpuops-reliability-report"]
    (c,) = pod["containers"]
    args = expanded_args(objs, c)
    p = cli_params(args)
    assert args[:2] == ["run", "gpu_reliability_report"] and p["name"] == "gpu_reliability_report"
    assert p["param"] == ["window=30d"]
    assert p["fail_on"] == "never" and str(p["out"]) == "/reports/out"
    assert p["source"] == cli_params(expanded_args(objs, pod_specs(objs)["CronJob/gpuops-report"]["containers"][0]))[
        "source"
    ]
    wpod = weekly["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == wpod["serviceAccountName"]
    assert pod["volumes"] == wpod["volumes"] and pod["securityContext"] == wpod["securityContext"]
