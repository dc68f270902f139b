"""DCGM exporter series of the demo fleet: dcgm-exporter's metric names, types and labels, the value model (personas,
diurnal load, injected incidents), samples and frames, a ``/metrics`` scrape and OpenMetrics for
``promtool tsdb create-blocks-from openmetrics``.

Every value is a pure function of (seed, device, field, timestamp), so the demo source and a Prometheus backfilled
from the same scenario return the same numbers.
"""

from __future__ import annotations

import math
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.schema import SERIES_COLUMNS, SUMMARY_COLUMNS, empty
from gpulib.core.timeutil import parse_window
from gpulib.demo.scenario import DAY, Device
from gpulib.demo.vllm_series import demo_vllm_series
from gpulib.sources.dcgm import format_labels, format_value
from gpulib.sources.reduce import increase
from gpulib.sources.signals import name_in, scale_in

#: stats :meth:`FleetMetrics.summary_frame` reduces per device, each exactly as the groupby of summarise_frame does
#: over one series' samples in time order (no NaN left); avg and p95 are left to it (their sums and interpolation
#: are pandas' own)
DEVICE_STATS = {"max": np.max, "min": np.min, "last": lambda v: float(v[-1]), "increase": increase}
#: the Device attributes behind SUMMARY_COLUMNS' labels, in order (``gpu`` is ``str(index)``)
_LABEL_ATTRS = (
    "node",
    "index",
    "uuid",
    "pci_bus_id",
    "model_name",
    "pod",
    "namespace",
    "container",
    "gi_profile",
    "gi_id",
)

#: dcgm-exporter listens on :9400; the GPU Operator's service/DaemonSet is ``nvidia-dcgm-exporter``
#: (``NVIDIA/dcgm-exporter: pkg/cmd/app.go`` @ d5e5f510, ``NVIDIA/gpu-operator:
#: assets/state-dcgm-exporter/0800_daemonset.yaml`` @ a22dbf67), which a ServiceMonitor turns into the scrape job name
EXPORTER_PORT = 9400
EXPORTER_JOB = "nvidia-dcgm-exporter"

