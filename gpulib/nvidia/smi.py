"""Parsers for ``nvidia-smi`` text output.

* :func:`parse_query` reads ``nvidia-smi -q`` (the whole report or ``-d ECC,PAGE_RETIREMENT,...``
  subsets, one GPU or many, old and new driver layouts, truncated captures) into one row per GPU.
* :func:`parse_table` reads the plain ``nvidia-smi`` table (GPU rows and the process list).
* :func:`gpu_id_map` joins PCI bus id, GPU index and UUID from any mix of nvidia-smi, NVML and DCGM frames.

Parsers never raise on odd text: fields a GPU does not report (``N/A``, ``[Not Supported]``, absent
sections) come back as NaN/None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.knowledge import load_table
from gpulib.core.textio import as_text, clip
from gpulib.nvidia.fabric import FABRIC_COLUMNS, fabric_columns

NA_TOKENS = {
    "",
    "n/a",
    "[n/a]",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "insufficient permissions",
    "[insufficient permissions]",
    "requested functionality has been deprecated",
    "[requested functionality has been deprecated]",
    "gpu is lost",
    "[gpu is lost]",
    "unknown",
    "none",
}

#: columns of :func:`parse_query`, in order (extra columns may follow in later versions).
#: Temperatures: ``temperature_*_tlimit_c`` are MARGINS in degrees C relative to the GPU's T.Limit, as R570+ drivers
#: print them (``GPU Slowdown T.Limit Temp : -2 C`` = HW slowdown 2 C past the T.Limit; negative = hotter than
#: the limit); ``temperature_tlimit_margin_c`` is the current distance to the T.Limit (NVML
#: nvmlDeviceGetMarginTemperature: "distance to nearest slowdown threshold"). ``temperature_shutdown_c`` /
#: ``_slowdown_c`` / ``_max_operating_c`` are absolute: printed by older drivers, derived from the margins on
#: R570+ (T.Limit = current temperature + current margin; threshold = T.Limit - its margin). The current
#: temperature and the margin are two readings taken at different instants, so a derived threshold can be one
#: degree off what NVML's nvmlDeviceGetTemperatureThreshold reports on the same GPU: it is flagged with
#: ``temperature_thresholds_tolerance_c`` = 1 (0 where printed), and :func:`with_nvml_thresholds` replaces it by
#: NVML's value where the NVML probe ran (tests/nvidia/test_smi_temperatures.py).
#: ``temperature_thresholds_from`` says which: "absolute", "T.Limit margins", "NVML" or "".
QUERY_COLUMNS = [
    "pci_bus_id",
    "index",
    "minor_number",
    "uuid",
    "name",
    "serial",
    "vbios_version",
    "driver_version",
    "cuda_version",
    "timestamp",
    "persistence_mode",
    "performance_state",
    "mig_mode_current",
    "mig_mode_pending",
    "ecc_mode_current",
    "ecc_sbe_volatile",
    "ecc_dbe_volatile",
    "ecc_sbe_aggregate",
    "ecc_dbe_aggregate",
    "retired_pages_sbe",
    "retired_pages_dbe",
    "retired_pages_pending",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "remap_banks_max",
    "remap_banks_none",
    "temperature_gpu_c",
    "temperature_memory_c",
    "temperature_shutdown_c",
    "temperature_slowdown_c",
    "temperature_max_operating_c",
    "temperature_tlimit_margin_c",
    "temperature_shutdown_tlimit_c",
    "temperature_slowdown_tlimit_c",
    "temperature_max_operating_tlimit_c",
    "temperature_memory_max_operating_tlimit_c",
    "temperature_thresholds_from",
    "temperature_thresholds_tolerance_c",
    "power_draw_w",
    "power_limit_w",
    "power_default_limit_w",
    "power_max_limit_w",
    "clock_event_mask",
    "clock_event_reasons",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "memory_clock_mhz",
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "fb_total_mib",
    "fb_used_mib",
    "fb_free_mib",
    "pcie_gen_current",
    "pcie_width_current",
    "pcie_replays",
    "reset_required",
    "drain_and_reset_recommended",
    "recovery_action",
    *FABRIC_COLUMNS,
    "truncated",
]

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^(?P<indent> *)(?P<key>[^:]*?[^:\s])\s*:\s?(?P<val>.*)$")
_NUM = re.compile(r"^[-+]?\d+(?:\.\d+)?")


# ------------------------------------------------------------------------------------- helpers
def _is_na(v: Any) -> bool:
    return v is None or str(v).strip().lower() in NA_TOKENS


def _num(v: Any) -> float:
    """``"28 C"`` -> 28.0, ``"16x"`` -> 16.0; NaN for N/A and non-numbers."""
    if _is_na(v):
        return np.nan
    m = _NUM.match(str(v).strip())
    return float(m.group(0)) if m else np.nan


def _flag(v: Any) -> float:
    """Yes/No, Enabled/Disabled, Active/Not Active -> 1.0/0.0; NaN otherwise."""
    if _is_na(v):
        return np.nan
    s = str(v).strip().lower()
    if s in ("yes", "enabled", "active", "true"):
        return 1.0
    if s in ("no", "disabled", "not active", "false"):
        return 0.0
    return np.nan


def _str(v: Any) -> str | None:
    return None if _is_na(v) else str(v).strip()


def _first(d: dict[str, str], *paths: str) -> str | None:
    for p in paths:
        if p in d and not _is_na(d[p]):
            return d[p]
    return None


def _first_num(d: dict[str, str], *paths: str) -> float:
    return _num(_first(d, *paths))


def _temperatures(d: dict[str, str]) -> dict[str, Any]:
    """Temperature fields in both layouts (see the note above :data:`QUERY_COLUMNS`)."""
    t = "Temperature/"
    out: dict[str, Any] = {
        "temperature_gpu_c": _first_num(d, t + "GPU Current Temp"),
        "temperature_memory_c": _first_num(d, t + "Memory Current Temp"),
        "temperature_tlimit_margin_c": _first_num(d, t + "GPU T.Limit Temp"),
        "temperature_shutdown_tlimit_c": _first_num(d, t + "GPU Shutdown T.Limit Temp"),
        "temperature_slowdown_tlimit_c": _first_num(d, t + "GPU Slowdown T.Limit Temp"),
        "temperature_max_operating_tlimit_c": _first_num(d, t + "GPU Max Operating T.Limit Temp"),
        "temperature_memory_max_operating_tlimit_c": _first_num(d, t + "Memory Max Operating T.Limit Temp"),
    }
    absolute = {
        "temperature_shutdown_c": _first_num(d, t + "GPU Shutdown Temp"),
        "temperature_slowdown_c": _first_num(d, t + "GPU Slowdown Temp"),
        "temperature_max_operating_c": _first_num(d, t + "GPU Max Operating Temp"),
    }
    source = "absolute" if any(not np.isnan(v) for v in absolute.values()) else ""
    tlimit = out["temperature_gpu_c"] + out["temperature_tlimit_margin_c"]  # NaN unless both were printed
    if not source and not np.isnan(tlimit):
        for col, margin in (
            ("temperature_shutdown_c", "temperature_shutdown_tlimit_c"),
            ("temperature_slowdown_c", "temperature_slowdown_tlimit_c"),
            ("temperature_max_operating_c", "temperature_max_operating_tlimit_c"),
        ):
            absolute[col] = tlimit - out[margin]
        if any(not np.isnan(v) for v in absolute.values()):
            source = "T.Limit margins"
    return {
        **out,
        **absolute,
        "temperature_thresholds_from": source,
        "temperature_thresholds_tolerance_c": _THRESHOLD_TOLERANCE_C.get(source, np.nan),
    }


#: how far an absolute threshold may be from NVML's, by where it came from: printed by the driver (0), or derived
#: from the current temperature and margin, two readings one degree apart at most (integer degrees)
_THRESHOLD_TOLERANCE_C = {"absolute": 0.0, "T.Limit margins": 1.0, "NVML": 0.0}
_NVML_THRESHOLDS = ("temperature_shutdown_c", "temperature_slowdown_c", "temperature_max_operating_c")


def with_nvml_thresholds(query: pd.DataFrame, nvml: pd.DataFrame | None) -> pd.DataFrame:
    """``query`` (:func:`parse_query`) with the absolute temperature thresholds of each GPU that ``nvml``
    (:func:`gpulib.nvidia.nvml.probe` rows, or the ``gpus`` of its JSON) has, matched by UUID: NVML's
    nvmlDeviceGetTemperatureThreshold values replace the printed or derived ones, ``temperature_thresholds_from``
    becomes "NVML" and the tolerance 0. The margins columns are left as printed; GPUs the probe did not see keep
    their own values. Raises :class:`InvalidParameter` when a frame has no ``uuid`` column."""

    out = query.copy()
    if nvml is None or len(nvml) == 0:
        return out
    for name, df in (("query", query), ("nvml", nvml)):
        if "uuid" not in df.columns:
            raise InvalidParameter(
                f"{name} frame has no uuid column; columns: {list(df.columns)}",
                hint="pass parse_query() rows and gpulib.nvidia.nvml.probe() rows",
            )
    by_uuid = {str(u): r for u, r in zip(nvml["uuid"], nvml.to_dict("records")) if isinstance(u, str) and u}
    for i, u in out["uuid"].items():
        r = by_uuid.get(str(u)) if isinstance(u, str) else None
        if r is None:
            continue
        vals = {c: _num(r.get(c)) for c in _NVML_THRESHOLDS}
        if all(np.isnan(v) for v in vals.values()):
            continue
        for c, v in vals.items():
            if not np.isnan(v):
                out.at[i, c] = v
        out.at[i, "temperature_thresholds_from"] = "NVML"
        out.at[i, "temperature_thresholds_tolerance_c"] = _THRESHOLD_TOLERANCE_C["NVML"]
    return out


def _sum_if_complete(d: dict[str, str], parts: list[str]) -> float:
    """Sum of the parts when every part was printed (N/A counts as printed); NaN if any is missing."""
    if not all(p in d for p in parts):
        return np.nan
    vals = [_num(d[p]) for p in parts]
    vals = [v for v in vals if not np.isnan(v)]
    return float(sum(vals)) if vals else np.nan


@lru_cache(maxsize=1)
def clock_event_table() -> pd.DataFrame:
    """Clock event (throttle) reason bits (NVIDIA/DCGM: dcgmlib/dcgm_fields.h @ 72fa3fea) from
    ``gpulib/data/nvidia/clock_event_reasons.csv``."""
    t = load_table("clock_event_reasons")
    t["bit"] = t["bit"].map(lambda s: int(str(s), 16))
    return t


def decode_clock_events(mask: Any) -> list[str]:
    """Names of the active clock-event reasons in an NVML/DCGM bitmask (``0x48`` -> HW_SLOWDOWN, HW_THERMAL)."""
    try:
        m = int(mask, 0) if isinstance(mask, str) else int(mask)
    except (TypeError, ValueError, OverflowError):
        return []
    return [r.name for r in clock_event_table().itertuples() if m & r.bit]


# --------------------------------------------------------------------------------- -q parser
def _lines(text: str) -> list[str]:
    if not text:
        return []
    lines = [clip(ln) for ln in text.splitlines()]  # bounded work per line (gpulib.core.textio)
    if not text.endswith(("\n", "\r")) and lines:
        lines = lines[:-1]  # the last line was cut mid-way: keep only complete lines
    return lines


def _tree(lines: list[str]) -> dict[str, str]:
    """Flatten an indented ``key : value`` block into ``{"Section/Sub/Key": value}``."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = _KV.match(line)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m:
            path = "/".join([s for _, s in stack] + [m.group("key").strip()])
            out.setdefault(path, m.group("val").strip())
        else:
            stack.append((indent, line.strip()))
    return out


