"""A loopback Kubernetes API double for tests that drive the REAL ``kubernetes`` client.

It serves real-shaped responses (kubectl-shaped fixtures under ``tests/fixtures/k8s``) on
``127.0.0.1:<free port>`` over plain HTTP, from a threaded ``http.server``:

* ``GET /api/v1/nodes``, ``/api/v1/nodes/{name}``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods``
  (``labelSelector`` with ``k=v,k!=v,k``; ``fieldSelector`` ``spec.nodeName=``, ``metadata.namespace=``)
* ``GET /apis/apps/v1/namespaces/{ns}/daemonsets``, ``GET /apis/nvidia.com/v1/clusterpolicies``
* ``GET /apis/resource.k8s.io/v1/resourceclaims``, ``.../namespaces/{ns}/resourceclaims`` and ``.../resourceslices``
  (DRA; ``resource_api=False``: a cluster that serves no ``resource.k8s.io/v1``, 404)
* ``GET /api/v1/namespaces/{ns}/configmaps/{name}`` (``configmaps``: the MIG Manager ConfigMap
  ``default-mig-parted-config`` in ``gpu-operator`` by default; 404 ``NotFound`` for another name)
* ``GET /api/v1/namespaces`` and ``/api/v1/namespaces/{name}`` (Namespace objects with their labels, e.g.
  ``gpu-operator`` with its PodSecurity ``enforce`` label; 404 ``NotFound`` for an unknown name)
* every list honours ``limit`` and ``continue`` the way the API server does (items ordered by key,
  opaque base64 continue token holding the resourceVersion and the next key, ``remainingItemCount``;
  an expired token answers 410 ``Expired``)
* ``PATCH /api/v1/nodes/{name}`` (strategic-merge / merge patch) and
  ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction``, both honouring ``dryRun=All``
  (nothing changes) and recorded; an eviction of a pod marked with :meth:`block_eviction` answers
  429 like a PodDisruptionBudget would
* ``coordination.k8s.io/v1`` Leases (``/apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]``): POST
  (409 AlreadyExists for an existing name), GET, PUT (409 Conflict unless ``metadata.resourceVersion`` is
  the current one), DELETE (409 Conflict when ``preconditions.resourceVersion`` does not match)
* ``batch/v1`` Jobs (``/apis/batch/v1/namespaces/{ns}/jobs[/{name}[/status]]``): POST (``dryRun=All`` honoured,
  409 for an existing name), GET and GET ``/status``, DELETE; a created Job is handed to :attr:`job_hook` (a
  callable ``job -> "Complete" | "Failed"`` run in a thread of its own, as the Job controller and the kubelet would
  run the pod) and its ``status.conditions`` say what the hook returned; ``jobs`` holds them by (namespace, name)
* ``events.k8s.io/v1`` Events (``/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]``): POST, GET, list, PUT
  with the resourceVersion check; ``PATCH /api/v1/nodes/{name}/status`` merges ``status.conditions`` by type
* bearer-token authentication (401 without it), and :meth:`fail` to answer 403/5xx for a path.
* pods of one run: ``POST /api/v1/namespaces/{ns}/pods`` (``dryRun=All`` honoured), ``GET .../pods/{name}``
  (the phase moves along :attr:`pod_script` ``phases``, one step per read; ``waiting_reason`` puts the
  container in e.g. ``ImagePullBackOff``, ``unschedulable`` adds a ``PodScheduled=False`` condition),
  ``GET .../pods/{name}/log`` (text/plain; ``log_mode="drop"`` closes the connection half-way through
  the body, as a dropped stream does) and ``DELETE .../pods/{name}``; ``created``/``deleted`` record them.

Use :func:`start_k8s_double` (returns a started double with ``.kubeconfig`` written) or the
``k8s_double`` pytest fixture. Every request is recorded in ``double.requests``.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "k8s"
DEFAULT_TOKEN = "k8s-double-token-3f9a1c7e"


def load_items(name: str) -> list[dict]:
    """Items of a kubectl-shaped fixture file under tests/fixtures/k8s."""
    return json.loads((FIXTURES / name).read_text())["items"]


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    content_type: str
    authorization: str  # the header as received (tests assert it never leaks elsewhere)

    def param(self, key: str) -> str | None:
        vals = self.query.get(key)
        return vals[0] if vals else None


@dataclass
class PodScript:
    """How pods created on the double behave (see the module docstring)."""

    phases: list = None  # type: ignore[assignment]
    log: str = ""  # "{token}" is replaced by the run token found in the pod's command
    log_mode: str = "full"  # "full" | "drop" (every read cut half-way) | "drop_once"
    waiting_reason: str | None = None
    waiting_message: str = ""
    unschedulable: str | None = None

    def __post_init__(self):
        if self.phases is None:
            self.phases = ["Pending", "Running", "Succeeded"]


@dataclass
class _Raw:
    """A non-JSON answer: ``data`` sent with ``declared`` Content-Length (more than sent = a cut body)."""

    data: bytes
    content_type: str = "text/plain"
    declared: int | None = None


@dataclass
class _FailRule:
    method: str
    pattern: str
    status: int
    remaining: int | None  # None = forever
    message: str = ""


def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {
        "apiVersion": "v1",
        "code": code,
        "kind": "Status",
        "message": message,
        "metadata": {},
        "reason": reason,
        "status": "Failure" if code >= 300 else "Success",
    }
    if details:
        body["details"] = details
    return body


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (identical to strategic merge for the fields we patch on Nodes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = _merge_patch(result.get(k), v)
    return result


def _label_match(labels: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.rstrip("=")) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class KubeApiDouble:
    """In-memory API server state + a loopback HTTP server. See module docstring."""

    def __init__(
        self,
        nodes: list[dict] | None = None,
        pods: list[dict] | None = None,
        daemonsets: list[dict] | None = None,
        cluster_policies: list[dict] | None = None,
        namespaces: list[dict] | None = None,
        configmaps: list[dict] | None = None,
        *,
        token: str | None = DEFAULT_TOKEN,
        crd_installed: bool = True,
        resource_claims: list[dict] | None = None,
        resource_slices: list[dict] | None = None,
        resource_api: bool = True,
    ):
        self.nodes = copy.deepcopy(nodes if nodes is not None else load_items("nodes.json"))
        self.pods = copy.deepcopy(pods if pods is not None else load_items("pods.json"))
        self.daemonsets = copy.deepcopy(
            daemonsets if daemonsets is not None else load_items("daemonsets-gpu-operator.json")
        )
        self.cluster_policies = copy.deepcopy(
            cluster_policies if cluster_policies is not None else load_items("clusterpolicies.json")
        )
        self.namespaces = copy.deepcopy(namespaces if namespaces is not None else load_items("namespaces.json"))
        #: GPUClusters (nvidia.com/v1alpha1, the GPU Operator's DRA stack); None: the CRD is not served (404)
        self.gpu_clusters: list[dict] | None = None
        self.configmaps = copy.deepcopy(
            configmaps if configmaps is not None else load_items("configmaps-gpu-operator.json")
        )
        self.token = token
        self.crd_installed = crd_installed
        # resource.k8s.io/v1 (DRA): ResourceClaims and ResourceSlices; resource_api=False: a cluster that serves none
        self.resource_claims = copy.deepcopy(resource_claims or [])
        self.resource_slices = copy.deepcopy(resource_slices or [])
        self.resource_api = resource_api
        self.resource_version = 48500000
        self.expired_before_rv = 0  # continue tokens from an older resourceVersion answer 410
        self._expire_next = False
        self.requests: list[RecordedRequest] = []
        self._rules: list[_FailRule] = []
        self._blocked: dict[tuple[str, str], str] = {}
        self.leases: dict[tuple[str, str], dict] = {}
        self.events: dict[tuple[str, str], dict] = {}
        self.jobs: dict[tuple[str, str], dict] = {}
        self.job_hook = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.kubeconfig: Path | None = None
        self.pod_script = PodScript()
        self.created: list[str] = []
        self.deleted: list[str] = []
        self._pod_reads: dict[str, int] = {}
        self._log_reads = 0

    # -- control ---------------------------------------------------------------------------
    def fail(self, path: str, status: int, *, times: int | None = None, method: str = "GET", message: str = "") -> None:
        """Answer ``status`` for ``method path`` (fnmatch pattern), ``times`` times (None = always)."""
        with self._lock:
            self._rules.append(_FailRule(method.upper(), path, status, times, message))

    def clear_failures(self) -> None:
        with self._lock:
            self._rules.clear()

    def block_eviction(self, namespace: str, pod: str, pdb: str = "pdb") -> None:
        """Evictions of this pod answer 429 as if PodDisruptionBudget ``pdb`` allowed no disruption."""
        self._blocked[(namespace, pod)] = pdb

    def expire_continue_tokens(self) -> None:
        """Make every continue token issued so far answer 410 Expired (etcd compaction)."""
        self.expired_before_rv = self.resource_version + 1
        self.resource_version += 1

    def expire_next_continue(self) -> None:
        """The next request carrying a continue token answers 410 Expired (compaction mid-list)."""
        self._expire_next = True

    def pod(self, namespace: str, name: str) -> dict | None:
        return next(
            (p for p in self.pods if p["metadata"]["name"] == name and p["metadata"].get("namespace") == namespace),
            None,
        )

    def pods_in(self, namespace: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods if p["metadata"].get("namespace") == namespace)

    def node(self, name: str) -> dict | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def namespace(self, name: str) -> dict | None:
        return next((n for n in self.namespaces if n["metadata"]["name"] == name), None)

    def requests_to(self, method: str, pattern: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method.upper() and fnmatch.fnmatch(r.path, pattern)]

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None, "double not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "KubeApiDouble":
        double = self

        class Handler(_Handler):
            api = double

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="k8s-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "KubeApiDouble":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def write_kubeconfig(
        self, path: str | Path, *, context: str = "double", user: str = "oncall", server: str | None = None
    ) -> Path:
        """Write a kubeconfig whose ``context`` points at this double with the bearer token."""
        import yaml

        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "current-context": context,
            "clusters": [{"name": "double-cluster", "cluster": {"server": server or self.url}}],
            "users": [{"name": user, "user": {"token": self.token} if self.token else {}}],
            "contexts": [
                {"name": context, "context": {"cluster": "double-cluster", "user": user, "namespace": "default"}}
            ],
        }
        p = Path(path)
        p.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.kubeconfig = p
        return p

    # -- request handling (called from the server threads) -------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict, body: bytes) -> tuple[int, Any]:
        """Answer one request; ``headers`` keys are lower-case."""
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        ctype = headers.get("content-type", "")
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(RecordedRequest(method, path, query, parsed, ctype, headers.get("authorization", "")))
            if self.token and headers.get("authorization") != f"Bearer {self.token}":
                return 401, _status(401, "Unauthorized", "Unauthorized")
            for rule in self._rules:
                if rule.method == method and fnmatch.fnmatch(path, rule.pattern) and rule.remaining != 0:
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule.status, self._failure(rule, method, path)
            return self._route(method, path, query, parsed, ctype)

    @staticmethod
    def _failure(rule: _FailRule, method: str, path: str) -> dict:
        if rule.status == 403:
            resource = path.rstrip("/").split("/")[-1]
            msg = rule.message or (
                f'{resource} is forbidden: User "oncall" cannot {method.lower() == "get" and "list" or method.lower()} '
                f'resource "{resource}" in API group "" at the cluster scope'
            )
        else:
            msg = rule.message or {
                500: "etcdserver: request timed out",
                503: "the server is currently unable to handle the request",
            }.get(rule.status, "injected failure")
        return _status(rule.status, _REASONS.get(rule.status, "Unknown"), msg)

    def _route(self, method, path, query, body, ctype) -> tuple[int, dict]:
        seg = [s for s in path.split("/") if s]
        if method == "GET":
            if seg == ["api", "v1", "nodes"]:
                return self._list("NodeList", "v1", self.nodes, query, builtin=True)
            if seg[:3] == ["api", "v1", "nodes"] and len(seg) == 4:
                node = self.node(seg[3])
                if node is None:
                    return 404, _status(
                        404, "NotFound", f'nodes "{seg[3]}" not found', {"kind": "nodes", "name": seg[3]}
                    )
                return 200, dict(node, apiVersion="v1", kind="Node")
            if seg == ["api", "v1", "namespaces"]:
                return self._list("NamespaceList", "v1", self.namespaces, query, builtin=True)
            if seg[:3] == ["api", "v1", "namespaces"] and len(seg) == 4:
                ns = self.namespace(seg[3])
                if ns is None:
                    return 404, _status(
                        404, "NotFound", f'namespaces "{seg[3]}" not found', {"kind": "namespaces", "name": seg[3]}
                    )
                return 200, dict(ns, apiVersion="v1", kind="Namespace")
            if seg == ["api", "v1", "pods"]:
                return self._list("PodList", "v1", self.pods, query, builtin=True)
            if len(seg) == 6 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "configmaps":
                cm = next(
                    (
                        c
                        for c in self.configmaps
                        if (c["metadata"].get("namespace"), c["metadata"]["name"]) == (seg[3], seg[5])
                    ),
                    None,
                )
                if cm is None:
                    return 404, _status(
                        404, "NotFound", f'configmaps "{seg[5]}" not found', {"kind": "configmaps", "name": seg[5]}
                    )
                return 200, dict(cm, apiVersion="v1", kind="ConfigMap")
            if len(seg) == 5 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods":
                pods = [p for p in self.pods if p["metadata"].get("namespace") == seg[3]]
                return self._list("PodList", "v1", pods, query, builtin=True)
            if len(seg) == 6 and seg[:4] == ["apis", "apps", "v1", "namespaces"] and seg[5] == "daemonsets":
                ds = [d for d in self.daemonsets if d["metadata"].get("namespace") == seg[4]]
                return self._list("DaemonSetList", "apps/v1", ds, query, builtin=True)
            if len(seg) == 6 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods":
                return self._read_pod(seg[3], seg[5])
            if len(seg) == 7 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods" and seg[6] == "log":
                return self._pod_log(seg[3], seg[5])
            if seg[:3] == ["apis", "resource.k8s.io", "v1"] and seg[3:] in (
                ["resourceclaims"],
                ["resourceslices"],
                ["namespaces", seg[4] if len(seg) > 4 else "", "resourceclaims"],
            ):
                if not self.resource_api:
                    return 404, _status(404, "NotFound", "the server could not find the requested resource")
                if seg[-1] == "resourceslices":
                    return self._list(
                        "ResourceSliceList", "resource.k8s.io/v1", self.resource_slices, query, builtin=True
                    )
                claims = [c for c in self.resource_claims if len(seg) == 4 or c["metadata"].get("namespace") == seg[4]]
                return self._list("ResourceClaimList", "resource.k8s.io/v1", claims, query, builtin=True)
            if seg == ["apis", "nvidia.com", "v1", "clusterpolicies"]:
                if not self.crd_installed:
                    return 404, _status(404, "NotFound", "the server could not find the requested resource")
                return self._list("ClusterPolicyList", "nvidia.com/v1", self.cluster_policies, query, builtin=False)
            if seg == ["apis", "nvidia.com", "v1alpha1", "gpuclusters"]:
                if self.gpu_clusters is None:
                    return 404, _status(404, "NotFound", "the server could not find the requested resource")
                return self._list("GPUClusterList", "nvidia.com/v1alpha1", self.gpu_clusters, query, builtin=False)
        if (
            seg[:3] == ["apis", "coordination.k8s.io", "v1"]
            and len(seg) in (6, 7)
            and seg[3] == "namespaces"
            and seg[5] == "leases"
        ):
            return self._lease(method, seg[4], seg[6] if len(seg) == 7 else None, body)
        if seg[:4] == ["apis", "batch", "v1", "namespaces"] and len(seg) in (6, 7, 8) and seg[5] == "jobs":
            return self._job(method, seg[4], seg[6] if len(seg) > 6 else None, query, body)
        if method == "POST" and len(seg) == 5 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods":
            return self._create_pod(seg[3], query, body)
        if method == "DELETE" and len(seg) == 6 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods":
            return self._delete_pod(seg[3], seg[5])
        if method == "PATCH" and seg[:3] == ["api", "v1", "nodes"] and len(seg) == 4:
            return self._patch_node(seg[3], query, body, ctype)
        if (
            method == "POST"
            and len(seg) == 7
            and seg[:3] == ["api", "v1", "namespaces"]
            and seg[4] == "pods"
            and seg[6] == "eviction"
        ):
            return self._evict(seg[3], seg[5], query, body)
        if seg[:4] == ["apis", "events.k8s.io", "v1", "namespaces"] and len(seg) in (6, 7) and seg[5] == "events":
            return self._event(method, seg[4], seg[6] if len(seg) == 7 else None, body)
        if method == "PATCH" and seg[:3] == ["api", "v1", "nodes"] and len(seg) == 5 and seg[4] == "status":
            return self._patch_node_status(seg[3], body, ctype)
        return 404, _status(404, "NotFound", "the server could not find the requested resource")

    # -- lists with paging ----------------------------------------------------------------------
    def _list(self, kind, api_version, items, query, *, builtin: bool) -> tuple[int, dict]:
        selected = list(items)
        if query.get("labelSelector"):
            selected = [
                i for i in selected if _label_match(i["metadata"].get("labels") or {}, query["labelSelector"][0])
            ]
        if query.get("fieldSelector"):
            for term in query["fieldSelector"][0].split(","):
                key, _, value = term.partition("=")
                if key == "spec.nodeName":
                    selected = [i for i in selected if (i.get("spec") or {}).get("nodeName", "") == value]
                elif key == "metadata.namespace":
                    selected = [i for i in selected if i["metadata"].get("namespace") == value]
                else:
                    return 400, _status(400, "BadRequest", f"field label not supported: {key}")
        keyed = sorted(
            ((f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}", i) for i in selected),
            key=lambda kv: kv[0],
        )
        rv = self.resource_version
        start = ""
        if query.get("continue"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(query["continue"][0] + "==="))
                rv, start = int(tok["rv"]), tok["start"]
            except (ValueError, KeyError, TypeError):
                return 400, _status(400, "BadRequest", "continue key is not valid: illegal base64 data")
            if self._expire_next:
                self._expire_next = False
                self.expire_continue_tokens()
            if rv < self.expired_before_rv:
                return 410, _status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without "
                    "the continue parameter.",
                )
        page = [(k, i) for k, i in keyed if k >= start]
        limit = int(query["limit"][0]) if query.get("limit") and int(query["limit"][0]) > 0 else None
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit is not None and len(page) > limit:
            nxt = page[limit][0]
            meta["continue"] = (
                base64.urlsafe_b64encode(json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": nxt}).encode())
                .decode()
                .rstrip("=")
            )
            meta["remainingItemCount"] = len(page) - limit
            page = page[:limit]
        out = []
        for _, item in page:
            obj = copy.deepcopy(item)
            if builtin:  # the API server omits kind/apiVersion on items of built-in lists
                obj.pop("kind", None)
                obj.pop("apiVersion", None)
            out.append(obj)
        return 200, {"apiVersion": api_version, "items": out, "kind": kind, "metadata": meta}

    # -- writes --------------------------------------------------------------------------------
    @staticmethod
    def _dry_run(query: dict, body: Any) -> tuple[bool, str | None]:
        values = list(query.get("dryRun", []))
        if isinstance(body, dict):
            values += list((body.get("deleteOptions") or {}).get("dryRun") or [])
        bad = [v for v in values if v != "All"]
        if bad:
            return False, f'Invalid value: "{bad[0]}": supported values: "All"'
        return bool(values), None

    def _lease(self, method, ns, name, body) -> tuple[int, dict]:
        def out(obj):
            return dict(copy.deepcopy(obj), apiVersion="coordination.k8s.io/v1", kind="Lease")

        if method == "POST" and name is None:
            name = ((body or {}).get("metadata") or {}).get("name", "")
            if (ns, name) in self.leases:
                return 409, _status(
                    409,
                    "AlreadyExists",
                    f'leases.coordination.k8s.io "{name}" already exists',
                    {"group": "coordination.k8s.io", "kind": "leases", "name": name},
                )
            self.resource_version += 1
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(obj.get("metadata") or {}, namespace=ns, resourceVersion=str(self.resource_version))
            self.leases[(ns, name)] = obj
            return 201, out(obj)
        cur = self.leases.get((ns, name))
        if cur is None:
            return 404, _status(
                404,
                "NotFound",
                f'leases.coordination.k8s.io "{name}" not found',
                {"group": "coordination.k8s.io", "kind": "leases", "name": name},
            )
        if method == "GET":
            return 200, out(cur)
        if method == "PUT":
            rv = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if rv != cur["metadata"]["resourceVersion"]:
                return 409, _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": '
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            self.resource_version += 1
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(obj.get("metadata") or {}, namespace=ns, resourceVersion=str(self.resource_version))
            self.leases[(ns, name)] = obj
            return 200, out(obj)
        if method == "DELETE":
            want = ((body or {}).get("preconditions") or {}).get("resourceVersion")
            if want is not None and want != cur["metadata"]["resourceVersion"]:
                return 409, _status(
                    409, "Conflict", "Precondition failed: ResourceVersion in precondition does not match"
                )
            del self.leases[(ns, name)]
            return 200, _status(200, "Success", "deleted")
        return 405, _status(405, "MethodNotAllowed", "method not allowed")

    def _event(self, method, ns, name, body) -> tuple[int, dict]:
        """``events.k8s.io/v1`` Events: POST (409 for an existing name), GET one or the namespace's list, PUT
        (409 Conflict unless ``metadata.resourceVersion`` is the current one), as the API server answers them."""

        def out(obj):
            return dict(copy.deepcopy(obj), apiVersion="events.k8s.io/v1", kind="Event")

        if method == "GET" and name is None:
            items = [e for (n, _), e in sorted(self.events.items()) if n == ns]
            return 200, {"apiVersion": "events.k8s.io/v1", "kind": "EventList", "metadata": {}, "items": items}
        if method == "POST" and name is None:
            if not isinstance(body, dict) or body.get("kind") != "Event" or not body.get("eventTime"):
                return 422, _status(422, "Invalid", "Event is invalid: eventTime: Required value")
            name = (body.get("metadata") or {}).get("name", "")
            if (ns, name) in self.events:
                return 409, _status(409, "AlreadyExists", f'events.events.k8s.io "{name}" already exists')
            self.resource_version += 1
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(obj.get("metadata") or {}, namespace=ns, resourceVersion=str(self.resource_version))
            self.events[(ns, name)] = obj
            return 201, out(obj)
        cur = self.events.get((ns, name))
        if cur is None:
            return 404, _status(404, "NotFound", f'events.events.k8s.io "{name}" not found')
        if method == "GET":
            return 200, out(cur)
        if method == "PUT":
            if ((body or {}).get("metadata") or {}).get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on events "{name}"')
            self.resource_version += 1
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(obj["metadata"], namespace=ns, resourceVersion=str(self.resource_version))
            self.events[(ns, name)] = obj
            return 200, out(obj)
        return 405, _status(405, "MethodNotAllowed", "method not allowed")

    def _patch_node_status(self, name, body, ctype) -> tuple[int, dict]:
        """``PATCH /api/v1/nodes/{name}/status`` as a strategic merge patch: ``status.conditions`` merged by ``type``
        (the patchMergeKey of NodeStatus.conditions), the rest as a merge patch."""
        node = self.node(name)
        if node is None:
            return 404, _status(404, "NotFound", f'nodes "{name}" not found', {"kind": "nodes", "name": name})
        if not ctype.startswith("application/strategic-merge-patch+json") or not isinstance(body, dict):
            return 415, _status(
                415, "UnsupportedMediaType", f"this double merges conditions by type only (got {ctype!r})"
            )
        conds = list(((node.get("status") or {}).get("conditions")) or [])
        for c in ((body.get("status") or {}).get("conditions")) or []:
            conds = [x for x in conds if x.get("type") != c.get("type")] + [c]
        rest = {**body, "status": {k: v for k, v in (body.get("status") or {}).items() if k != "conditions"}}
        patched = _merge_patch(node, rest)
        patched.setdefault("status", {})["conditions"] = conds
        self.resource_version += 1
        patched["metadata"]["resourceVersion"] = str(self.resource_version)
        self.nodes[self.nodes.index(node)] = patched
        return 200, dict(patched, apiVersion="v1", kind="Node")

    def _patch_node(self, name, query, body, ctype) -> tuple[int, dict]:
        node = self.node(name)
        if node is None:
            return 404, _status(404, "NotFound", f'nodes "{name}" not found', {"kind": "nodes", "name": name})
        if not ctype.startswith(("application/strategic-merge-patch+json", "application/merge-patch+json")):
            return 415, _status(
                415,
                "UnsupportedMediaType",
                (
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                    f"application/strategic-merge-patch+json (got {ctype!r})"
                ),
            )
        if not isinstance(body, dict):
            return 400, _status(400, "BadRequest", "patch body must be a JSON object")
        dry, err = self._dry_run(query, None)
        if err:
            return 400, _status(400, "BadRequest", err)
        patched = _merge_patch(node, body)
        if not dry:
            self.resource_version += 1
            patched["metadata"]["resourceVersion"] = str(self.resource_version)
            self.nodes[self.nodes.index(node)] = patched
        return 200, dict(patched, apiVersion="v1", kind="Node")

    def _job(self, method, ns, name, query, body) -> tuple[int, Any]:
        if method == "POST" and name is None:
            if not isinstance(body, dict) or body.get("kind") != "Job":
                return 400, _status(400, "BadRequest", "body is not a Job")
            dry, err = self._dry_run(query, None)
            if err:
                return 400, _status(400, "BadRequest", err)
            job = copy.deepcopy(body)
            name = job["metadata"]["name"]
            if (ns, name) in self.jobs:
                return 409, _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            job["metadata"].update(namespace=ns, uid=f"job-uid-{len(self.jobs)}")
            job["status"] = {"active": 1}
            if not dry:
                self.jobs[(ns, name)] = job
                self.resource_version += 1
                if self.job_hook is not None:
                    threading.Thread(target=self._run_job, args=(ns, name), daemon=True).start()
            return 201, job
        job = self.jobs.get((ns, name)) if name else None
        if job is None:
            return 404, _status(404, "NotFound", f'jobs.batch "{name}" not found', {"group": "batch", "kind": "jobs"})
        if method == "GET":
            return 200, dict(copy.deepcopy(job), apiVersion="batch/v1", kind="Job")
        if method == "DELETE":
            del self.jobs[(ns, name)]
            self.deleted.append(f"job/{name}")
            return 200, _status(200, "Success", f'jobs.batch "{name}" deleted')
        return 405, _status(405, "MethodNotAllowed", f"{method} is not served for jobs")

    def _run_job(self, ns, name) -> None:
        job = self.jobs.get((ns, name))
        try:
            result = self.job_hook(copy.deepcopy(job))
        except Exception as exc:  # the pod failed: the Job says so
            result = f"Failed: {exc}"
        if (ns, name) not in self.jobs:  # deleted meanwhile
            return
        kind, _, message = str(result).partition(": ")
        cond = {"type": kind, "status": "True"}
        if kind == "Failed":
            cond.update(reason="BackoffLimitExceeded", message=message or "Job has reached the specified backoff limit")
        job["status"] = {"conditions": [cond], ("succeeded" if kind == "Complete" else "failed"): 1}

    def _create_pod(self, ns, query, body) -> tuple[int, Any]:
        if not isinstance(body, dict) or body.get("kind") != "Pod":
            return 400, _status(400, "BadRequest", "body is not a Pod")
        dry, err = self._dry_run(query, None)
        if err:
            return 400, _status(400, "BadRequest", err)
        pod = copy.deepcopy(body)
        name = pod["metadata"]["name"]
        if self.pod(ns, name) is not None:
            return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
        pod["metadata"].update(namespace=ns, uid=f"uid-{len(self.created)}", creationTimestamp="2026-12-01T08:00:00Z")
        pod["status"] = {"phase": "Pending"}
        if not dry:
            self.pods.append(pod)
            self.created.append(name)
            self.resource_version += 1
        return 201, pod

    def _read_pod(self, ns, name) -> tuple[int, Any]:
        pod = self.pod(ns, name)
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found', {"kind": "pods", "name": name})
        script = self.pod_script
        n = self._pod_reads.get(name, 0)
        self._pod_reads[name] = n + 1
        phase = script.phases[min(n, len(script.phases) - 1)]
        status: dict[str, Any] = {"phase": phase}
        if script.unschedulable:
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": script.unschedulable}
            ]
        if script.waiting_reason:
            image = pod["spec"]["containers"][0]["image"]
            status["containerStatuses"] = [
                {
                    "name": pod["spec"]["containers"][0]["name"],
                    "image": image,
                    "ready": False,
                    "restartCount": 0,
                    "imageID": "",
                    "state": {"waiting": {"reason": script.waiting_reason, "message": script.waiting_message}},
                }
            ]
        pod["status"] = status
        return 200, dict(copy.deepcopy(pod), apiVersion="v1", kind="Pod")

    def _pod_log(self, ns, name) -> tuple[int, Any]:
        if self.pod(ns, name) is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found', {"kind": "pods", "name": name})
        log = self.pod_script.log
        if "{token}" in log:  # the run token of the created pod's script (gpulib.kube.collect.script)
            import re

            found = re.search(
                r"@@gpuops:([0-9a-f]{16}):", " ".join(self.pod(ns, name)["spec"]["containers"][0]["command"])
            )
            log = log.replace("{token}", found.group(1) if found else "")
        data = log.encode()
        self._log_reads += 1
        mode = self.pod_script.log_mode
        if mode == "drop" or (mode == "drop_once" and self._log_reads == 1):
            return 200, _Raw(data[: len(data) // 2], declared=len(data))
        return 200, _Raw(data)

    def _delete_pod(self, ns, name) -> tuple[int, Any]:
        pod = self.pod(ns, name)
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found', {"kind": "pods", "name": name})
        self.pods.remove(pod)
        self.deleted.append(name)
        self.resource_version += 1
        return 200, dict(copy.deepcopy(pod), apiVersion="v1", kind="Pod")

    def _evict(self, ns, name, query, body) -> tuple[int, dict]:
        pod = next(
            (p for p in self.pods if p["metadata"]["name"] == name and p["metadata"].get("namespace") == ns), None
        )
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found', {"kind": "pods", "name": name})
        dry, err = self._dry_run(query, body)
        if err:
            return 400, _status(400, "BadRequest", err)
        if (ns, name) in self._blocked:
            pdb = self._blocked[(ns, name)]
            return 429, _status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb} needs 1 healthy pods and has 1 currently",
                        }
                    ]
                },
            )
        if not dry:
            self.pods.remove(pod)
            self.resource_version += 1
        return 201, {"apiVersion": "v1", "code": 201, "kind": "Status", "metadata": {}, "status": "Success"}


class _Handler(BaseHTTPRequestHandler):
    api: KubeApiDouble
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}  # HTTP header names are case-insensitive
        status, payload = self.api.handle(self.command, self.path, headers, body)
        if isinstance(payload, _Raw):
            self.send_response(status)
            self.send_header("Content-Type", payload.content_type)
            self.send_header(
                "Content-Length", str(payload.declared if payload.declared is not None else len(payload.data))
            )
            self.end_headers()
            self.wfile.write(payload.data)
            if payload.declared is not None and payload.declared > len(payload.data):
                self.wfile.flush()
                self.close_connection = True  # the body stops short of its Content-Length
            return
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening (for 'connection refused' tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_k8s_double(tmp_path: str | Path, **kwargs) -> KubeApiDouble:
    """Start a double (kwargs as :class:`KubeApiDouble`) and write ``tmp_path/kubeconfig`` for it.

    The caller stops it (``double.stop()``); the ``k8s_double`` fixture does that for you.
    """
    double = KubeApiDouble(**kwargs).start()
    double.write_kubeconfig(Path(tmp_path) / "kubeconfig")
    return double


@pytest.fixture
def k8s_double(tmp_path, monkeypatch):
    """A started :class:`KubeApiDouble` serving the fixtures; ``.kubeconfig`` points at it.

    Loopback must bypass any HTTP proxy of the CI environment, so NO_PROXY gains 127.0.0.1.
    """
    import os

    monkeypatch.setenv("NO_PROXY", ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1"])))
    monkeypatch.setenv("no_proxy", ",".join(filter(None, [os.environ.get("no_proxy", ""), "127.0.0.1"])))
    double = start_k8s_double(tmp_path)
    yield double
    double.stop()
