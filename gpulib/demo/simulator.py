"""The embedded demo fleet: a deterministic simulator of a GPU Kubernetes cluster with incidents.

A scenario (``gpulib/data/demo/demo_fleet.yaml`` by default) lists nodes, GPU models, workloads with a
*persona* (train, infer, infer_small, idle, zombie, dev) and injected incidents (XID, DBE with a
row-remap failure, thermal throttle, degraded NVLink, rising SBE). From it the simulator produces:

* DCGM exporter series with dcgm-exporter's metric names and labels (:meth:`FleetSimulator.sample`),
  as a ``/metrics`` scrape (:meth:`scrape_text`) or as OpenMetrics for
  ``promtool tsdb create-blocks-from openmetrics`` (:meth:`write_openmetrics`);
* ``kubectl get nodes/pods -o json`` documents with GFD labels, capacity and GPU requests;
* ``dmesg`` text with the matching ``NVRM: Xid`` lines.

Every value is a pure function of (seed, device, field, timestamp), so the demo source and a
Prometheus backfilled from the same scenario return the same numbers.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from gpulib.core.errors import InvalidParameter, UnknownNode
from gpulib.core.knowledge import data_path, load_table
from gpulib.core.timeutil import parse_window
from gpulib.demo.cluster_objects import FleetObjects
from gpulib.demo.dra_objects import is_dra
from gpulib.demo.memo import Memo
from gpulib.demo.metrics import FleetMetrics
from gpulib.demo.scenario import MIG_SLICES, Device, _mig_memory_mib, _rel
from gpulib.sources.signals import GENERATIONS


@functools.lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    return yaml.safe_load(Path(path).read_text())


def read_scenario(path: Path) -> dict:
    """The scenario file at ``path``, parsed once per version of the file (its modification time and size): a verdict
    process builds a simulator per run, and parsing a 150-node scenario costs more than the verdict's own arithmetic.
    Each caller gets its own copy."""
    st = path.stat()
    return copy.deepcopy(_parsed(str(path.resolve()), st.st_mtime_ns, st.st_size))


def shared_simulator(scenario: str | Path | None = None, *, end: datetime | None = None, **kw) -> FleetSimulator:
    """The simulator of a scenario file (or the packaged fleet), built once per process for each version of the file,
    window end and option set: every value a simulator gives is a pure function of those, and nothing changes a
    simulator after it is built, so the sources of successive runs (a verdict process serves many) share it instead
    of rebuilding the fleet per run. ``kw``: :class:`FleetSimulator`'s other keyword options."""
    path = Path(scenario) if scenario is not None else data_path("demo_fleet.yaml")
    if not path.exists():
        raise InvalidParameter(f"scenario file {str(path)!r} does not exist")
    st = path.stat()
    end = end or datetime.now(timezone.utc).replace(second=0, microsecond=0)
    key = tuple(sorted((k, tuple(v) if isinstance(v, (list, set, frozenset)) else v) for k, v in kw.items()))
    return _shared(str(path.resolve()), st.st_mtime_ns, st.st_size, end, key)


@functools.lru_cache(maxsize=8)
def _shared(path: str, mtime_ns: int, size: int, end: datetime, options: tuple) -> FleetSimulator:
    return FleetSimulator(path, end=end, **dict(options))


