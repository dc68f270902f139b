"""``nvidia-smi topo -m`` as data: the device x device link-code matrix, CPU/NUMA affinity and the NIC legend.

Link codes (X, NV#, PIX, PXB, PHB, NODE, SYS) are those of the legend nvidia-smi prints under the matrix; NCCL's
own path names add NVB and C2C (``NVIDIA/nccl: src/graph/topo.cc`` @ 5067397c).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.text import _lines

# --------------------------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------------------------

_LINK_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|C2C|P2C|N/A)$")
_AFFINITY_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class Topology:
    """``nvidia-smi topo -m`` as data.

    ``links``: device x device DataFrame of link codes (X, NV#, PIX, PXB, PHB, NODE, SYS).
    ``affinity``: one row per GPU with cpu_affinity, numa_affinity, gpu_numa_id (strings, "N/A" kept).
    ``nics``: one row per NIC column with its legend name (``NIC0`` -> ``mlx5_0``).
    """

    gpus: list[str]
    nics: pd.DataFrame
    links: pd.DataFrame
    affinity: pd.DataFrame
    warnings: list[str] = field(default_factory=list)  # what a damaged paste lost or how it was repaired (topo_repair)

    @property
    def gpu_links(self) -> pd.DataFrame:
        return self.links.loc[self.gpus, self.gpus] if self.gpus else self.links.iloc[0:0, 0:0]

    def link(self, a: str | int, b: str | int) -> str:
        a, b = (f"GPU{x}" if isinstance(x, int) else x for x in (a, b))
        if a not in self.links.index or b not in self.links.columns:
            raise InvalidParameter(
                f"device {a!r} or {b!r} is not in the topology", hint=f"devices: {', '.join(self.links.index)}"
            )
        return str(self.links.loc[a, b])

    def nvlink_count(self, a: str | int, b: str | int) -> int:
        """Number of bonded NVLinks between two devices (0 when not NV#)."""
        m = re.fullmatch(r"NV(\d+)", self.link(a, b))
        return int(m.group(1)) if m else 0

    @property
    def gpu_pair_codes(self) -> list[str]:
        g = self.gpus
        return [str(self.links.loc[g[i], g[j]]) for i in range(len(g)) for j in range(len(g)) if i != j]

    @property
    def interconnect(self) -> str:
        """``"NVLink"`` when every GPU pair is NV#, ``"PCIe"`` when none is, ``"mixed"``, ``"single"``."""
        codes = self.gpu_pair_codes
        if not codes:
            return "single"
        nv = [c.startswith("NV") and c != "NVB" for c in codes]
        return "NVLink" if all(nv) else ("PCIe" if not any(nv) else "mixed")

    @property
    def min_nvlinks(self) -> int:
        counts = [int(c[2:]) for c in self.gpu_pair_codes if re.fullmatch(r"NV\d+", c)]
        return min(counts) if counts else 0

    def nearest_nics(self, gpu: str | int) -> list[str]:
        """NICs with the closest link code to ``gpu`` (legend names when known)."""
        g = f"GPU{gpu}" if isinstance(gpu, int) else gpu
        order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
        cand = [(order.index(self.link(g, n)), n) for n in self.nics["nic"] if self.link(g, n) in order]
        if not cand:
            return []
        best = min(c[0] for c in cand)
        names = dict(zip(self.nics["nic"], self.nics["name"]))
        return [names.get(n) or n for k, n in cand if k == best]


def _join_labels(toks: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(toks):
        if toks[i : i + 3] == ["GPU", "NUMA", "ID"]:
            out.append("GPU NUMA ID")
            i += 3
        elif toks[i : i + 2] in (["CPU", "Affinity"], ["NUMA", "Affinity"]):
            out.append(" ".join(toks[i : i + 2]))
            i += 2
        else:
            out.append(toks[i])
            i += 1
    return out


def parse_topology(text: str | bytes) -> Topology:
    """Parse ``nvidia-smi topo -m`` (tabs or spaces, ANSI underline codes, ``NIC Legend``, the
    ``CPU Affinity``/``NUMA Affinity``/``GPU NUMA ID`` columns, old ``mlx5_0`` NIC columns).
    Never raises on text: without a matrix, ``gpus`` is empty. Damaged pastes (NIC rows cut, wrapped
    rows, cut columns) are repaired or refused first, with ``warnings`` (:mod:`gpulib.nvidia.topo_repair`)."""
    from gpulib.nvidia.topo_repair import repair_topology_lines

    lines, warnings = repair_topology_lines(_lines(text))
    devices: list[str] = []
    extra: list[str] = []
    matrix: dict[str, list[str]] = {}
    aff_rows = []
    legend: dict[str, str] = {}
    for line in lines:
        toks = line.split()
        if not toks:
            continue
        if not devices and re.fullmatch(r"GPU\d+", toks[0]) and (len(toks) == 1 or not _LINK_CODE.match(toks[1])):
            labels = _join_labels(toks)
            devices = [t for t in labels if t not in _AFFINITY_LABELS]
            extra = [t for t in labels if t in _AFFINITY_LABELS]
            continue
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if m:
            legend[m.group(1)] = m.group(2)
            continue
        if devices and toks[0] in devices and toks[0] not in matrix:
            codes = toks[1 : 1 + len(devices)]
            if len(codes) < len(devices) or not all(_LINK_CODE.match(c) for c in codes):
                continue
            matrix[toks[0]] = codes
            rest = toks[1 + len(devices) :]
            if toks[0].startswith("GPU"):
                row = {"gpu": toks[0], "cpu_affinity": None, "numa_affinity": None, "gpu_numa_id": None}
                keys = dict(zip(_AFFINITY_LABELS, ("cpu_affinity", "numa_affinity", "gpu_numa_id")))
                for label, tok in zip(extra, rest):
                    row[keys[label]] = tok
                aff_rows.append(row)
    names = [d for d in devices if d in matrix]
    links = pd.DataFrame([[matrix[r][devices.index(c)] for c in names] for r in names], index=names, columns=names)
    gpus = [d for d in names if re.fullmatch(r"GPU\d+", d)]
    nic_cols = [d for d in names if d not in gpus]
    nics = pd.DataFrame({"nic": nic_cols, "name": [legend.get(n, n) for n in nic_cols]}, dtype="object")
    affinity = pd.DataFrame(aff_rows, columns=["gpu", "cpu_affinity", "numa_affinity", "gpu_numa_id"])
    return Topology(gpus=gpus, nics=nics, links=links, affinity=affinity, warnings=warnings)
