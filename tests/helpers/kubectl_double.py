"""The loopback API double (``tests/helpers/k8s_double.py``) grown so the REAL ``kubectl`` can talk to it.

What kubectl needs beyond the Python client's paths, after the Kubernetes API concepts page
(https://kubernetes.io/docs/reference/using-api/api-concepts/: resource URIs, "Dry-run", "Receiving resources as
Tables") and the discovery section of https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api
(aggregated vs unaggregated discovery):

* discovery: ``GET /version``, ``/api`` (APIVersions), ``/apis`` (APIGroupList), ``/api/v1`` and
  ``/apis/<group>/<version>`` (APIResourceList: name, singularName, namespaced, kind, verbs, shortNames, and the
  ``pods/log``, ``pods/eviction``, ``<workload>/scale`` subresources). Aggregated discovery
  (``apidiscovery.k8s.io/v2``) is not served: the answers are plain ``application/json``, and kubectl falls back
  to the per-group lists (seen with ``kubectl get nodes -v=8``: it asks for ``as=APIGroupDiscoveryList`` then reads
  ``/api/v1`` and each ``/apis/<group>/<version>``). No ``/openapi/v2``/``v3`` either: ``kubectl get`` prints
  its default NAME/AGE columns when the answer is not a ``Table``, and ``kubectl apply`` runs with
  ``--validate=false`` (see ``tests/helpers/commandcheck.py``).
* every resource of :data:`RESOURCES`, cluster-scoped or namespaced: list (``labelSelector``; ``fieldSelector``
  with ``=``/``==``/``!=`` on the field labels the API server supports per kind, :data:`FIELD_LABELS`, anything
  else answers 400 ``field label not supported``), get (404 ``NotFound`` Status naming the resource, e.g.
  ``deployments.apps "x" not found``), ``/scale`` of Deployments, StatefulSets and ReplicaSets, ``pods/log``
  (canned text; 400 for a container the pod does not have, or ``previous=true`` of a container that never
  restarted, as the kubelet answers), ``pods/eviction`` (PodDisruptionBudget blocks as in the base double);
  ``watch=true`` answers an empty stream (the watch ends at once), so ``kubectl get -w`` prints and returns.
* writes -- PATCH (strategic-merge, merge, JSON patch), POST, PUT, DELETE, the scale subresource -- are answered
  only with ``dryRun=All`` ("Dry-run" section of the API concepts page): the answer is the object as it would be,
  nothing is stored, and each is recorded in :attr:`KubectlDouble.dry_runs`. A write without ``dryRun`` answers
  403, so a check that forgot ``--dry-run=server`` fails instead of changing the double. The merged object is
  validated the way the API server's validation does for the fields the printed commands touch (taint effects,
  label keys and values, replicas >= 0, the body's kind matches the URL, the namespace exists).

Objects that do not exist answer 404, so a printed command naming a node, pod or namespace the fleet does not
have, or a StatefulSet addressed as ``deployment/<name>``, fails. :func:`demo_cluster`
(``tests/helpers/demo_cluster.py``)
builds the demo fleet's objects.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.helpers.k8s_double import KubeApiDouble, _label_match, _merge_patch, _Raw, _status

#: (group, version, plural, kind, namespaced, shortNames, subresources) the double serves; the short names and
#: subresources are those of ``kubectl api-resources`` on a v1.29+ cluster
#: (https://kubernetes.io/docs/reference/kubectl/#resource-types)
RESOURCES = [
    ("", "v1", "nodes", "Node", False, ["no"], ["status"]),
    ("", "v1", "pods", "Pod", True, ["po"], ["log", "eviction", "status", "exec", "attach"]),
    ("", "v1", "namespaces", "Namespace", False, ["ns"], ["status"]),
    ("", "v1", "events", "Event", True, ["ev"], []),
    ("", "v1", "services", "Service", True, ["svc"], ["status"]),
    ("", "v1", "endpoints", "Endpoints", True, ["ep"], []),
    ("", "v1", "configmaps", "ConfigMap", True, ["cm"], []),
    ("apps", "v1", "deployments", "Deployment", True, ["deploy"], ["scale", "status"]),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ["sts"], ["scale", "status"]),
    ("apps", "v1", "daemonsets", "DaemonSet", True, ["ds"], ["status"]),
    ("apps", "v1", "replicasets", "ReplicaSet", True, ["rs"], ["scale", "status"]),
    ("batch", "v1", "jobs", "Job", True, [], ["status"]),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ["hpa"], ["status"]),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"], ["status"]),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, [], []),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ["crd", "crds"],
        ["status"],
    ),
    # custom resources of the demo fleet: the GPU Operator's ClusterPolicy (NVIDIA/gpu-operator:
    # config/crd/bases/nvidia.com_clusterpolicies.yaml), Kubeflow's PyTorchJob (kubeflow/training-operator:
    # manifests/base/crds/kubeflow.org_pytorchjobs.yaml), prometheus-operator's ServiceMonitor
    # (prometheus-operator/prometheus-operator:
    # example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml)
    ("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False, [], ["status"]),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, [], ["status"]),
    ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True, ["smon"], []),
]
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUB_VERBS = {
    "log": ["get"],
    "eviction": ["create"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "scale": ["get", "patch", "update"],
    "status": ["get", "patch", "update"],
}
_SUB_KIND = {
    "log": ("", "v1", "Pod"),
    "eviction": ("policy", "v1", "Eviction"),
    "exec": ("", "v1", "PodExecOptions"),
    "attach": ("", "v1", "PodAttachOptions"),
    "scale": ("autoscaling", "v1", "Scale"),
}
#: field labels the API server accepts in ``fieldSelector`` beyond metadata.name/metadata.namespace
#: (kubernetes/kubernetes: pkg/registry/core/pod/strategy.go ToSelectableFields, pkg/registry/core/node/strategy.go,
#: pkg/registry/core/event/strategy.go)
FIELD_LABELS = {
    "pods": {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "nodes": {"spec.unschedulable"},
    "events": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
}
#: node taint effects (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/)
TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
# label syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set)
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")


def _field(obj: dict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur).lower() if isinstance(cur, bool) else str(cur)


def _strip_directives(patch: Any) -> Any:
    """A strategic-merge patch without its ``$setElementOrder``/``$retainKeys``/``$patch`` directives (merged
    like a JSON merge patch, which is what it is for the maps the printed commands change)."""
    if isinstance(patch, dict):
        return {k: _strip_directives(v) for k, v in patch.items() if not k.startswith("$")}
    return patch


def _json_patch(obj: dict, ops: list) -> dict:
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = out
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise ValueError(f"json patch op {op['op']!r} not supported by the double")
    return out


class KubectlDouble(KubeApiDouble):
    """See the module docstring. ``objects``: every object of the cluster (any kind of :data:`RESOURCES`)."""

    def __init__(self, objects: list[dict] | None = None, **kwargs):
        super().__init__(nodes=[], pods=[], daemonsets=[], cluster_policies=[], namespaces=[], **kwargs)
        self.dry_runs: list[tuple[str, str]] = []
        #: counts every change of the stored objects (load/add/put; writes over HTTP are dry runs and store nothing),
        #: so a caller may reuse an answer it got at the same generation
        self.generation = 0
        self.load(objects or [])

    def load(self, objects: list[dict]) -> None:
        """Replace the cluster's objects (the base double's ``nodes``/``pods``/... lists are the same lists)."""
        with self._lock:
            self.generation += 1
            self.store = {r[2]: [] for r in RESOURCES}
            self.nodes, self.pods, self.daemonsets = self.store["nodes"], self.store["pods"], self.store["daemonsets"]
            self.namespaces, self.cluster_policies = self.store["namespaces"], self.store["clusterpolicies"]
            for obj in objects:
                self.add(obj)

    def add(self, obj: dict) -> None:
        res = self._by_kind(obj["kind"])
        if res is None:
            raise ValueError(f"the double does not serve kind {obj['kind']}")
        self.store[res[2]].append(copy.deepcopy(obj))
        self.generation += 1

    def put(self, obj: dict) -> None:
        """Add ``obj``, replacing the object of the same kind, namespace and name."""
        res = self._by_kind(obj["kind"])
        old = self._find(res, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if old is not None:
            self.store[res[2]].remove(old)
        self.add(obj)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        res = self._by_kind(kind)
        return self._find(res, namespace, name) if res else None

    @staticmethod
    def _by_kind(kind: str):
        return next((r for r in RESOURCES if r[3] == kind), None)

    def _find(self, res, ns, name):
        return next(
            (
                o
                for o in self.store[res[2]]
                if o["metadata"]["name"] == name and (not res[4] or o["metadata"].get("namespace") == ns)
            ),
            None,
        )

    # -- routing ---------------------------------------------------------------------------------
    def _route(self, method, path, query, body, ctype):
        seg = [s for s in path.split("/") if s]
        if method == "GET" and (found := self._discovery(seg)) is not None:
            return 200, found
        if seg[:1] == ["api"] and seg[1:2] == ["v1"]:
            group, version, rest = "", "v1", seg[2:]
        elif seg[:1] == ["apis"] and len(seg) >= 4:
            group, version, rest = seg[1], seg[2], seg[3:]
        else:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        res = next((r for r in RESOURCES if r[:3] == (group, version, rest[0])), None)
        if res is None or len(rest) > 3 or (ns is not None and not res[4]):
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if method != "GET" and not (method == "POST" and sub == "eviction"):
            # DELETE carries DeleteOptions (with its dryRun) in the body, the other writes in the query
            dry, err = self._dry_run(
                query, {"deleteOptions": body} if method == "DELETE" and isinstance(body, dict) else None
            )
            if err:
                return 400, _status(400, "BadRequest", err)
            if not dry:
                return 403, _status(403, "Forbidden", "the kubectl double answers writes only with dryRun=All")
        if name is None:
            if method == "GET":
                return self._list_of(res, ns, query)
            if method == "POST":
                return self._create(res, ns, query, body)
            return 405, _status(405, "MethodNotAllowed", "method not allowed")
        if res[4] and ns is None:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        if res[4] and self._find(self._by_kind("Namespace"), None, ns) is None and method != "POST":
            return 404, _status(404, "NotFound", f'namespaces "{ns}" not found', {"kind": "namespaces", "name": ns})
        obj = self._find(res, ns, name)
        if obj is None:
            return 404, self._not_found(res, name)
        if sub == "eviction" and method == "POST":
            return self._evict(ns, name, query, body)
        if sub == "log" and method == "GET":
            return self._log(obj, query)
        if sub == "scale":
            return self._scale(res, obj, method, body, ctype)
        if sub is not None:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            return 200, self._out(res, obj)
        if method == "PATCH":
            return self._patch(res, obj, body, ctype, path)
        if method == "PUT":
            return self._checked(res, obj, copy.deepcopy(body), path)
        if method == "DELETE":
            self.dry_runs.append(("DELETE", path))
            return 200, self._out(res, obj)
        return 405, _status(405, "MethodNotAllowed", "method not allowed")

    @staticmethod
    def _not_found(res, name) -> dict:
        full = f"{res[2]}.{res[0]}" if res[0] else res[2]
        return _status(404, "NotFound", f'{full} "{name}" not found', {"name": name, "group": res[0], "kind": res[2]})

    @staticmethod
    def _out(res, obj) -> dict:
        return dict(copy.deepcopy(obj), apiVersion=f"{res[0]}/{res[1]}" if res[0] else res[1], kind=res[3])

    # -- discovery -----------------------------------------------------------------------------
    def _discovery(self, seg: list[str]) -> dict | None:
        if seg == ["version"]:
            return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-double", "platform": "linux/amd64"}
        if seg == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
            }
        groups = sorted({(r[0], r[1]) for r in RESOURCES if r[0]})
        if seg == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                        "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                    }
                    for g, v in groups
                ],
            }
        if seg == ["api", "v1"]:
            return self._resource_list("", "v1")
        if len(seg) == 3 and seg[0] == "apis" and (seg[1], seg[2]) in groups:
            return self._resource_list(seg[1], seg[2])
        return None

    @staticmethod
    def _resource_list(group: str, version: str) -> dict:
        out = []
        for g, v, plural, kind, namespaced, short, subs in RESOURCES:
            if (g, v) != (group, version):
                continue
            out.append(
                {
                    "name": plural,
                    "singularName": kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": _VERBS,
                    **({"shortNames": short} if short else {}),
                }
            )
            for sub in subs:
                sg, sv, skind = _SUB_KIND.get(sub, (g, v, kind))
                out.append(
                    {
                        "name": f"{plural}/{sub}",
                        "singularName": "",
                        "namespaced": namespaced,
                        "kind": skind,
                        "verbs": _SUB_VERBS[sub],
                        **({"group": sg, "version": sv} if (sg, sv) != (g, v) else {}),
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": out,
        }

    # -- reads ---------------------------------------------------------------------------------
    def _list_of(self, res, ns, query) -> tuple[int, Any]:
        items = [o for o in self.store[res[2]] if ns is None or o["metadata"].get("namespace") == ns]
        if query.get("labelSelector"):
            items = [o for o in items if _label_match(o["metadata"].get("labels") or {}, query["labelSelector"][0])]
        for term in filter(None, (query.get("fieldSelector") or [""])[0].split(",")):
            m = re.fullmatch(r"([A-Za-z.]+)(!=|==|=)(.*)", term)
            if not m or m.group(1) not in FIELD_LABELS.get(res[2], set()) | {"metadata.name", "metadata.namespace"}:
                return 400, _status(
                    400,
                    "BadRequest",
                    f'"{term.split("=")[0].rstrip("!")}" is not a known field selector: '
                    f'only "metadata.name", "metadata.namespace"',
                )
            key, op, value = m.groups()
            items = [o for o in items if (_field(o, key) == value) == (op != "!=")]
        if query.get("watch") in (["true"], ["1"]):
            return 200, _Raw(b"", content_type="application/json")
        return 200, {
            "apiVersion": f"{res[0]}/{res[1]}" if res[0] else res[1],
            "kind": f"{res[3]}List",
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": [
                copy.deepcopy(o)
                for o in sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            ],
        }

    def _log(self, pod, query) -> tuple[int, Any]:
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        containers = [c["name"] for c in spec.get("containers") or []]
        every = containers + [c["name"] for c in spec.get("initContainers") or []]
        want = (query.get("container") or [None])[0]
        if want is None:
            if len(containers) != 1:
                return 400, _status(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]",
                )
            want = containers[0]
        if want not in every:
            return 400, _status(400, "BadRequest", f"container {want} is not valid for pod {name}")
        if (query.get("previous") or ["false"])[0] == "true":
            st = pod.get("status") or {}
            cs = next(
                (
                    c
                    for c in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])
                    if c["name"] == want
                ),
                {},
            )
            if not cs.get("restartCount") and "terminated" not in (cs.get("lastState") or {}):
                return 400, _status(
                    400, "BadRequest", f'previous terminated container "{want}" in pod "{name}" not found'
                )
        return 200, _Raw(
            f"log of {pod['metadata'].get('namespace')}/{name} container {want} (kubectl double)\n".encode()
        )

    # -- writes (dryRun=All only) ----------------------------------------------------------------
    def _patch(self, res, obj, body, ctype, path) -> tuple[int, Any]:
        try:
            if ctype.startswith("application/json-patch+json"):
                new = _json_patch(obj, body)
            elif ctype.startswith(
                (
                    "application/strategic-merge-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                )
            ):
                if not isinstance(body, dict):
                    return 400, _status(400, "BadRequest", "patch body must be a JSON object")
                new = _merge_patch(obj, _strip_directives(body))
            else:
                return 415, _status(
                    415, "UnsupportedMediaType", f"the body of the request was in an unknown format ({ctype})"
                )
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            return 422, _status(422, "Invalid", f"the patch does not apply: {exc}")
        return self._checked(res, obj, new, path, verb="PATCH")

    def _checked(self, res, old, new, path, verb="PUT") -> tuple[int, Any]:
        """Validate the object a write would leave (dry run: it is answered, not stored)."""
        problems = self._invalid(res, new)
        if (new.get("metadata") or {}).get("name") != old["metadata"]["name"]:
            problems.append("metadata.name: Invalid value: field is immutable")
        if problems:
            return 422, _status(
                422, "Invalid", f'{res[3]} "{old["metadata"]["name"]}" is invalid: {"; ".join(problems)}'
            )
        self.dry_runs.append((verb, path))
        return 200, self._out(res, new)

    def _invalid(self, res, obj) -> list[str]:
        if not isinstance(obj, dict):
            return ["body is not an object"]
        out = []
        if obj.get("kind") not in (None, res[3]):
            out.append(f"kind: Invalid value: {obj.get('kind')!r}: must be {res[3]}")
        for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items():
            if not _LABEL_KEY.match(k) or len(k.split("/")[-1]) > 63:
                out.append(f"metadata.labels: Invalid value: {k!r}: name part must consist of alphanumeric characters")
            if not isinstance(v, str) or not _LABEL_VALUE.match(v):
                out.append(
                    f"metadata.labels: Invalid value: {v!r}: a valid label must be an empty string or "
                    "consist of alphanumeric characters"
                )
        for t in (obj.get("spec") or {}).get("taints") or [] if res[3] == "Node" else []:
            if t.get("effect") not in TAINT_EFFECTS:
                out.append(
                    f"spec.taints[].effect: Unsupported value: {t.get('effect')!r}: supported values: "
                    f"{', '.join(sorted(TAINT_EFFECTS))}"
                )
            if not _LABEL_KEY.match(t.get("key") or ""):
                out.append(f"spec.taints[].key: Invalid value: {t.get('key')!r}")
        replicas = (obj.get("spec") or {}).get("replicas")
        if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
            out.append(f"spec.replicas: Invalid value: {replicas!r}: must be greater than or equal to 0")
        return out

    def _create(self, res, ns, query, body) -> tuple[int, Any]:
        if not isinstance(body, dict):
            return 400, _status(400, "BadRequest", "the body of the request is not an object")
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            return 422, _status(
                422, "Invalid", f"{res[3]} is invalid: metadata.name: Required value: name or generateName is required"
            )
        if res[4] and self._find(self._by_kind("Namespace"), None, ns) is None:
            return 404, _status(404, "NotFound", f'namespaces "{ns}" not found', {"kind": "namespaces", "name": ns})
        if meta.get("namespace") not in (None, ns) and res[4]:
            return 400, _status(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        if self._find(res, ns, name) is not None:
            full = f"{res[2]}.{res[0]}" if res[0] else res[2]
            return 409, _status(
                409, "AlreadyExists", f'{full} "{name}" already exists', {"name": name, "group": res[0], "kind": res[2]}
            )
        obj = copy.deepcopy(body)
        obj["metadata"] = dict(
            meta,
            uid=f"dry-run-{len(self.dry_runs)}",
            creationTimestamp="2026-11-29T12:00:00Z",
            **({"namespace": ns} if res[4] else {}),
        )
        code, out = self._checked(res, {"metadata": {"name": name}}, obj, f"{res[2]}/{name}", verb="POST")
        return (201 if code == 200 else code), out

    def _scale(self, res, obj, method, body, ctype) -> tuple[int, Any]:
        if res[2] not in ("deployments", "statefulsets", "replicasets"):
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        spec = obj.get("spec") or {}
        sel = ",".join(f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items())
        scale = {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion") if k in obj["metadata"]
            },
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", spec.get("replicas", 1)), "selector": sel},
        }
        if method == "GET":
            return 200, scale
        if method == "PATCH":
            code, new = self._patch(
                ("autoscaling", "v1", "scale", "Scale", True),
                scale,
                body,
                ctype,
                f"{res[2]}/{obj['metadata']['name']}/scale",
            )
            return code, new
        if method == "PUT":
            return self._checked(
                ("autoscaling", "v1", "scale", "Scale", True),
                scale,
                copy.deepcopy(body),
                f"{res[2]}/{obj['metadata']['name']}/scale",
            )
        return 405, _status(405, "MethodNotAllowed", "method not allowed")

    def _evict(self, ns, name, query, body):
        dry, err = self._dry_run(query, body)
        if not dry and not err:
            return 403, _status(403, "Forbidden", "the kubectl double answers evictions only with dryRun=All")
        code, out = super()._evict(ns, name, query, body)
        if code == 201:
            self.dry_runs.append(("POST", f"pods/{name}/eviction"))
        return code, out
