"""Guarded remediation: cordon, uncordon, drain, taint and label GPU nodes (``docs/architecture.md``).

Every action is **dry-run unless ``apply=True``**:

* with a cluster (a :class:`gpulib.kube.client.KubeCluster`, or a source object holding one as ``.kube``/
  ``.cluster``) the request goes to the API server with ``dryRun=All``: it is authenticated,
  authorised, admitted and validated, but nothing is persisted;
* without a cluster the result is a printed plan (the kubectl commands and the patch).

Every call, dry-run or applied, successful, refused or failed, appends one JSON line to the audit
log (argument ``audit_log``, else ``$GPUOPS_AUDIT_LOG``, else ``~/.gpuops/audit.jsonl``):
who (OS user, kubeconfig context and user name, API server; never a credential), when, what,
target, dry_run, result. A circuit breaker refuses a cordon/drain that would leave more than a
share of the GPU nodes unschedulable (``data/kube/remediation_policy.csv``).

Each function returns a :class:`RemediationResult` with the equivalent kubectl commands.
"""

from __future__ import annotations

import datetime as _dt
import errno
import getpass
import html
import json
import math
import os
import re
import shlex
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import gpulib.kube.lease as lease
from gpulib.core.errors import GpulibError, InvalidParameter, KubernetesError, RemediationRefused
from gpulib.core.knowledge import load_table
from gpulib.kube.client import KubeCluster, _policy, eviction_body
from gpulib.kube.frames import iter_gpu_nodes, nodes_frame, pod_row
from gpulib.kube.labels import ANNOTATION_MIRROR_POD, GPU_RESOURCE, LABEL_MIG_CONFIG, MIG_RESOURCE_PREFIX

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DEFAULT_AUDIT_LOG = "~/.gpuops/audit.jsonl"
# Kubernetes label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set)
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass
class RemediationResult:
    """What a remediation did or would do.

    ``mode``: ``plan`` (no cluster: nothing sent), ``server-dry-run`` (sent with dryRun=All),
    ``applied``. ``ok`` is False when an eviction was blocked or failed. ``kubectl`` lists the
    equivalent commands (with ``--dry-run=server`` when it was a server dry run).
    ``changes``: the patches/evictions, each with its outcome.
    """

    action: str
    node: str
    dry_run: bool
    mode: str
    ok: bool
    message: str
    kubectl: list[str] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)
    audit_log: str = ""

    @property
    def kubectl_command(self) -> str:
        return "\n".join(self.kubectl)

    def as_dict(self) -> dict:
        return asdict(self)

    def as_text(self) -> str:
        head = {
            "plan": "PLAN (no cluster; nothing sent)",
            "server-dry-run": "DRY RUN (server-side, nothing changed)",
            "applied": "APPLIED",
        }.get(self.mode, self.mode.upper())
        lines = [f"{head}: {self.action} {self.node} -> {'ok' if self.ok else 'NOT OK'}: {self.message}"]
        for ch in self.changes:
            lines.append(
                "  - " + ", ".join(f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in ch.items())
            )
        lines += ["  equivalent kubectl:"] + [f"    {c}" for c in self.kubectl]
        if self.audit_log:
            lines.append(f"  audit: {self.audit_log}")
        return "\n".join(lines)

    __str__ = as_text

    def _repr_html_(self) -> str:  # notebooks

        return f"<pre>{html.escape(self.as_text())}</pre>"


# --------------------------------------------------------------------------------------------
# audit
# --------------------------------------------------------------------------------------------
def audit_path(audit_log: str | os.PathLike | None = None) -> Path:
    """Where audit records go: the argument, else ``$GPUOPS_AUDIT_LOG``, else ``~/.gpuops/audit.jsonl``."""
    raw = audit_log or os.environ.get("GPUOPS_AUDIT_LOG") or DEFAULT_AUDIT_LOG
    return Path(os.path.expanduser(str(raw)))


