"""Artefacts of the demo fleet that its DCGM series do not carry: ``nvidia-smi -q`` text per node,
and the packaged 2xH200 NCCL captures the NCCL runbook opens by default.

:func:`render_smi_query` writes what ``nvidia-smi -q`` would print on a demo node at a moment of the
scenario, in the layout of the project's real H200 capture (``gpulib/data/captures/2xh200_580.159.04_smi_q.txt``,
driver 580) so :func:`gpulib.nvidia.smi.parse_query` reads it like a real report. Every value comes from the
simulator at that moment: bus ids and UUIDs from its devices, ECC counters from the DCGM ECC fields
(correctable -> ``DRAM Correctable``, uncorrectable -> ``DRAM Uncorrectable``), remapped rows and
the remap failure from the row-remap fields, temperature, power, SM clock, framebuffer and
utilisation from their gauges, clock-event reasons from the thermal incident. A GPU that fell off
the bus (XID 79) has no block: nvidia-smi prints ``Unable to determine the device handle for GPU...``
for it instead (wording as reported in NVIDIA/gpu-operator and dcgm-exporter issue texts).
Fields the simulator has no value for are omitted or ``N/A``, never invented.
"""

from __future__ import annotations

import math
import zlib
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table
from gpulib.demo.captures import DEMO_NCCL_TESTS, DEMO_TOPOLOGY
from gpulib.demo.captures import DEMO_NVLINK_STATUS as DEMO_NVLINK_STATUS  # re-exported: its old home
from gpulib.demo.captures import demo_file as demo_file  # re-exported: its old home
from gpulib.demo.nccl_history import runbook_default_history

#: column of the ``:`` in nvidia-smi -q (the real capture pads every key to 55 characters)
_KEY_WIDTH = 55


def nccl_check_context() -> dict[str, Any]:
    """What the nccl_check steps read beyond their parameters (``gpulib.run.catalogue``'s context of the runbook):
    the packaged 2xH200 captures and the demo's results history, which the domain may not name."""
    return {
        "default_tests": DEMO_NCCL_TESTS,
        "default_topology": DEMO_TOPOLOGY,
        "default_history": runbook_default_history,
    }


def _kv(indent: int, key: str, value: object) -> str:
    return f"{' ' * indent}{key}".ljust(_KEY_WIDTH) + f": {value}"


def _sec(indent: int, name: str) -> str:
    return f"{' ' * indent}{name}"


