"""The source interface every backend implements, and the registry ``connect`` uses.

Shaped like papermill's engines (https://github.com/nteract/papermill/blob/main/papermill/engines.py): a base class with
a handful of methods and a tiny registry
(:func:`register`, :func:`get_source_class`) so a new backend plugs in without touching callers.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Iterable

import pandas as pd

from gpulib.core import validate
from gpulib.core.errors import EmptyResult, GpulibError, InvalidParameter, NotProvided, UnknownGPU, UnknownNode
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings
from gpulib.core.schema import GPU_COLUMNS, SERIES_COLUMNS, SUMMARY_COLUMNS, conform
from gpulib.core.sop import sop
from gpulib.core.timeutil import parse_window, to_utc, utcnow
from gpulib.kube import dra
from gpulib.sources.history import clip
from gpulib.sources.reduce import aggregate_steps
from gpulib.sources.signals import aliases, canonical, generations_from, per_node

STATS = ("avg", "max", "min", "p95", "last", "increase")
AGGS = ("avg", "max", "min")

#: fields a runbook needs, the fallback used when missing, and what to enable
#: (``NVIDIA/dcgm-exporter: etc/default-counters.csv`` @ d5e5f510)
IMPORTANT_FIELDS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (
        "activity falls back to DCGM_FI_DEV_GPU_UTIL (coarse; reads 100 % on a hung NCCL kernel)"
    ),
    "DCGM_FI_PROF_SM_ACTIVE": (
        "off in dcgm-exporter's default counters; enable it in the counters CSV for SM-level activity"
    ),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ECC counters are off by default; XID 48/63/64 and remapped rows are used instead",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ECC counters are off by default; SBE trends cannot be shown",
    "DCGM_FI_DEV_GPU_UTIL": "absent for MIG instances (dcgm-exporter #430); GR_ENGINE_ACTIVE is used",
    "DCGM_FI_DEV_FB_USED": "memory per GPU/pod cannot be shown",
    "DCGM_FI_DEV_XID_ERRORS": "XIDs can only be read from the kernel log",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": (
        "row-remap failure (RMA signal) cannot be seen in metrics; run nvidia-smi -q -d ROW_REMAPPER"
    ),
}


@dataclass
class Capabilities:
    """What the metrics backend actually exposes (the metric preflight)."""

    metrics: set[str] = field(default_factory=set)
    host_label: str | None = None  # "hostname" or "Hostname"
    pod_label: str | None = None  # "pod", "exported_pod", "pod_name" or None (no pod mapping)
    pod_coverage: float = 0.0  # share of FB_USED series with a workload pod label
    mig_present: bool = False
    series: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: node -> the dcgm-exporter generation its names come from (gpulib.sources.signals.generation_of)
    generations: dict[str, str] = field(default_factory=dict)
    #: GPU node -> device plugin | DRA | both | none (gpulib.kube.dra.allocation_models); {} without a node list
    allocation: dict[str, str] = field(default_factory=dict)

    @property
    def activity_metric(self) -> str:
        """GR_ENGINE_ACTIVE when exported (0..1), else GPU_UTIL (0..100)."""
        return (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
            if "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in self.metrics
            else "DCGM_FI_DEV_GPU_UTIL"
        )

    def has(self, metric: str) -> bool:
        return metric in self.metrics

    def table(self) -> pd.DataFrame:
        rows = [{"field": f, "present": f in self.metrics, "if missing": why} for f, why in IMPORTANT_FIELDS.items()]
        return pd.DataFrame(rows)


def _also(field: str) -> str:
    """`` (nor as NEW, ...)`` for a field that has had other names, else ''."""
    others = aliases(field)[1:]
    return f" (nor as {', '.join(others)})" if others else ""


def capabilities_from(
    metrics: Iterable[str], label_sets: list[dict[str, str]], node_names: dict[str, set[str]] | None = None
) -> Capabilities:
    """Build :class:`Capabilities` (with Findings saying what to enable) from metric names (any exporter generation's:
    they are read as canonical names) and FB_USED label sets; ``node_names``: node -> the names (metrics and labels) it
    emits, which tell its exporter generation and the fields it lacks under every name (else the generation is told
    from the label sets)."""
    names = {canonical(n) for n in metrics}
    caps = Capabilities(metrics=names, series=len(label_sets))
    if not names:
        s = sop("sources_sop", "no_dcgm_metrics")
        caps.findings.append(
            Finding(
                Severity.CRITICAL,
                "No DCGM metrics found",
                category="preflight",
                summary=s.summary,
                sop_step=s.sop_step,
                commands=s.commands,
            )
        )
        return caps
    hosts = [k for k in ("hostname", "Hostname") if any(k in ls for ls in label_sets)]
    caps.host_label = hosts[0] if hosts else None
    for key in ("exported_pod", "pod", "pod_name"):
        with_pod = [
            ls
            for ls in label_sets
            if ls.get(key)
            and not (
                key == "pod"
                and "exported_pod" not in ls
                and str(ls[key]).startswith(("nvidia-dcgm-exporter", "dcgm-exporter"))
            )
        ]
        if with_pod:
            caps.pod_label = key
            caps.pod_coverage = len(with_pod) / max(len(label_sets), 1)
            break
    caps.mig_present = any(ls.get("GPU_I_PROFILE") or ls.get("gpu_i_profile") for ls in label_sets)
    missing = [f for f in IMPORTANT_FIELDS if f not in names]
    if "DCGM_FI_DEV_GPU_UTIL" in missing and caps.mig_present and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in names:
        missing.remove("DCGM_FI_DEV_GPU_UTIL")
    if missing:
        s = sop("sources_sop", "fields_not_exported")
        caps.findings.append(
            Finding(
                Severity.INFO,
                f"{len(missing)} useful DCGM field(s) not exported",
                category="preflight",
                summary=s.summary,
                evidence=[f"{f}{_also(f)}: {IMPORTANT_FIELDS[f]}" for f in missing],
                sop_step=s.sop_step,
                commands=s.commands,
            )
        )
    if caps.pod_label is None:
        s = sop("sources_sop", "no_pod_labels")
        caps.findings.append(
            Finding(
                Severity.WARNING,
                "DCGM series carry no pod labels",
                category="preflight",
                summary=s.summary,
                sop_step=s.sop_step,
                commands=s.commands,
            )
        )
    elif caps.pod_label == "exported_pod":
        s = sop("sources_sop", "exported_pod_labels")
        caps.findings.append(
            Finding(
                Severity.INFO,
                "Workload labels arrive as exported_pod/exported_namespace",
                category="preflight",
                confidence=1.0,
                summary=s.summary,
                sop_step=s.sop_step,
            )
        )
    nodes = per_node(node_names, IMPORTANT_FIELDS) if node_names else {}
    caps.generations = {n: g for n, (g, _) in nodes.items()} if node_names else generations_from(label_sets)
    if set(caps.generations.values()) - {"<=4.8", "unknown"}:  # an all-<=4.8 fleet: nothing to say
        s = sop("sources_sop", "exporter_generations")
        seen = sorted(set(caps.generations.values()))
        lacks = {n: "; ".join(f + _also(f) for f in m) for n, (_, m) in nodes.items() if m}
        caps.findings.append(
            Finding(
                Severity.INFO,
                f"dcgm-exporter field names per node: {', '.join(seen)}",
                category="preflight",
                summary=s.summary,
                evidence=[
                    f"{node}: {g}" + (f"; absent under every name: {lacks[node]}" if node in lacks else "")
                    for node, g in caps.generations.items()
                ],
            )
        )
    if caps.host_label == "Hostname":
        caps.findings.append(
            Finding(
                Severity.INFO,
                "Host label is 'Hostname' (dcgm-exporter before PR #655)",
                category="preflight",
                summary=sop("sources_sop", "old_host_label").summary,
            )
        )
    return caps


#: how far back an instant query looks for a sample: Prometheus' default --query.lookback-delta
#: (https://prometheus.io/docs/prometheus/latest/querying/basics/#staleness)
LOOKBACK = timedelta(minutes=5)


def default_step(window: timedelta) -> float:
    """The point spacing of a range over ``window``: about 720 points, a multiple of 30 s (at least 30 s)."""
    return max(30.0, math.ceil(window.total_seconds() / 720 / 30) * 30)


class Source(ABC):
    """A fleet data backend. Subclasses implement the ``_`` methods; the public ones validate input."""

    name = "base"

    def __init__(self, *, end: datetime | str | None = None):
        if end is None and os.environ.get("GPUOPS_END"):
            end = os.environ["GPUOPS_END"]  # replay an incident: pin the window end (ISO-8601)
        self._end = to_utc(end) if end is not None else None
        self._nodes_cache: pd.DataFrame | None = None

    # ---- time -------------------------------------------------------------------------
    @property
    def end(self) -> datetime:
        """End of the analysis window: now, unless pinned by ``end=`` or ``$GPUOPS_END``."""
        return self._end or utcnow()

    # ---- public API ---------------------------------------------------------------------
    def series(
        self,
        field: str,
        window: str | timedelta = "6h",
        *,
        node: str | None = None,
        gpu: str | int | None = None,
        step: str | float | None = None,
        agg: str | None = None,
    ) -> pd.DataFrame:
        """Range series of one DCGM field (``SERIES_COLUMNS``), optionally for one node / GPU.

        ``step`` spaces the points. With ``agg`` ("avg", "max" or "min") each point summarises every
        sample of the step before it, like PromQL ``max_over_time(x[step])`` evaluated every step, so a
        coarse step loses no spike (plain points are single samples and can miss them).
        """
        w = parse_window(window)
        step_s = parse_window(step, name="step").total_seconds() if step is not None else None
        node, gpu = self._check_target(node, gpu)
        if agg is None:
            df = self._series(field, w, node, gpu, step_s)
        else:
            if agg not in AGGS:
                raise InvalidParameter(f"agg={agg!r}; use one of {', '.join(AGGS)}")
            if step_s is None:
                raise InvalidParameter("agg needs a step (e.g. step='5m', agg='max')")
            native = self._native_step()
            if native is not None and step_s <= native:  # one sample per step: nothing to aggregate
                df = self._series(field, w, node, gpu, step_s)
            else:
                df = self._series_agg(field, w, node, gpu, step_s, agg)
        return conform(df, SERIES_COLUMNS)

    def summary(
        self,
        field: str,
        window: str | timedelta = "6h",
        stat: str = "avg",
        *,
        node: str | None = None,
        gpu: str | int | None = None,
    ) -> pd.DataFrame:
        """Per-series summary over the window (``SUMMARY_COLUMNS``): avg, max, min, p95, last or increase."""
        if stat not in STATS:
            raise InvalidParameter(f"stat={stat!r}; use one of {', '.join(STATS)}")
        w = parse_window(window)
        node, gpu = self._check_target(node, gpu)
        df = self._summary(field, w, stat, node, gpu)
        df = df.assign(stat=stat)
        return conform(df, SUMMARY_COLUMNS)

    def last_seen(self, field: str, *, node: str | None = None) -> pd.DataFrame:
        """When each series of ``field`` last reported: ``node, gpu, uuid, gpu_i_id, timestamp`` (UTC), one row per
        series with a sample within the lookback (:data:`LOOKBACK`) before the window end. A series missing here
        has stopped; its last sample is older. Exact, unlike the last point of a coarse range grid."""
        node, _ = self._check_target(node, None)
        df = self._last_seen(field, node)
        cols = ["node", "gpu", "uuid", "gpu_i_id", "timestamp"]
        if df.empty:
            return pd.DataFrame(
                {c: pd.Series(dtype="datetime64[ns, UTC]" if c == "timestamp" else object) for c in cols}
            )
        return df[cols].reset_index(drop=True)

    def nodes(self) -> pd.DataFrame:
        if self._nodes_cache is None:  # with the GPUs ResourceSlices advertise (gpulib.kube.dra.attach_nodes)
            self._nodes_cache = dra.attach_nodes(self._nodes(), dra.slice_devices(dra.dra_objects(self)[1]))
        return self._nodes_cache

    def pods(self) -> pd.DataFrame:
        pods, (claims, slices) = self._pods(), dra.dra_objects(self)  # with the GPUs ResourceClaims give them
        return dra.attach_pods(pods, dra.claim_allocations(claims, slices, pods) if claims else None)

    def gpus(self, node: str, window: str | timedelta = "6h") -> pd.DataFrame:
        """The node's GPUs (``GPU_COLUMNS``): index, UUID, PCI bus id and model of each physical GPU, plus one
        row per MIG instance (``gpu_i_id``; ``mig_uuid`` where the source knows it). Sources that only see
        DCGM series list the GPUs that reported within ``window`` or the inventory lookback
        (``alert_settings.csv`` gpu_inventory_lookback_s), whichever is longer; a GPU the node's capacity
        (``nvidia.com/gpu.count``) counts but no series names is listed with its index only. An empty frame
        means the source cannot tell."""
        if node in ("", None):
            raise InvalidParameter("gpus() needs a node name")
        node, _ = self._check_target(node, None)

        look = timedelta(seconds=float(settings("alert_settings").number("gpu_inventory_lookback_s")))
        df = conform(self._gpus(node, max(parse_window(window), look)), GPU_COLUMNS)
        for c in GPU_COLUMNS:
            df[c] = df[c].fillna("").astype(str)
        df = df[GPU_COLUMNS].drop_duplicates().reset_index(drop=True)
        return pd.concat([df, self._uncounted_gpus(node, df)], ignore_index=True)

    def _uncounted_gpus(self, node: str, df: pd.DataFrame) -> pd.DataFrame:
        """Index-only rows for the GPUs the node's capacity counts that ``df`` does not name (not with the MIG
        single strategy, whose gpu.count counts MIG devices)."""
        try:
            n = self.nodes().set_index("node")
        except GpulibError:  # no Kubernetes API: the DCGM rows are all there is
            return pd.DataFrame(columns=GPU_COLUMNS)
        if node not in n.index or str(n.loc[node].get("mig_strategy") or "") == "single":
            return pd.DataFrame(columns=GPU_COLUMNS)
        count = pd.to_numeric(pd.Series([n.loc[node, "gpu_count"]]), errors="coerce").iloc[0]
        if pd.isna(count):
            return pd.DataFrame(columns=GPU_COLUMNS)
        have = set(df.loc[df["gpu_i_id"] == "", "gpu"])
        rows = [
            dict({c: "" for c in GPU_COLUMNS}, node=node, gpu=str(i)) for i in range(int(count)) if str(i) not in have
        ]
        return pd.DataFrame(rows, columns=GPU_COLUMNS)

    def preflight(self, window: str | timedelta = "1h") -> Capabilities:
        """Which DCGM fields and labels exist (ECC and SM_ACTIVE are off by default; MIG has no GPU_UTIL)."""
        w = parse_window(window)
        names, label_sets = self._inventory(w)
        caps = capabilities_from(names, label_sets, self._node_names(w))
        try:  # which allocation model serves each GPU node
            caps.allocation = dra.allocation_models(self.nodes())
        except GpulibError:
            pass  # no node list from this source (Prometheus only)
        return caps

    def kernel_log(self, node: str) -> str | None:
        """The node's kernel log (dmesg) if this source has it, else None."""
        self._check_target(node, None)
        return self._kernel_log(node)

    def smi_query(self, node: str) -> str | None:
        """``nvidia-smi -q`` output for the node if this source has it, else None."""
        self._check_target(node, None)
        return self._smi_query(node)

    def nvlink_status(self, node: str) -> str | None:
        """``nvidia-smi nvlink -s`` output for the node if this source has it (``_nvlink_status``), else None."""
        self._check_target(node, None)
        hook = getattr(self, "_nvlink_status", None)
        return hook(node) if hook is not None else None

    def diag_report(self, node: str) -> str | None:
        """``dcgmi diag -j`` (or text) output for the node if this source has it, else None."""
        self._check_target(node, None)
        return self._diag_report(node)

    def describe(self) -> str:
        return self.name

    # ---- validation ---------------------------------------------------------------------
    def known_nodes(self) -> list[str]:
        return sorted(self.nodes()["node"].astype(str))

    def _check_target(self, node: str | None, gpu: Any) -> tuple[str | None, str | None]:

        if node in ("", None):
            node = None
        else:
            node = validate.node_name(node)
            known = self.known_nodes()
            if known and node not in known:
                close = [n for n in known if node.lower() in n.lower() or n.lower() in node.lower()]
                raise UnknownNode(
                    f"node={node!r} is not a GPU node of this source ({self.describe()}); "
                    f"known: {', '.join(close or known[:20])}{' ...' if len(known) > 20 and not close else ''}"
                )
        if gpu in ("", None):
            return node, None
        g = str(gpu).strip()
        if not (g.isdigit() or g.startswith("GPU-") or g.startswith("MIG-")):
            raise UnknownGPU(f"gpu={gpu!r} is neither an index nor a UUID")
        validate.gpu_ref(g)
        if node is not None and g.isdigit():
            n = self.nodes().set_index("node")
            count = n.loc[node, "gpu_count"] if node in n.index else None
            if count is not None and pd.notna(count) and int(g) >= int(count):
                raise UnknownGPU(f"gpu={g} on node {node!r}: the node has {int(count)} GPUs (0..{int(count) - 1})")
        return node, g

    # ---- backend hooks --------------------------------------------------------------------
    @abstractmethod
    def _series(
        self, field: str, window: timedelta, node: str | None, gpu: str | None, step: float | None
    ) -> pd.DataFrame: ...

    @abstractmethod
    def _summary(self, field: str, window: timedelta, stat: str, node: str | None, gpu: str | None) -> pd.DataFrame: ...

    @abstractmethod
    def _nodes(self) -> pd.DataFrame: ...

    @abstractmethod
    def _pods(self) -> pd.DataFrame: ...

    @abstractmethod
    def _inventory(self, window: timedelta) -> tuple[set[str], list[dict[str, str]]]: ...

    def _node_names(self, window: timedelta) -> dict[str, set[str]] | None:
        """node -> the DCGM metric (and label) names it emits; None: the generation is told from the label sets."""
        return None

    def _last_seen(self, field: str, node: str | None) -> pd.DataFrame:
        """Default: the newest raw sample of each series within the lookback."""
        try:
            df = self._series(field, LOOKBACK, node, None, self._native_step())
        except EmptyResult:
            return pd.DataFrame()
        if df.empty:
            return df
        df = df.assign(timestamp=pd.to_datetime(df["timestamp"], utc=True))
        df = df[df["timestamp"] <= pd.Timestamp(self.end)]
        return df.groupby(["node", "gpu", "uuid", "gpu_i_id"], as_index=False, dropna=False)["timestamp"].max()

    def _native_step(self) -> float | None:
        """Spacing of the raw samples, when the backend knows it (the demo's scrape interval)."""
        return None

    def _series_agg(
        self, field: str, window: timedelta, node: str | None, gpu: str | None, step: float, agg: str
    ) -> pd.DataFrame:
        """Default: fetch raw samples and aggregate each step client-side (see :func:`aggregate_steps`)."""
        raw = self._series(field, window + timedelta(seconds=step), node, gpu, self._native_step())
        end = self.end.timestamp()
        return aggregate_steps(raw, end - window.total_seconds(), end, step, agg)

    def _gpus(self, node: str, window: timedelta) -> pd.DataFrame:
        """Default inventory: the labels of the node's DCGM temperature and framebuffer series (every
        physical GPU reports DCGM_FI_DEV_GPU_TEMP; MIG instances report FB_USED with GPU_I_ID). DCGM labels
        carry no MIG device UUID, so ``mig_uuid`` stays empty."""
        parts = []
        for f in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"):
            try:
                parts.append(self.summary(f, window, "last", node=node))
            except EmptyResult:
                continue
        if not parts:
            return pd.DataFrame(columns=GPU_COLUMNS)
        return pd.concat(parts, ignore_index=True)[[c for c in GPU_COLUMNS if c != "mig_uuid"]]

    def _kernel_log(self, node: str) -> str | None:
        return None

    def _smi_query(self, node: str) -> str | None:
        return None

    def _diag_report(self, node: str) -> str | None:
        return None

    # ---- generic access: raw objects and PromQL -------------------------------------------------
    # What only some backends have is asked through these two methods, never through a method per domain: the
    # domains turn the raw objects into results (gpulib.gpu_operator.operator_objects, gpulib.mig.current_mig_config,
    # gpulib.fleet.pod_specs_from, gpulib.vllm.vllm_metrics). A backend without the data raises NotProvided (a
    # SourceError, so a runbook step shows its hint and the run is INCOMPLETE); callers for which the data is
    # optional catch it.
    def objects(self, kind: str, namespace: str | None = None) -> list[dict]:
        """Raw objects of ``kind`` (one of :data:`OBJECT_KINDS`), as the items of ``kubectl get <kind> -o json``:
        of ``namespace`` for a namespaced kind (None: every namespace; :data:`NAMESPACE_REQUIRED` need one), the
        Namespace named ``namespace`` for ``namespaces``; a cluster-scoped kind ignores it. NotProvided (with the
        kind's hint) where the source does not hold them."""
        validate.one_of(kind, OBJECT_KINDS, param="kind")
        if namespace not in (None, ""):
            namespace = validate.namespace(namespace)
        elif kind in NAMESPACE_REQUIRED:
            raise InvalidParameter(f"objects({kind!r}) needs a namespace")
        else:
            namespace = None
        return self._objects(kind, namespace)

    def _objects(self, kind: str, namespace: str | None) -> list[dict]:
        subject, hint = OBJECT_KINDS[kind]
        raise NotProvided(f"{subject} not available from this source ({self.describe()})", hint=hint)

    def query(self, promql: str) -> list[dict]:
        """A PromQL instant query at the window end: ``[{"metric": {labels}, "value": [t, "v"]}, ...]`` (a range
        selector such as ``{__name__=~"vllm:.+"}[3600s]``: ``[{"metric": {labels}, "values": [[t, "v"], ...]}]``)."""
        raise NotProvided(
            f"PromQL queries are not available from this source ({self.describe()})",
            hint="use source='live' or 'prometheus' with the Prometheus that scrapes the workload",
        )

    def range_query(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """A PromQL range query from ``start`` to ``end`` (unix seconds) every ``step`` seconds, each series as
        ``{"metric": {labels}, "ts": float array, "v": float array}``."""
        raise NotProvided(
            f"PromQL queries are not available from this source ({self.describe()})",
            hint="use source='live' or 'prometheus' with the Prometheus that scrapes the workload",
        )

    def node_history(self, window: str | timedelta = "7d", node: str | None = None):
        """The events of ``node`` (every node: None) over ``window`` before :attr:`end`: XIDs, ECC, cordons,
        conditions, pod restarts, remediation and serve records, driver and label changes, exporter gaps (see
        ``gpulib.core.schema.HISTORY_SIGNALS``). An event that lasts is kept when it overlaps the window."""

        win = parse_window(window)
        node, _ = self._check_target(node, None)
        return clip(self._node_history(win, node), pd.Timestamp(self.end), win, node)

    def _node_history(self, window: timedelta, node: str | None):
        raise NotProvided(
            f"node history is not available from this source ({self.describe()})",
            hint="use source='live' or 'prometheus' (kube-state-metrics and DCGM series in Prometheus), a snapshot "
            "with events.json (kubectl get events -A -o json), or the demo fleet",
        )

    def kube_cluster(self):
        """The Kubernetes API client (:class:`gpulib.kube.client.KubeCluster`) to act through, or None when this
        source has none: remediation then prints a plan and sends nothing (``gpulib/kube/remediate.py``)."""
        return None


#: the object kinds :meth:`Source.objects` knows: what a backend without them says, and the hint
OBJECT_KINDS = {
    "pods": (
        "Pod specs are",
        "use source='live' with a kubeconfig (or in-cluster service account) to read Pod specs",
    ),
    "nodes": (
        "Node objects are",
        "use source='live' (Kubernetes API) or a snapshot with nodes.json",
    ),
    "daemonsets": (
        "DaemonSet objects are",
        "use source='live' (Kubernetes API) or a snapshot with daemonsets.json and clusterpolicies.json",
    ),
    "clusterpolicies": (
        "ClusterPolicy objects are",
        "use source='live' (Kubernetes API) or a snapshot with daemonsets.json and clusterpolicies.json",
    ),
    "namespaces": ("Namespace objects are", "use source='live' (Kubernetes API)"),
    **dra.DRA_KINDS,  # resource.k8s.io/v1 ResourceClaims and ResourceSlices (gpulib.kube.dra)
    # the MIG Manager ConfigMap in use (ClusterPolicy spec.migManager.config.name, else default-mig-parted-config),
    # as one ConfigMap object whose annotation WHERE_ANNOTATION says where it was read
    "mig-parted-config": (
        "the MIG Manager ConfigMap is",
        "use source='live' (the Kubernetes API), a snapshot with mig-parted-config.yaml or "
        "configmaps.json, or pass the ConfigMap's config.yaml as current_mig_config",
    ),
    "gpuclusters": ("GPUCluster objects are", "use source='live' or a snapshot with gpuclusters.json"),
}

#: the kinds asked of one namespace only (the Namespace itself; the operator's DaemonSets and MIG Manager ConfigMap)
NAMESPACE_REQUIRED = ("namespaces", "daemonsets", "mig-parted-config")

#: the annotation of a ``mig-parted-config`` object that says where the backend read it (a sentence)
WHERE_ANNOTATION = "gpulib/read-from"

#: the public names of :class:`Source` (``name`` the backend's), the whole interface: the questions every runbook
#: asks (DCGM series and summaries, nodes, pods, GPUs, the metric preflight, a node's text evidence) and generic
#: access to raw objects and PromQL. A domain's reader is a function of its domain over these
#: (``tests/sources/test_base.py`` holds every backend to this list)
PUBLIC_METHODS = tuple(
    "name end describe known_nodes series summary last_seen nodes pods gpus preflight kernel_log smi_query "
    "nvlink_status diag_report objects query range_query node_history kube_cluster".split()
)


def mig_parted_object(text: str, name: str, namespace: str, where: str) -> dict:
    """The ``mig-parted-config`` object of :meth:`Source.objects`: ConfigMap ``namespace/name`` holding ``text`` as
    its ``config.yaml``, annotated with where it was read."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "annotations": {WHERE_ANNOTATION: where}},
        "data": {"config.yaml": text},
    }