def _split(text: str) -> tuple[dict[str, str], list[tuple[str, list[str]]], bool]:
    lines = _lines(text)
    truncated = bool(text) and not text.endswith(("\n", "\r"))
    header: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _GPU_HEADER.match(line.strip()) if not line.startswith(" ") else None
        if m:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            header.append(line)
    return _tree(header), blocks, truncated


def _ecc(d: dict[str, str], scope: str) -> tuple[float, float]:
    base = f"ECC Errors/{scope}"
    sbe = _sum_if_complete(d, [f"{base}/SRAM Correctable", f"{base}/DRAM Correctable"])
    if f"{base}/SRAM Uncorrectable" in d:
        dbe = _sum_if_complete(d, [f"{base}/SRAM Uncorrectable", f"{base}/DRAM Uncorrectable"])
    else:
        dbe = _sum_if_complete(
            d, [f"{base}/SRAM Uncorrectable Parity", f"{base}/SRAM Uncorrectable SEC-DED", f"{base}/DRAM Uncorrectable"]
        )
    if np.isnan(sbe):
        sbe = _first_num(d, f"{base}/Single Bit/Total")
    if np.isnan(dbe):
        dbe = _first_num(d, f"{base}/Double Bit/Total")
    return sbe, dbe


def _clock_events(d: dict[str, str]) -> tuple[float, list[str] | None]:
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Reasons"):
        keys = {k.rsplit("/", 1)[-1]: v for k, v in d.items() if k.startswith(section + "/")}
        if not keys:
            continue
        mask, names, seen = 0, [], False
        for r in clock_event_table().itertuples():
            state = _flag(keys.get(r.smi_label))
            if not np.isnan(state):
                seen = True
            if state == 1.0:
                mask |= r.bit
                names.append(r.name)
        return (float(mask) if seen else np.nan), (names if seen else None)
    return np.nan, None


