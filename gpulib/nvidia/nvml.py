"""A small typed object model over NVML (``pynvml`` from nvidia-ml-py), nvitop-style.

``Device`` hides the C-style calls; every NVML read goes through one place (:meth:`Device._call`)
where ``NVMLError_NotSupported`` (and the other per-field errors: no permission, GPU lost, function
not found in an old driver) become ``None`` and are remembered in ``Device.errors``.

    python3 -m gpulib.nvidia.nvml --json OUT.json     # probe every GPU, write JSON (fixture for tests)

Imports only numpy, pandas and pynvml, so it runs on a bare GPU node.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

try:  # nvidia-ml-py; tests replace this module attribute with a fake
    import pynvml  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    pynvml = None  # type: ignore

from gpulib.core.errors import NVMLUnavailable
from gpulib.nvidia.smi import clock_event_table, decode_clock_events

PROBE_COLUMNS = [
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "serial",
    "minor_number",
    "memory_total_mib",
    "memory_used_mib",
    "memory_free_mib",
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "temperature_gpu_c",
    "temperature_shutdown_c",
    "temperature_slowdown_c",
    "temperature_max_operating_c",
    "temperature_memory_max_c",
    "power_draw_w",
    "power_limit_w",
    "sm_clock_mhz",
    "memory_clock_mhz",
    "max_sm_clock_mhz",
    "performance_state",
    "clock_event_mask",
    "clock_event_reasons",
    "ecc_mode_current",
    "ecc_sbe_volatile",
    "ecc_dbe_volatile",
    "ecc_sbe_aggregate",
    "ecc_dbe_aggregate",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "retired_pages_sbe",
    "retired_pages_dbe",
    "retired_pages_pending",
    "mig_mode_current",
    "mig_mode_pending",
    "nvlink_states",
    "nvlink_active",
    "pcie_gen_current",
    "pcie_width_current",
    "pcie_replays",
    "nvml_errors",
]

MIB = 1024 * 1024


def _lib():
    if pynvml is None:
        raise NVMLUnavailable("pynvml (nvidia-ml-py) is not installed")
    return pynvml


def _s(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _nan(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _err_name(e: Exception) -> str:
    lib = pynvml
    value = getattr(e, "value", None)
    for name in dir(lib) if lib is not None else []:
        if name.startswith("NVML_ERROR_") and getattr(lib, name) == value:
            return name[len("NVML_ERROR_") :]
    return type(e).__name__


@dataclass
class NvLinkState:
    link: int
    active: bool


class Device:
    """One physical GPU. Properties return None (or NaN in :meth:`as_row`) when NVML cannot say."""

    def __init__(self, index: int):
        self.index = index
        self.errors: dict[str, str] = {}
        self._handle = self._call("handle", _lib().nvmlDeviceGetHandleByIndex, index)
        if self._handle is None:
            raise NVMLUnavailable(f"NVML has no GPU with index {index}: {self.errors.get('handle')}")

    # -- the one place NVML errors are handled -------------------------------------------------
    def _call(self, field: str, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """Call an NVML function; NOT_SUPPORTED and other per-field NVML errors give None (noted in ``errors``)."""
        lib = _lib()
        if fn is None:
            self.errors[field] = "FUNCTION_NOT_FOUND"
            return None
        try:
            return fn(*args)
        except lib.NVMLError as e:  # NotSupported, NoPermission, GpuIsLost, FunctionNotFound, ...
            self.errors[field] = _err_name(e)
            return None

    def _get(self, field: str, name: str, *args: Any) -> Any:
        return self._call(field, getattr(_lib(), name, None), self._handle, *args)

    # -- identity --------------------------------------------------------------------------------
    @property
    def uuid(self) -> str | None:
        return _s(self._get("uuid", "nvmlDeviceGetUUID"))

    @property
    def name(self) -> str | None:
        return _s(self._get("name", "nvmlDeviceGetName"))

    @property
    def serial(self) -> str | None:
        return _s(self._get("serial", "nvmlDeviceGetSerial"))

    @property
    def minor_number(self) -> int | None:
        return self._get("minor_number", "nvmlDeviceGetMinorNumber")

    @property
    def pci_bus_id(self) -> str | None:
        from gpulib.core.ids import normalise_pci_bus_id

        info = self._get("pci_bus_id", "nvmlDeviceGetPciInfo")
        return normalise_pci_bus_id(_s(getattr(info, "busId", None))) if info is not None else None

    # -- memory / utilisation --------------------------------------------------------------------
    def memory(self) -> dict[str, float]:
        """Frame-buffer memory in MiB: total, used, free."""
        m = self._get("memory", "nvmlDeviceGetMemoryInfo")
        if m is None:
            return {"total": math.nan, "used": math.nan, "free": math.nan}
        return {"total": m.total / MIB, "used": m.used / MIB, "free": m.free / MIB}

    def utilization(self) -> dict[str, float]:
        u = self._get("utilization", "nvmlDeviceGetUtilizationRates")
        return {"gpu": _nan(getattr(u, "gpu", None)), "memory": _nan(getattr(u, "memory", None))}

    # -- temperature / power / clocks --------------------------------------------------------------
    def temperature(self) -> float:
        return _nan(self._get("temperature", "nvmlDeviceGetTemperature", _lib().NVML_TEMPERATURE_GPU))

    def temperature_thresholds(self) -> dict[str, float]:
        lib = _lib()
        keys = {
            "shutdown": "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",
            "slowdown": "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
            "max_operating": "NVML_TEMPERATURE_THRESHOLD_GPU_MAX",
            "memory_max": "NVML_TEMPERATURE_THRESHOLD_MEM_MAX",
        }
        return {
            k: _nan(self._get(f"temperature_{k}", "nvmlDeviceGetTemperatureThreshold", getattr(lib, c)))
            if hasattr(lib, c)
            else math.nan
            for k, c in keys.items()
        }

    def power(self) -> dict[str, float]:
        """Power draw and enforced limit in W (NVML reports mW)."""
        draw = self._get("power_draw", "nvmlDeviceGetPowerUsage")
        limit = self._get("power_limit", "nvmlDeviceGetEnforcedPowerLimit")
        return {"draw": _nan(draw) / 1000.0, "limit": _nan(limit) / 1000.0}

    def clocks(self) -> dict[str, float]:
        lib = _lib()
        return {
            "sm": _nan(self._get("sm_clock", "nvmlDeviceGetClockInfo", lib.NVML_CLOCK_SM)),
            "memory": _nan(self._get("memory_clock", "nvmlDeviceGetClockInfo", lib.NVML_CLOCK_MEM)),
            "max_sm": _nan(self._get("max_sm_clock", "nvmlDeviceGetMaxClockInfo", lib.NVML_CLOCK_SM)),
        }

    def performance_state(self) -> str | None:
        p = self._get("performance_state", "nvmlDeviceGetPerformanceState")
        return None if p is None else f"P{int(p)}"

    def clock_event_mask(self) -> int | None:
        """Active clock-event (throttle) reasons bitmask; the newer NVML name first, then the old one."""
        lib = _lib()
        fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        v = self._call("clock_event_reasons", fn, self._handle)
        return None if v is None else int(v)

    def clock_event_reasons(self) -> list[str] | None:
        mask = self.clock_event_mask()
        return None if mask is None else decode_clock_events(mask)

    # -- ECC / row remap / page retirement -----------------------------------------------------------
    def ecc_mode(self) -> str | None:
        m = self._get("ecc_mode", "nvmlDeviceGetEccMode")
        if m is None:
            return None
        return "Enabled" if int(m[0]) == 1 else "Disabled"

    def ecc_counts(self) -> dict[str, float]:
        """Corrected (SBE) and uncorrected (DBE) totals, volatile (since reset) and aggregate (lifetime)."""
        lib = _lib()
        out = {}
        for err_name, err in (
            ("sbe", lib.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ("dbe", lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        ):
            for scope_name, scope in (("volatile", lib.NVML_VOLATILE_ECC), ("aggregate", lib.NVML_AGGREGATE_ECC)):
                key = f"ecc_{err_name}_{scope_name}"
                out[key] = _nan(self._get(key, "nvmlDeviceGetTotalEccErrors", err, scope))
        return out

    def remapped_rows(self) -> dict[str, float]:
        r = self._get("remapped_rows", "nvmlDeviceGetRemappedRows")
        if r is None:
            return {k: math.nan for k in ("correctable", "uncorrectable", "pending", "failure")}
        corr, unc, pending, failure = r
        return {
            "correctable": float(corr),
            "uncorrectable": float(unc),
            "pending": float(bool(pending)),
            "failure": float(bool(failure)),
        }

    def retired_pages(self) -> dict[str, float]:
        lib = _lib()
        sbe = self._get(
            "retired_pages_sbe",
            "nvmlDeviceGetRetiredPages",
            lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        )
        dbe = self._get(
            "retired_pages_dbe", "nvmlDeviceGetRetiredPages", lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        )
        pend = self._get("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")
        return {
            "sbe": math.nan if sbe is None else float(len(sbe)),
            "dbe": math.nan if dbe is None else float(len(dbe)),
            "pending": math.nan if pend is None else float(int(pend) == getattr(lib, "NVML_FEATURE_ENABLED", 1)),
        }

    # -- MIG / NVLink / PCIe ----------------------------------------------------------------------
    def mig_mode(self) -> tuple[str | None, str | None]:
        m = self._get("mig_mode", "nvmlDeviceGetMigMode")
        if m is None:
            return None, None
        word = {1: "Enabled", 0: "Disabled"}
        return word.get(int(m[0])), word.get(int(m[1]))

    def nvlink_states(self) -> list[NvLinkState] | None:
        """State of each NVLink; stops at the first link NVML does not know. None when NVLink is unsupported."""
        lib = _lib()
        fn = getattr(lib, "nvmlDeviceGetNvLinkState", None)
        if fn is None:
            self.errors["nvlink"] = "FUNCTION_NOT_FOUND"
            return None
        states = []
        for link in range(int(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                st = fn(self._handle, link)
            except lib.NVMLError as e:
                if not states:
                    self.errors["nvlink"] = _err_name(e)
                break
            states.append(NvLinkState(link, int(st) == getattr(lib, "NVML_FEATURE_ENABLED", 1)))
        return states or None

    def pcie(self) -> dict[str, float]:
        return {
            "gen": _nan(self._get("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration")),
            "width": _nan(self._get("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth")),
            "replays": _nan(self._get("pcie_replays", "nvmlDeviceGetPcieReplayCounter")),
        }

    # -- one row ------------------------------------------------------------------------------------
    def as_row(self) -> dict[str, Any]:
        """Every field as one flat dict (column names match :func:`gpulib.nvidia.smi.parse_query` where shared)."""
        mem, util, thr, pw, clk = (
            self.memory(),
            self.utilization(),
            self.temperature_thresholds(),
            self.power(),
            self.clocks(),
        )
        ecc, rr, rp, pcie = self.ecc_counts(), self.remapped_rows(), self.retired_pages(), self.pcie()
        mig_cur, mig_pend = self.mig_mode()
        mask = self.clock_event_mask()
        links = self.nvlink_states()
        row = {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "pci_bus_id": self.pci_bus_id,
            "serial": self.serial,
            "minor_number": self.minor_number,
            "memory_total_mib": mem["total"],
            "memory_used_mib": mem["used"],
            "memory_free_mib": mem["free"],
            "utilization_gpu_pct": util["gpu"],
            "utilization_memory_pct": util["memory"],
            "temperature_gpu_c": self.temperature(),
            "temperature_shutdown_c": thr["shutdown"],
            "temperature_slowdown_c": thr["slowdown"],
            "temperature_max_operating_c": thr["max_operating"],
            "temperature_memory_max_c": thr["memory_max"],
            "power_draw_w": pw["draw"],
            "power_limit_w": pw["limit"],
            "sm_clock_mhz": clk["sm"],
            "memory_clock_mhz": clk["memory"],
            "max_sm_clock_mhz": clk["max_sm"],
            "performance_state": self.performance_state(),
            "clock_event_mask": math.nan if mask is None else float(mask),
            "clock_event_reasons": None if mask is None else decode_clock_events(mask),
            "ecc_mode_current": self.ecc_mode(),
            **ecc,
            "remapped_rows_correctable": rr["correctable"],
            "remapped_rows_uncorrectable": rr["uncorrectable"],
            "remapped_rows_pending": rr["pending"],
            "remapped_rows_failure": rr["failure"],
            "retired_pages_sbe": rp["sbe"],
            "retired_pages_dbe": rp["dbe"],
            "retired_pages_pending": rp["pending"],
            "mig_mode_current": mig_cur,
            "mig_mode_pending": mig_pend,
            "nvlink_states": None if links is None else {s.link: s.active for s in links},
            "nvlink_active": math.nan if links is None else float(sum(s.active for s in links)),
            "pcie_gen_current": pcie["gen"],
            "pcie_width_current": pcie["width"],
            "pcie_replays": pcie["replays"],
        }
        row["nvml_errors"] = dict(self.errors)
        return row


class NVML:
    """Context manager: ``with NVML() as nv: nv.devices()``. Raises :class:`NVMLUnavailable` without a driver."""

    def __enter__(self) -> "NVML":
        lib = _lib()
        try:
            lib.nvmlInit()
        except lib.NVMLError as e:
            raise NVMLUnavailable(f"nvmlInit failed: {_err_name(e)} ({e})") from e
        return self

    def __exit__(self, *exc: Any) -> None:
        lib = _lib()
        try:
            lib.nvmlShutdown()
        except lib.NVMLError:
            pass

    def device_count(self) -> int:
        lib = _lib()
        return int(lib.nvmlDeviceGetCount())

    def devices(self) -> list[Device]:
        return [Device(i) for i in range(self.device_count())]

    def versions(self) -> dict[str, str | None]:
        """Driver, NVML and CUDA driver versions (CUDA as ``12.4`` from NVML's 12040)."""
        lib = _lib()

        def safe(name: str) -> Any:
            fn = getattr(lib, name, None)
            try:
                return fn() if fn else None
            except lib.NVMLError:
                return None

        cuda = safe("nvmlSystemGetCudaDriverVersion_v2") or safe("nvmlSystemGetCudaDriverVersion")
        return {
            "driver_version": _s(safe("nvmlSystemGetDriverVersion")),
            "nvml_version": _s(safe("nvmlSystemGetNVMLVersion")),
            "cuda_version": None if cuda is None else f"{int(cuda) // 1000}.{(int(cuda) % 1000) // 10}",
        }


def probe() -> pd.DataFrame:
    """One row per GPU with :data:`PROBE_COLUMNS`; version info in ``df.attrs``."""
    with NVML() as nv:
        rows = [d.as_row() for d in nv.devices()]
        versions = nv.versions()
    df = pd.DataFrame(rows, columns=PROBE_COLUMNS)
    df.attrs.update(versions)
    return df


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item"):
        return v.item()
    return v


def probe_json() -> dict[str, Any]:
    """The probe as a JSON-ready document: ``{"versions": {...}, "gpus": [...], "clock_event_bits": {...}}``."""
    df = probe()
    return {
        "schema": 1,
        "versions": dict(df.attrs),
        "gpus": [_jsonable(r) for r in df.to_dict("records")],
        "clock_event_bits": {r.name: r.bit for r in clock_event_table().itertuples()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m gpulib.nvidia.nvml", description="Probe every NVIDIA GPU through NVML"
    )
    ap.add_argument("--json", metavar="OUT.json", help="write the probe as JSON to this file ('-' for stdout)")
    args = ap.parse_args(argv)
    try:
        doc = probe_json()
    except NVMLUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(doc, indent=2, sort_keys=True)
    if args.json and args.json != "-":
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
        print(f"wrote {len(doc['gpus'])} GPU(s) to {args.json}")
    else:
        print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
