"""Expected large-message busbw bands and the verdict on a run.

Bands come from ``gpulib/data/nccl/nccl_expected_busbw.csv`` and the link peaks from
``gpulib/data/nccl/nccl_link_bandwidth.csv`` (each row cites its source); tolerances from
``gpulib/data/nccl/nccl_thresholds.csv``. Units: GB/s with GB = 1e9 bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table
from gpulib.nccl.findings import _fmt_bytes, _verdict_finding
from gpulib.nccl.results import COLLECTIVES, NcclTestResult, _bus_factors, _canonical_collective, _thr, check_busbw
from gpulib.nvidia.topology import Topology

# --------------------------------------------------------------------------------------------
# expected bandwidth
# --------------------------------------------------------------------------------------------

#: families in matching order (GH200 before H200, GB200 before B200)
_FAMILIES = ["GH200", "GB200", "H200", "H100", "H800", "A100", "A800", "B200", "B100", "V100"]


def gpu_family(model: str | None) -> str | None:
    """``"NVIDIA H200"`` -> ``"H200"``; None when unknown."""
    if not model:
        return None
    up = str(model).upper()
    return next((f for f in _FAMILIES if f in up), None)


@dataclass
class Band:
    """Expected large-message busbw band (GB/s) and where it comes from."""

    collective: str
    low: float
    high: float
    basis: str
    source: str
    inferred: bool
    link_peak: float | None = None
    unit: str = "GB/s"

    def __str__(self) -> str:
        return f"{self.collective} {self.low:.0f}-{self.high:.0f} {self.unit} ({self.basis})"


def _nvlink_gen(family: str | None, nvlinks: int | None) -> str | None:
    links = load_table("nccl_link_bandwidth")
    if family:
        for _, r in links[links["kind"] == "nvlink"].iterrows():
            if family in str(r["gpu_models"]).split("|"):
                return str(r["link"])
    if nvlinks:  # NV12 -> NVLink3; NV18 is NVLink4 unless the model says NVLink5
        return {12: "NVLink3", 18: "NVLink4"}.get(nvlinks)
    return None


def expected_busbw(
    collective: str = "all_reduce",
    *,
    topology: Topology | None = None,
    gpu_model: str | None = None,
    interconnect: str | None = None,
    gpus_per_node: int | None = None,
    nodes: int = 1,
    nic_gbit: float | None = None,
    nics_per_node: int | None = None,
    nvls: bool = False,
    pcie_gen: int | None = None,
) -> Band | None:
    """Expected busbw band for ``collective`` at large message sizes.

    Inputs: a parsed :class:`Topology` and/or ``gpu_model`` (``"NVIDIA H200"``), ``interconnect``
    (``NVLink3/4/5``, ``NVLink-bridge``, ``PCIe``), GPUs per node, nodes, NIC line rate (Gbit/s) and
    NICs per node, NVLS on/off. A published figure (``nccl_expected_busbw.csv``) wins; otherwise the
    band is derived: NVLink per-GPU bandwidth x ring efficiency, PCIe spec x efficiency, and for
    several nodes the NIC sum (``nccl_thresholds.csv``); derived bands have ``inferred=True``.
    None when there is no basis (e.g. alltoall, unknown GPU).
    """
    coll = _canonical_collective(collective)
    if coll not in _bus_factors().index:
        raise InvalidParameter(f"collective={collective!r} is unknown", hint=f"use one of {', '.join(COLLECTIVES)}")
    if nodes < 1:
        raise InvalidParameter(f"nodes={nodes!r} must be >= 1")
    family = gpu_family(gpu_model)
    nvlinks = topology.min_nvlinks if topology is not None else None
    if gpus_per_node is None and topology is not None:
        gpus_per_node = len(topology.gpus) or None
    if interconnect is None and topology is not None:
        ic = topology.interconnect
        interconnect = _nvlink_gen(family, nvlinks) if ic == "NVLink" else ("PCIe" if ic in ("PCIe", "mixed") else None)
    if interconnect is None and family:
        interconnect = _nvlink_gen(family, None)
    if interconnect and interconnect.lower() == "nvlink":
        interconnect = _nvlink_gen(family, nvlinks)
    if not interconnect:
        return None
    use_nvls = bool(nvls) and coll == "all_reduce" and (gpus_per_node or 0) > 4
    pub = load_table("nccl_expected_busbw")
    q = pub[
        (pub["collective"] == coll)
        & (pub["interconnect"] == interconnect)
        & (pub["nodes"] == nodes)
        & (pub["nvls"] == ("yes" if use_nvls else "no"))
    ]
    if family:
        q = q[q["gpu_family"] == family]
    if gpus_per_node:
        q = q[q["gpus_per_node"] == gpus_per_node]
    if nodes > 1 and nic_gbit:
        q = q[(q["nic_gbit"] == nic_gbit) & ((q["nics_per_node"] == nics_per_node) | q["nics_per_node"].isna())]
    if family and gpus_per_node and len(q):
        r = q.iloc[0]
        return Band(
            coll,
            float(r["low_gbs"]),
            float(r["high_gbs"]),
            f"published: {r['note']}",
            str(r["source"]),
            r["inferred"] == "yes",
            link_peak=_link_peak(interconnect, nvlinks),
        )
    if use_nvls:
        return None  # NVLS bands exist only as published 8-GPU figures
    if coll not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        return None
    intra = _intra_band(interconnect, nvlinks, pcie_gen, family)
    if intra is None:
        return None
    low, high, peak, basis, source = intra
    if nodes > 1:
        if not nic_gbit or not nics_per_node:
            return None
        per_nic = nic_gbit / 8.0
        nlow = nics_per_node * per_nic * _thr("nic_efficiency_low") * _thr("multinode_nic_sum_low")
        nhigh = nics_per_node * per_nic * _thr("nic_efficiency_high") * _thr("multinode_nic_sum_high")
        if nlow < low or nhigh < high:
            basis += f"; capped by {nics_per_node} x {nic_gbit:g} Gb/s NICs per node x NIC efficiency"
            source += (
                "; nccl_thresholds.csv nic_efficiency_* and multinode_nic_sum_* (NVIDIA/nccl-tests#290, "
                "NVIDIA/nccl#412)"
            )
        low, high = min(low, nlow), min(high, nhigh)
    return Band(coll, round(low, 1), round(high, 1), f"derived: {basis}", source, True, link_peak=peak)


def _link_peak(interconnect: str, nvlinks: int | None) -> float | None:
    links = load_table("nccl_link_bandwidth").set_index("link")
    if interconnect in links.index:
        r = links.loc[interconnect]
        if r["kind"] == "nvlink" and nvlinks:
            return float(r["per_link_gbps_uni"]) * nvlinks
        return float(r["gbps_uni_per_gpu"])
    return None


def _ring_efficiency(link: pd.Series) -> tuple[float, float, str]:
    """Ring busbw as a fraction of the link's per-GPU bandwidth: the link generation's own published range
    (``ring_efficiency_*`` of ``nccl_link_bandwidth.csv``), else the generic ``nvlink_ring_efficiency_*`` thresholds."""
    lo, hi = (
        pd.to_numeric(link.get("ring_efficiency_low"), errors="coerce"),
        pd.to_numeric(link.get("ring_efficiency_high"), errors="coerce"),
    )
    if pd.notna(lo) and pd.notna(hi):
        return float(lo), float(hi), str(link.get("ring_efficiency_source"))
    return (
        _thr("nvlink_ring_efficiency_low"),
        _thr("nvlink_ring_efficiency_high"),
        "nccl_thresholds.csv nvlink_ring_efficiency_* (no published ring figure for this link generation)",
    )


def _intra_band(interconnect: str, nvlinks: int | None, pcie_gen: int | None, family: str | None):
    links = load_table("nccl_link_bandwidth").set_index("link")
    if interconnect.startswith("NVLink") and interconnect in links.index:
        peak = _link_peak(interconnect, nvlinks)
        lo, hi, eff_source = _ring_efficiency(links.loc[interconnect])
        what = f"{interconnect} {peak:g} GB/s per GPU" + (f" (NV{nvlinks})" if nvlinks else "")
        return (
            peak * lo,
            peak * hi,
            peak,
            f"{what} x ring efficiency {lo:g}-{hi:g}",
            f"{links.loc[interconnect, 'source']}; ring efficiency: {eff_source}",
        )
    if interconnect.upper().startswith("PCIE"):
        gen = pcie_gen or (5 if family in ("H100", "H200", "H800", "B200", "B100") else 4)
        key = f"PCIe{gen}"
        if key not in links.index:
            return None
        peak = float(links.loc[key, "gbps_uni_per_gpu"])
        lo, hi = _thr("pcie_efficiency_low"), _thr("pcie_efficiency_high")
        return (
            peak * lo,
            peak * hi,
            peak,
            f"{key} x16 {peak:g} GB/s x efficiency {lo:g}-{hi:g}",
            str(links.loc[key, "source"]),
        )
    return None


@dataclass
class Verdict:
    """healthy / degraded / broken / unknown, with the reasons and a Finding for the runbook."""

    status: str
    collective: str | None
    measured_busbw: float | None
    size_bytes: int | None
    band: Band | None
    reasons: list[str]
    finding: Finding

    def __str__(self) -> str:
        m = "n/a" if self.measured_busbw is None else f"{self.measured_busbw:g} GB/s"
        return f"{self.status}: {self.collective} busbw {m} vs {self.band or 'no expected band'}"


def verdict(result: NcclTestResult, band: Band | None = None, *, node: str | None = None, **model: Any) -> Verdict:
    """Judge a measured run against the expected band.

    ``band`` defaults to :func:`expected_busbw` for the result's collective with ``model`` keywords
    (``topology=``, ``gpu_model=``, ``nodes=`` ...; ``gpus_per_node`` defaults to the rank count of a
    single-node run). Broken: a crash, a cut table without rows, wrong results (#wrong > 0) or out
    of bounds values. Degraded: best large-message busbw below the band (minus ``band_tolerance``).
    Healthy otherwise. Unknown: no band, or a single rank (busbw is 0 by definition).
    """
    reasons: list[str] = []
    coll = result.collective
    n = result.nranks
    if band is None and coll:
        kw = dict(model)
        hosts = result.ranks["host"].nunique() if len(result.ranks) else 1
        if "nodes" not in kw and hosts > 1:
            kw["nodes"] = int(hosts)
        if "gpus_per_node" not in kw and n and "topology" not in kw:
            kw["gpus_per_node"] = n // kw.get("nodes", 1)
        if "gpu_model" not in kw and len(result.ranks):
            kw["gpu_model"] = str(result.ranks["model"].iloc[0])
        try:
            band = expected_busbw(coll, **kw)
        except InvalidParameter as exc:
            reasons.append(str(exc))
    measured, size = _best_busbw(result)
    wrong = 0.0
    if not result.table.empty:
        wrong = float(result.table[["oop_wrong", "ip_wrong"]].fillna(0).clip(lower=0).to_numpy().sum())
    status = "unknown"
    if result.errors:
        status = "broken"
        reasons.append(f"the run crashed: {result.errors[0][:200]}")
    if wrong > 0:
        status = "broken"
        reasons.append(f"{wrong:g} wrong element(s) reported: data corruption (check Xid/ECC, run dcgmi diag -r 3)")
    if result.header.get("validation") == 0 and not result.table.empty:
        reasons.append(
            "results not validated (-c 0): the wrong-element check was not done, so data corruption "
            "cannot be ruled out; rerun with -c 1 to check"
        )
    if result.out_of_bounds:
        status = "broken"
        reasons.append(f"{result.out_of_bounds} out-of-bounds value(s)")
    if result.table.empty and status != "broken":
        status = "broken" if not result.complete else "unknown"
        reasons.append("no result rows: the table is missing or was cut before the first size")
    elif not result.complete and not result.errors:
        reasons.append("table incomplete (no 'Avg bus bandwidth' trailer): the run was cut or is still running")
    if n == 1:
        reasons.append(
            "single rank: busbw is 0 by definition, and NCCL only copies the send buffer into the receive "
            "buffer on one rank (out-of-place algbw is a device copy rate, in-place calls are no-ops); "
            "run on 2 or more GPUs"
        )
        band = None
    if status != "broken" and measured is not None and n != 1:
        if size is not None and size < _thr("verdict_min_bytes"):
            reasons.append(
                f"largest size is {_fmt_bytes(size)}; published bands are for >= "
                f"{_fmt_bytes(int(_thr('verdict_min_bytes')))} messages"
            )
        if band is None:
            reasons.append("no expected band for this setup; pass gpu_model=/topology=/interconnect=")
        else:
            floor = band.low * (1 - _thr("band_tolerance"))
            ratio = measured / band.low if band.low else math.nan
            if measured >= floor:
                status = "healthy"
                reasons.append(
                    f"busbw {measured:g} GB/s at {_fmt_bytes(size)} meets the expected {band.low:g}-{band.high:g} GB/s "
                    f"(within {_thr('band_tolerance'):.0%} tolerance)"
                )
                if measured > band.high * _thr("above_band_note"):
                    reasons.append("above the band: NVLS (NVLink SHARP) or a hierarchical algorithm is likely in use")
            else:
                status = "degraded"
                reasons.append(
                    f"busbw {measured:g} GB/s at {_fmt_bytes(size)} is {ratio:.0%} of the expected low end "
                    f"{band.low:g} GB/s"
                )
                reasons.extend(_degraded_hints(measured, band))
    cons = check_busbw(result)
    if len(cons) and not cons["ok"].all():
        bad = cons[~cons["ok"]]
        reasons.append(
            f"{len(bad)} row(s) where busbw/algbw disagree with the {coll} factor for {n} ranks "
            f"(first: {_fmt_bytes(int(bad['size_bytes'].iloc[0]))} {bad['problem'].iloc[0]}): "
            "wrong rank count or an edited table"
        )
    f = _verdict_finding(status, coll, measured, size, band, reasons, node)
    return Verdict(status, coll, measured, size, band, reasons, f)


def _best_busbw(result: NcclTestResult) -> tuple[float | None, int | None]:
    t = result.table
    if t.empty:
        return None, None
    best = t[["oop_busbw", "ip_busbw"]].max(axis=1)
    big = t["size_bytes"] >= _thr("verdict_min_bytes")
    if big.any():
        i = best[big].idxmax()
    else:
        i = t["size_bytes"].idxmax()
    v = best.loc[i]
    return (None if pd.isna(v) else float(v)), int(t.loc[i, "size_bytes"])


def _degraded_hints(measured: float, band: Band) -> list[str]:
    hints = []
    pcie = float(load_table("nccl_link_bandwidth").set_index("link").loc["PCIe5", "gbps_uni_per_gpu"])
    if band.link_peak and band.link_peak > pcie and measured < pcie:
        hints.append(
            "busbw is at PCIe/host-memory level although the GPUs have NVLink: NVLink P2P is probably not "
            "used (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL, links down) - check `nvidia-smi nvlink -s` and "
            "`nvidia-smi nvlink -e`, `nvidia-smi topo -m`, and 'via P2P' vs 'via SHM' in an NCCL_DEBUG=INFO log"
        )
    hints.append(
        "check NCCL_* variables (NCCL_P2P_DISABLE, NCCL_ALGO/NCCL_PROTO left from debugging), "
        "NVLink errors (`nvidia-smi nvlink -e`), the topology (`nvidia-smi topo -m`), other processes on "
        "the GPUs and clock throttling (`nvidia-smi -q -d PERFORMANCE`)"
    )
    return hints