def _gpu_row(pci: str, d: dict[str, str]) -> dict[str, Any]:
    sbe_v, dbe_v = _ecc(d, "Volatile")
    sbe_a, dbe_a = _ecc(d, "Aggregate")
    mask, reasons = _clock_events(d)
    pr = "GPU Power Readings"
    return {
        "pci_bus_id": normalise_pci_bus_id(pci) or normalise_pci_bus_id(d.get("PCI/Bus Id")),
        "minor_number": _first_num(d, "Minor Number"),
        "uuid": _str(d.get("GPU UUID")),
        "name": _str(d.get("Product Name")),
        "serial": _str(d.get("Serial Number")),
        "vbios_version": _str(d.get("VBIOS Version")),
        "persistence_mode": _str(d.get("Persistence Mode")),
        "performance_state": _str(d.get("Performance State")),
        "mig_mode_current": _str(d.get("MIG Mode/Current")),
        "mig_mode_pending": _str(d.get("MIG Mode/Pending")),
        "ecc_mode_current": _str(_first(d, "ECC Mode/Current", "Ecc Mode/Current")),
        "ecc_sbe_volatile": sbe_v,
        "ecc_dbe_volatile": dbe_v,
        "ecc_sbe_aggregate": sbe_a,
        "ecc_dbe_aggregate": dbe_a,
        "retired_pages_sbe": _first_num(d, "Retired Pages/Single Bit ECC"),
        "retired_pages_dbe": _first_num(d, "Retired Pages/Double Bit ECC"),
        "retired_pages_pending": _flag(
            _first(
                d,
                "Retired Pages/Pending Page Blacklist",
                "Retired Pages/Pending Page Retirement",
                "Retired Pages/Pending",
            )
        ),
        "remapped_rows_correctable": _first_num(d, "Remapped Rows/Correctable Error"),
        "remapped_rows_uncorrectable": _first_num(d, "Remapped Rows/Uncorrectable Error"),
        "remapped_rows_pending": _flag(d.get("Remapped Rows/Pending")),
        "remapped_rows_failure": _flag(d.get("Remapped Rows/Remapping Failure Occurred")),
        "remap_banks_max": _first_num(d, "Remapped Rows/Bank Remap Availability Histogram/Max"),
        "remap_banks_none": _first_num(d, "Remapped Rows/Bank Remap Availability Histogram/None"),
        "temperature_gpu_c": _first_num(d, "Temperature/GPU Current Temp"),
        "temperature_memory_c": _first_num(d, "Temperature/Memory Current Temp"),
        **_temperatures(d),
        "power_draw_w": _first_num(
            d,
            f"{pr}/Power Draw",
            f"{pr}/Instantaneous Power Draw",
            f"{pr}/Average Power Draw",
            "Power Readings/Power Draw",
        ),
        "power_limit_w": _first_num(
            d,
            f"{pr}/Current Power Limit",
            f"{pr}/Enforced Power Limit",
            "Power Readings/Enforced Power Limit",
            "Power Readings/Power Limit",
        ),
        "power_default_limit_w": _first_num(d, f"{pr}/Default Power Limit", "Power Readings/Default Power Limit"),
        "power_max_limit_w": _first_num(d, f"{pr}/Max Power Limit", "Power Readings/Max Power Limit"),
        "clock_event_mask": mask,
        "clock_event_reasons": reasons,
        "sm_clock_mhz": _first_num(d, "Clocks/SM"),
        "max_sm_clock_mhz": _first_num(d, "Max Clocks/SM"),
        "memory_clock_mhz": _first_num(d, "Clocks/Memory"),
        "utilization_gpu_pct": _first_num(d, "Utilization/Gpu"),
        "utilization_memory_pct": _first_num(d, "Utilization/Memory"),
        "fb_total_mib": _first_num(d, "FB Memory Usage/Total"),
        "fb_used_mib": _first_num(d, "FB Memory Usage/Used"),
        "fb_free_mib": _first_num(d, "FB Memory Usage/Free"),
        "pcie_gen_current": _first_num(d, "PCI/GPU Link Info/PCIe Generation/Current"),
        "pcie_width_current": _first_num(d, "PCI/GPU Link Info/Link Width/Current"),
        "pcie_replays": _first_num(d, "PCI/Replays Since Reset"),
        "reset_required": _flag(d.get("GPU Reset Status/Reset Required")),
        "drain_and_reset_recommended": _flag(d.get("GPU Reset Status/Drain and Reset Recommended")),
        "recovery_action": _str(d.get("GPU Recovery Action")),
        **fabric_columns(d),  # State, Status, CliqueId, ClusterUUID, Health (gpulib.nvidia.fabric)
    }


