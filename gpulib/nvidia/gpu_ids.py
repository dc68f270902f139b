"""PCI bus id <-> GPU index <-> UUID, joined from whatever frames carry some of them (nvidia-smi, NVML, DCGM)."""

from __future__ import annotations

import functools

import pandas as pd

from gpulib.core.ids import normalise_pci_bus_id


def _id_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(index=df.index)
    gpu_col = next((c for c in ("gpu", "index") if c in df.columns), None)
    out["gpu"] = df[gpu_col].map(lambda v: None if pd.isna(v) or v == "" else str(int(float(v)))) if gpu_col else None
    out["uuid"] = df["uuid"].map(lambda v: None if pd.isna(v) or v == "" else str(v)) if "uuid" in df.columns else None
    out["pci_bus_id"] = df["pci_bus_id"].map(normalise_pci_bus_id) if "pci_bus_id" in df.columns else None
    return out


@functools.lru_cache(maxsize=256)
def _id_records(cols: tuple[str, ...], dtypes: tuple, distinct: tuple) -> tuple[dict, ...]:
    df = pd.DataFrame(list(distinct), columns=list(cols)).astype(dict(zip(cols, dtypes)))
    return tuple(_id_frame(df).drop_duplicates().to_dict("records"))


def _ids(df: pd.DataFrame) -> tuple[dict, ...]:
    """The frame's distinct (gpu, uuid, pci_bus_id) rows, normalised. The id columns' distinct values are found
    first, in plain Python (a SERIES frame repeats them once per sample), and the frames of one node, which carry
    the same ids, are normalised once (callers only read the rows)."""
    cols = tuple(c for c in ("gpu", "index", "uuid", "pci_bus_id") if c in df.columns)
    distinct = tuple(dict.fromkeys(zip(*(df[c].tolist() for c in cols))))
    return _id_records(cols, tuple(df[c].dtype for c in cols), distinct)


def gpu_id_map(*frames: pd.DataFrame | None) -> pd.DataFrame:
    """PCI bus id <-> GPU index <-> UUID from any frames that carry some of ``gpu``/``index``, ``uuid``,
    ``pci_bus_id`` (:func:`parse_query`, :func:`gpulib.nvidia.nvml.probe`, DCGM SERIES/SUMMARY frames).

    Rows that share a UUID or a PCI bus id are merged; returns columns ``gpu`` (str), ``uuid``, ``pci_bus_id``.
    """
    recs: list[dict[str, str | None]] = []
    for df in frames:
        if df is None or len(df) == 0:
            continue
        for r in _ids(df):
            matches = [
                x
                for x in recs
                if (r["uuid"] and x["uuid"] == r["uuid"]) or (r["pci_bus_id"] and x["pci_bus_id"] == r["pci_bus_id"])
            ]
            if matches:
                target = matches[0]
                for k in ("gpu", "uuid", "pci_bus_id"):
                    if target[k] is None and r[k] is not None:
                        target[k] = r[k]
            elif r["uuid"] or r["pci_bus_id"]:
                recs.append(dict(r))
    return pd.DataFrame(recs, columns=["gpu", "uuid", "pci_bus_id"])