def _open_audit(path: Path):
    """Open the audit log for appending (0600, parents 0700) before acting, so an unwritable log stops us early."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise GpulibError(
            f"cannot write the remediation audit log {path}: {exc.strerror or exc}",
            hint="set GPUOPS_AUDIT_LOG to a writable file or pass audit_log=",
        ) from exc
    return os.fdopen(fd, "ab", buffering=0)  # unbuffered: a failed write fails now, nothing is left to flush


def _safe_server(server: str) -> str:
    """The API server URL without any user:password part."""
    parts = urlsplit(server)
    if parts.username or parts.password:
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return server


def _who(cluster: KubeCluster | None) -> dict:
    try:
        os_user = getpass.getuser()
    except (KeyError, OSError):
        os_user = os.environ.get("USER", "")
    who = {"os_user": os_user}
    if cluster is not None:
        who.update(context=cluster.context or "", k8s_user=cluster.user or "", server=_safe_server(cluster.server))
    return who


def _write_record(fh, path: Path, record: dict) -> None:
    """Append one JSON line and force it to disk (flush + fsync); a failure is a GpulibError that stops the action."""
    try:
        fh.write((json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8"))
        try:
            os.fsync(fh.fileno())
        except OSError as exc:  # character devices and some filesystems cannot fsync; the write itself succeeded
            if exc.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):
                raise
    except OSError as exc:
        raise GpulibError(
            f"cannot write the remediation audit log {path}: {exc.strerror or exc}",
            hint="set GPUOPS_AUDIT_LOG to a writable file or pass audit_log=; nothing was changed "
            "after the failed write",
        ) from None


def _intent(
    fh, path: Path, audit_id: str, action: str, node: str, mode: str, cluster: KubeCluster | None, reason: str
) -> None:
    """The record written (and on disk) before anything is sent: what is about to be done, by whom."""
    _write_record(
        fh,
        path,
        {
            "id": audit_id,
            "phase": "intent",
            "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "who": _who(cluster),
            "action": action,
            "target": {"kind": "Node", "name": node},
            "dry_run": mode != "applied",
            "mode": mode,
            "reason": reason,
        },
    )


def _audit(
    fh,
    path: Path,
    result: RemediationResult,
    cluster: KubeCluster | None,
    reason: str,
    error: str = "",
    audit_id: str = "",
) -> None:
    record = {
        "id": audit_id,
        "phase": "done",
        "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "who": _who(cluster),
        "action": result.action,
        "target": {"kind": "Node", "name": result.node},
        "dry_run": result.dry_run,
        "mode": result.mode,
        "result": "error" if error else ("ok" if result.ok else ("refused" if result.mode == "refused" else "partial")),
        "message": error or result.message,
        "reason": reason,
        "kubectl": result.kubectl,
        "changes": result.changes,
    }
    _write_record(fh, path, record)
    result.audit_log = str(path)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
@runtime_checkable
class HoldsCluster(Protocol):
    """What remediation asks of a source: the capability :meth:`gpulib.sources.base.Source.kube_cluster` (the
    Kubernetes API client to act through, or None when the source has none). ``kube/`` does not import
    ``sources/`` (``sources/live.py`` imports ``kube/``), so the capability is named here as a protocol."""

    def kube_cluster(self) -> KubeCluster | None: ...


def _as_cluster(cluster: Any) -> KubeCluster | None:
    """``cluster`` as the client to act through: a KubeCluster, None (a plan), or a source asked through its
    ``kube_cluster()`` capability (None there: a plan)."""
    if isinstance(cluster, HoldsCluster) and not isinstance(cluster, KubeCluster):
        cluster = cluster.kube_cluster()
    if cluster is None or isinstance(cluster, KubeCluster):
        return cluster
    raise InvalidParameter(
        f"cluster must be a gpulib.kube.client.KubeCluster (or a source whose kube_cluster() "
        f"returns one), got {type(cluster).__name__}",
        hint="use gpulib.kube.client.KubeCluster(context=...) or src.kube_cluster() of gpulib.connect('live', ...)",
    )


def _check_node_name(node: str) -> str:
    if not isinstance(node, str) or not _NODE_NAME.match(node) or len(node) > 253:
        raise InvalidParameter(
            f"node {node!r} is not a valid Kubernetes node name", hint="use the NAME column of `kubectl get nodes`"
        )
    return node


def _check_label(key: str, value: str | None, what: str = "label") -> None:
    if not isinstance(key, str) or not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise InvalidParameter(
            f"{what} key {key!r} is not a valid Kubernetes key",
            hint="[prefix/]name, name <= 63 chars of [A-Za-z0-9-_.], starting and ending alphanumeric",
        )
    if value is not None and (not isinstance(value, str) or not _LABEL_VALUE.match(value)):
        raise InvalidParameter(
            f"{what} value {value!r} for key {key!r} is not a valid Kubernetes value",
            hint="<= 63 chars of [A-Za-z0-9-_.], starting and ending alphanumeric, or empty",
        )


def _dry_flag(dry_run: bool, on_cluster: bool) -> str:
    return " --dry-run=server" if (dry_run and on_cluster) else ""


def _mode(cluster: KubeCluster | None, apply: bool) -> str:
    if apply:
        if cluster is None:
            raise InvalidParameter(
                "apply=True needs a cluster (cluster=KubeCluster(...)); without one only a plan can be printed",
                hint="connect with gpulib.kube.client.KubeCluster(context=...) first",
            )
        return "applied"
    return "server-dry-run" if cluster is not None else "plan"


def _max_share(max_share: float | None) -> float:
    raw = max_share if max_share is not None else os.environ.get("GPUOPS_MAX_CORDON_SHARE")
    value = float(raw) if raw is not None else _policy("max_cordoned_gpu_node_share")
    if not 0 < value <= 1:
        raise InvalidParameter(f"max_share must be within (0, 1], got {raw}")
    return value


def _placement_taints() -> set[str]:
    return set(load_table("placement_taints")["key"])


def _tainted_out(node_list: dict) -> set[str]:
    """Nodes a NoSchedule/NoExecute taint keeps new pods off, other than placement taints GPU workloads
    tolerate (``data/kube/placement_taints.csv``): the cap counts them like cordoned nodes."""
    keep = _placement_taints()
    out = set()
    for n in node_list.get("items") or []:
        for t in (n.get("spec") or {}).get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") not in keep:
                out.add((n.get("metadata") or {}).get("name"))
    return out


def check_circuit_breaker(cluster: KubeCluster, node: str, max_share: float | None = None) -> dict:
    """Refuse (RemediationRefused) when cordoning ``node`` would leave too many GPU nodes unschedulable.

    Allowed unschedulable GPU nodes = max(1, floor(max_share x GPU nodes)). Returns the counts.
    """
    share = _max_share(max_share)
    raw = cluster.list_nodes()
    nodes = nodes_frame(raw)
    gpu = set(iter_gpu_nodes(nodes))
    unsched = (set(nodes.loc[~nodes["schedulable"], "node"]) | _tainted_out(raw)) & gpu
    after = unsched | ({node} if node in gpu else set())
    allowed = max(1, math.floor(share * len(gpu)))
    counts = {"gpu_nodes": len(gpu), "unschedulable_after": len(after), "allowed": allowed, "max_share": share}
    if node in gpu and node not in unsched and len(after) > allowed:
        raise RemediationRefused(
            f"circuit breaker: cordoning {node} would leave {len(after)} of {len(gpu)} GPU nodes unschedulable "
            f"(allowed {allowed} = max(1, floor({share} x {len(gpu)}))); already cordoned: "
            f"{', '.join(sorted(unsched)) or 'none'}"
        )
    return counts


def _guarded(
    action: str,
    node: str,
    cluster: KubeCluster | None,
    apply: bool,
    audit_log,
    reason: str,
    run,
    *,
    locked: bool = False,
):
    """Audit the intent (on disk before anything is sent), run ``run(mode, changes) -> RemediationResult``, then
    audit the outcome with every change made so far, also when the run fails half-way. ``locked``: an applied
    run holds the cluster's remediation Lease (:mod:`gpulib.kube.lease`) so the breaker's count-then-act
    cannot interleave with another remediation."""
    mode = _mode(cluster, apply)
    path = audit_path(audit_log)
    if mode == "plan" and not (audit_log or os.environ.get("GPUOPS_AUDIT_LOG")):
        # a plan contacts no cluster (the demo source, or no kubeconfig): nothing to audit in the user's
        # own log; an audit log named explicitly still records it
        result = run(mode, [])
        print(result.as_text())
        return result
    audit_id = uuid.uuid4().hex
    changes: list[dict] = []
    with _open_audit(path) as fh:
        _intent(fh, path, audit_id, action, node, mode, cluster, reason)
        try:
            if locked and mode == "applied" and cluster is not None:
                with lease.held(cluster):
                    result = run(mode, changes)
            else:
                result = run(mode, changes)
        except RemediationRefused as exc:
            refused = RemediationResult(action, node, not apply, "refused", False, str(exc), changes=list(changes))
            _audit(fh, path, refused, cluster, reason, audit_id=audit_id)
            raise
        except GpulibError as exc:
            failed = RemediationResult(action, node, not apply, mode, False, str(exc), changes=list(changes))
            _audit(fh, path, failed, cluster, reason, error=str(exc), audit_id=audit_id)
            raise
        _audit(fh, path, result, cluster, reason, audit_id=audit_id)
    if mode == "plan":
        print(result.as_text())
    return result


def _patch(cluster: KubeCluster | None, node: str, patch: dict, mode: str, changes: list | None = None) -> dict:
    """Send the patch (dry-run or applied); returns the change record (also appended to ``changes`` once sent)."""
    change: dict[str, Any] = {"op": "patch", "node": node, "patch": patch}
    if cluster is None:
        change["outcome"] = "planned"
        return change
    cluster.patch_node(node, patch, dry_run=(mode != "applied"))
    change["outcome"] = "patched" if mode == "applied" else "accepted by server dry run"
    if changes is not None:
        changes.append(change)
    return change


# --------------------------------------------------------------------------------------------
# actions
# --------------------------------------------------------------------------------------------
def cordon(
    node: str,
    *,
    cluster: Any = None,
    apply: bool = False,
    audit_log: str | os.PathLike | None = None,
    reason: str = "",
    max_share: float | None = None,
) -> RemediationResult:
    """Mark ``node`` unschedulable (``kubectl cordon``), behind the circuit breaker."""
    _check_node_name(node)
    kc = _as_cluster(cluster)

    def run(mode, changes):
        breaker = check_circuit_breaker(kc, node, max_share) if kc is not None else None
        change = _patch(kc, node, {"spec": {"unschedulable": True}}, mode, changes)
        if breaker:
            change["circuit_breaker"] = breaker
        return RemediationResult(
            "cordon",
            node,
            mode != "applied",
            mode,
            True,
            "node marked unschedulable" if mode == "applied" else "would mark the node unschedulable",
            [f"kubectl cordon {node}{_dry_flag(mode != 'applied', kc is not None)}"],
            [change],
        )

    return _guarded("cordon", node, kc, apply, audit_log, reason, run, locked=True)


def uncordon(
    node: str, *, cluster: Any = None, apply: bool = False, audit_log: str | os.PathLike | None = None, reason: str = ""
) -> RemediationResult:
    """Make ``node`` schedulable again (``kubectl uncordon``)."""
    _check_node_name(node)
    kc = _as_cluster(cluster)

    def run(mode, changes):
        change = _patch(kc, node, {"spec": {"unschedulable": None}}, mode, changes)
        return RemediationResult(
            "uncordon",
            node,
            mode != "applied",
            mode,
            True,
            "node schedulable" if mode == "applied" else "would make the node schedulable",
            [f"kubectl uncordon {node}{_dry_flag(mode != 'applied', kc is not None)}"],
            [change],
        )

    return _guarded("uncordon", node, kc, apply, audit_log, reason, run)


def label(
    node: str,
    key: str,
    value: str | None,
    *,
    cluster: Any = None,
    apply: bool = False,
    audit_log: str | os.PathLike | None = None,
    reason: str = "",
) -> RemediationResult:
    """Set (or with ``value=None`` remove) a node label (``kubectl label --overwrite``)."""
    _check_node_name(node)
    _check_label(key, value)
    kc = _as_cluster(cluster)
    arg = f"{key}-" if value is None else f"{key}={value}"

    def run(mode, changes):
        change = _patch(kc, node, {"metadata": {"labels": {key: value}}}, mode, changes)
        verb = "removed" if value is None else "set"
        return RemediationResult(
            "label",
            node,
            mode != "applied",
            mode,
            True,
            f"label {arg} {verb}" if mode == "applied" else f"would apply label {arg}",
            [f"kubectl label node {node} {shlex.quote(arg)} --overwrite{_dry_flag(mode != 'applied', kc is not None)}"],
            [change],
        )

    return _guarded("label", node, kc, apply, audit_log, reason, run)


def set_mig_config(node: str, config: str, **kwargs) -> RemediationResult:
    """Ask the GPU Operator's MIG Manager for a mig-parted config: label ``nvidia.com/mig.config=<config>``.

    MIG Manager then reports progress in ``nvidia.com/mig.config.state`` (pending -> success | failed,
    ``NVIDIA/mig-parted: deployments/container/reconfigure-mig.sh`` @ bd7160f4). Drain GPU workloads first:
    reconfiguration needs idle GPUs.
    """
    return label(node, LABEL_MIG_CONFIG, config, **kwargs)


def _new_taints(current: list[dict], key: str, value: str, effect: str, remove: bool) -> list[dict]:
    """Taint list after adding/replacing (same key+effect) or removing (key, and effect when given)."""
    kept = [t for t in current if not (t.get("key") == key and (t.get("effect") == effect or (remove and not effect)))]
    if remove:
        return kept
    new = {"key": key, "effect": effect}
    if value:
        new["value"] = value
    return kept + [new]


def taint(
    node: str,
    key: str,
    value: str = "",
    effect: str = "NoSchedule",
    *,
    remove: bool = False,
    cluster: Any = None,
    apply: bool = False,
    audit_log: str | os.PathLike | None = None,
    reason: str = "",
    max_share: float | None = None,
    bypass_pdb: bool = False,
) -> RemediationResult:
    """Add/replace (``kubectl taint --overwrite``) or with ``remove=True`` remove a node taint.

    ``effect`` is NoSchedule, PreferNoSchedule or NoExecute. A NoSchedule/NoExecute taint takes the node out
    of scheduling like a cordon, so it passes the same circuit breaker. NoExecute evicts every pod that does
    not tolerate it *without* the Eviction API, i.e. past PodDisruptionBudgets
    (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-based-evictions):
    it is refused unless ``bypass_pdb=True`` says so. With ``remove=True`` and ``effect=""`` every taint
    with ``key`` goes.
    """
    _check_node_name(node)
    _check_label(key, value or None, "taint")
    if effect not in TAINT_EFFECTS and not (remove and effect == ""):
        raise InvalidParameter(f"taint effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    if effect == "NoExecute" and not remove and not bypass_pdb:
        raise InvalidParameter(
            "a NoExecute taint evicts pods past their PodDisruptionBudgets; use drain() "
            "(Eviction API), or pass bypass_pdb=True deliberately (audited)"
        )
    takes_out = not remove and effect in ("NoSchedule", "NoExecute") and key not in _placement_taints()
    kc = _as_cluster(cluster)
    spec = f"{key}{'=' + value if value else ''}{':' + effect if effect else ''}"
    arg = f"{key}{':' + effect if effect else ''}-" if remove else spec

    def run(mode, changes):
        if kc is None:
            change = {
                "op": "remove-taint" if remove else "add-taint",
                "node": node,
                "key": key,
                "value": value,
                "effect": effect,
                "outcome": "planned",
            }
        else:
            breaker = check_circuit_breaker(kc, node, max_share) if takes_out else None
            current = (kc.get_node(node).get("spec") or {}).get("taints") or []
            new = _new_taints(current, key, value, effect, remove)
            change = _patch(kc, node, {"spec": {"taints": new}}, mode, changes)
            change["taints_before"] = current
            if breaker:
                change["circuit_breaker"] = breaker
            if effect == "NoExecute" and not remove:
                change["bypass_pdb"] = True
        done = "removed" if remove else "set"
        return RemediationResult(
            "taint",
            node,
            mode != "applied",
            mode,
            True,
            f"taint {spec} {done}" if mode == "applied" else f"would {'remove' if remove else 'set'} taint {spec}",
            [
                f"kubectl taint node {node} {shlex.quote(arg)}{'' if remove else ' --overwrite'}"
                f"{_dry_flag(mode != 'applied', kc is not None)}"
            ],
            [change],
        )

    return _guarded("taint", node, kc, apply, audit_log, reason, run, locked=takes_out)


def _skip_reason(pod: dict, gpu_only: bool, force: bool) -> str:
    """Why a drain leaves this pod alone ('' = evict it). Mirrors `kubectl drain --ignore-daemonsets`."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if ANNOTATION_MIRROR_POD in (meta.get("annotations") or {}):
        return "mirror (static) pod"
    if any(r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or []):
        return "DaemonSet-managed (ignored, like --ignore-daemonsets)"
    if status.get("phase") in ("Succeeded", "Failed"):
        return f"already {status.get('phase')}"
    if gpu_only:
        row = pod_row(pod)
        if row["gpu_request"] == 0 and not any(row["mig_requests"].values()) and row["gpu_limit"] == 0:
            return f"requests no {GPU_RESOURCE} or {MIG_RESOURCE_PREFIX}* (gpu_only=True)"
    if not meta.get("ownerReferences") and not force:
        return "not managed by a controller; it would not come back (pass force=True, like kubectl drain --force)"
    return ""