def parse_query(text: str | bytes | None) -> pd.DataFrame:
    """One row per GPU from ``nvidia-smi -q`` text (columns :data:`QUERY_COLUMNS`).

    ECC totals: ``ecc_sbe_*`` = correctable (SRAM + DRAM on Ampere+ layouts, ``Single Bit/Total`` on
    older ones), ``ecc_dbe_*`` = uncorrectable; a total is NaN unless every part was printed.
    ``index`` is the GPU's position when the report lists all attached GPUs (NaN after ``-i N``).
    A capture that ends mid-line loses that last line; its GPU row carries ``truncated=True``.
    """
    text = as_text(text)
    try:
        header, blocks, truncated = _split(text)
    except (ValueError, TypeError):  # defensive: the tree walk only slices strings
        return pd.DataFrame(columns=QUERY_COLUMNS)
    attached = _num(header.get("Attached GPUs"))
    rows = []
    for pos, (pci, lines) in enumerate(blocks):
        row = _gpu_row(pci, _tree(lines))
        row.update(
            {
                "index": float(pos) if attached == len(blocks) else np.nan,
                "driver_version": _str(header.get("Driver Version")),
                "cuda_version": _str(header.get("CUDA Version")),
                "timestamp": _str(header.get("Timestamp")),
                "truncated": truncated and pos == len(blocks) - 1,
            }
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=QUERY_COLUMNS)


