"""``demo``: the embedded fleet simulator as a source (the default, so every runbook works offline)."""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import yaml

from gpulib.core.errors import EmptyResult
from gpulib.core.schema import GPU_COLUMNS
from gpulib.demo.artifacts import render_smi_query
from gpulib.demo.dra_objects import resource_claims, resource_slices
from gpulib.demo.history import demo_history, demo_history_signals
from gpulib.demo.metrics import METRICS
from gpulib.demo.operator_objects import demo_objects
from gpulib.demo.simulator import FleetSimulator, shared_simulator
from gpulib.demo.vllm_series import demo_vllm_frame, demo_vllm_series
from gpulib.kube.frames import nodes_frame, pods_frame
from gpulib.mig import default_configs
from gpulib.sources.base import Source, mig_parted_object
from gpulib.sources.dcgm import canonical_scrape
from gpulib.sources.history import NodeHistory
from gpulib.sources.reduce import summarise_frame
from gpulib.sources.signals import GENERATIONS, name_in

#: series per chart: the default step keeps a window at about this many points, like a Grafana panel
TARGET_POINTS = 720

#: the PromQL the demo answers (:meth:`DemoSource.query`): every sample of its simulated vllm: series in a window
_VLLM_RANGE = re.compile(r'\{__name__=~"vllm:\.\+"\}\[(\d+)s\]')


#: a scenario file used instead of the packaged demo fleet (benchmarks/bench_serve.py's generated fleets)
FLEET_ENV = "GPUOPS_DEMO_FLEET"
#: the dcgm-exporter generation whose names the demo serves its fields under (:class:`DemoSource` ``exporter``)
EXPORTER_ENV = "GPUOPS_DEMO_EXPORTER"
#: a fleet mid-upgrade: every other node (in name order) on the newest generation, the rest on the oldest
MIXED = "mixed"


