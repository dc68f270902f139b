"""Live Kubernetes: :class:`KubeCluster`, the official ``kubernetes`` client (kubeconfig context or in-cluster) with
paging (``limit``/``continue``), bounded retries with backoff on 5xx/429/connection errors, and errors that name the
URL, resource, verb and the RBAC rule. It returns the same frames as the converters of :mod:`gpulib.kube.frames`.

The ``kubernetes`` package is imported lazily, so the converters work on a GPU node or in a notebook with only pandas
installed.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from gpulib.core.errors import GpulibError, KubeconfigMissing, KubernetesError, MalformedKubernetesObject
from gpulib.core.knowledge import settings
from gpulib.kube.frames import configmap_config_yaml, daemonsets_frame, mig_parted_configmap, nodes_frame, pods_frame
from gpulib.kube.labels import (
    CLUSTERPOLICY_GROUP,
    CLUSTERPOLICY_PLURAL,
    CLUSTERPOLICY_VERSION,
    GPUCLUSTER_GROUP,
    GPUCLUSTER_PLURAL,
    GPUCLUSTER_VERSION,
)


# --------------------------------------------------------------------------------------------
# the live client
# --------------------------------------------------------------------------------------------
def kubernetes_client():
    """The official client's ``kubernetes.client`` module.

    ``import kubernetes`` imports its dynamic client (kubernetes-client/python: kubernetes/__init__.py @02465849),
    which imports ``kubernetes_validate`` if installed (kubernetes-client/python: kubernetes/base/dynamic/client.py
    @02465849) and so jsonschema, whose iri grammars are built only when first used
    (:func:`gpulib.core.lazy.defer_iri_grammars`, called when gpulib is imported)."""
    from kubernetes import client

    return client


def _policy(key: str) -> float:
    """A number of ``gpulib/data/kube/remediation_policy.csv`` (:func:`gpulib.core.knowledge.settings`)."""
    return settings("remediation_policy").number(key)


@dataclass(frozen=True)
class _Call:
    """What a request is, for error messages: ``verb`` ``resource`` at ``path`` (+ RBAC rule)."""

    verb: str
    resource: str
    path: str
    api_group: str = ""
    namespace: str | None = None

    def rbac_rule(self) -> str:
        group = self.api_group or '""'
        return f"apiGroups: [{group}], resources: [{self.resource}], verbs: [{self.verb}]"


class KubeCluster:
    """Live Kubernetes through the official client; returns the same frames as the converters.

    ``kubeconfig``: path (or ``os.pathsep``-joined paths); default ``$KUBECONFIG`` then
    ``~/.kube/config``. ``context``: a kubeconfig context (default: current-context).
    ``in_cluster=True`` uses the pod's service account. Lists are read in pages of ``page_size``
    with ``continue`` tokens; 5xx, 429 and connection errors are retried ``retries`` times in all
    with exponential backoff from ``backoff_s``; ``timeout`` (s) bounds each request.
    """

    def __init__(
        self,
        kubeconfig: str | os.PathLike | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        page_size: int | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        backoff_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        client = kubernetes_client()

        self.page_size = int(page_size if page_size is not None else _policy("page_size"))
        if self.page_size < 1:
            raise GpulibError(f"page_size must be >= 1, got {page_size}")
        self.timeout = float(timeout if timeout is not None else _policy("request_timeout_s"))
        self.retries = int(retries if retries is not None else _policy("retry_attempts"))
        self.backoff_s = float(backoff_s if backoff_s is not None else _policy("retry_backoff_s"))
        self._sleep = sleep
        self.in_cluster = in_cluster
        cfg = client.Configuration()
        if in_cluster:
            self.context, self.user = self._load_in_cluster(cfg), "serviceaccount"
            self.kubeconfig = None
        else:
            self.kubeconfig, self.context, self.user = self._load_kubeconfig(cfg, kubeconfig, context)
        cfg.retries = 0  # our own bounded retries below; urllib3 must not retry silently
        self.server = cfg.host
        self.api_client = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api_client)
        self._apps = self._custom = None

    @property
    def apps(self):
        """``AppsV1Api``, made on first use: reading nodes and pods (the utilization report) never imports it."""
        if self._apps is None:
            self._apps = kubernetes_client().AppsV1Api(self.api_client)
        return self._apps

    @property
    def custom(self):
        """``CustomObjectsApi``, made on first use."""
        if self._custom is None:
            self._custom = kubernetes_client().CustomObjectsApi(self.api_client)
        return self._custom

    @classmethod
    def from_environment(cls, **kw) -> "KubeCluster":
        """The cluster of a long-running gpuops process (``gpuops serve``'s claims and render Jobs): the pod's service
        account inside a pod (:func:`in_pod`), else the kubeconfig; ``$GPUOPS_KUBE_CONTEXT`` picks its context."""
        return cls(context=os.environ.get("GPUOPS_KUBE_CONTEXT") or None, in_cluster=in_pod(), **kw)

    # -- configuration ---------------------------------------------------------------------
    @staticmethod
    def _kubeconfig_paths(kubeconfig: str | os.PathLike | None) -> list[str]:
        if kubeconfig is not None:
            raw = str(kubeconfig)
        else:
            raw = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config"))
        return [os.path.expanduser(p) for p in raw.split(os.pathsep) if p]

    def _load_kubeconfig(self, cfg, kubeconfig, context) -> tuple[str, str, str]:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        paths = self._kubeconfig_paths(kubeconfig)
        present = [p for p in paths if os.path.isfile(p)]
        if not present:
            raise KubeconfigMissing(f"no kubeconfig file found (tried {', '.join(paths) or '<none>'})")
        joined = os.pathsep.join(present)
        try:
            contexts, current = config.list_kube_config_contexts(config_file=joined)
        except ConfigException as exc:
            raise KubeconfigMissing(f"kubeconfig {joined} has no usable contexts: {exc}") from exc
        names = [c.get("name", "") for c in contexts or []]
        chosen = context or (current or {}).get("name")
        if not chosen:
            raise KubeconfigMissing(
                f"kubeconfig {joined} sets no current-context and no context was given "
                f"(contexts: {', '.join(names) or 'none'})"
            )
        if chosen not in names:
            raise KubeconfigMissing(
                f"context {chosen!r} is not in kubeconfig {joined} (contexts: {', '.join(names) or 'none'})",
                hint="list them with `kubectl config get-contexts`",
            )
        try:
            config.load_kube_config(config_file=joined, context=chosen, client_configuration=cfg)
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeconfigMissing(f"cannot load context {chosen!r} from kubeconfig {joined}: {exc}") from exc
        entry = next(c for c in contexts if c.get("name") == chosen)
        return joined, chosen, (entry.get("context") or {}).get("user", "")

    @staticmethod
    def _load_in_cluster(cfg) -> str:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            config.load_incluster_config(client_configuration=cfg)
        except ConfigException as exc:
            raise KubeconfigMissing(
                f"in-cluster configuration not available: {exc}",
                hint="in_cluster=True works inside a pod (KUBERNETES_SERVICE_HOST/PORT set and a service "
                "account token at /var/run/secrets/kubernetes.io/serviceaccount/token); "
                "outside a pod pass kubeconfig=/context=",
            ) from exc
        return "in-cluster"

    # -- requests --------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return f"{self.server.rstrip('/')}{path}"

    def _error(self, exc: Exception, call: _Call, attempts: int) -> KubernetesError:
        err = self._make_error(exc, call, attempts)
        err.api_message = _status_message(exc)  # the API's own words (e.g. the PodDisruptionBudget refusal)
        return err

    def _make_error(self, exc: Exception, call: _Call, attempts: int) -> KubernetesError:
        from kubernetes.client.exceptions import ApiException

        url = self._url(call.path)
        if isinstance(exc, ApiException):
            status = exc.status or None
            reason = _status_message(exc)
            if status == 403:
                return KubernetesError(
                    f"forbidden: {self.user or 'this identity'} (context {self.context}) cannot {call.verb} "
                    f"{call.resource} ({url}): {reason}",
                    status=403,
                    hint=f"grant RBAC: a (Cluster)Role rule `{call.rbac_rule()}` bound to this user; check "
                    f"with `kubectl auth can-i {call.verb} {call.resource}"
                    f"{' -n ' + call.namespace if call.namespace else ''}`",
                )
            if status == 401:
                return KubernetesError(
                    f"unauthorized at {url}: {reason}",
                    status=401,
                    hint="credentials expired or invalid: refresh the kubeconfig token (cloud CLI login) and retry",
                )
            if status == 404:
                return KubernetesError(f"not found: {call.verb} {call.resource} at {url}: {reason}", status=404)
            if status == 429:
                return KubernetesError(
                    f"HTTP 429 for {call.verb} {call.resource} at {url}: {reason}",
                    status=429,
                    hint="a PodDisruptionBudget (for evictions) or API priority-and-fairness "
                    "throttling refused the request; retry later",
                )
            if status is not None and status >= 500:
                return KubernetesError(
                    f"Kubernetes API answered HTTP {status} for {call.verb} {call.resource} at {url} "
                    f"after {attempts} attempt(s): {reason}",
                    status=status,
                    hint="the API server (or an aggregated API / webhook behind it) failed; check "
                    "`kubectl get --raw /readyz?verbose` and retry later",
                )
            return KubernetesError(f"HTTP {status} for {call.verb} {call.resource} at {url}: {reason}", status=status)
        return KubernetesError(
            f"cannot reach the Kubernetes API server {self.server} ({call.verb} {call.resource}) after "
            f"{attempts} attempt(s): {_root_cause(exc)}",
            hint="check the server address in the kubeconfig context "
            f"{self.context!r}, VPN/port-forward, and `kubectl cluster-info`",
        )

    @staticmethod
    def _retryable(exc: Exception, retry_429: bool = True) -> bool:
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException):
            return bool(exc.status) and (exc.status >= 500 or (retry_429 and exc.status == 429))
        return True  # urllib3 connection/read errors

    def _request(self, fn: Callable[..., Any], call: _Call, *, retry_429: bool = True, **kwargs) -> Any:
        """Call ``fn`` with bounded retries; returns parsed JSON; raises KubernetesError.

        ``retry_429=False`` for evictions: a 429 there is a PodDisruptionBudget answer, not load.
        """
        import urllib3
        from kubernetes.client.exceptions import ApiException

        attempts = max(1, self.retries)
        delay = self.backoff_s
        for attempt in range(1, attempts + 1):
            try:
                resp = fn(_preload_content=False, _request_timeout=self.timeout, **kwargs)
                data = resp.data
                return json.loads(data) if data else {}
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt == attempts or not self._retryable(exc, retry_429):
                    raise self._error(exc, call, attempt) from exc
                self._sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _list(self, fn: Callable[..., Any], call: _Call, kind: str, **kwargs) -> dict:
        """All pages of a list (``limit`` + ``continue``), as one ``<kind>List`` dict."""
        items: list[dict] = []
        token: str | None = None
        restarted = False
        meta: dict = {}
        while True:
            page_kwargs = dict(kwargs, limit=self.page_size)
            if token:
                page_kwargs["_continue"] = token
            try:
                page = self._request(fn, call, **page_kwargs)
            except KubernetesError as exc:
                if exc.status == 410 and token and not restarted:  # continue token expired: start over once
                    items, token, restarted = [], None, True
                    continue
                raise
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        return {
            "apiVersion": page.get("apiVersion", "v1"),
            "kind": page.get("kind", f"{kind}List"),
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "items": items,
        }

    # -- raw lists -------------------------------------------------------------------------
    def list_nodes(self, label_selector: str | None = None) -> dict:
        kw = {"label_selector": label_selector} if label_selector else {}
        return self._list(self.core.list_node, _Call("list", "nodes", "/api/v1/nodes"), "Node", **kw)

    def list_pods(self, namespace: str | None = None, field_selector: str | None = None) -> dict:
        kw = {"field_selector": field_selector} if field_selector else {}
        if namespace:
            call = _Call("list", "pods", f"/api/v1/namespaces/{namespace}/pods", namespace=namespace)
            return self._list(self.core.list_namespaced_pod, call, "Pod", namespace=namespace, **kw)
        return self._list(self.core.list_pod_for_all_namespaces, _Call("list", "pods", "/api/v1/pods"), "Pod", **kw)

    def list_daemonsets(self, namespace: str) -> dict:
        call = _Call("list", "daemonsets", f"/apis/apps/v1/namespaces/{namespace}/daemonsets", "apps", namespace)
        return self._list(self.apps.list_namespaced_daemon_set, call, "DaemonSet", namespace=namespace)

    def list_cluster_policies(self) -> dict:
        path = f"/apis/{CLUSTERPOLICY_GROUP}/{CLUSTERPOLICY_VERSION}/{CLUSTERPOLICY_PLURAL}"
        call = _Call("list", CLUSTERPOLICY_PLURAL, path, CLUSTERPOLICY_GROUP)
        try:
            return self._list(
                self.custom.list_cluster_custom_object,
                call,
                "ClusterPolicy",
                group=CLUSTERPOLICY_GROUP,
                version=CLUSTERPOLICY_VERSION,
                plural=CLUSTERPOLICY_PLURAL,
            )
        except KubernetesError as exc:
            if exc.status == 404:
                raise KubernetesError(
                    f"the ClusterPolicy CRD (clusterpolicies.nvidia.com) is not served by {self.server}",
                    status=404,
                    hint="the NVIDIA GPU Operator is not installed; see runbooks/operator_install",
                ) from exc
            raise

    def list_gpuclusters(self) -> dict:
        """GPUClusters (``nvidia.com/v1alpha1``, the GPU Operator's DRA stack, NVIDIA/gpu-operator PR #2571);
        KubernetesError 404 where the CRD is not served."""
        g, v, plural = GPUCLUSTER_GROUP, GPUCLUSTER_VERSION, GPUCLUSTER_PLURAL
        call = _Call("list", plural, f"/apis/{g}/{v}/{plural}", g)
        return self._list(self.custom.list_cluster_custom_object, call, "GPUCluster", group=g, version=v, plural=plural)

    def list_resource_claims(self, namespace: str | None = None) -> dict:
        """``resource.k8s.io/v1`` ResourceClaims (all namespaces, or one) through the official client's
        ``ResourceV1Api`` (kubernetes-client/python: kubernetes/client/api/resource_v1_api.py)."""
        from kubernetes import client

        api = client.ResourceV1Api(self.api_client)
        if namespace:
            path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
            call = _Call("list", "resourceclaims", path, "resource.k8s.io", namespace)
            return self._list(api.list_namespaced_resource_claim, call, "ResourceClaim", namespace=namespace)
        call = _Call("list", "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io")
        return self._list(api.list_resource_claim_for_all_namespaces, call, "ResourceClaim")

    def list_resource_slices(self) -> dict:
        """``resource.k8s.io/v1`` ResourceSlices (cluster-scoped) through ``ResourceV1Api``."""
        from kubernetes import client

        api = client.ResourceV1Api(self.api_client)
        call = _Call("list", "resourceslices", "/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io")
        return self._list(api.list_resource_slice, call, "ResourceSlice")

    def get_node(self, name: str) -> dict:
        return self._request(self.core.read_node, _Call("get", "nodes", f"/api/v1/nodes/{name}"), name=name)

    def namespace_labels(self, name: str) -> dict[str, str]:
        """The labels of one Namespace (raises KubernetesError, e.g. status 404 when it does not exist)."""
        obj = self._request(
            self.core.read_namespace, _Call("get", "namespaces", f"/api/v1/namespaces/{name}"), name=name
        )
        obj = obj.to_dict() if hasattr(obj, "to_dict") else obj
        return dict(((obj or {}).get("metadata") or {}).get("labels") or {})

    def get_configmap(self, namespace: str, name: str) -> dict:
        """One ConfigMap (raises KubernetesError: status 404 when it does not exist, 403 without ``get configmaps``
        in ``namespace``)."""
        call = _Call("get", "configmaps", f"/api/v1/namespaces/{namespace}/configmaps/{name}", namespace=namespace)
        return self._request(self.core.read_namespaced_config_map, call, name=name, namespace=namespace)

    def mig_parted_config(self, namespace: str) -> tuple[str, str, bool]:
        """``(config.yaml text, ConfigMap name, custom?)`` of the MIG Manager ConfigMap in the operator namespace:
        the one ClusterPolicy ``spec.migManager.config.name`` names, else ``default-mig-parted-config``
        (:func:`gpulib.kube.frames.mig_parted_configmap`). KubernetesError(status=404) when there is no
        ClusterPolicy, no such ConfigMap or no ``config.yaml`` key in it; 403 when RBAC forbids a read."""
        policies = self.list_cluster_policies()["items"]
        if not policies:
            raise KubernetesError(
                f"no ClusterPolicy at {self.server}: the GPU Operator deploys no MIG Manager",
                status=404,
                hint="install the GPU Operator (runbooks/operator_install) or pass the mig-parted "
                "config.yaml MIG Manager uses as current_mig_config",
            )
        name, custom = mig_parted_configmap(policies)
        try:
            cm = self.get_configmap(namespace, name)
        except KubernetesError as exc:
            if exc.status != 403:
                raise
            raise KubernetesError(
                exc.args[0],
                status=403,
                hint=f"grant `get` on configmaps in the operator namespace {namespace} (a Role and "
                "RoleBinding there, as deploy/base/serve/rbac.yaml does); check with `kubectl auth "
                f"can-i get configmaps/{name} -n {namespace}`",
            ) from exc
        text = configmap_config_yaml(cm)
        if text is None:
            raise KubernetesError(
                (
                    f"ConfigMap {namespace}/{name} has no config.yaml key "
                    f"({self._url(f'/api/v1/namespaces/{namespace}/configmaps/{name}')})"
                ),
                status=404,
                hint="MIG Manager reads the mig-parted document from the key config.yaml",
            )
        return text, name, custom

    def operator_objects(self, namespace: str) -> dict:
        """The GPU Operator's raw objects as :func:`gpulib.gpu_operator.operator_objects` assembles them from a
        source: DaemonSets and pods of ``namespace``, ClusterPolicies (none when the CRD is not served), nodes, and the
        namespace's labels (left out when they cannot be read)."""
        try:
            policies = self.list_cluster_policies()["items"]
        except KubernetesError as exc:
            if exc.status != 404:
                raise
            policies = []
        try:
            namespaces = {namespace: self.namespace_labels(namespace)}
        except KubernetesError:
            namespaces = {}
        try:
            gpu_clusters = self.list_gpuclusters()["items"]
        except KubernetesError as exc:
            if exc.status not in (403, 404):  # CRD not served, or a role without it
                raise
            gpu_clusters = []
        return {
            "gpu_clusters": gpu_clusters,
            "daemonsets": self.list_daemonsets(namespace)["items"],
            "cluster_policies": policies,
            "pods": self.list_pods(namespace)["items"],
            "namespaces": namespaces,
            "nodes": self.list_nodes()["items"],
        }

    # -- writes (used by gpulib.kube.remediate) -----------------------------------------------------
    def patch_node(self, name: str, patch: dict, *, dry_run: bool = True) -> dict:
        """Strategic-merge PATCH of a Node; ``dry_run`` sends ``dryRun=All`` (validated, not persisted)."""
        call = _Call("patch", "nodes", f"/api/v1/nodes/{name}")
        kw = {"dry_run": "All"} if dry_run else {}
        return self._request(self.core.patch_node, call, name=name, body=patch, field_manager="gpuops", **kw)

    def evict_pod(self, namespace: str, name: str, *, dry_run: bool = True) -> dict:
        """POST an Eviction (policy/v1), which honours PodDisruptionBudgets (429 when one forbids it)."""
        call = _Call("create", "pods/eviction", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", "", namespace)
        body = eviction_body(namespace, name, dry_run=dry_run)
        kw = {"dry_run": "All"} if dry_run else {}
        return self._request(
            self.core.create_namespaced_pod_eviction,
            call,
            retry_429=False,
            name=name,
            namespace=namespace,
            body=body,
            **kw,
        )

    # -- frames ----------------------------------------------------------------------------
    def nodes(self) -> pd.DataFrame:
        """All nodes as ``NODE_COLUMNS`` (see :func:`nodes_frame`)."""
        return nodes_frame(self.list_nodes())

    def pods(self, namespace: str | None = None) -> pd.DataFrame:
        """Pods of all namespaces (or one) as ``POD_COLUMNS`` (see :func:`pods_frame`)."""
        return pods_frame(self.list_pods(namespace))

    def daemonsets(self, namespace: str = "gpu-operator") -> pd.DataFrame:
        """DaemonSets of the GPU Operator's namespace with desired/ready counts (:func:`daemonsets_frame`)."""
        return daemonsets_frame(self.list_daemonsets(namespace))

    def cluster_policy(self) -> dict | None:
        """The GPU Operator's ClusterPolicy object (``cluster-policy`` preferred), or None when none exists.

        Raises KubernetesError(status=404) when the CRD itself is absent (operator not installed).
        Summarise it with :func:`cluster_policy_status`.
        """
        items = self.list_cluster_policies()["items"]
        if not items:
            return None
        return next((p for p in items if (p.get("metadata") or {}).get("name") == "cluster-policy"), items[0])

    def dump(self, directory: str | os.PathLike, *, operator_namespace: str = "gpu-operator") -> list[Path]:
        """Write a snapshot folder like kubectl would: ``nodes.json``, ``pods.json`` (+ operator objects).

        ``daemonsets.json``, ``clusterpolicies.json``, ``resourceclaims.json``, ``resourceslices.json`` and
        ``mig-parted-config.yaml`` (the MIG Manager ConfigMap's
        ``config.yaml``, :meth:`mig_parted_config`) are written when readable; a 403/404 on those is skipped (the
        snapshot stays usable). Returns the paths written.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = [
            _write_kubectl_json(out / "nodes.json", self.list_nodes()),
            _write_kubectl_json(out / "pods.json", self.list_pods()),
        ]
        for name, fetch in (
            ("daemonsets.json", lambda: self.list_daemonsets(operator_namespace)),
            ("clusterpolicies.json", self.list_cluster_policies),
            ("resourceclaims.json", self.list_resource_claims),  # DRA: who holds which GPU
            ("resourceslices.json", self.list_resource_slices),
        ):
            try:
                written.append(_write_kubectl_json(out / name, fetch()))
            except KubernetesError as exc:
                if exc.status not in (403, 404):
                    raise
        try:
            text = self.mig_parted_config(operator_namespace)[0]
        except MalformedKubernetesObject:
            pass  # the snapshot then has no MIG config and says so (gpulib.mig.current_mig_config)
        except KubernetesError as exc:
            if exc.status not in (403, 404):
                raise
        else:
            (out / "mig-parted-config.yaml").write_text(text, encoding="utf-8")
            written.append(out / "mig-parted-config.yaml")
        return written

    def __repr__(self) -> str:
        where = "in-cluster" if self.in_cluster else f"context={self.context!r}"
        return f"KubeCluster({where}, server={self.server!r})"


def in_pod(kubeconfig: str | os.PathLike | None = None) -> bool:
    """Whether to use the pod's service account: in a pod (``$KUBERNETES_SERVICE_HOST``, which the kubelet sets in every
    container) and no kubeconfig named (``kubeconfig`` or ``$KUBECONFIG``)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not (kubeconfig or os.environ.get("KUBECONFIG"))


def eviction_body(namespace: str, name: str, *, dry_run: bool = False) -> dict:
    """The policy/v1 Eviction object for a pod (``deleteOptions.dryRun`` set for a server dry run)."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    return body


def _write_kubectl_json(path: Path, list_json: dict) -> Path:
    """Write a list the way ``kubectl get -o json`` prints it (kind List, 4-space indent, sorted keys)."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list_json.get("items", [])}
    path.write_text(json.dumps(doc, indent=4, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _status_message(exc: Any) -> str:
    """The ``message`` (+ ``details.causes`` messages) of a Kubernetes Status body, else the HTTP reason."""
    body = getattr(exc, "body", None)
    if body:
        try:
            status = json.loads(body)
            msg = str(status.get("message") or "")
            causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
            msg = " ".join([msg] + [c for c in causes if c]).strip()
            if msg:
                return msg
        except (ValueError, AttributeError, TypeError):
            pass
    return str(getattr(exc, "reason", "") or exc)


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a urllib3 error chain (e.g. ``Connection refused``)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        return _root_cause(reason)
    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] ([^')]+)", text)
    return m.group(1) if m else text
