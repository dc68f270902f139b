"""A cluster-wide lock for remediation: a ``coordination.k8s.io/v1`` Lease.

The circuit breaker of :mod:`gpulib.kube.remediate` counts unschedulable GPU nodes and then acts; two
on-call engineers (threads, processes or machines) doing that at once would both pass the check. Every
applied change that the breaker guards therefore runs while holding the Lease ``gpuops-remediation``
(namespace ``$GPUOPS_LOCK_NAMESPACE``, default ``default``):

* acquire = **create** the Lease (the API server refuses a second create with 409 AlreadyExists), or take
  over an expired one with an **update carrying its resourceVersion** (409 Conflict when someone else
  updated it first: optimistic concurrency,
  https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions);
* release = **delete** with a resourceVersion precondition, so only the holder's own Lease goes.

Lease objects: https://kubernetes.io/docs/concepts/architecture/leases/ . The RBAC needed is
``create,get,update,delete`` on ``leases`` in ``coordination.k8s.io`` in that namespace.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
import uuid
from contextlib import contextmanager

from gpulib.core.errors import KubernetesError, LockBusy
from gpulib.kube.client import _Call

LEASE_NAME = "gpuops-remediation"
#: a holder that died releases the lock after this long (seconds); a change takes well under it
LEASE_SECONDS = 60
#: how long to wait for another remediation to finish before refusing
WAIT_SECONDS = 20.0


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _fmt(t: _dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(s: str | None) -> _dt.datetime | None:
    if not s:
        return None
    try:
        return _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


def namespace() -> str:
    return os.environ.get("GPUOPS_LOCK_NAMESPACE") or "default"


def _api(cluster):
    from kubernetes import client

    return client.CoordinationV1Api(cluster.api_client)


def _body(holder: str, rv: str | None = None, name: str = LEASE_NAME, seconds: int = LEASE_SECONDS) -> dict:
    now = _fmt(_now())
    meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpuops"}}
    if rv:
        meta["resourceVersion"] = rv
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": int(seconds), "acquireTime": now, "renewTime": now},
    }


def _try_acquire(cluster, ns: str, holder: str, name: str = LEASE_NAME, seconds: int = LEASE_SECONDS) -> str | None:
    """The Lease ``name``'s resourceVersion when we now hold it, None when someone else does."""
    api = _api(cluster)
    base = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    try:
        got = cluster._request(
            api.create_namespaced_lease,
            _Call("create", "leases", base, "coordination.k8s.io", ns),
            namespace=ns,
            body=_body(holder, None, name, seconds),
        )
        return (got.get("metadata") or {}).get("resourceVersion", "")
    except KubernetesError as exc:
        if exc.status != 409:
            raise
    cur = cluster._request(
        api.read_namespaced_lease,
        _Call("get", "leases", f"{base}/{name}", "coordination.k8s.io", ns),
        name=name,
        namespace=ns,
    )
    spec, meta = cur.get("spec") or {}, cur.get("metadata") or {}
    if spec.get("holderIdentity") == holder:  # ours already (a claim made again by its holder)
        return meta.get("resourceVersion", "")
    renew = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    ttl = float(spec.get("leaseDurationSeconds") or seconds)
    if renew is not None and (_now() - renew).total_seconds() < ttl:
        return None
    try:  # expired: take it over, only if nobody changed it since we read it
        got = cluster._request(
            api.replace_namespaced_lease,
            _Call("update", "leases", f"{base}/{name}", "coordination.k8s.io", ns),
            name=name,
            namespace=ns,
            body=_body(holder, meta.get("resourceVersion"), name, seconds),
        )
        return (got.get("metadata") or {}).get("resourceVersion", "")
    except KubernetesError as exc:
        if exc.status in (409, 404):
            return None
        raise


def _release(cluster, ns: str, rv: str) -> None:
    api = _api(cluster)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE_NAME}"
    try:
        cluster._request(
            api.delete_namespaced_lease,
            _Call("delete", "leases", path, "coordination.k8s.io", ns),
            name=LEASE_NAME,
            namespace=ns,
            body={"preconditions": {"resourceVersion": rv}},
        )
    except KubernetesError as exc:
        if exc.status not in (404, 409):  # gone or taken over after expiry: not ours any more
            raise


@contextmanager
def held(cluster, *, wait_s: float = WAIT_SECONDS, sleep=time.sleep):
    """Hold the remediation Lease for the block; LockBusy when another holder keeps it past ``wait_s``."""
    ns = namespace()
    holder = f"gpuops@{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        rv = _try_acquire(cluster, ns, holder)
        if rv is not None:
            break
        if time.monotonic() >= deadline:
            raise LockBusy(f"another remediation holds Lease {ns}/{LEASE_NAME}; waited {wait_s:g}s")
        sleep(delay)
        delay = min(delay * 2, 1.0)
    try:
        yield holder
    finally:
        _release(cluster, ns, rv)


def claim(cluster, name: str, *, seconds: int, holder: str | None = None) -> bool:
    """Claim the Lease ``name`` for ``seconds`` (``gpuops serve``'s incident claims: one replica runs an incident):
    True when this holder now has it, False while another holder's claim has not expired. A claim is not released:
    it lapses, so the incident stays with its replica for its window, and a later one may be claimed again."""
    holder = holder or f"gpuops@{socket.gethostname()}/{os.getpid()}"
    return _try_acquire(cluster, namespace(), holder, name, seconds) is not None