def _eviction_cmd(ns: str, pod: str, dry_run: bool) -> str:
    body = json.dumps(eviction_body(ns, pod, dry_run=dry_run), separators=(",", ":"))
    return f"echo {shlex.quote(body)} | kubectl create --raw /api/v1/namespaces/{ns}/pods/{pod}/eviction -f -"


def drain(
    node: str,
    *,
    cluster: Any = None,
    apply: bool = False,
    gpu_only: bool = True,
    force: bool = False,
    audit_log: str | os.PathLike | None = None,
    reason: str = "",
    max_share: float | None = None,
) -> RemediationResult:
    """Cordon ``node`` and evict its GPU pods through the Eviction API (PodDisruptionBudgets honoured).

    DaemonSet pods, mirror pods and finished pods stay; with ``gpu_only=True`` (default) only pods
    requesting ``nvidia.com/gpu`` or ``nvidia.com/mig-*`` are evicted; bare pods need ``force=True``.
    A PDB that forbids an eviction leaves ``ok=False`` with the PDB's message. Evictions are requested,
    not awaited: watch ``kubectl get pods -A -o wide --field-selector spec.nodeName=<node>``.
    """
    _check_node_name(node)
    kc = _as_cluster(cluster)

    def run(mode, changes):
        dry = mode != "applied"
        flag = _dry_flag(dry, kc is not None)
        full = f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data{' --force' if force else ''}{flag}"
        if kc is None:
            cmds = [f"kubectl cordon {node}"]
            cmds += (
                [
                    f"kubectl get pods -A -o wide --field-selector spec.nodeName={node}  "
                    "# then evict each GPU pod (not DaemonSet pods):",
                    _eviction_cmd("<namespace>", "<pod>", False),
                ]
                if gpu_only
                else [full]
            )
            return RemediationResult(
                "drain",
                node,
                True,
                mode,
                True,
                "plan only: connect to the cluster to list the pods that would be evicted",
                cmds,
                [{"op": "cordon+evict", "node": node, "gpu_only": gpu_only, "outcome": "planned"}],
            )
        breaker = check_circuit_breaker(kc, node, max_share)
        cordon_change = _patch(kc, node, {"spec": {"unschedulable": True}}, mode, changes)
        cordon_change["circuit_breaker"] = breaker
        cmds = [f"kubectl cordon {node}{flag}"]
        evicted = blocked = 0
        for pod in kc.list_pods(field_selector=f"spec.nodeName={node}")["items"]:
            meta = pod.get("metadata") or {}
            ns, name = meta.get("namespace", ""), meta.get("name", "")
            skip = _skip_reason(pod, gpu_only, force)
            if skip:
                changes.append({"op": "skip", "pod": f"{ns}/{name}", "outcome": skip})
                continue
            change = {"op": "evict", "pod": f"{ns}/{name}"}
            try:
                kc.evict_pod(ns, name, dry_run=dry)
                change["outcome"] = "evicted" if not dry else "eviction accepted by server dry run"
                evicted += 1
            except KubernetesError as exc:
                if exc.status == 429:
                    change["outcome"] = (
                        f"blocked by PodDisruptionBudget: {getattr(exc, 'api_message', '') or exc.args[0]}"
                    )
                    blocked += 1
                elif exc.status == 404:
                    change["outcome"] = "already gone"
                else:
                    raise
            changes.append(change)
            cmds.append(_eviction_cmd(ns, name, dry))
        if not gpu_only:
            cmds.append(full)
        verb = "evicted" if not dry else "would evict"
        msg = f"cordoned; {verb} {evicted} pod(s)"
        if blocked:
            msg += f"; {blocked} blocked by PodDisruptionBudget (retry later or scale the workload)"
        return RemediationResult("drain", node, dry, mode, blocked == 0, msg, cmds, changes)

    return _guarded("drain", node, kc, apply, audit_log, reason, run, locked=True)
