"""The remediation audit log of :mod:`gpulib.kube.remediate`: where it is, and the intent and outcome records appended
to it (one JSON line each, on disk before the action goes on; who, never a credential).

A record is on disk whole or not at all: a short write (a filling disk cuts a write at what is left) is continued,
a failed one is cut back to where the record began, and the record is read back from the file before the action goes
on. A failed write says truthfully whether the change was sent to the cluster."""

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
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)  # read: each record is read back
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


#: what a failed audit write says about the cluster, by whether anything was sent to it
NOTHING_SENT = "nothing was sent to the cluster: the change was not made"


def _write_record(fh, path: Path, record: dict, sent: str = NOTHING_SENT) -> None:
    """Append one JSON line whole, force it to disk (fsync) and read it back; a failure is a GpulibError that stops
    the action, the line cut back out of the file, ``sent`` (what was sent to the cluster) in its hint."""
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = fh.fileno()
    written = 0
    try:
        while written < len(data):  # O_APPEND: each write lands at the end; a short one is continued
            n = os.write(fd, data[written:])
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += n
        try:
            os.fsync(fd)
        except OSError as exc:  # character devices and some filesystems cannot fsync; the write itself succeeded
            if exc.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):
                raise
        _read_back(fd, data)
    except OSError as exc:
        _cut_back(fd, written)
        raise GpulibError(
            f"cannot write the remediation audit log {path}: {exc.strerror or exc}",
            hint=f"{sent}; set GPUOPS_AUDIT_LOG to a writable file (with free space) or pass audit_log=",
        ) from None


def _read_back(fd: int, data: bytes) -> None:
    """The record just appended, read from the file, is ``data`` (OSError EIO otherwise)."""
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)
    except OSError as exc:
        if exc.errno == errno.ESPIPE:  # a pipe or character device (/dev/full): nothing to read back
            return
        raise
    if os.pread(fd, len(data), end - len(data)) != data:
        raise OSError(errno.EIO, "the record read back differs from the one written")


def _cut_back(fd: int, written: int) -> None:
    """Remove the ``written`` bytes of a record that failed, when nothing was appended after them."""
    if not written:
        return
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)
        if os.fstat(fd).st_size == end:
            os.ftruncate(fd, end - written)
    except OSError:
        pass


def _sent(result: Any) -> str:
    """What a remediation result sent to the cluster, as a failed outcome record says it."""
    done = [c for c in (result.changes or []) if c.get("outcome") not in ("planned", "accepted by server dry run")]
    if done:
        what = ", ".join(f"{c.get('op')} {c.get('node') or c.get('pod') or ''}".strip() for c in done)
        return f"the change WAS sent to the cluster ({what}) but its outcome is not in the audit log: record it by hand"
    if result.mode == "applied":
        return "nothing was applied to the cluster"
    return "nothing was changed in the cluster (a dry run)"


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
    _write_record(fh, path, record, _sent(result))
    result.audit_log = str(path)
