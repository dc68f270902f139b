"""``nvidia-smi nvlink -s`` -> one row per GPU link: ``gpu`` (index as str), ``link`` (int), ``up`` (bool),
``gb_s`` (the link's speed, NaN when it is down).

Layout: ``GPU 0: NVIDIA H200 (UUID: GPU-...)`` then ``\\t Link 0: 26.562 GB/s`` per link
(gpulib/data/captures/2xh200_smi_nvlink_s.txt); a link that is down prints ``Link 3: <inactive>``
(https://github.com/Azure/azhpc-diagnostics/issues/73). A GPU without NVLink prints nothing
(gpulib/data/captures/h200_1rank_smi_nvlink_s.txt): no row. Never raises.
"""

from __future__ import annotations

import re

import pandas as pd

NVLINK_COLUMNS = ["gpu", "link", "up", "gb_s"]
_GPU = re.compile(r"^\s*GPU\s+(\d+):")
_LINK = re.compile(r"^\s*Link\s+(\d+):\s*(.*?)\s*$")
_SPEED = re.compile(r"([\d.]+)\s*GB/s", re.IGNORECASE)


def parse_nvlink_status(text: str | bytes | None) -> pd.DataFrame:
    """Parse ``nvidia-smi nvlink -s`` into :data:`NVLINK_COLUMNS` rows."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    rows: list[dict] = []
    gpu = None
    for line in (text or "").splitlines():
        m = _GPU.match(line)
        if m:
            gpu = m.group(1)
            continue
        m = _LINK.match(line)
        if m and gpu is not None:
            speed = _SPEED.search(m.group(2))
            rows.append(
                {
                    "gpu": gpu,
                    "link": int(m.group(1)),
                    "up": speed is not None,
                    "gb_s": float(speed.group(1)) if speed else float("nan"),
                }
            )
    return (
        pd.DataFrame(rows, columns=NVLINK_COLUMNS).astype({"up": bool})
        if rows
        else pd.DataFrame(columns=NVLINK_COLUMNS)
    )


def links_down(links: pd.DataFrame | None, gpu: str | None = None) -> list[str]:
    """Evidence lines for GPUs whose every NVLink is down (``gpu``: that GPU only); [] without link rows."""
    if links is None or len(links) == 0:
        return []
    sel = links if gpu in (None, "") else links[links["gpu"] == str(gpu)]
    out = []
    for g, grp in sel.groupby("gpu", sort=True):
        if not grp["up"].any():
            out.append(f"nvidia-smi nvlink -s: GPU {g} has {len(grp)} of {len(grp)} NVLinks down (<inactive>)")
    return out