def exporter_nodes(nodes: list[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(the fleet's generation, the nodes on another one) of a :data:`MIXED` fleet of ``nodes``."""
    return GENERATIONS[0], tuple((n, GENERATIONS[-1]) for n in sorted(nodes)[1::2])


class DemoSource(Source):
    """Simulated fleet. ``scenario`` is a YAML path or dict (default: the file named by ``$GPUOPS_DEMO_FLEET``, else
    ``gpulib/data/demo/demo_fleet.yaml``): a larger fleet of the same shape for scale tests reaches every run, kernel
    and verdict process through the environment."""

    name = "demo"

    def __init__(
        self,
        scenario: str | Path | dict | None = None,
        *,
        end: datetime | str | None = None,
        seed: int = 7,
        label_style: str = "new",
        counters: str = "full",
        scrape_interval: str | None = None,
        operator_scenario: str = "healthy",
        exporter: str | None = None,
        **_ignored,
    ):
        super().__init__(end=end)
        if scenario is None:
            scenario = os.environ.get(FLEET_ENV) or None
        #: the exporter generation the fields are served under and read back through the source boundary
        #: (:func:`gpulib.sources.dcgm.canonical_scrape`): 4.8, 4.9, 4.10 or ``mixed``; None: canonical names as is
        self.exporter = exporter or os.environ.get(EXPORTER_ENV) or None
        gens: dict = {}
        if self.exporter == MIXED:
            base = FleetSimulator if isinstance(scenario, dict) else shared_simulator
            names = [spec["name"] for spec in base(scenario, end=self._end, seed=seed).node_specs]
            gens["exporter"], gens["exporter_nodes"] = exporter_nodes(names)
        elif self.exporter is not None:
            gens["exporter"] = self.exporter
        # gpulib.demo.operator_objects.SCENARIOS: a healthy or broken GPU Operator
        self.operator_scenario = operator_scenario
        build = FleetSimulator if isinstance(scenario, dict) else shared_simulator
        self.sim = build(
            scenario,
            end=self._end,
            seed=seed,
            label_style=label_style,
            counters=counters,
            scrape_interval=scrape_interval,
            **gens,
        )
        self._end = self.sim.end

    def describe(self) -> str:
        return (
            f"demo fleet ({len(self.sim.node_specs)} nodes, "
            f"{sum(1 for d in self.sim.devices if not d.is_instance)} GPUs)"
        )

    def _served(self, field: str, df: pd.DataFrame | None) -> pd.DataFrame | None:
        """``df`` (canonical) as each node's exporter emits it (:meth:`~gpulib.demo.metrics.FleetMetrics.emitted`,
        what its scrapes and backfills write: the generation's name and unit) read back as a scrape is read
        (:func:`gpulib.sources.dcgm.canonical_scrape`); as is without an ``exporter`` generation."""
        if self.exporter is None or df is None or df.empty or field.startswith("vllm:") or "node" not in df:
            return df
        if self.sim.exporter_nodes:  # a fleet mid-upgrade: each node's own generation
            parts = []
            for node, part in df.groupby("node", sort=False):
                name, values = self.sim.emitted(field, part["value"].to_numpy(dtype=float), str(node))
                parts.append(part.assign(metric=name, value=values))
            emitted = pd.concat(parts).sort_index()
        else:  # one generation: every node emits it alike
            name, values = self.sim.emitted(field, df["value"].to_numpy(dtype=float), str(df["node"].iat[0]))
            emitted = df.assign(metric=name, value=values)
        back = canonical_scrape(emitted)
        return back[back["metric"] == field].drop(columns="metric")

    def _devices(self, node, gpu):
        for d in self.sim.devices:
            if node and d.node != node:
                continue
            if gpu is not None and not (str(d.index) == gpu or d.uuid == gpu):
                continue
            yield d

    def _default_step(self, window: timedelta) -> float:
        si = self.sim.scrape_interval
        raw = max(si, window.total_seconds() / TARGET_POINTS)
        return float(-(-raw // si) * si)  # a multiple of the scrape interval

    def _check_field(self, field: str) -> None:
        if field.startswith("vllm:"):  # simulated vLLM server metrics (gpulib.demo.vllm_series)
            return
        if field not in self.sim.metric_names():
            raise EmptyResult(
                f"{field} is not exported by the demo fleet"
                + (" (off in dcgm-exporter's default counters)" if field in METRICS else ""),
                query=field,
            )

    def _series(self, field, window, node, gpu, step):
        self._check_field(field)
        end = self.end.timestamp()
        step = step or self._default_step(window)
        if field.startswith("vllm:"):
            return demo_vllm_frame(self.sim, field, end - window.total_seconds(), end, step)
        df = self._served_frame(field, end - window.total_seconds(), end, step, node, gpu)
        if df.empty:
            raise EmptyResult(
                f"{field} has no samples for node={node or '*'} gpu={gpu or '*'} in the last {window}", query=field
            )
        return df

    def _served_frame(self, field, start, end, step, node, gpu):
        """The simulator's frame of ``field`` served under the exporter generation (:meth:`_served`); the conversion
        is kept in the simulator's memo like the frame (a pure function of the simulator, which the generation is
        part of), a copy each time."""

        def frame():
            return self.sim.frame(field, start, end, step, self._devices(node, gpu))

        if self.exporter is None:
            return frame()
        key = ("served", self.exporter, field, start, end, step, node, gpu)
        return self.sim.memo.get(key, lambda: self._served(field, frame()))

    def _native_step(self):
        return self.sim.scrape_interval

    def _summary(self, field, window, stat, node, gpu):
        """Kept in the simulator's memo (one row per device), a copy each time; an empty answer raises each time."""
        self._check_field(field)
        end = self.end.timestamp()
        key = ("summary", self.exporter, field, end - window.total_seconds(), end, stat, node, gpu)
        return self.sim.memo.get(key, lambda: self._reduced(field, window, stat, node, gpu, end))

    def _reduced(self, field, window, stat, node, gpu, end):
        if field.startswith("vllm:"):
            df = demo_vllm_frame(self.sim, field, end - window.total_seconds(), end, None)
        else:
            start = end - window.total_seconds()
            df = self._served(field, self.sim.summary_frame(field, start, end, stat, self._devices(node, gpu)))
            if df is not None:  # reduced per device (the stats where that is exact)
                if df.empty:
                    raise EmptyResult(
                        f"{field} has no samples for node={node or '*'} gpu={gpu or '*'} in the last {window}",
                        query=field,
                    )
                return df
            df = self._served(field, self.sim.frame(field, start, end, None, self._devices(node, gpu)))
        if df.empty:
            raise EmptyResult(
                f"{field} has no samples for node={node or '*'} gpu={gpu or '*'} in the last {window}", query=field
            )
        return summarise_frame(df, stat)

    def _nodes(self):

        if self.operator_scenario != "healthy":  # a broken operator changes node labels / allocatable
            return nodes_frame({"items": self._operator_objects()["nodes"]})
        return self.sim.once("nodes_frame", lambda: nodes_frame(self.sim.nodes_json())).copy()

    def _operator_objects(self, namespace: str | None = "gpu-operator") -> dict:

        return demo_objects(self.sim.nodes_json(), self.operator_scenario, namespace=namespace)

    #: the key of each object kind in the demo's GPU Operator objects
    #: (:func:`gpulib.demo.operator_objects.demo_objects`)
    _OPERATOR_KINDS = {
        "daemonsets": "daemonsets",
        "clusterpolicies": "cluster_policies",
        "nodes": "nodes",
        "gpuclusters": "gpu_clusters",
    }

    def _objects(self, kind, namespace):
        """The simulated cluster's objects. Its GPU Operator is installed in the namespace asked about (a
        cluster-scoped ClusterPolicy names it in ``status.namespace``); ``pods`` of every namespace are the
        workloads', of one namespace the operator's operand pods there."""
        if kind == "pods" and namespace is None:
            return list(self.sim.pods_json().get("items", []))
        if kind == "mig-parted-config":
            return [self._mig_parted_config(namespace)]
        if kind == "resourceclaims":
            return resource_claims(self.sim, namespace)
        if kind == "resourceslices":
            return resource_slices(self.sim)
        objs = self._operator_objects(namespace)
        if kind == "pods":
            return [p for p in objs["pods"] if (p.get("metadata") or {}).get("namespace") == namespace]
        if kind == "namespaces":
            labels = objs["namespaces"].get(namespace)
            if labels is None:
                return []
            return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}]
        return objs[self._OPERATOR_KINDS[kind]]

    def _mig_parted_config(self, namespace):
        """mig-parted's default set plus each demo MIG node's current layout, as the GPU Operator's custom
        ConfigMap ``custom-mig-config`` (ClusterPolicy ``spec.migManager.config.name``) would hold it."""
        doc = default_configs()
        for spec in self.sim.node_specs:
            mig = spec.get("mig") or {}
            if mig.get("config") and mig.get("layout"):
                doc["mig-configs"][mig["config"]] = [
                    {"devices": "all", "mig-enabled": True, "mig-devices": dict(Counter(mig["layout"]))}
                ]
        return mig_parted_object(
            yaml.safe_dump(doc, sort_keys=False),
            "custom-mig-config",
            namespace,
            f"the demo fleet's MIG Manager ConfigMap {namespace}/custom-mig-config (mig-parted's "
            "default set plus each demo MIG node's current layout)",
        )

    def _pods(self):

        return self.sim.once("pods_frame", lambda: pods_frame(self.sim.pods_json())).copy()

    def _inventory(self, window):
        devs = [d for d in self.sim.devices if self.sim.emits("DCGM_FI_DEV_FB_USED", d)]
        if self.exporter is None:
            return set(self.sim.metric_names()), [self.sim.labels(d) for d in devs]
        names = {n for d in self.sim.devices for n in self._emitted(d)}
        return names, [self.sim.labels(d) for d in devs]

    def _emitted(self, d) -> set[str]:
        """The metric names device ``d``'s exporter serves, under its node's generation."""
        gen = self.sim.generation(d.node)
        return {name_in(m, gen) for m in self.sim.metric_names() if self.sim.emits(m, d)}

    def _node_names(self, window):
        """node -> the metric and label names its exporter serves (with an ``exporter`` generation only)."""
        if self.exporter is None:
            return None
        out: dict[str, set[str]] = {}
        for d in self.sim.devices:
            seen = out.setdefault(d.node, set())
            seen.update(self._emitted(d))
            seen.update(self.sim.labels(d))
        return out

    def _gpus(self, node, window):
        """Every GPU and MIG instance of the node (a GPU that stopped reporting is still listed, as nvidia-smi -L
        would)."""
        return pd.DataFrame(
            [
                {
                    "node": d.node,
                    "gpu": str(d.index),
                    "uuid": d.uuid,
                    "pci_bus_id": d.pci_bus_id,
                    "model": d.model_name,
                    "gpu_i_id": d.gi_id,
                    "gpu_i_profile": d.gi_profile,
                    "mig_uuid": d.mig_uuid,
                }
                for d in self.sim.devices
                if d.node == node
            ],
            columns=GPU_COLUMNS,
        )

    def _kernel_log(self, node):
        return self.sim.kernel_log(node)

    def _smi_query(self, node):
        """Rendered once per simulator and node (text: kept as is)."""
        return self.sim.memo.get(("smi_query", node), lambda: render_smi_query(self.sim, node))

    def known_nodes(self):
        return sorted(s["name"] for s in self.sim.node_specs)

    def nodes_json(self) -> dict:
        return self.sim.nodes_json()

    def pods_json(self) -> dict:
        return self.sim.pods_json()

    def query(self, promql):
        """The one PromQL form the demo answers: a range selector over its simulated ``vllm:`` series,
        ``{__name__=~"vllm:.+"}[<seconds>s]`` (every sample of the window, as Prometheus returns a range vector
        from an instant query); any other query raises NotProvided like a source without PromQL."""
        m = _VLLM_RANGE.fullmatch(promql.strip())
        if m is None:
            return super().query(promql)

        def points():  # each series' samples as Prometheus' JSON gives them, kept (immutable) in the memo
            end = self.end.timestamp()
            t = self.sim.grid(end - float(m.group(1)), end, self.sim.scrape_interval)
            return tuple(
                (name, tuple(labels.items()), tuple(zip(map(float, t), map(str, values))))
                for name, labels, values in demo_vllm_series(self.sim, t)
            )

        kept = self.sim.memo.get(("vllm range", m.group(1)), points, weight=lambda v: sum(len(x[2]) for x in v))
        return [
            {"metric": {"__name__": name, **dict(labels)}, "values": [list(p) for p in values]}
            for name, labels, values in kept
        ]

    def _node_history(self, window, node):

        if getattr(self, "_history", None) is None:
            self._history = demo_history(self.sim)
        return NodeHistory(self._history, demo_history_signals(self.sim), {})
