"""PCI bus id <-> GPU index <-> UUID, joined from whatever frames carry some of them (nvidia-smi, NVML, DCGM)."""

from __future__ import annotations

import pandas as pd

from gpulib.core.ids import normalise_pci_bus_id


def _id_frame(df: pd.DataFrame) -> pd.DataFrame:
    # the id columns' distinct rows first: a SERIES frame repeats them once per sample
    df = df[[c for c in ("gpu", "index", "uuid", "pci_bus_id") if c in df.columns]].drop_duplicates()
    out = pd.DataFrame(index=df.index)
    gpu_col = next((c for c in ("gpu", "index") if c in df.columns), None)
    out["gpu"] = df[gpu_col].map(lambda v: None if pd.isna(v) or v == "" else str(int(float(v)))) if gpu_col else None
    out["uuid"] = df["uuid"].map(lambda v: None if pd.isna(v) or v == "" else str(v)) if "uuid" in df.columns else None
    out["pci_bus_id"] = df["pci_bus_id"].map(normalise_pci_bus_id) if "pci_bus_id" in df.columns else None
    return out


def gpu_id_map(*frames: pd.DataFrame | None) -> pd.DataFrame:
    """PCI bus id <-> GPU index <-> UUID from any frames that carry some of ``gpu``/``index``, ``uuid``,
    ``pci_bus_id`` (:func:`parse_query`, :func:`gpulib.nvidia.nvml.probe`, DCGM SERIES/SUMMARY frames).

    Rows that share a UUID or a PCI bus id are merged; returns columns ``gpu`` (str), ``uuid``, ``pci_bus_id``.
    """
    recs: list[dict[str, str | None]] = []
    for df in frames:
        if df is None or len(df) == 0:
            continue
        for r in _id_frame(df).drop_duplicates().to_dict("records"):
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
