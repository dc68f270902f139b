"""Parsers of ``nvidia-smi mig -lgip`` (GPU instance profiles), ``-lgipp`` (their placements) and ``-lgi`` (the GPU
instances that exist), and a profile catalog built from them for a GPU the packaged catalog lacks.
"""

from __future__ import annotations

import re

import pandas as pd

from gpulib.core.errors import MigParseError
from gpulib.core.textio import as_text
from gpulib.core.textio import lines as _text_lines
from gpulib.mig.catalog import CATALOG_COLUMNS

# --------------------------------------------------------------------------------------------------
# nvidia-smi parsers
# --------------------------------------------------------------------------------------------------
_LGIPP_RE = re.compile(r"GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}\s*:\s*(\d+)\s*$")
_LGIP_ROW = re.compile(
    r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*$"
)
_LGIP_ROW2 = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*$")
_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|\s*$")


def parse_lgipp(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgipp``: one row per (gpu, profile_id) with ``starts`` (list) and ``size``.

    Lines that look like placements but do not parse (truncated output) are skipped and listed in
    ``df.attrs["skipped"]``; raises :class:`MigParseError` when nothing parses.
    """
    rows, skipped = [], []
    for ln, line in enumerate(_text_lines(text), 1):
        if "Profile ID" not in line:
            continue
        m = _LGIPP_RE.search(line.strip())
        if not m:
            skipped.append(f"line {ln}: {line.strip()}")
            continue
        starts = [int(s) for s in re.findall(r"\d+", m.group(3))]  # any whitespace (tabs too) between starts
        rows.append({"gpu": m.group(1), "profile_id": int(m.group(2)), "starts": starts, "size": int(m.group(4))})
    if not rows:
        raise MigParseError(
            "no 'GPU <n> Profile ID <id> Placements: {starts}:size' lines found in -lgipp text"
            + (f" ({len(skipped)} malformed)" if skipped else "")
        )
    df = pd.DataFrame(rows, columns=["gpu", "profile_id", "starts", "size"])
    df.attrs["skipped"] = skipped
    return df


def parse_lgip(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgip``: one row per (gpu, profile) with name, profile_id, free, total,
    memory_gib, p2p, sms, dec, enc, ce, jpeg, ofa. Partial rows are skipped into ``df.attrs["skipped"]``."""
    rows, skipped = [], []
    lines = _text_lines(text)
    for i, line in enumerate(lines):
        m = _LGIP_ROW.match(line.strip())
        if not m:
            if re.match(r"^\|\s*\d+\s+MIG\s", line.strip()):
                skipped.append(f"line {i + 1}: {line.strip()}")
            continue
        row = {
            "gpu": m.group(1),
            "name": m.group(2).removeprefix("MIG"),
            "profile_id": int(m.group(3)),
            "free": int(m.group(4)),
            "total": int(m.group(5)),
            "memory_gib": float(m.group(6)),
            "p2p": m.group(7) == "Yes",
            "sms": int(m.group(8)),
            "dec": int(m.group(9)),
            "enc": int(m.group(10)),
            "ce": pd.NA,
            "jpeg": pd.NA,
            "ofa": pd.NA,
        }
        m2 = _LGIP_ROW2.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
        if m2:
            row["ce"], row["jpeg"], row["ofa"] = (int(g) for g in m2.groups())
        rows.append(row)
    if not rows:
        raise MigParseError(
            "no GPU-instance profile rows ('|  0  MIG 1g.10gb  19  7/7  9.75  No ...') in -lgip text"
            + (f" ({len(skipped)} malformed)" if skipped else "")
        )
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skipped
    return df


def parse_lgi(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgi`` (existing GPU instances): gpu, profile, profile_id, instance_id, start, size."""
    rows = []
    for line in _text_lines(text):
        m = _LGI_ROW.match(line.strip())
        if m:
            rows.append(
                {
                    "gpu": m.group(1),
                    "profile": m.group(2),
                    "profile_id": int(m.group(3)),
                    "instance_id": int(m.group(4)),
                    "start": int(m.group(5)),
                    "size": int(m.group(6)),
                }
            )
    if not rows and "No GPU instances found" not in as_text(text):
        raise MigParseError("no GPU instance rows in -lgi text")
    return pd.DataFrame(rows, columns=["gpu", "profile", "profile_id", "instance_id", "start", "size"])


def catalog_from_smi(
    lgip_text: str,
    lgipp_text: str,
    gpu_model: str = "custom",
    gpu: str = "0",
    source: str = "nvidia-smi mig -lgip/-lgipp capture",
) -> pd.DataFrame:
    """Build a catalog (same columns as ``mig_profiles.csv``) for a GPU we do not ship, from its
    ``-lgip`` and ``-lgipp`` outputs; pass it as ``catalog=`` to :func:`place` / :func:`is_valid_layout`."""
    lgip, lgipp = parse_lgip(lgip_text), parse_lgipp(lgipp_text)
    lgip, lgipp = lgip[lgip["gpu"] == str(gpu)], lgipp[lgipp["gpu"] == str(gpu)]
    merged = lgip.merge(lgipp, on=["gpu", "profile_id"], how="left")
    missing = merged[merged["size"].isna()]
    if not missing.empty:
        raise MigParseError(f"profiles {list(missing['name'])} have no placement line in the -lgipp text")
    out = []
    for r in merged.itertuples():
        cm = re.match(r"(\d+)g", r.name)
        if not cm:
            raise MigParseError(f"cannot read the compute slices from profile name {r.name!r}")
        out.append(
            {
                "gpu_model": gpu_model,
                "profile": r.name,
                "profile_id": r.profile_id,
                "memory_gib": r.memory_gib,
                "compute_slices": int(cm.group(1)),
                "memory_slots": int(r.size),
                "max_count": r.total,
                "placements": ";".join(str(s) for s in r.starts),
                "media_ext": "yes" if "+me" in r.name else "no",
                "inferred": "no",
                "inferred_fields": "",
                "source": source,
            }
        )
    return pd.DataFrame(out, columns=CATALOG_COLUMNS)