# ----------------------------------------------------------------------------- table parser
@dataclass
class SmiTable:
    """The plain ``nvidia-smi`` table: one row per GPU and one per process."""

    gpus: pd.DataFrame
    processes: pd.DataFrame
    driver_version: str | None = None
    cuda_version: str | None = None
    notes: list[str] = field(default_factory=list)


TABLE_GPU_COLUMNS = [
    "index",
    "name",
    "persistence_mode",
    "pci_bus_id",
    "display_active",
    "ecc_uncorrected_volatile",
    "fan_pct",
    "temperature_gpu_c",
    "performance_state",
    "power_draw_w",
    "power_limit_w",
    "memory_used_mib",
    "memory_total_mib",
    "utilization_gpu_pct",
    "compute_mode",
    "mig_mode",
]
TABLE_PROCESS_COLUMNS = ["gpu", "gi_id", "ci_id", "pid", "type", "process", "memory_mib"]

_T_VERS = re.compile(r"Driver Version:\s*(?P<drv>[\d.]+)(?:.*?CUDA Version:\s*(?P<cuda>[\d.]+|N/A))?")
_T_GPU1 = re.compile(
    r"^\|\s+(?P<idx>\d+)\s+(?P<name>.+?)\s+(?P<pm>On|Off|N/A)\s*\|\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>On|Off|N/A)\s*\|\s*(?P<ecc>\S+)\s*\|\s*$"
)
_T_GPU2 = re.compile(
    r"^\|\s*(?P<fan>\d+%|N/A|ERR!)\s+(?P<temp>\d+C|N/A|ERR!)\s+(?P<perf>P\d+|N/A|ERR!)\s+"
    r"(?P<pwr>\d+W|N/A|ERR!)?\s*/?\s*(?P<cap>\d+W|N/A|ERR!)?\s*\|\s*(?P<used>\d+)MiB\s*/\s*"
    r"(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+%|N/A|ERR!)\s+(?P<cm>.+?)\s*\|\s*$"
)
_T_GPU3 = re.compile(r"^\|\s+\|\s+\|\s+(?P<mig>\S+)\s*\|\s*$")
_T_PROC = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:(?P<gi>\d+|N/A)\s+(?P<ci>\d+|N/A)\s+)?(?P<pid>\d+)\s+"
    r"(?P<type>C\+G|M\+C|C|G|M)\s+(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*\|\s*$"
)


