"""The remediation audit log of :mod:`gpulib.kube.remediate`: where it is, and the intent and outcome records appended
to it (one JSON line each, on disk before the action goes on; who, never a credential)."""

from __future__ import annotations

import datetime as _dt
import errno
import getpass
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gpulib.core.errors import GpulibError
from gpulib.kube.client import KubeCluster

DEFAULT_AUDIT_LOG = "~/.gpuops/audit.jsonl"


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
    result: Any,  # a gpulib.kube.remediate.RemediationResult
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
