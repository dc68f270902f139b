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

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import yaml

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import data_path, load_table
from gpulib.core.timeutil import parse_window
from gpulib.demo.cluster_objects import FleetObjects
from gpulib.demo.metrics import FleetMetrics
from gpulib.demo.scenario import MIG_SLICES, Device, _mig_memory_mib, _rel


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
            scenario = yaml.safe_load(path.read_text())
        self.scenario = scenario
        self.seed = int(seed)
        self.label_style = label_style
        self.counters = counters
        end = end or datetime.now(timezone.utc).replace(second=0, microsecond=0)
        self.end = end if end.tzinfo else end.replace(tzinfo=timezone.utc)
        self.end_s = self.end.timestamp()
        self.scrape_interval = parse_window(scrape_interval or scenario.get("scrape_interval", "30s")).total_seconds()
        self.driver_version = str(scenario.get("driver_version", "550.127.05"))
        self._models = load_table("demo_gpu_models").set_index("model")
        self.devices: list[Device] = []
        self.node_specs: list[dict] = list(scenario["nodes"])
        for spec in self.node_specs:
            self.devices.extend(self._build_node(spec))
        names = {spec["name"] for spec in self.node_specs}
        self.exporter_down = frozenset(exporter_down)
        unknown = sorted(self.exporter_down - names)
        if unknown:
            from gpulib.core.errors import UnknownNode

            raise UnknownNode(
                f"exporter_down names unknown node(s) {', '.join(unknown)}; nodes: {', '.join(sorted(names))}"
            )

    # ------------------------------------------------------------------ fleet construction
    def _uuid(self, *parts: object) -> str:
        h = hashlib.sha1("|".join(map(str, (self.seed, *parts))).encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def _build_node(self, spec: dict) -> list[Device]:
        if spec["model"] not in self._models.index:
            raise InvalidParameter(
                f"node {spec['name']}: GPU model {spec['model']!r} unknown; known: {', '.join(self._models.index)}"
            )
        m = self._models.loc[spec["model"]]
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
                devs.append(
                    Device(
                        uuid=uuid,
                        memory_mib=float(m["memory_mib"]),
                        incidents=incidents,
                        **self._workload_fields(ws[0] if ws else None),
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