def parse_table(text: str | bytes | None) -> SmiTable:
    """Parse the plain ``nvidia-smi`` table (driver 390 through 565 layouts) into GPU and process frames."""
    text = as_text(text)
    gpus: list[dict[str, Any]] = []
    procs: list[dict[str, Any]] = []
    drv = cuda = None
    in_procs = False
    last_kind = ""
    for line in _lines(text) if isinstance(text, str) else []:
        s = line.rstrip()
        if drv is None and (m := _T_VERS.search(s)):
            drv, cuda = m.group("drv"), (m.group("cuda") if m.group("cuda") not in (None, "N/A") else None)
        if "Processes:" in s:
            in_procs = True
        if in_procs and (m := _T_PROC.match(s)):
            procs.append(
                {
                    "gpu": int(m.group("gpu")),
                    "gi_id": _num(m.group("gi")),
                    "ci_id": _num(m.group("ci")),
                    "pid": int(m.group("pid")),
                    "type": m.group("type"),
                    "process": m.group("name").strip(),
                    "memory_mib": _num(m.group("mem")),
                }
            )
            continue
        if in_procs:
            continue
        if m := _T_GPU1.match(s):
            gpus.append(
                {
                    "index": int(m.group("idx")),
                    "name": m.group("name").strip(),
                    "persistence_mode": m.group("pm"),
                    "pci_bus_id": normalise_pci_bus_id(m.group("bus")),
                    "display_active": m.group("disp"),
                    "ecc_uncorrected_volatile": _num(m.group("ecc")),
                }
            )
            last_kind = "gpu1"
        elif gpus and last_kind == "gpu1" and (m := _T_GPU2.match(s)):
            gpus[-1].update(
                {
                    "fan_pct": _num(m.group("fan")),
                    "temperature_gpu_c": _num(m.group("temp")),
                    "performance_state": _str(m.group("perf")),
                    "power_draw_w": _num(m.group("pwr")),
                    "power_limit_w": _num(m.group("cap")),
                    "memory_used_mib": _num(m.group("used")),
                    "memory_total_mib": _num(m.group("total")),
                    "utilization_gpu_pct": _num(m.group("util")),
                    "compute_mode": m.group("cm").strip(),
                }
            )
            last_kind = "gpu2"
        elif gpus and last_kind == "gpu2" and (m := _T_GPU3.match(s)):
            gpus[-1]["mig_mode"] = _str(m.group("mig"))
            last_kind = ""
        else:
            last_kind = ""
    return SmiTable(
        gpus=pd.DataFrame(gpus, columns=TABLE_GPU_COLUMNS),
        processes=pd.DataFrame(procs, columns=TABLE_PROCESS_COLUMNS),
        driver_version=drv,
        cuda_version=cuda,
    )
