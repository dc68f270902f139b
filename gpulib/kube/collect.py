"""Node evidence through the Kubernetes API: what ``kubectl debug node/NODE`` does, as one short-lived pod.

The pod (:func:`pod_spec`) is pinned to the node (``spec.nodeName``, so the scheduler is bypassed
and no taint keeps it off: it also tolerates every taint), shares the host PID namespace, mounts the
host root read-only at ``/host`` and is privileged (``dmesg`` needs CAP_SYSLOG and ``nvidia-smi`` the
GPU device nodes, as with ``kubectl debug node --profile=sysadmin``:
https://kubernetes.io/docs/tasks/debug/debug-cluster/kubectl-node-debug/). It runs the commands of
``gpulib/data/kube/collect_commands.csv`` under ``chroot`` (the host root, or the GPU Operator's driver
root ``/run/nvidia/driver`` when the host has no ``nvidia-smi``), each section framed by marker lines
carrying a per-run random token (so no line of the node's own logs can forge one), and exits.
:func:`collect_node` reads its output through the pod log API (streamed, ``follow=True``), splits
the sections, writes a snapshot folder in the layout :mod:`gpulib.sources.snapshot` reads, and
deletes the pod in every case: success, timeout, error, interrupt.

Dry run by default: without ``apply=True`` nothing is created and the result carries the pod spec.
Settings (image, namespace, timeouts) come from ``gpulib/data/kube/collect_settings.csv``. The RBAC the
collection needs is ``deploy/collect/rbac.yaml``. Failures raise :class:`gpulib.core.errors.CollectError`
with a ``reason`` naming them.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from gpulib.core.errors import CollectError, InvalidParameter, KubernetesError, UnknownNode
from gpulib.core.knowledge import load_table
from gpulib.core.knowledge import settings as settings_table
from gpulib.core.validate import namespace as valid_namespace
from gpulib.core.validate import node_name
from gpulib.kube.client import _Call
from gpulib.kube.frames import pods_frame

COLLECT_LABEL = "app.kubernetes.io/name"
COLLECT_APP = "gpuops-collect"
CONTAINER = "collect"
#: container waiting reasons that mean the image will not come (kubelet images/types.go ErrImagePull etc.)
IMAGE_PULL_REASONS = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
}
DIAG_LEVELS = (1, 2, 3, 4)
_SECTION = re.compile(
    r"^@@gpuops:(?P<token>[0-9a-f]{16}):(?P<what>begin|end):(?P<section>[a-z_]+)(?::rc=(?P<rc>-?\d+))?$"
)


@lru_cache(maxsize=1)
def _settings_table() -> dict[str, str]:
    t = settings_table("collect_settings")
    return {key: t.text(key) for key in t}


def settings(**overrides: Any) -> dict[str, Any]:
    """Collect settings (``collect_settings.csv``) with ``overrides`` (None values ignored)."""
    s: dict[str, Any] = dict(_settings_table())
    s.update({k: v for k, v in overrides.items() if v is not None})
    for k in ("timeout_s", "diag_timeout_s", "pending_timeout_s", "poll_s", "delete_attempts"):
        try:
            s[k] = float(s[k])
        except (TypeError, ValueError) as exc:
            raise InvalidParameter(f"collect setting {k}={s[k]!r} is not a number") from exc
    s["namespace"] = valid_namespace(s["namespace"])
    return s


@lru_cache(maxsize=1)
def _commands() -> list[dict]:
    return load_table("collect_commands").to_dict("records")


def sections(diag_level: int | None = None) -> list[dict]:
    """The collection commands for this run (the diag row only with ``diag_level``)."""
    return [
        dict(c, command=str(c["command"]).replace("{level}", str(diag_level)))
        for c in _commands()
        if c["diag_only"] != "yes" or diag_level is not None
    ]


def _check_level(diag_level: Any) -> int | None:
    if diag_level in (None, "", 0, "0"):
        return None
    try:
        level = int(diag_level)
    except (TypeError, ValueError):
        level = -1
    if level not in DIAG_LEVELS:
        raise InvalidParameter(f"diag level {diag_level!r}: use 1, 2, 3 or 4 (dcgmi diag -r LEVEL)")
    return level


def script(token: str, diag_level: int | None = None) -> str:
    """The shell script the pod runs: each section framed by ``@@gpuops:<token>:begin|end:<section>`` lines."""
    if not re.fullmatch(r"[0-9a-f]{16}", token):
        raise InvalidParameter("collect token must be 16 hex digits")
    lines = [
        "set -u",
        "R=/host",
        "if [ ! -x /host/usr/bin/nvidia-smi ] && [ -x /host/run/nvidia/driver/usr/bin/nvidia-smi ]; then R=/host/run/nvidia/driver; fi",
        f'run() {{ s=$1; shift; echo "@@gpuops:{token}:begin:$s"; "$@" 2>&1; rc=$?; echo; echo "@@gpuops:{token}:end:$s:rc=$rc"; }}',
    ]
    if diag_level is not None:
        lines.append(
            "command -v nv-hostengine >/dev/null 2>&1 && { nv-hostengine >/tmp/nv-hostengine.log 2>&1 || true; sleep 3; }"
        )
    for c in sections(diag_level):
        cmd = c["command"]
        if "'" in cmd or not re.fullmatch(r"[a-z_]+", c["section"]):
            raise InvalidParameter(
                f"collect command {c['section']!r} must not contain a single quote (it is wrapped in one)"
            )
        if c["root"] == "host":
            lines.append(f"run {c['section']} chroot /host /bin/sh -c '{cmd}'")
        elif c["root"] == "driver":
            lines.append(f"run {c['section']} chroot \"$R\" /bin/sh -c '{cmd}'")
        else:
            lines.append(f"run {c['section']} /bin/sh -c '{cmd}'")
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def pod_name(node: str, token: str) -> str:
    """``gpuops-collect-<node>-<5 hex>``: a DNS-1123 subdomain of at most 63 characters."""
    base = re.sub(r"[^a-z0-9.-]", "-", node.lower()).strip(".-")[:40].strip(".-") or "node"
    return f"{COLLECT_APP}-{base}-{token[:5]}"


def pod_spec(node: str, *, token: str | None = None, diag_level: int | None = None, **overrides: Any) -> dict:
    """The collection Pod (a plain dict, as the API takes it). ``overrides``: collect settings."""
    node = node_name(node)
    level = _check_level(diag_level)
    s = settings(**overrides)
    token = token or secrets.token_hex(8)
    timeout = int(s["diag_timeout_s"] if level is not None else s["timeout_s"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(node, token),
            "namespace": s["namespace"],
            "labels": {COLLECT_LABEL: COLLECT_APP, "app.kubernetes.io/managed-by": "gpuops"},
            "annotations": {
                "gpuops.io/node": node,
                "gpuops.io/purpose": "read-only node evidence for GPU triage",
                "gpuops.io/diag-level": str(level or 0),
            },
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "hostPID": True,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [{"operator": "Exists"}],
            "activeDeadlineSeconds": timeout,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": CONTAINER,
                    "image": str(s["diag_image"] if level is not None else s["image"]),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", script(token, level)],
                    "securityContext": {"privileged": True},
                    "resources": {
                        "requests": {"cpu": str(s["cpu_request"]), "memory": "64Mi"},
                        "limits": {"memory": str(s["memory_limit"])},
                    },
                    "volumeMounts": [{"name": "host-root", "mountPath": "/host", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}],
        },
    }


def validate_spec(spec: dict, k8s_version: str = "1.30.0") -> None:
    """Validate the Pod against the Kubernetes OpenAPI schema (kubernetes-validate, strict: unknown fields fail)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(spec, k8s_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise InvalidParameter(f"collection pod spec is invalid for Kubernetes {k8s_version}: {exc.message}") from exc


# ---------------------------------------------------------------------------------------- sections
@dataclass
class Section:
    name: str
    text: str
    rc: int | None  # None: the end marker never came (output cut)

    @property
    def complete(self) -> bool:
        return self.rc is not None


def split_sections(log: str, token: str) -> dict[str, Section]:
    """The sections of a collection log; one without its end marker has ``rc=None``. One pass over the lines."""
    out: dict[str, Section] = {}
    current: str | None = None
    buf: list[str] = []
    for line in log.splitlines():
        m = _SECTION.match(line) if line.startswith("@@gpuops:") else None
        if m is None or m.group("token") != token:
            if current is not None:
                buf.append(line)
            continue
        if m.group("what") == "begin":
            if current is not None:
                out[current] = Section(current, _body(buf), None)
            current, buf = m.group("section"), []
        elif current == m.group("section"):
            out[current] = Section(current, _body(buf), int(m.group("rc")))
            current, buf = None, []
    if current is not None:
        out[current] = Section(current, _body(buf), None)
    return out


def _body(lines: list[str]) -> str:
    if lines and lines[-1] == "":
        lines = lines[:-1]  # the script's own `echo` before the end marker
    return "\n".join(lines) + ("\n" if lines else "")


# ---------------------------------------------------------------------------------------- result
@dataclass
class CollectResult:
    node: str
    pod: str
    namespace: str
    spec: dict
    applied: bool
    diag_level: int | None = None
    sections: dict[str, Section] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    log: str = ""

    def text(self, section: str) -> str | None:
        """A section's output when it is complete and usable (rc 0, or a result even on failure like dcgmi's)."""
        s = self.sections.get(section)
        if s is None or not s.complete:
            return None
        keep = next((c["keep_on_error"] == "yes" for c in _commands() if c["section"] == section), False)
        return s.text if (s.rc == 0 or keep) else None

    def manifest(self) -> dict:
        return {
            "node": self.node,
            "pod": self.pod,
            "namespace": self.namespace,
            "diag_level": self.diag_level,
            "image": self.spec["spec"]["containers"][0]["image"],
            "sections": {
                k: {"rc": s.rc, "complete": s.complete, "bytes": len(s.text)} for k, s in self.sections.items()
            },
            "files": [p.name for p in self.files],
            "problems": self.problems,
        }


# ---------------------------------------------------------------------------------------- the run
def gpu_pods_on(cluster, node: str) -> list[str]:
    """``namespace/pod`` of the running or pending pods on ``node`` that request GPUs."""
    pods = pods_frame(cluster.list_pods(field_selector=f"spec.nodeName={node}"))
    live = pods[~pods["phase"].isin(["Succeeded", "Failed"]) & (pods["gpu_request"] > 0)]
    return [f"{r.namespace}/{r.pod}" for r in live.itertuples()]


def collect_node(
    cluster,
    node: str,
    *,
    apply: bool = False,
    diag_level: int | None = None,
    force: bool = False,
    out_dir: str | Path | None = None,
    token: str | None = None,
    with_cluster_objects: bool = True,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    **overrides: Any,
) -> CollectResult:
    """Collect node evidence with a short-lived pod; ``apply=False`` (default) only builds and validates the spec.

    ``diag_level`` adds ``dcgmi diag -r LEVEL -j``, which loads the GPUs for minutes: it is refused when
    GPU pods run on the node unless ``force``. ``out_dir``: write the snapshot folder there. Raises
    :class:`CollectError` (``reason`` names the failure; ``result`` has what came back); the pod is
    deleted in every case, and a pod that could not be deleted is a ``CleanupFailed`` error naming it.
    """
    node = node_name(node)
    level = _check_level(diag_level)
    token = token or secrets.token_hex(8)
    spec = pod_spec(node, token=token, diag_level=level, **overrides)
    validate_spec(spec)
    s = settings(**overrides)
    ns, name = spec["metadata"]["namespace"], spec["metadata"]["name"]
    res = CollectResult(node, name, ns, spec, apply, level)
    if not apply:
        return res
    try:
        cluster.get_node(node)
    except KubernetesError as exc:
        if exc.status == 404:
            raise UnknownNode(f"node {node!r} does not exist in the cluster ({cluster.server})") from exc
        raise
    if level is not None and not force:
        busy = gpu_pods_on(cluster, node)
        if busy:
            raise CollectError(
                f"dcgmi diag -r {level} loads every GPU of {node} for minutes, and GPU pods run there: "
                f"{', '.join(busy[:10])}",
                reason="CollectRefused",
                hint="drain the node first (xid_ecc_triage's remediation plan), or pass --force to run it anyway",
            )
    try:
        _create(cluster, spec)
        _wait_started(cluster, ns, name, s, clock, sleep, res)
        res.log = _read_log(cluster, ns, name, s, res)
        res.sections = split_sections(res.log, token)
        _check_complete(res, level, cluster, ns, name)
    except BaseException as exc:
        if isinstance(exc, CollectError) and exc.result is None:
            exc.result = res
        _delete(cluster, ns, name, s, res, exc)
        if out_dir is not None and res.sections:
            write_snapshot(res, out_dir)  # what did finish; cut sections only as .partial files
        raise
    _delete(cluster, ns, name, s, res, None)
    if out_dir is not None:
        write_snapshot(res, out_dir, cluster=cluster if with_cluster_objects else None)
    return res


def _create(cluster, spec: dict) -> None:
    ns = spec["metadata"]["namespace"]
    call = _Call("create", "pods", f"/api/v1/namespaces/{ns}/pods", "", ns)
    cluster._request(cluster.core.create_namespaced_pod, call, namespace=ns, body=spec)


def _read_pod(cluster, ns: str, name: str) -> dict:
    call = _Call("get", "pods", f"/api/v1/namespaces/{ns}/pods/{name}", "", ns)
    return cluster._request(cluster.core.read_namespaced_pod, call, name=name, namespace=ns)


def _wait_started(cluster, ns, name, s, clock, sleep, res: CollectResult) -> None:
    deadline = clock() + s["pending_timeout_s"]
    while True:
        pod = _read_pod(cluster, ns, name)
        status = pod.get("status") or {}
        phase = status.get("phase", "")
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in IMAGE_PULL_REASONS:
                raise CollectError(
                    f"image {cs.get('image') or res.spec['spec']['containers'][0]['image']!r} cannot be pulled "
                    f"on {res.node} ({waiting['reason']}: {waiting.get('message', '')})",
                    reason="ImagePullFailed",
                    hint="set another image in gpulib/data/kube/collect_settings.csv (or --image) that the node can "
                    "pull, e.g. from the cluster's mirror registry",
                )
        if phase in ("Running", "Succeeded", "Failed"):
            return
        if clock() >= deadline:
            why = (
                "; ".join(
                    f"{c.get('reason', '')}: {c.get('message', '')}"
                    for c in status.get("conditions") or []
                    if c.get("status") == "False"
                )
                or "no reason given"
            )
            raise CollectError(
                f"pod {ns}/{name} still {phase or 'Pending'} on {res.node} after {s['pending_timeout_s']:.0f} s ({why})",
                reason="PodStuckPending",
                hint=f"kubectl -n {ns} describe pod {name}: a node without room for the pod's requests, a "
                "PodSecurity policy refusing a privileged pod, or a slow image pull",
            )
        sleep(s["poll_s"])


def _read_log(cluster, ns, name, s, res: CollectResult) -> str:
    """The container's log streamed with ``follow=True``; a dropped stream is read once more without follow."""
    text, cut = _stream(cluster, ns, name, s, follow=True)
    if cut:
        res.problems.append(f"log stream of {ns}/{name} cut mid-way ({cut}): read again")
        again, cut2 = _stream(cluster, ns, name, s, follow=False)
        if len(again) >= len(text):
            text = again
        if cut2:
            res.problems.append(f"log of {ns}/{name} cut again ({cut2})")
    return text


def _stream(cluster, ns, name, s, *, follow: bool) -> tuple[str, str]:
    import urllib3
    from kubernetes.client.exceptions import ApiException

    call = _Call("get", "pods/log", f"/api/v1/namespaces/{ns}/pods/{name}/log", "", ns)
    chunks: list[bytes] = []
    try:
        resp = cluster.core.read_namespaced_pod_log(
            name=name,
            namespace=ns,
            container=CONTAINER,
            follow=follow,
            _preload_content=False,
            _request_timeout=(10, s["timeout_s"]),
        )
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise cluster._error(exc, call, 1) from exc
    try:
        for chunk in resp.stream(1024, decode_content=True):  # small reads: a cut stream loses at most its last KiB
            chunks.append(chunk)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return b"".join(chunks).decode("utf-8", "replace"), type(exc).__name__
    finally:
        resp.release_conn()
    return b"".join(chunks).decode("utf-8", "replace"), ""


def _check_complete(res: CollectResult, level, cluster, ns, name) -> None:
    wanted = [c["section"] for c in sections(level)]
    cut = [w for w in wanted if w in res.sections and not res.sections[w].complete]
    absent = [w for w in wanted if w not in res.sections]
    for sec in wanted:
        got = res.sections.get(sec)
        if got is not None and got.complete and got.rc != 0 and res.text(sec) is None:
            res.problems.append(f"{sec}: command exited {got.rc}; its output is kept as an .err file, not as evidence")
    if cut or absent:
        phase = ((_read_pod_quiet(cluster, ns, name) or {}).get("status") or {}).get("phase", "?")
        reason = "CollectTimeout" if phase == "Failed" else "LogStreamCut"
        raise CollectError(
            f"collection log of {ns}/{name} on {res.node} ends before "
            f"{', '.join(cut + absent)} finished (pod phase {phase})",
            reason=reason,
            result=res,
            hint="the sections that did finish are in the result; raise timeout_s (collect settings or "
            "--timeout) if the pod hit activeDeadlineSeconds, else re-run: a cut log is never read "
            "as complete evidence",
        )


def _read_pod_quiet(cluster, ns, name) -> dict | None:
    try:
        return _read_pod(cluster, ns, name)
    except KubernetesError:
        return None


def _delete(cluster, ns, name, s, res: CollectResult, primary: BaseException | None) -> None:
    call = _Call("delete", "pods", f"/api/v1/namespaces/{ns}/pods/{name}", "", ns)
    last: KubernetesError | None = None
    for _ in range(max(1, int(s["delete_attempts"]))):
        try:
            cluster._request(cluster.core.delete_namespaced_pod, call, name=name, namespace=ns, grace_period_seconds=0)
            return
        except KubernetesError as exc:
            if exc.status == 404:
                return  # never created, or already gone
            last = exc
    err = CollectError(
        f"pod {ns}/{name} on {res.node} could not be deleted: {last}",
        reason="CleanupFailed",
        status=getattr(last, "status", None),
        result=res,
        hint=f"delete it by hand: kubectl -n {ns} delete pod {name} --grace-period=0 "
        f"(it stops by itself after activeDeadlineSeconds={res.spec['spec']['activeDeadlineSeconds']})",
    )
    if primary is not None:
        res.problems.append(str(err))
        return  # the first failure is the one raised; the leftover pod is named in the result
    raise err


# ---------------------------------------------------------------------------------------- snapshot
def file_name(section: str, node: str) -> str:
    row = next(c for c in _commands() if c["section"] == section)
    return str(row["file"]).replace("{node}", node)


def write_snapshot(res: CollectResult, out_dir: str | Path, *, cluster=None) -> list[Path]:
    """Write the sections as the snapshot source's files (``dmesg-<node>.txt``, ``nvidia-smi-q-<node>.txt``, ...),
    failed or cut ones as ``<file>.err`` / ``<file>.partial`` (never under the evidence name), ``collect-<node>.json``
    (what ran and what came back) and, with ``cluster``, ``nodes.json`` and ``pods.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for sec, part in res.sections.items():
        if not any(c["section"] == sec for c in _commands()):
            continue
        target = out / file_name(sec, res.node)
        usable = res.text(sec)
        if usable is not None:
            target.write_text(usable)
            res.files.append(target)
        else:
            bad = target.with_name(target.name + (".partial" if not part.complete else ".err"))
            bad.write_text(part.text)
            res.files.append(bad)
    if cluster is not None:
        try:
            res.files += cluster.dump(out)
        except KubernetesError as exc:
            res.problems.append(f"nodes.json/pods.json not written: {exc}")
    manifest = out / f"collect-{res.node}.json"
    manifest.write_text(json.dumps(res.manifest(), indent=2) + "\n")
    res.files.append(manifest)
    return res.files