class FleetSimulator(FleetMetrics, FleetObjects):
    """Deterministic GPU fleet. ``end`` anchors the incident times (default: now, to the minute)."""

    def __init__(
        self,
        scenario: str | Path | dict | None = None,
        *,
        end: datetime | None = None,
        seed: int = 7,
        label_style: str = "new",
        counters: str = "full",
        scrape_interval: str | None = None,
        exporter_down: Iterable[str] = (),
        exporter: str = "4.10",
        exporter_nodes: dict[str, str] | tuple[tuple[str, str], ...] | None = None,
    ):
        if label_style not in ("new", "old"):
            raise InvalidParameter(
                f"label_style={label_style!r}: use 'new' (hostname, pod) or 'old' (Hostname, exported_pod)"
            )
        if counters not in ("full", "default"):
            raise InvalidParameter(f"counters={counters!r}: use 'full' or 'default' (dcgm-exporter default CSV)")
        if scenario is None:
            scenario = data_path("demo_fleet.yaml")
        if isinstance(scenario, (str, Path)):
            path = Path(scenario)
            if not path.exists():
                raise InvalidParameter(f"scenario file {str(path)!r} does not exist")
            scenario = read_scenario(path)
        exporter_nodes = dict(exporter_nodes or {})  # a tuple of pairs too: shared_simulator's cache key must hash
        for gen in (exporter, *exporter_nodes.values()):
            if gen not in GENERATIONS:
                raise InvalidParameter(f"exporter={gen!r}: use one of {', '.join(GENERATIONS)} (dcgm-exporter names)")
        self.exporter = exporter
        #: node -> the generation of its exporter where it differs from ``exporter`` (a fleet mid-upgrade)
        self.exporter_nodes = dict(exporter_nodes or {})
        self.scenario = scenario
        self.seed = int(seed)
        self.label_style = label_style
        self.counters = counters
        end = end or datetime.now(timezone.utc).replace(second=0, microsecond=0)
        self.end = end if end.tzinfo else end.replace(tzinfo=timezone.utc)
        self.end_s = self.end.timestamp()
        self.scrape_interval = parse_window(scrape_interval or scenario.get("scrape_interval", "30s")).total_seconds()
        self.driver_version = str(scenario.get("driver_version", "550.127.05"))
        # model -> its row, as plain dicts: a node's spec reads several columns and a pandas row lookup per column costs
        # more than the whole lookup table
        self._models: dict[str, dict] = load_table("demo_gpu_models").set_index("model").to_dict("index")
        self._once: dict[str, object] = {}
        #: results that are pure functions of this simulator (its frames and summaries; a source's served series and
        #: summaries, nvidia-smi text and vllm: samples), bounded (gpulib.demo.memo)
        self.memo = Memo()
        self.devices: list[Device] = []
        self.node_specs: list[dict] = list(scenario["nodes"])
        for spec in self.node_specs:
            self.devices.extend(self._build_node(spec))
        names = {spec["name"] for spec in self.node_specs}
        self.exporter_down = frozenset(exporter_down)
        unknown = sorted(self.exporter_down - names)
        if unknown:
            raise UnknownNode(
                f"exporter_down names unknown node(s) {', '.join(unknown)}; nodes: {', '.join(sorted(names))}"
            )

    # ------------------------------------------------------------------ fleet construction
    def once(self, name: str, build: Callable[[], Any]) -> Any:
        """``build()`` computed once per simulator and kept under ``name`` (what it returns depends only on what the
        simulator was built from). Callers copy the result before they change it."""
        if name not in self._once:
            self._once[name] = build()
        return self._once[name]

    def memoised(self, key: tuple, devices: list[Device] | None, build: Callable[[], Any]) -> Any:
        """``build()`` kept in :attr:`memo` under ``key`` and the places of ``devices`` in the fleet (None: every
        device). Devices that are not this fleet's own objects (a changed copy) are computed, not looked up."""
        places = None
        if devices is not None:
            place = self.once("device_places", lambda: {id(d): i for i, d in enumerate(self.devices)})
            places = tuple(place.get(id(d), -1) for d in devices)
            if any(i < 0 or self.devices[i] is not d for i, d in zip(places, devices)):
                return build()
            if places == tuple(range(len(self.devices))):
                places = None
        return self.memo.get((*key, places), build)

    def _uuid(self, *parts: object) -> str:
        h = hashlib.sha1("|".join(map(str, (self.seed, *parts))).encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def _build_node(self, spec: dict) -> list[Device]:
        if spec["model"] not in self._models:
            raise InvalidParameter(
                f"node {spec['name']}: GPU model {spec['model']!r} unknown; known: {', '.join(self._models)}"
            )
        m = self._models[spec["model"]]
        mig = spec.get("mig") or {}
        layout = list(mig.get("layout", []))
        by_gpu: dict[int, list[dict]] = {}
        for w in spec.get("workloads", []):
            for g in w.get("gpus", []):
                by_gpu.setdefault(int(g), []).append(w)
        devs = []
        for i in range(int(spec["gpus"])):
            base = dict(
                node=spec["name"],
                index=i,
                model=spec["model"],
                model_name=m["dcgm_model_name"],
                pci_bus_id=f"00000000:{(0x18 + 0x10 * i) & 0xFF:02X}:00.0",
                tdp_w=float(m["tdp_w"]),
                max_clock=float(m["max_sm_clock_mhz"]),
                nvlink=m["nvlink"] == "yes",
                hbm=spec["model"] != "L4",
            )
            incidents = [dict(x) for x in spec.get("incidents", []) if int(x.get("gpu", -1)) == i]
            for inc in incidents:
                for key in ("at", "since"):
                    if key in inc:
                        inc[key] = _rel(inc[key], self.end_s)
            uuid = "GPU-" + self._uuid(spec["name"], i)
            if layout:
                devs.append(
                    Device(uuid=uuid, memory_mib=float(m["memory_mib"]), mig_enabled=True, incidents=incidents, **base)
                )
                for j, prof in enumerate(layout):
                    w = next((x for x in by_gpu.get(i, []) if int(x.get("mig", -1)) == j), None)
                    devs.append(
                        Device(
                            uuid=uuid,
                            memory_mib=_mig_memory_mib(prof),
                            gi_profile=prof,
                            gi_id=str(j + 1),
                            mig_uuid="MIG-" + self._uuid(spec["name"], i, "mig", j + 1),
                            slices=MIG_SLICES[prof.split(".")[0]],
                            mig_enabled=True,
                            **self._workload_fields(w),
                            **base,
                        )
                    )
            else:
                ws = [w for w in by_gpu.get(i, []) if w.get("persona") != "none"]
                fields = self._workload_fields(ws[0] if ws else None)
                if is_dra(spec):  # its exporter maps no DRA-held GPU to a pod (gpulib.demo.dra_objects)
                    fields.update(pod="", namespace="", container="")
                devs.append(
                    Device(
                        uuid=uuid,
                        memory_mib=float(m["memory_mib"]),
                        incidents=incidents,
                        **fields,
                        **base,
                    )
                )
        return devs

    def _workload_fields(self, w: dict | None) -> dict:
        if not w or w.get("persona") in (None, "none"):
            return {"persona": "free"}
        return {
            "persona": w["persona"],
            "pod": w["pod"],
            "namespace": w["namespace"],
            "container": w.get("container", w.get("owner", w["pod"]).split("-")[0]),
            "since": _rel(w.get("since"), self.end_s),
        }
