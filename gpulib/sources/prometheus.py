"""``prometheus``: PromQL over HTTP (prometheus-api-client on requests, see :mod:`.promhttp`; works with Thanos,
Mimir, VictoriaMetrics).

Connection settings come from the environment or a config file, never from notebook parameters,
so no secret lands in an executed notebook:

=============================== =====================================================
``GPUOPS_PROMETHEUS_URL``        base URL (``https://prom.example.com``; a path prefix is kept)
``GPUOPS_PROMETHEUS_TOKEN``      bearer token (or ``GPUOPS_PROMETHEUS_TOKEN_FILE``)
``GPUOPS_PROMETHEUS_USER``       basic-auth user (+ ``GPUOPS_PROMETHEUS_PASSWORD``); not together with a token
``GPUOPS_PROMETHEUS_CA_BUNDLE``  CA bundle path; ``GPUOPS_PROMETHEUS_VERIFY=false`` disables TLS verification
``GPUOPS_PROMETHEUS_TIMEOUT``    seconds per request (default 30); ``GPUOPS_PROMETHEUS_RETRIES`` (default 3)
``GPUOPS_PROMETHEUS_CLUSTER``    the cluster to read (every query carries the matcher, :mod:`.promql_scope`);
                                 ``GPUOPS_PROMETHEUS_CLUSTER_LABEL`` its label (default ``cluster``)
``GPUOPS_CONFIG``                YAML file with a ``prometheus:`` mapping of the same keys in lower case
=============================== =====================================================
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import yaml

from gpulib.core import redact, validate
from gpulib.core.errors import (
    EmptyResult,
    InvalidParameter,
    KubeconfigMissing,
    SourceError,
    UnknownNode,
)
from gpulib.core.schema import SERIES_COLUMNS, empty
from gpulib.core.validate import promql_string
from gpulib.kube.frames import mig_configmap_where
from gpulib.sources.base import Source, default_step, mig_parted_object
from gpulib.sources.dcgm import normalise_labels
from gpulib.sources.prom_history import prometheus_history
from gpulib.sources.promhttp import PromHTTP, check_result
from gpulib.sources.promql_scope import cluster_matcher, scoped
from gpulib.sources.signals import aliases, scale

#: Prometheus refuses range queries of more than 11,000 points per series
MAX_POINTS = 11000

_PROMQL_FN = {
    "avg": "avg_over_time({sel}[{w}])",
    "max": "max_over_time({sel}[{w}])",
    "min": "min_over_time({sel}[{w}])",
    "p95": "quantile_over_time(0.95, {sel}[{w}])",
    "last": "last_over_time({sel}[{w}])",
    "increase": "increase({sel}[{w}])",
}


@dataclass
class PrometheusSettings:
    url: str
    token: str | None = None
    user: str | None = None
    password: str | None = None
    ca_bundle: str | None = None
    verify: bool = True
    timeout: float = 30.0
    retries: int = 3
    cluster: str | None = None
    cluster_label: str = "cluster"

    def __post_init__(self):
        cluster_matcher(self.cluster_label, self.cluster or "x")  # InvalidParameter for a bad label name
        # a user means basic auth, and requests' basic auth rewrites the Authorization header
        # (``requests.auth.HTTPBasicAuth.__call__``), so with a token as well the token would silently never be
        # sent: ambiguous, refused at connect time (a password without a user builds no basic auth)
        if self.token and self.user:
            raise InvalidParameter(
                "both a bearer token (GPUOPS_PROMETHEUS_TOKEN or GPUOPS_PROMETHEUS_TOKEN_FILE) and basic-auth "
                "credentials (GPUOPS_PROMETHEUS_USER / GPUOPS_PROMETHEUS_PASSWORD) are set for Prometheus; an HTTP "
                "request carries one Authorization header, so only one of them can be used",
                hint="unset either GPUOPS_PROMETHEUS_TOKEN/_TOKEN_FILE or GPUOPS_PROMETHEUS_USER/_PASSWORD "
                "(or prometheus.token / prometheus.user in GPUOPS_CONFIG)",
            )

    def __repr__(self) -> str:  # never print secrets
        return (
            f"PrometheusSettings(url={self.url!r}, token={'***' if self.token else None}, user={self.user!r}, "
            f"password={'***' if self.password else None}, verify={self.verify}, timeout={self.timeout})"
        )


def _truthy(v: str) -> bool:
    return str(v).strip().lower() not in ("0", "false", "no", "off", "")


def load_settings(
    url: str | None = None, config: str | Path | None = None, env: dict | None = None
) -> PrometheusSettings:
    """Resolve settings: explicit URL > environment > config file. Secrets only from env or file."""
    env = dict(os.environ if env is None else env)
    cfg: dict = {}
    path = config or env.get("GPUOPS_CONFIG")
    if path:
        p = Path(path).expanduser()
        if not p.exists():
            raise InvalidParameter(f"GPUOPS_CONFIG={str(p)!r} does not exist")
        try:
            cfg = (yaml.safe_load(p.read_text()) or {}).get("prometheus", {}) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as exc:
            raise InvalidParameter(
                f"GPUOPS_CONFIG={str(p)!r} is not a readable YAML mapping ({type(exc).__name__})"
            ) from None
        if not isinstance(cfg, dict):
            raise InvalidParameter(f"GPUOPS_CONFIG={str(p)!r}: prometheus: must be a mapping")

    def get(key: str, default=None):
        return env.get(f"GPUOPS_PROMETHEUS_{key.upper()}", cfg.get(key, default))

    url = url or get("url")
    if not url:
        raise InvalidParameter(
            "no Prometheus URL: set GPUOPS_PROMETHEUS_URL (or prometheus.url in GPUOPS_CONFIG)",
            hint="e.g. export GPUOPS_PROMETHEUS_URL=http://prometheus-k8s.monitoring:9090",
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidParameter(f"Prometheus URL {redact.redact(url)!r} is not an http(s) URL")
    if "@" in parts.netloc or parts.username or parts.password:
        raise InvalidParameter(
            "the Prometheus URL must not carry credentials; use GPUOPS_PROMETHEUS_USER/PASSWORD",
            hint="credentials in URLs end up in logs and notebooks",
        )
    token = get("token")
    token_file = get("token_file")
    if not token and token_file:
        tf = Path(token_file).expanduser()
        if not tf.exists():
            raise InvalidParameter(f"token file {str(tf)!r} does not exist")
        token = tf.read_text().strip()
    token = str(token).strip() if token else None
    user, password = get("user"), get("password")
    redact.register(token, user=user, password=password)
    if token and not _HEADER_SAFE.match(token):
        raise InvalidParameter(
            "the Prometheus token holds characters an HTTP header cannot carry (a control character or space)",
            hint="check GPUOPS_PROMETHEUS_TOKEN / the token file for stray characters",
        )
    return PrometheusSettings(
        url=url.rstrip("/"),
        token=token,
        user=user,
        password=password,
        ca_bundle=get("ca_bundle"),
        verify=_truthy(get("verify", "true")),
        timeout=_number(get("timeout", 30), "timeout", float, 0.1, 3600),
        retries=_number(get("retries", 3), "retries", int, 0, 10),
        cluster=str(get("cluster") or "").strip() or None,
        cluster_label=str(get("cluster_label") or "cluster").strip(),
    )


#: visible ASCII, the characters a token68 / header value may hold (RFC 9110 §11.2)
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]+$")


def _number(raw, key: str, kind, lo: float, hi: float):
    """``GPUOPS_PROMETHEUS_<KEY>`` as ``kind`` within [lo, hi]; InvalidParameter (a usage error) otherwise."""
    try:
        v = kind(str(raw).strip())
    except (TypeError, ValueError):
        v = None
    if v is None or not (lo <= v <= hi):  # NaN fails both comparisons
        raise InvalidParameter(
            f"GPUOPS_PROMETHEUS_{key.upper()}={str(raw)[:40]!r} is not a number from {lo:g} to {hi:g}",
            hint=f"e.g. export GPUOPS_PROMETHEUS_{key.upper()}={30 if key == 'timeout' else 3}",
        )
    return v


def _selector(field: str, node: str | None, gpu: str | None, host_label: str) -> str:
    """``field{host="node",gpu|UUID="gpu"}`` with every label value escaped (validate.promql_string)."""
    m = [f"{host_label}={promql_string(node)}"] if node else []
    if gpu is not None:
        m.append(f"UUID={promql_string(gpu)}" if not gpu.isdigit() else f"gpu={promql_string(gpu)}")
    return f"{field}{{{','.join(m)}}}"


def _fmt_duration(seconds: float) -> str:
    return f"{int(math.ceil(seconds))}s"


_MATRIX_HEAD = '{"status":"success","data":{"resultType":"matrix","result":['
_DECODER = json.JSONDecoder()


def parse_matrix(body: bytes | str) -> list[dict] | None:
    """Parse a ``/api/v1/query_range`` answer into ``[{"metric": {...}, "ts": array, "v": array}]``.

    A matrix is mostly ``[<unix s>,"<value>"]`` pairs; building a Python list and string per pair (what
    ``json.loads`` does) dominates the client's time at fleet scale. Here each series' label object is
    decoded with :mod:`json` and its pairs are read by numpy in one pass. Returns None for anything
    that is not a plain successful float matrix in Prometheus' own layout (native histograms, another
    key order), so the caller falls back to :func:`json.loads`.
    """
    if isinstance(body, bytes):
        if not body.startswith(_MATRIX_HEAD.encode()):
            return None
        try:
            s = body.decode()
        except UnicodeDecodeError:
            return None
    else:
        s = body
    if not s.startswith(_MATRIX_HEAD):
        return None
    pos, out = len(_MATRIX_HEAD), []
    try:
        while s[pos] != "]":
            if not s.startswith('{"metric":', pos):
                return None
            metric, pos = _DECODER.raw_decode(s, pos + 10)
            if not s.startswith(',"values":[', pos):
                return None
            pos += 10  # at the values' opening bracket
            if s.startswith("[]", pos):
                ts = v = np.empty(0)
                pos += 2
            else:
                close = s.find("]]", pos)
                if close < 0:
                    return None
                text = s[pos + 1 : close + 1].replace("[", "").replace("]", "").replace('"', "")
                nums = np.fromstring(text, sep=",") if text else np.empty(0)
                if nums.size != text.count(",") + 1 or nums.size % 2:
                    return None
                ts, v = nums[0::2], nums[1::2]
                pos = close + 2
            if s[pos] != "}":
                return None
            out.append({"metric": metric, "ts": ts, "v": v})
            pos += 1
            if s[pos] == ",":
                pos += 1
    except (IndexError, ValueError, RecursionError):
        return None
    return out


def _as_arrays(r: dict) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, values) of one range-result series, from ``ts``/``v`` arrays or JSON ``values`` pairs."""
    if "ts" in r:
        return r["ts"], r["v"]
    vals = r.get("values") or []
    if not vals:
        return np.empty(0), np.empty(0)
    arr = np.asarray(vals, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


class PrometheusSource(Source):
    """DCGM series from Prometheus. ``nodes()``/``pods()`` come from a Kubernetes backend (``kube``)."""

    name = "prometheus"

    def __init__(
        self,
        url: str | None = None,
        *,
        config: str | Path | None = None,
        end: datetime | str | None = None,
        kube=None,
        settings: PrometheusSettings | None = None,
        cluster: str | None = None,
        **_ignored,
    ):
        super().__init__(end=end)
        self.settings = settings or load_settings(url, config)
        if cluster is not None:
            self.settings.cluster = str(cluster).strip() or None
        #: ``label="value"`` added to every selector of every query (:func:`promql_scope.scoped`); "" for none
        self.scope_matcher = cluster_matcher(self.settings.cluster_label, self.settings.cluster)
        self._kube = kube
        self._kube_factory = None  # set by LiveSource: the Kubernetes client is built on first use
        self._kube_error = None
        self._http_lock = threading.Lock()  # the report's queries start from several threads at once
        # the HTTP client (and its imports: requests, prometheus-api-client) is made here, in the thread that makes
        # the source: requests first imported in a query thread while another thread imports kubernetes (which
        # imports requests too) failed with "partially initialized module 'requests.utils'" (first imports in two
        # threads are not safe on the Pythons we support, https://github.com/python/cpython/issues/83065)
        self._http = PromHTTP(self.settings)
        self._host_labels = ("hostname", "Hostname")

    def describe(self) -> str:
        return f"Prometheus at {self.settings.url}"

    # ---- HTTP (gpulib.sources.promhttp: PrometheusConnect, deadline, retries, circuit breaker, shape) ---
    @property
    def http(self):
        with self._http_lock:  # one client (and one circuit breaker) however many threads ask first
            if self._http is None:
                self._http = PromHTTP(self.settings)
        return self._http

    def query(self, promql: str) -> list[dict]:
        """Instant query at the source's end time (scoped to the cluster when one is set)."""
        return self.http.instant(scoped(promql, self.scope_matcher), self.end.timestamp())

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """Range query split into chunks of at most 11,000 points per series; Prometheus' own result layout
        (``[{"metric": {...}, "values": [[ts, value], ...]}]``)."""
        return [
            {"metric": r["metric"], "values": [[float(t), str(v)] for t, v in zip(r["ts"], r["v"])]}
            for r in self._range_arrays(promql, start, end, step)
        ]

    def _instant_arrays(self, promql: str, at: float) -> list[dict]:
        """``promql`` at ``at`` (an instant query: Prometheus keeps the millisecond, prometheus/prometheus:
        web/api/v1/api.go @ 225c6112, ``parseTime``; a range query's ends are whole seconds here), each series as
        :meth:`_range_arrays` gives it."""
        res = self.http.instant(scoped(promql, self.scope_matcher), at)
        return [{"metric": r["metric"], "ts": np.array([at]), "v": np.array([float(r["value"][1])])} for r in res]

    def _get_range(self, promql: str, start: float, end: float, step: str) -> list[dict]:
        """One ``/api/v1/query_range`` call, parsed straight to arrays (:func:`parse_matrix`; json as fallback)."""
        resp = self.http.range(scoped(promql, self.scope_matcher), round(start), round(end), step)
        parsed = parse_matrix(resp.content)
        if parsed is None:
            result = check_result(self.http.decode(resp, promql), self.settings.url, promql, "matrix")
            parsed = [{"metric": r["metric"], "values": r.get("values", [])} for r in result]
        return parsed

    def _range_arrays(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """Like :meth:`query_range` (same chunking), but each series as ``{"metric", "ts", "v"}`` float arrays."""
        results: dict[tuple, dict] = {}
        span = step * (MAX_POINTS - 1)
        t = start
        while t <= end:
            t_end = min(end, t + span)
            for r in self._get_range(promql, t, t_end, _fmt_duration(step)):
                ts, v = _as_arrays(r)
                key = tuple(sorted(r["metric"].items()))
                acc = results.setdefault(key, {"metric": r["metric"], "ts": [], "v": []})
                acc["ts"].append(ts)
                acc["v"].append(v)
            t = t_end + step
        return [
            {"metric": r["metric"], "ts": np.concatenate(r["ts"]), "v": np.concatenate(r["v"])}
            for r in results.values()
        ]

    # ---- helpers ------------------------------------------------------------------------
    def _by_host(self, template: str, field: str, node, gpu, *, scaled: bool = True) -> str:
        """PromQL over every name ``field`` has had (gpulib/data/sources/signals.csv), each in the canonical unit
        (``(<q of NEW>) * scale`` where the unit changed, unless ``scaled`` is False: ``timestamp()``), and either
        host label (``hostname`` or legacy ``Hostname``) when a node is given, joined by ``or``: one query answers
        a fleet whose nodes run different dcgm-exporter generations. Plain PromQL (``or``, scalar ``*``), so Thanos,
        Mimir and VictoriaMetrics answer it as Prometheus does."""
        hosts = self._host_labels if node else ("hostname",)
        terms = []
        for name in aliases(field):
            factor = scale(name) if scaled else 1.0
            for h in hosts:
                q = template.format(sel=_selector(name, node, gpu, h))
                terms.append(q if factor == 1.0 else f"({q}) * {factor:.12g}")
        return " or ".join(terms)

    @staticmethod
    def _rows(result: list[dict], *, vector: bool) -> list[dict]:
        rows = []
        for r in result:
            lab = normalise_labels(r["metric"])
            if vector:
                ts, v = r["value"]
                rows.append({**lab, "value": float(v)})
            else:
                for ts, v in r["values"]:
                    rows.append({"timestamp": ts, **lab, "value": float(v)})
        return rows

    @staticmethod
    def _range_frame(result: list[dict], *, dedupe: bool) -> pd.DataFrame:
        """Long SERIES frame of a range-query result (series with ``values`` pairs as in the JSON, or
        ``ts``/``v`` arrays from :meth:`_range_arrays`), built column-wise: labels are normalised once per
        series and the ``[ts, "value"]`` pairs become float arrays (no per-sample dict), then rows are
        ordered by (node, gpu, gpu_i_id, timestamp). ``dedupe`` drops samples repeated under the same
        normalised labels and timestamp (e.g. two raw series that differ only in a dropped label)."""
        labels, ts_parts, val_parts = [], [], []
        for r in result:
            ts, v = _as_arrays(r)
            if not len(ts):
                continue
            labels.append(normalise_labels(r["metric"]))
            ts_parts.append(ts)
            val_parts.append(v)
        if not labels:
            return empty(SERIES_COLUMNS)
        lab = pd.DataFrame(labels)
        # order the series by device, then by first sample, so the rows come out time-ordered per
        # device without sorting (and copying) the long frame; a full sort only when series interleave
        device_rank = lab.groupby(["node", "gpu", "gpu_i_id"], sort=True).ngroup().to_numpy()
        first_ts = np.array([t[0] for t in ts_parts])
        by_series = np.lexsort((first_ts, device_rank))
        lab = lab.take(by_series).reset_index(drop=True)
        device_rank = device_rank[by_series]
        lengths = np.array([len(ts_parts[i]) for i in by_series], dtype=np.int64)
        series_of_row = np.repeat(np.arange(len(lab)), lengths)
        ts = np.concatenate([ts_parts[i] for i in by_series])
        values = np.concatenate([val_parts[i] for i in by_series])
        del ts_parts, val_parts
        cols = {"timestamp": pd.to_datetime(ts, unit="s", utc=True)}
        cols.update({c: lab[c].take(series_of_row).reset_index(drop=True) for c in lab.columns})
        cols["value"] = values
        df = pd.DataFrame(cols, copy=False)
        df = df[[c for c in SERIES_COLUMNS if c in df.columns] + [c for c in df.columns if c not in SERIES_COLUMNS]]
        if dedupe and lab.duplicated().any():
            df = df.drop_duplicates(subset=[c for c in SERIES_COLUMNS if c != "value" and c in df.columns])
            keep = df.index.to_numpy()
            series_of_row, ts = series_of_row[keep], ts[keep]
        row_rank = device_rank[series_of_row]
        in_order = bool(np.all((np.diff(row_rank) > 0) | ((np.diff(row_rank) == 0) & (np.diff(ts) >= 0))))
        if not in_order:  # series of one device overlap in time: stable sort by (device, time)
            df = df.take(np.lexsort((ts, row_rank)))
        return df

    # ---- Source hooks -------------------------------------------------------------------
    def _series(self, field, window, node, gpu, step):
        end = self.end.timestamp()
        step = step or default_step(window)
        start = math.ceil((end - window.total_seconds()) / step) * step
        q = self._by_host("{sel}", field, node, gpu)
        df = self._range_frame(self._range_arrays(q, start, end, step), dedupe=True)
        if df.empty:
            raise EmptyResult(f"no series for {q!r} at {self.settings.url} in the last {window}", query=q)
        return df

    def _series_agg(self, field, window, node, gpu, step, agg):
        """Server-side: ``<agg>_over_time(F[step])`` evaluated every step."""
        end = self.end.timestamp()
        start = math.ceil((end - window.total_seconds()) / step) * step
        q = self._by_host(f"{agg}_over_time({{sel}}[{_fmt_duration(step)}])", field, node, gpu)
        df = self._range_frame(self._range_arrays(q, start, end, step), dedupe=False)
        if df.empty:
            raise EmptyResult(f"no series for {q!r} at {self.settings.url} in the last {window}", query=q)
        return df

    def _summary(self, field, window, stat, node, gpu):
        q = self._by_host(_PROMQL_FN[stat].replace("{w}", _fmt_duration(window.total_seconds())), field, node, gpu)
        rows = self._rows(self.query(q), vector=True)
        if not rows:
            raise EmptyResult(f"no series for {q!r} at {self.settings.url}", query=q)
        return pd.DataFrame(rows)

    def _last_seen(self, field, node):
        """``timestamp(F)`` at the window end: the time of each series' newest sample within the lookback."""
        q = self._by_host("timestamp({sel})", field, node, None, scaled=False)
        rows = self._rows(self.query(q), vector=True)
        if not rows:
            return pd.DataFrame()
        df = pd.DataFrame(rows)
        df["timestamp"] = pd.to_datetime(df["value"].astype(float), unit="s", utc=True)
        return df

    def _inventory(self, window):
        w = _fmt_duration(window.total_seconds())
        names = {r["metric"].get("__name__") for r in self.query('count by (__name__) ({__name__=~"DCGM_.+"})')}
        names.discard(None)
        labels = (
            [r["metric"] for r in self.query(f"last_over_time(DCGM_FI_DEV_FB_USED[{w}])")]
            if "DCGM_FI_DEV_FB_USED" in names
            else []
        )
        return names, labels

    def _node_names(self, window):
        """node -> its DCGM metric names, one query (``count by`` both host spellings); None when it fails."""
        try:
            res = self.query('count by (__name__, hostname, Hostname) ({__name__=~"DCGM_.+"})')
        except SourceError:
            return None
        out: dict[str, set[str]] = {}
        for r in res:
            node = r["metric"].get("hostname") or r["metric"].get("Hostname")
            if node and r["metric"].get("__name__"):
                out.setdefault(node, set()).add(r["metric"]["__name__"])
        return out or None

    @property
    def kube(self):
        """The Kubernetes backend, built on first use; None when there is none (or its config is missing,
        in which case the DCGM queries still work and nodes()/pods() raise the kubeconfig error)."""
        if self._kube is None and self._kube_factory is not None and self._kube_error is None:
            try:
                self._kube = self._kube_factory()
            except KubeconfigMissing as exc:
                self._kube_error = exc
        return self._kube

    def _require_kube(self):
        if self.kube is None:
            if self._kube_error is not None:
                raise self._kube_error
            raise KubeconfigMissing(
                "this source has Prometheus only: nodes and pods need a Kubernetes API "
                "(set KUBECONFIG / GPUOPS_KUBE_CONTEXT or run in-cluster)"
            )
        return self.kube

    def _nodes(self):
        return self._require_kube().nodes()

    def _pods(self):
        return self._require_kube().pods()

    def _objects(self, kind, namespace):
        if kind == "pods":
            if self.kube is None:  # no Kubernetes API configured: Pod specs are optional for their callers
                return super()._objects(kind, namespace)
            return list(self.kube.list_pods(namespace).get("items", []))
        if kind == "mig-parted-config":
            if self.kube is None and self._kube_factory is None:  # Prometheus only: no Kubernetes API to read it
                return super()._objects(kind, namespace)

            text, name, custom = self._require_kube().mig_parted_config(namespace)
            return [mig_parted_object(text, name, namespace, mig_configmap_where(namespace, name, custom))]
        kube = self._require_kube()
        if kind == "nodes":
            return kube.list_nodes()["items"]
        if kind == "daemonsets":
            return kube.list_daemonsets(namespace)["items"]
        if kind == "clusterpolicies":
            return kube.list_cluster_policies()["items"]
        if kind == "gpuclusters":
            return kube.list_gpuclusters()["items"]
        if kind == "resourceclaims":
            return kube.list_resource_claims(namespace)["items"]
        if kind == "resourceslices":
            return kube.list_resource_slices()["items"]
        if kind == "namespaces":
            labels = kube.namespace_labels(namespace)
            return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}]
        return super()._objects(kind, namespace)

    def range_query(self, promql, start, end, step):
        return self._range_arrays(promql, start, end, step)

    def _node_history(self, window, node):

        return prometheus_history(self, window, node)

    def kube_cluster(self):
        return self.kube

    def known_nodes(self):
        if self.kube is None:
            res = self.query(f"count by (hostname, Hostname) ({' or '.join(aliases('DCGM_FI_DEV_GPU_TEMP'))})")
            return sorted({r["metric"].get("hostname") or r["metric"].get("Hostname") for r in res} - {None})
        return super().known_nodes()

    def _check_target(self, node, gpu):

        if node:
            validate.node_name(node)
        if gpu not in (None, ""):
            validate.gpu_ref(gpu)
        if self.kube is None and node:
            known = self.known_nodes()
            if known and node not in known:
                raise UnknownNode(
                    f"node={node!r} has no DCGM series at {self.settings.url}; known: {', '.join(known[:20])}"
                )
            return node, (None if gpu in (None, "") else str(gpu))
        return super()._check_target(node, gpu)