#: every DCGM metric the simulator emits: name -> (prometheus type, scope, help)
#: scope: "gpu" = physical GPU only, "instance" = per MIG instance (or whole GPU when MIG is off)
METRICS: dict[str, tuple[str, str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "gpu", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "gpu", "GPU temperature (in C)."),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "gpu", "Memory temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "gpu", "Power draw (in W)."),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("counter", "gpu", "Total number of PCIe retries."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "gpu_nomig", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "gpu_nomig", "Memory utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "gpu", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "instance", "Frame buffer memory free (in MB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "instance", "Frame buffer memory used (in MB)."),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "counter",
        "gpu_nvlink",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (
        "counter",
        "gpu_hbm",
        "Number of remapped rows for uncorrectable errors",
    ),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("counter", "gpu_hbm", "Number of remapped rows for correctable errors"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "gpu_hbm", "Whether remapping of rows has failed"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "gpu_ecc", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "gpu_ecc", "Total number of double-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("counter", "gpu_ecc", "Total number of single-bit persistent ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("counter", "gpu_ecc", "Total number of double-bit persistent ECC errors."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "instance", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "instance_sm", "The ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "instance", "Ratio of cycles the tensor (HMMA) pipe is active."),
}

#: fields left out when a scenario uses dcgm-exporter's default counters
#: (``NVIDIA/dcgm-exporter: etc/default-counters.csv`` @ d5e5f510)
OFF_BY_DEFAULT = {
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_PROF_SM_ACTIVE",
}

#: err_msg text of the XID metric for the codes the demo injects (dcgm-exporter xid_errors.go wording)
_ERR_MSG = {
    0: "No Error",
    13: "Graphics Engine Exception",
    48: "DBE (Double Bit Error) ECC Error",
    64: "ECC page retirement or row remapper recording failure",
    79: "GPU has fallen off the bus",
}


class FleetMetrics:
    """DCGM series of the simulated fleet, as a mixin of :class:`gpulib.demo.simulator.FleetSimulator` (it uses the
    fleet's ``devices``, ``seed``, ``end_s``, ``counters``, ``label_style``, ``driver_version`` and
    ``scrape_interval``)."""

    # ------------------------------------------------------------------ value model
    def _noise(self, d: Device, key: str, t: np.ndarray) -> np.ndarray:
        """Smooth deterministic noise in [-1, 1] as a sum of three sines with seeded phases."""
        rng = np.random.default_rng(zlib.crc32(f"{self.seed}|{d.uuid}|{d.gi_id}|{key}".encode()))
        ph = rng.uniform(0, 2 * math.pi, 3)
        return (
            np.sin(2 * math.pi * t / 613 + ph[0])
            + np.sin(2 * math.pi * t / 2311 + ph[1])
            + np.sin(2 * math.pi * t / 7129 + ph[2])
        ) / 3

    def _diurnal(self, d: Device, t: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(f"{self.seed}|{d.pod}|diurnal".encode()))
        return np.sin(2 * math.pi * t / DAY + rng.uniform(0, 2 * math.pi))

    def _incident(self, d: Device, kind: str) -> dict | None:
        return next((x for x in d.incidents if x["type"] == kind), None)

    def _lost_after(self, d: Device) -> float | None:
        """Time after which a GPU that fell off the bus (XID 79) stops reporting telemetry."""
        inc = next((x for x in self._parent(d).incidents if x["type"] == "xid" and int(x["code"]) == 79), None)
        return inc["at"] + 60 if inc else None

    def _parent(self, d: Device) -> Device:
        if not d.is_instance:
            return d
        return next(p for p in self.devices if p.uuid == d.uuid and not p.is_instance)

    def activity(self, d: Device, t: np.ndarray) -> np.ndarray:
        """GR engine activity ratio 0..1 of a device (a MIG parent: slice-weighted mean of its instances)."""
        t = np.asarray(t, dtype=float)
        if d.mig_enabled and not d.is_instance:
            insts = [x for x in self.devices if x.uuid == d.uuid and x.is_instance]
            return sum(self.activity(x, t) * x.slices for x in insts) / 7.0
        n = self._noise(d, "act", t)
        p = d.persona
        if p == "train":
            a = 0.88 + 0.05 * n
        elif p == "infer":
            a = 0.38 + 0.22 * self._diurnal(d, t) + 0.08 * n
        elif p == "infer_small":
            a = 0.12 + 0.07 * self._diurnal(d, t) + 0.04 * n
        elif p == "idle":
            a = 0.012 + 0.008 * n
        elif p == "dev":
            a = 0.7 * np.clip(n, 0, 1) ** 3
        elif p == "zombie":
            a = np.where(t >= (d.since or -np.inf), 0.0, 0.45 + 0.1 * n)
        else:
            a = np.zeros_like(t)
        parent = self._parent(d)
        xid = self._incident(parent, "xid")
        if xid and int(xid["code"]) in (79, 48, 64, 95):
            a = np.where(t >= xid["at"], 0.0, a)
        dbe = self._incident(parent, "dbe_remap_failure")
        if dbe:
            a = np.where(t >= dbe["at"], 0.0, a)  # the job crashed on the DBE
        return np.clip(a, 0.0, 1.0)

    def fb_used(self, d: Device, t: np.ndarray) -> np.ndarray:
        mem = d.memory_mib
        n = self._noise(d, "fb", t)
        p = d.persona
        if d.mig_enabled and not d.is_instance:
            raise GpulibError("FB of a MIG-enabled GPU is reported per instance")
        # idle (allocated but unused) holds a CUDA context only: 440..560 MiB, below zombie_fb_used_min_mib on every
        # device incl. a 1g MIG instance (gpulib/data/core/thresholds.csv: "CUDA context alone uses a few hundred MiB")
        frac = {
            "train": 0.82 + 0.03 * n,
            "infer": 0.9 + 0 * n,
            "infer_small": 0.36 + 0.01 * n,
            "idle": (500 + 60 * n) / mem,
            "dev": 0.2 + 0.05 * n,
            "zombie": np.where(t >= (d.since or -np.inf), 0.74, 0.5 + 0.05 * n),
        }.get(p, 4 / mem + 0 * n)
        used = np.round(np.asarray(frac, dtype=float) * mem)
        dbe = self._incident(self._parent(d), "dbe_remap_failure")
        if dbe:
            used = np.where(t >= dbe["at"], 0.0, used)
        return used

    def _value(self, name: str, d: Device, t: np.ndarray) -> np.ndarray:
        act = self.activity(d, t)
        n = self._noise(d, name, t)
        parent = self._parent(d)
        thermal = self._incident(parent, "thermal")
        hot = (t >= thermal["since"]) if thermal else np.zeros_like(t, dtype=bool)
        if name == "DCGM_FI_DEV_GPU_UTIL":
            return np.round(np.clip(act * 112 + 2 * n, 0, 100))
        if name == "DCGM_FI_DEV_MEM_COPY_UTIL":
            return np.round(np.clip(act * 45 + 2 * n, 0, 100))
        if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            return np.round(act, 6)
        if name == "DCGM_FI_PROF_SM_ACTIVE":
            return np.round(act * 0.86, 6)
        if name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
            share = {"train": 0.48, "infer": 0.32, "infer_small": 0.2}.get(d.persona, 0.05)
            return np.round(act * share, 6)
        if name == "DCGM_FI_DEV_FB_USED":
            return self.fb_used(d, t)
        if name == "DCGM_FI_DEV_FB_FREE":
            reserved = round(d.memory_mib * 0.006)
            return np.maximum(d.memory_mib - reserved - self.fb_used(d, t), 0)
        if name == "DCGM_FI_DEV_POWER_USAGE":
            idle = 0.09 * d.tdp_w
            p = idle + (0.86 * d.tdp_w - idle) * act + 0.015 * d.tdp_w * n
            p = np.where(hot, np.minimum(p + 0.1 * d.tdp_w, 0.99 * d.tdp_w), p)
            return np.round(p, 3)
        if name == "DCGM_FI_DEV_GPU_TEMP":
            temp = 31 + 37 * act + 1.5 * n
            ramp = np.clip((t - (thermal["since"] if thermal else 0)) / 1200, 0, 1)
            temp = np.where(hot, np.maximum(temp, 85 + 5 * ramp + 0.8 * n), temp)
            return np.round(temp)
        if name == "DCGM_FI_DEV_MEMORY_TEMP":
            return np.round(self._value("DCGM_FI_DEV_GPU_TEMP", d, t) + 4 + n)
        if name == "DCGM_FI_DEV_SM_CLOCK":
            clk = np.where(act < 0.02, 345.0, d.max_clock * (0.975 + 0.01 * n))
            clk = np.where(hot, d.max_clock * (0.6 + 0.02 * n), clk)
            return np.round(clk / 15) * 15
        if name == "DCGM_FI_DEV_XID_ERRORS":
            out = np.zeros_like(t)
            events = sorted(self.xid_events(parent), key=lambda e: e[0])
            for at, code in events:
                out = np.where(t >= at, float(code), out)
            return out
        if name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER":
            return np.floor((t - (self.end_s - 30 * DAY)) / 86400 * 3)
        if name == "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL":
            # a bandwidth in MB/s (NVIDIA/DCGM: dcgmlib/src/dcgm_fields.cpp @0fb66990 gives field 449 the unit
            # DCGM_FIELD_UNIT_BW_MBPS), not a byte counter: ~200 GB/s on a training GPU, 12 % of it on a degraded link
            rate = 2.0e5 * (0.15 if d.persona != "train" else 1.0)
            nv = self._incident(parent, "nvlink_degraded")
            mbs = rate * (1 + 0.03 * n)
            if nv:
                mbs = np.where(t >= nv["since"], 0.12 * mbs, mbs)
            return np.round(mbs)
        if name in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"):
            agg = 1200.0 if name.endswith("AGG_TOTAL") else 0.0
            if self._incident(parent, "sbe_rising"):
                return agg + np.floor(np.clip(t - (self.end_s - 12 * 3600), 0, None) / 3600 * 2500)
            return np.full_like(t, agg if d.index % 3 == 0 else 0.0)
        if name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"):
            agg = 3.0 if name.endswith("AGG_TOTAL") else 0.0
            dbe = self._incident(parent, "dbe_remap_failure")
            if dbe:
                return np.where(t >= dbe["at"], agg + 2, agg)
            return np.zeros_like(t)
        if name == "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS":
            dbe = self._incident(parent, "dbe_remap_failure")
            return np.where(t >= dbe["at"], 9.0, 7.0) if dbe else np.zeros_like(t)
        if name == "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":
            return np.zeros_like(t) + (1.0 if self._incident(parent, "sbe_rising") else 0.0)
        if name == "DCGM_FI_DEV_ROW_REMAP_FAILURE":
            dbe = self._incident(parent, "dbe_remap_failure")
            return np.where(t >= dbe["at"] + 60, 1.0, 0.0) if dbe else np.zeros_like(t)
        raise GpulibError(f"simulator has no model for {name}")

    def xid_events(self, d: Device) -> list[tuple[float, int]]:
        """(epoch s, code) for every XID the scenario injects on a physical GPU."""
        out = []
        for inc in d.incidents:
            if inc["type"] == "xid":
                out.append((inc["at"], int(inc["code"])))
            elif inc["type"] == "dbe_remap_failure":
                out += [(inc["at"], 48), (inc["at"] + 60, 64)]
        return out

    # ------------------------------------------------------------------ series
    def metric_names(self) -> list[str]:
        return [m for m in METRICS if not (self.counters == "default" and m in OFF_BY_DEFAULT)]

    def emits(self, name: str, d: Device) -> bool:
        scope = METRICS[name][1]
        if self.counters == "default" and name in OFF_BY_DEFAULT:
            return False
        physical = not d.is_instance
        if scope == "gpu":
            return physical
        if scope == "gpu_nomig":
            return physical and not d.mig_enabled
        if scope == "gpu_nvlink":
            return physical and d.nvlink
        if scope in ("gpu_hbm", "gpu_ecc"):
            return physical and d.hbm
        if scope in ("instance", "instance_sm"):
            return d.is_instance or not d.mig_enabled
        raise GpulibError(f"bad scope {scope}")

    def sample(self, name: str, d: Device, t: np.ndarray) -> np.ndarray:
        """Values of metric ``name`` on device ``d`` at epoch seconds ``t``; NaN where not reported."""
        if name not in METRICS:
            raise InvalidParameter(f"metric {name!r} is not simulated; simulated: {', '.join(METRICS)}")
        t = np.asarray(t, dtype=float)
        if not self.emits(name, d) or d.node in self.exporter_down:  # a down exporter is not scraped: no series
            return np.full_like(t, np.nan)
        v = self._value(name, d, t).astype(float)
        lost = self._lost_after(d)
        if lost is not None and name != "DCGM_FI_DEV_XID_ERRORS":
            v = np.where(t >= lost, np.nan, v)
        return v

    def labels(self, d: Device) -> dict[str, str]:
        """dcgm-exporter labels of a device, as the exporter (``new``) or a default ServiceMonitor (``old``) shows
        them."""
        host_key = "hostname" if self.label_style == "new" else "Hostname"
        lab = {
            "gpu": str(d.index),
            "UUID": d.uuid,
            "pci_bus_id": d.pci_bus_id,
            "device": f"nvidia{d.index}",
            "modelName": d.model_name,
        }
        if d.gi_id:
            lab["GPU_I_PROFILE"] = d.gi_profile
            lab["GPU_I_ID"] = d.gi_id
        lab[host_key] = d.node
        lab[name_in("DCGM_FI_DRIVER_VERSION", self.generation(d.node))] = self.driver_version
        if d.pod:
            if self.label_style == "new":
                lab.update(container=d.container, namespace=d.namespace, pod=d.pod)
            else:  # scraped without honorLabels: the exporter's own pod holds `pod`
                lab.update(exported_container=d.container, exported_namespace=d.namespace, exported_pod=d.pod)
        if self.label_style == "old":
            lab.update(
                container="nvidia-dcgm-exporter",
                namespace="gpu-operator",
                pod=f"nvidia-dcgm-exporter-{zlib.crc32(d.node.encode()) % 100000:05d}",
                instance=self.exporter_instance(d.node),
                job=EXPORTER_JOB,
            )
        return lab

    def exporter_instance(self, node: str) -> str:
        """``instance`` of the node's dcgm-exporter scrape target (its pod IP and port 9400)."""
        return f"10.0.{zlib.crc32(node.encode()) % 250}.10:{EXPORTER_PORT}"

    def exporter_targets(self) -> list[dict[str, Any]]:
        """One dcgm-exporter scrape target per node: the labels of its ``up`` series and the value
        (1, or 0 for a node in ``exporter_down``)."""
        return [
            {
                "labels": {"job": EXPORTER_JOB, "instance": self.exporter_instance(spec["name"]), "node": spec["name"]},
                "up": 0.0 if spec["name"] in self.exporter_down else 1.0,
            }
            for spec in self.node_specs
        ]

    def device_series(self) -> Iterator[Device]:
        yield from self.devices

    def grid(self, start: float, end: float, step: float | None = None) -> np.ndarray:
        """Scrape timestamps (aligned to the step) in [start, end]."""
        step = step or self.scrape_interval
        first = math.ceil(start / step) * step
        return np.arange(first, end + step / 2, step)

    def frame(
        self, name: str, start: float, end: float, step: float | None = None, devices: Iterable[Device] | None = None
    ) -> pd.DataFrame:
        """Long frame: one row per (device, timestamp) with non-NaN value, plus normalised labels. Kept in the
        simulator's memo (:meth:`~gpulib.demo.simulator.FleetSimulator.memoised`): each caller gets a copy."""
        devs = None if devices is None else list(devices)
        key = ("frame", name, start, end, step or self.scrape_interval)
        return self.memoised(key, devs, lambda: self._frame(name, start, end, step, devs))

    def _frame(self, name: str, start: float, end: float, step: float | None, devices: list[Device] | None):
        t = self.grid(start, end, step)
        times, values, devs = [], [], []
        for d in devices if devices is not None else self.devices:
            v = self.sample(name, d, t)
            ok = ~np.isnan(v)
            if not ok.any():
                continue
            times.append(t[ok])
            values.append(v[ok])
            devs.append(d)
        if not devs:
            return empty(SERIES_COLUMNS)
        # one frame built from whole columns (each device's labels repeated over its samples): a frame per device
        # and a concat cost more than the samples themselves
        counts = [len(x) for x in times]

        def labels(attr: str) -> np.ndarray:
            return np.repeat(np.array([getattr(d, attr) for d in devs], dtype=object), counts)

        return pd.DataFrame(
            {
                "timestamp": pd.to_datetime(np.concatenate(times), unit="s", utc=True),
                "node": labels("node"),
                "gpu": np.repeat(np.array([str(d.index) for d in devs], dtype=object), counts),
                "uuid": labels("uuid"),
                "pci_bus_id": labels("pci_bus_id"),
                "model": labels("model_name"),
                "pod": labels("pod"),
                "namespace": labels("namespace"),
                "container": labels("container"),
                "gpu_i_profile": labels("gi_profile"),
                "gpu_i_id": labels("gi_id"),
                "value": np.concatenate(values),
            }
        )

    def summary_frame(
        self, name: str, start: float, end: float, stat: str, devices: Iterable[Device] | None = None
    ) -> pd.DataFrame | None:
        """What :func:`gpulib.sources.reduce.summarise_frame` makes of :meth:`frame` for the stats it reduces exactly
        (:data:`DEVICE_STATS`), computed from each device's samples without the long frame: one row per device
        (SUMMARY_COLUMNS less ``stat``), in the groupby's order. ``None`` for another stat, or when two devices carry
        the same labels (the groupby would pool them): the caller reduces the long frame. Kept like :meth:`frame`."""
        if stat not in DEVICE_STATS:
            return None
        devs = None if devices is None else list(devices)
        return self.memoised(
            ("summary", name, start, end, stat), devs, lambda: self._summary(name, start, end, stat, devs)
        )

    def _summary(self, name: str, start: float, end: float, stat: str, devices: list[Device] | None):
        reduce = DEVICE_STATS[stat]
        t = self.grid(start, end)
        rows = []
        for d in devices if devices is not None else self.devices:
            v = self.sample(name, d, t)
            v = v[~np.isnan(v)]
            if len(v):
                labels = [getattr(d, a) for a in _LABEL_ATTRS]
                labels[1] = str(d.index)
                rows.append((*labels, reduce(v)))
        keys = [c for c in SUMMARY_COLUMNS if c not in ("stat", "value")]
        if not rows:
            return pd.DataFrame(columns=keys + ["value"])
        if len({r[:-1] for r in rows}) < len(rows):
            return None
        df = pd.DataFrame(rows, columns=keys + ["value"])
        return df.sort_values(keys, na_position="last", kind="stable").reset_index(drop=True)

    # ------------------------------------------------------------------ exposition
    def generation(self, node: str) -> str:
        """The dcgm-exporter generation serving ``node``: ``exporter_nodes``' entry, else the fleet's ``exporter``."""
        return self.exporter_nodes.get(node, self.exporter)

    def emitted(self, name: str, v: np.ndarray, node: str) -> tuple[str, np.ndarray]:
        """(name, values) of canonical metric ``name`` as the node's dcgm-exporter generation emits it: its name in
        that generation and the value in that generation's unit (gpulib/data/sources/signals.csv)."""
        gen = self.generation(node)
        factor = scale_in(name, gen)
        return name_in(name, gen), (v / factor if factor != 1.0 else v)

    def scrape_text(self, at: datetime | None = None, node: str | None = None) -> str:
        """A dcgm-exporter ``/metrics`` page (Prometheus text format) at time ``at`` (default: end)."""
        ts = np.array([(at or self.end).timestamp()])
        lines = []
        for name in self.metric_names():
            typ, _, help_ = METRICS[name]
            bodies: dict[str, list[str]] = {}
            for d in self.devices:
                if node and d.node != node:
                    continue
                out_name, out = self.emitted(name, self.sample(name, d, ts), d.node)
                v = out[0]
                if not np.isnan(v):
                    lab = self.labels(d)
                    if self.label_style == "old":  # a raw scrape has no target labels
                        lab = {
                            k: v2
                            for k, v2 in lab.items()
                            if k not in ("instance", "job", "pod", "namespace", "container")
                        }
                        lab = {
                            (
                                "pod"
                                if k == "exported_pod"
                                else "namespace"
                                if k == "exported_namespace"
                                else "container"
                                if k == "exported_container"
                                else k
                            ): v2
                            for k, v2 in lab.items()
                        }
                    if name == "DCGM_FI_DEV_XID_ERRORS":
                        lab["err_code"] = str(int(v))
                        lab["err_msg"] = _ERR_MSG.get(int(v), "Unknown Error")
                    bodies.setdefault(out_name, []).append(f"{out_name}{format_labels(lab)} {format_value(float(v))}")
            for out_name, body in bodies.items():
                lines += [f"# HELP {out_name} {help_}", f"# TYPE {out_name} {typ}", *body]
        return "\n".join(lines) + "\n"

    def write_openmetrics(
        self,
        path: str | Path,
        window: str = "6h",
        step: float | None = None,
        *,
        start: float | datetime | None = None,
        end: float | datetime | None = None,
        metrics: Iterable[str] | None = None,
    ) -> Path:
        """Write the scenario's last ``window`` as OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``.

        ``start`` / ``end`` (epoch seconds or datetimes; both ends inclusive, like :meth:`grid`) write
        one slice of time instead, so a long history can be generated and backfilled a block at a
        time (``end`` defaults to the scenario end, ``start`` to ``end - window``). ``metrics`` limits
        the file to those DCGM metric names (the demo vLLM series are then left out).

        Counters are typed ``unknown`` because OpenMetrics requires counter samples to end in
        ``_total``, which dcgm-exporter's names do not; queries are unaffected. Each node's exporter
        target also gets the ``up`` series Prometheus would record for its scrapes
        (``up{job="nvidia-dcgm-exporter",instance="<ip>:9400",node="<node>"}``, 0 for ``exporter_down``).
        """
        path = Path(path)
        end_s = self._epoch(end, "end") if end is not None else self.end_s
        start_s = self._epoch(start, "start") if start is not None else end_s - parse_window(window).total_seconds()
        if start_s > end_s:
            raise InvalidParameter(f"start={start!r} is after end={end!r}")
        names = self.metric_names()
        if metrics is not None:
            wanted = list(metrics)
            unknown = [m for m in wanted if m not in names]
            if unknown:
                raise InvalidParameter(f"metrics={unknown}: not simulated here; simulated: {', '.join(names)}")
            names = [m for m in names if m in wanted]
        t = self.grid(start_s, end_s, step)
        with path.open("w") as fh:
            for name in names:
                typ, _, help_ = METRICS[name]
                families: dict[str, list[Device]] = {}
                for d in self.devices:
                    families.setdefault(name_in(name, self.generation(d.node)), []).append(d)
                for out_name, devices in families.items():
                    fh.write(
                        f"# HELP {out_name} {help_}\n# TYPE {out_name} {'gauge' if typ == 'gauge' else 'unknown'}\n"
                    )
                    for d in devices:
                        v = self.emitted(name, self.sample(name, d, t), d.node)[1]
                        ok = ~np.isnan(v)
                        if not ok.any():
                            continue
                        lab = format_labels(self.labels(d))
                        fh.writelines(
                            f"{out_name}{lab} {format_value(float(x))} {int(ts)}\n" for x, ts in zip(v[ok], t[ok])
                        )
            if metrics is None:  # a metric-limited slice (fleet benchmark) leaves out vLLM and up
                self._write_vllm_openmetrics(fh, t)
                fh.write("# HELP up 1 if the target was scraped, 0 if the scrape failed.\n# TYPE up gauge\n")
                for target in self.exporter_targets():
                    lab = format_labels(target["labels"])
                    fh.writelines(f"up{lab} {format_value(target['up'])} {int(ts)}\n" for ts in t)
            fh.write("# EOF\n")
        return path

    @staticmethod
    def _epoch(value: float | datetime, name: str) -> float:
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
        try:
            return float(value)
        except (TypeError, ValueError):
            raise InvalidParameter(f"{name}={value!r}: use epoch seconds or a datetime") from None

    def _write_vllm_openmetrics(self, fh, t: np.ndarray) -> None:
        """The demo vLLM pods' ``vllm:`` series (gpulib.demo.vllm_series.demo_vllm_series), one family per sample name
        (counters and histogram buckets typed ``unknown``, like the DCGM counters above)."""
        families: dict[str, list[tuple[dict, np.ndarray]]] = {}
        for name, lab, v in demo_vllm_series(self, t):
            families.setdefault(name, []).append((lab, v))
        for name, series in families.items():
            typ = (
                "gauge"
                if name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
                else "unknown"
            )
            fh.write(f"# TYPE {name} {typ}\n")
            for lab, v in series:
                labs = format_labels(lab)
                fh.writelines(f"{name}{labs} {format_value(float(x))} {int(ts)}\n" for x, ts in zip(v, t))