def _fmt_int(v: float, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "N/A"
    return f"{int(round(v))}{(' ' + unit) if unit else ''}"


def _fmt_w(v: float) -> str:
    return "N/A" if v is None or math.isnan(v) else f"{v:.2f} W"


def _serial(uuid: str) -> str:
    """A stable 13-digit board serial derived from the UUID (the demo has no real serials)."""
    return f"{zlib.crc32(uuid.encode()) % 10**13:013d}"


def _cuda_version(driver: str) -> str:
    t = load_table("demo_driver_cuda").set_index("driver_branch")
    branch = int(str(driver).split(".")[0])
    return str(t.loc[branch, "cuda_version"]) if branch in t.index else "N/A"


def _values(sim, d, t: float) -> dict[str, float]:
    """Every simulated DCGM field of a physical GPU at time ``t`` (NaN where not reported)."""
    ts = np.array([t], dtype=float)
    out = {name: float(sim.sample(name, d, ts)[0]) for name in sim.metric_names()}
    if d.mig_enabled:  # framebuffer is reported per MIG instance: the GPU's use is their sum
        insts = [x for x in sim.devices if x.uuid == d.uuid and x.is_instance]
        out["DCGM_FI_DEV_FB_USED"] = float(sum(sim.sample("DCGM_FI_DEV_FB_USED", x, ts)[0] for x in insts))
    return out


def _remap_pending(sim, d, t: float) -> bool:
    """Rows remapped during the scenario stay pending until a GPU reset; the scenario resets nothing."""
    inc = next((x for x in d.incidents if x["type"] == "dbe_remap_failure"), None)
    return bool(inc and t >= inc["at"])


def _clock_events(sim, d, t: float, act: float) -> dict[str, bool]:
    thermal = next((x for x in d.incidents if x["type"] == "thermal"), None)
    hot = bool(thermal and t >= thermal["since"])
    return {
        "Idle": act < 0.02 and not hot,
        "Applications Clocks Setting": False,
        "SW Power Cap": False,
        "HW Slowdown": hot,
        "HW Thermal Slowdown": hot,
        "HW Power Brake Slowdown": False,
        "Sync Boost": False,
        "SW Thermal Slowdown": hot,
        "Display Clock Setting": False,
    }


def _gpu_block(sim, d, t: float, limits: pd.Series | None) -> list[str]:
    v = _values(sim, d, t)
    act = float(sim.activity(d, np.array([t]))[0])
    hbm = sim.emits("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", d) or sim.emits("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", d)
    bus = int(d.pci_bus_id.split(":")[1], 16)
    mig = "Enabled" if d.mig_enabled else "Disabled"
    lines = [
        f"GPU {d.pci_bus_id}",
        _kv(4, "Product Name", d.model_name),
        _kv(4, "Product Brand", "NVIDIA"),
        _kv(4, "Persistence Mode", "Enabled"),
        _sec(4, "MIG Mode"),
        _kv(8, "Current", mig),
        _kv(8, "Pending", mig),
        _kv(4, "Serial Number", _serial(d.uuid)),
        _kv(4, "GPU UUID", d.uuid),
        _kv(4, "Minor Number", d.index),
        _kv(4, "GPU Recovery Action", "None"),
        _sec(4, "PCI"),
        _kv(8, "Bus", f"0x{bus:02X}"),
        _kv(8, "Device", "0x00"),
        _kv(8, "Domain", "0x0000"),
        _kv(8, "Bus Id", d.pci_bus_id),
        _sec(8, "GPU Link Info"),
        _sec(12, "PCIe Generation"),
    ]
    gen = "N/A" if limits is None or pd.isna(limits["pcie_gen"]) else int(limits["pcie_gen"])
    lines += [
        _kv(16, "Max", gen),
        _kv(16, "Current", gen),
        _sec(12, "Link Width"),
        _kv(16, "Max", "16x"),
        _kv(16, "Current", "16x"),
        _kv(8, "Replays Since Reset", _fmt_int(v.get("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", math.nan))),
        _kv(4, "Fan Speed", "N/A"),
        _kv(4, "Performance State", "P0"),
    ]
    ev = _clock_events(sim, d, t, act)
    lines += [_sec(4, "Clocks Event Reasons")]
    for key in ("Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown"):
        lines.append(_kv(8, key, "Active" if ev[key] else "Not Active"))
    lines += [
        _kv(12, "HW Thermal Slowdown", "Active" if ev["HW Thermal Slowdown"] else "Not Active"),
        _kv(12, "HW Power Brake Slowdown", "Not Active"),
    ]
    for key in ("Sync Boost", "SW Thermal Slowdown", "Display Clock Setting"):
        lines.append(_kv(8, key, "Active" if ev[key] else "Not Active"))
    total = d.memory_mib
    reserved = round(total * 0.006)  # the simulator's FB_FREE model keeps this share reserved
    used = v.get("DCGM_FI_DEV_FB_USED", math.nan)
    free = total - reserved - used if not math.isnan(used) else math.nan
    lines += [
        _sec(4, "FB Memory Usage"),
        _kv(8, "Total", _fmt_int(total, "MiB")),
        _kv(8, "Reserved", _fmt_int(reserved, "MiB")),
        _kv(8, "Used", _fmt_int(used, "MiB")),
        _kv(8, "Free", _fmt_int(free, "MiB")),
        _kv(4, "Compute Mode", "Default"),
        _sec(4, "Utilization"),
        _kv(8, "GPU", "N/A" if d.mig_enabled else _fmt_int(v.get("DCGM_FI_DEV_GPU_UTIL", math.nan), "%")),
        _kv(8, "Memory", "N/A" if d.mig_enabled else _fmt_int(v.get("DCGM_FI_DEV_MEM_COPY_UTIL", math.nan), "%")),
    ]
    lines += _ecc_lines(v, hbm) + _remap_lines(sim, d, t, v, hbm)

    def lim(k: str) -> str:
        return "N/A" if limits is None or pd.isna(limits[k]) else f"{int(limits[k])} C"

    lines += [
        _sec(4, "Temperature"),
        _kv(8, "GPU Current Temp", _fmt_int(v.get("DCGM_FI_DEV_GPU_TEMP", math.nan), "C")),
        _kv(8, "GPU Shutdown Temp", lim("shutdown_temp_c")),
        _kv(8, "GPU Slowdown Temp", lim("slowdown_temp_c")),
        _kv(8, "GPU Max Operating Temp", lim("max_operating_temp_c")),
        _kv(8, "GPU Target Temperature", "N/A"),
        _kv(8, "Memory Current Temp", _fmt_int(v.get("DCGM_FI_DEV_MEMORY_TEMP", math.nan), "C")),
        _kv(8, "Memory Max Operating Temp", lim("memory_max_operating_temp_c")),
    ]
    p = v.get("DCGM_FI_DEV_POWER_USAGE", math.nan)
    lines += [
        _sec(4, "GPU Power Readings"),
        _kv(8, "Average Power Draw", _fmt_w(p)),
        _kv(8, "Instantaneous Power Draw", _fmt_w(p)),
        _kv(8, "Current Power Limit", _fmt_w(d.tdp_w)),
        _kv(8, "Requested Power Limit", _fmt_w(d.tdp_w)),
        _kv(8, "Default Power Limit", _fmt_w(d.tdp_w)),
        _kv(8, "Max Power Limit", _fmt_w(d.tdp_w)),
    ]
    sm = v.get("DCGM_FI_DEV_SM_CLOCK", math.nan)
    lines += [
        _sec(4, "Clocks"),
        _kv(8, "Graphics", _fmt_int(sm, "MHz")),
        _kv(8, "SM", _fmt_int(sm, "MHz")),
        _sec(4, "Max Clocks"),
        _kv(8, "Graphics", _fmt_int(d.max_clock, "MHz")),
        _kv(8, "SM", _fmt_int(d.max_clock, "MHz")),
    ]
    procs = "None" if d.persona == "free" and not d.mig_enabled else None  # a DRA-held GPU has no pod label
    if procs:
        lines.append(_kv(4, "Processes", procs))
    else:
        lines += _process_lines(sim, d, t)
    return lines + [""]


def _ecc_lines(v: dict[str, float], hbm: bool) -> list[str]:
    def val(name: str) -> str:
        return _fmt_int(v.get(name, math.nan)) if hbm else "N/A"

    out = [_sec(4, "ECC Mode"), _kv(8, "Current", "Enabled"), _kv(8, "Pending", "Enabled"), _sec(4, "ECC Errors")]
    for scope, sbe, dbe in (
        ("Volatile", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        ("Aggregate", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"),
    ):
        zero = "0" if hbm else "N/A"
        out += [
            _sec(8, scope),
            _kv(12, "SRAM Correctable", zero),
            _kv(12, "SRAM Uncorrectable Parity", zero),
            _kv(12, "SRAM Uncorrectable SEC-DED", zero),
            _kv(12, "DRAM Correctable", val(sbe)),
            _kv(12, "DRAM Uncorrectable", val(dbe)),
        ]
    return out


def _remap_lines(sim, d, t: float, v: dict[str, float], hbm: bool) -> list[str]:
    out = [
        _sec(4, "Retired Pages"),
        _kv(8, "Single Bit ECC", "N/A"),
        _kv(8, "Double Bit ECC", "N/A"),
        _kv(8, "Pending Page Blacklist", "N/A"),
    ]
    if not hbm:
        return out + [_kv(4, "Remapped Rows", "N/A")]
    fail = v.get("DCGM_FI_DEV_ROW_REMAP_FAILURE", math.nan)
    return out + [
        _sec(4, "Remapped Rows"),
        _kv(8, "Correctable Error", _fmt_int(v.get("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", math.nan))),
        _kv(8, "Uncorrectable Error", _fmt_int(v.get("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", math.nan))),
        _kv(8, "Pending", "Yes" if _remap_pending(sim, d, t) else "No"),
        _kv(8, "Remapping Failure Occurred", "N/A" if math.isnan(fail) else ("Yes" if fail >= 1 else "No")),
    ]


def _process_lines(sim, d, t: float) -> list[str]:
    """The Processes section: one python process per pod holding memory (GI/CI ids on MIG instances)."""
    rows = [x for x in sim.devices if x.uuid == d.uuid and x.is_instance and x.pod] if d.mig_enabled else [d]
    out = [_sec(4, "Processes")]
    if not rows:
        return [_kv(4, "Processes", "None")]
    for x in rows:
        used = float(sim.fb_used(x, np.array([t]))[0])
        if used <= 0:
            continue
        out += [
            _kv(8, "GPU instance ID", x.gi_id or "N/A"),
            _kv(8, "Compute instance ID", "0" if x.gi_id else "N/A"),
            _kv(8, "Process ID", 4000 + x.index),
            _kv(8, "Type", "C"),
            _kv(8, "Name", "python3"),
            _kv(8, "Used GPU Memory", _fmt_int(used, "MiB")),
        ]
    return out if len(out) > 1 else [_kv(4, "Processes", "None")]


def render_smi_query(sim, node: str, at: datetime | float | None = None) -> str:
    """``nvidia-smi -q`` text for every GPU of a demo node at ``at`` (default: the scenario end).

    ``sim`` is a :class:`gpulib.demo.simulator.FleetSimulator`. Raises :class:`InvalidParameter` for a node the
    scenario does not have.
    """
    names = [s["name"] for s in sim.node_specs]
    if node not in names:
        raise InvalidParameter(f"node={node!r} is not in the demo scenario; nodes: {', '.join(names)}")
    t = sim.end_s if at is None else (at.timestamp() if isinstance(at, datetime) else float(at))
    limits_t = load_table("demo_smi_limits").set_index("model")
    gpus = [d for d in sim.devices if d.node == node and not d.is_instance]
    # a GPU off the bus (XID 79) stops reporting every gauge: its temperature is NaN
    lost = [d for d in gpus if np.isnan(sim.sample("DCGM_FI_DEV_GPU_TEMP", d, np.array([t]))[0])]
    stamp = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
    lines = [f"Unable to determine the device handle for GPU{d.pci_bus_id[4:]}: Unknown Error" for d in lost]
    lines += [
        "",
        "==============NVSMI LOG==============",
        "",
        _kv(0, "Timestamp", stamp),
        _kv(0, "Driver Version", sim.driver_version),
        _kv(0, "CUDA Version", _cuda_version(sim.driver_version)),
        "",
        _kv(0, "Attached GPUs", len(gpus)),
    ]
    for d in gpus:
        if d in lost:
            continue
        limits = limits_t.loc[d.model] if d.model in limits_t.index else None
        lines += _gpu_block(sim, d, t, limits)
    return "\n".join(lines) + "\n"
