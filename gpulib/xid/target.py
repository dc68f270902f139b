"""Which GPU of a node the XID triage is about: the ``gpu`` parameter resolved against the node's GPUs.

An alert names a GPU by its index (DCGM's ``gpu`` label), its UUID (``UUID`` label, ``nvidia-smi -L``) or,
on a MIG-enabled GPU, a MIG device UUID (``nvidia-smi -L``, a pod's ``NVIDIA_VISIBLE_DEVICES``); the form is
checked by :func:`gpulib.core.validate.gpu_ref`. Every form resolves to the physical GPU's index, which is
the key of every frame and finding (XIDs, ECC and row remapping are per physical GPU: the NVIDIA MIG user
guide, https://docs.nvidia.com/datacenter/tesla/mig-user-guide/). A reference that matches none of the node's
GPUs is :class:`~gpulib.core.errors.UnknownGPU` naming the GPUs the node has, never an empty (OK) triage.

The node's GPUs come from the source (:meth:`gpulib.sources.base.Source.gpus`) and from the node's
``nvidia-smi -q`` when one is at hand (index, UUID, PCI bus id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulib.core.errors import UnknownGPU
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.schema import GPU_COLUMNS
from gpulib.core.validate import gpu_ref


@dataclass(frozen=True)
class Target:
    """The GPU a triage is about. ``gpu`` is the physical GPU's index (None: every GPU of the node)."""

    node: str
    given: str = ""
    gpu: str | None = None
    uuid: str = ""
    pci_bus_id: str = ""
    mig_uuid: str = ""
    gpu_i_id: str = ""

    @property
    def label(self) -> str:
        """``dgx-h100-1 GPU 5`` (with the UUID or MIG instance the user gave, when not the index)."""
        if self.gpu is None:
            return f"{self.node} (all GPUs)"
        extra = (
            f" (MIG instance {self.gpu_i_id}, {self.mig_uuid})"
            if self.mig_uuid
            else (f" ({self.uuid})" if self.given and self.given != self.gpu else "")
        )
        return f"{self.node} GPU {self.gpu}{extra}"


def inventory(src, node: str, window: str = "6h", smi: pd.DataFrame | None = None) -> pd.DataFrame:
    """The node's GPUs (``GPU_COLUMNS``) from the source, completed with an ``nvidia-smi -q`` frame's rows."""
    df = src.gpus(node, window)
    if smi is not None and len(smi):
        have = set(df["uuid"].str.lower())
        rows = [
            {
                "node": node,
                "gpu": "" if pd.isna(r.get("index")) else str(int(r["index"])),
                "uuid": str(r.get("uuid") or ""),
                "pci_bus_id": str(r.get("pci_bus_id") or ""),
                "model": str(r.get("name") or ""),
                "gpu_i_id": "",
                "gpu_i_profile": "",
                "mig_uuid": "",
            }
            for r in smi.to_dict("records")
            if str(r.get("uuid") or "").lower() not in have
        ]
        if rows:
            df = pd.concat([df, pd.DataFrame(rows, columns=GPU_COLUMNS)], ignore_index=True)
    return df


def _listing(inv: pd.DataFrame) -> str:
    phys = inv[inv["gpu_i_id"] == ""].copy()
    phys["_k"] = pd.to_numeric(phys["gpu"], errors="coerce")
    parts = [f"{r['gpu']} {r['uuid']}" for r in phys.sort_values("_k").to_dict("records")]
    mig = inv[(inv["gpu_i_id"] != "") & (inv["mig_uuid"] != "")]
    parts += [f"{r['mig_uuid']} (GPU {r['gpu']} MIG instance {r['gpu_i_id']})" for r in mig.to_dict("records")]
    return "; ".join(parts) if parts else "none listed"


def resolve(src, node: str, gpu: Any, window: str = "6h", smi: pd.DataFrame | None = None) -> Target:
    """Resolve ``gpu`` (index, GPU UUID, MIG UUID or empty) on ``node``; UnknownGPU when it matches none."""
    if gpu in (None, ""):
        return Target(node=node)
    ref = gpu_ref(gpu)
    inv = inventory(src, node, window, smi)
    if inv.empty:
        if ref.kind == "index":  # the source cannot list GPUs; the index was range-checked against the node
            return Target(node=node, given=ref.value, gpu=ref.value)
        raise UnknownGPU(
            f"gpu={ref.value}: the source ({src.describe()}) lists no GPU of node {node!r}, so a UUID "
            "cannot be matched",
            hint="give the GPU index, or a saved nvidia-smi -q of the node (smi_file)",
        )
    if ref.kind == "index":
        hit = inv[(inv["gpu"] == ref.value) & (inv["gpu_i_id"] == "")]
        if hit.empty:
            hit = inv[inv["gpu"] == ref.value]
    elif ref.kind == "uuid":
        hit = inv[inv["uuid"].str.lower() == ref.value.lower()]
    else:
        hit = inv[inv["mig_uuid"].str.lower() == ref.value.lower()]
    if hit.empty:
        why = ""
        if ref.kind == "mig" and not (inv["mig_uuid"] != "").any():
            why = (
                " (this source has no MIG device UUIDs: DCGM labels name the parent GPU; `nvidia-smi -L` on the "
                "node shows which GPU holds the MIG device)"
            )
        raise UnknownGPU(
            f"gpu={ref.value} matches no GPU of node {node!r}{why}; the node has: {_listing(inv)}",
            hint="give one of the node's GPU indexes or UUIDs listed above",
        )
    row = hit.iloc[0].to_dict()
    pci = normalise_pci_bus_id(row["pci_bus_id"]) if row["pci_bus_id"] else ""
    mig = ref.kind == "mig"
    return Target(
        node=node,
        given=ref.value,
        gpu=row["gpu"] or None,
        uuid=row["uuid"],
        pci_bus_id=pci or "",
        mig_uuid=row["mig_uuid"] if mig else "",
        gpu_i_id=row["gpu_i_id"] if mig else "",
    )
