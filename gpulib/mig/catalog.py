"""The MIG profile catalog (``gpulib/data/mig/mig_profiles.csv``, each row citing its source) and GPU model resolution:
a catalog name, an ``nvidia-smi`` name or a node's ``nvidia.com/gpu.product`` label -> the catalog's model, its
profiles and their geometry (memory slots, compute slices, allowed start slots).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

from gpulib.core.errors import InvalidParameter, UnknownGPUModel, UnknownProfile
from gpulib.core.knowledge import load_table
from gpulib.mig.models import model_by_name, model_by_pci_id

CATALOG_COLUMNS = [
    "gpu_model",
    "profile",
    "profile_id",
    "memory_gib",
    "compute_slices",
    "memory_slots",
    "max_count",
    "placements",
    "media_ext",
    "inferred",
    "inferred_fields",
    "source",
]


# --------------------------------------------------------------------------------------------------
# catalog
# --------------------------------------------------------------------------------------------------
def gpu_models() -> pd.DataFrame:
    """GPU models known to the catalog (``mig_gpu_models.csv``), MIG-capable or not."""
    return load_table("mig_gpu_models")


def resolve_gpu_model(name: str | None, pci_device_id: str | int | None = None) -> str:
    """Canonical catalog name: by ``pci_device_id`` (``0x2342`` / ``0x234210DE``, from NVML or a label) when
    given and known, else by the exact catalog name or an exact product name (GFD label such as
    ``NVIDIA-A100-SXM4-40GB``, NVML name such as ``NVIDIA H100 80GB HBM3``; see :mod:`gpulib.mig.models`).
    Never by substring. Raises :class:`UnknownGPUModel`."""
    by_id = model_by_pci_id(pci_device_id)
    if by_id is not None:
        return by_id
    if not isinstance(name, str) or not name.strip():
        raise UnknownGPUModel(
            f"gpu_model must be a non-empty string, got {name!r}"
            + (
                f" (PCI device id {pci_device_id!r} is not in gpulib/data/mig/gpu_model_names.csv)"
                if pci_device_id is not None
                else ""
            )
        )
    return _resolve_cached(name)


@lru_cache(maxsize=256)
def _resolve_cached(name: str) -> str:
    models = gpu_models()
    for m in models["gpu_model"]:
        if m.lower() == name.strip().lower():
            return m
    best = model_by_pci_id(name) or model_by_name(name)
    if best is None:
        raise UnknownGPUModel(
            f"GPU model {name!r} is not in the catalog (matched by PCI device id or exact product "
            "name only: gpulib/data/mig/gpu_model_names.csv)"
        )
    return best


def is_mig_capable(gpu_model: str) -> bool:
    """True when the GPU model supports MIG (per the catalog). Unknown models raise :class:`UnknownGPUModel`."""
    m = gpu_models().set_index("gpu_model").loc[resolve_gpu_model(gpu_model)]
    return str(m["mig_capable"]).lower() == "yes"


def profiles(gpu_model: str, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """The GPU-instance profiles of one GPU model, smallest first (a copy of ``mig_profiles.csv`` rows,
    or of ``catalog`` when given, e.g. one built by :func:`catalog_from_smi`)."""
    if catalog is not None:
        df = catalog[catalog["gpu_model"] == gpu_model] if gpu_model in set(catalog["gpu_model"]) else catalog
        if df.empty:
            raise UnknownGPUModel(f"catalog has no rows for {gpu_model!r}")
        return df.copy().reset_index(drop=True)
    model = resolve_gpu_model(gpu_model)
    df = load_table("mig_profiles")
    df = df[df["gpu_model"] == model]
    if df.empty:
        raise UnknownGPUModel(
            f"GPU model {model} does not support MIG (no profiles in the catalog)",
            hint="use whole GPUs, time-slicing or MPS: see gpulib.mig.sharing.recommend",
        )
    return df.sort_values(["memory_slots", "compute_slices", "media_ext"]).reset_index(drop=True)


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile of one GPU model."""

    gpu_model: str
    name: str
    profile_id: int | None
    memory_gib: float
    compute_slices: int
    memory_slots: int
    max_count: int
    starts: tuple[int, ...]
    media_ext: bool
    inferred: bool

    @property
    def resource_suffix(self) -> str:
        """Name as the device plugin advertises it (``+`` becomes ``.``: ``1g.10gb+me`` -> ``1g.10gb.me``)."""
        return self.name.replace("+", ".")


def _to_profile(row) -> Profile:
    pid = row["profile_id"]
    return Profile(
        gpu_model=str(row["gpu_model"]),
        name=str(row["profile"]),
        profile_id=None if pd.isna(pid) else int(pid),
        memory_gib=float(row["memory_gib"]),
        compute_slices=int(row["compute_slices"]),
        memory_slots=int(row["memory_slots"]),
        max_count=int(row["max_count"]),
        starts=tuple(int(s) for s in str(row["placements"]).split(";") if s != ""),
        media_ext=str(row["media_ext"]).lower() == "yes",
        inferred=str(row.get("inferred", "no")).lower() == "yes",
    )


def profile_objects(gpu_model: str, catalog: pd.DataFrame | None = None) -> list[Profile]:
    """Profiles of a GPU model as :class:`Profile` objects, smallest first (cached for the shipped catalog)."""
    if catalog is None:
        return list(_profile_objects_cached(resolve_gpu_model(gpu_model)))
    return [_to_profile(r) for _, r in profiles(gpu_model, catalog).iterrows()]


@lru_cache(maxsize=64)
def _profile_objects_cached(model: str) -> tuple[Profile, ...]:
    return tuple(_to_profile(r) for _, r in profiles(model).iterrows())


def slot_geometry(gpu_model: str, catalog: pd.DataFrame | None = None) -> tuple[int, int]:
    """(memory slots, compute slices) of the GPU, derived from its profiles (the full-GPU profile spans both)."""
    ps = profile_objects(gpu_model, catalog)
    return max(max(p.starts) + p.memory_slots for p in ps), max(p.compute_slices for p in ps)


_PROFILE_RE = re.compile(r"^(?:nvidia\.com/mig-|MIG\s+)?(\d+g(?:\.\d+gb)?)((?:[+.\-]me)?)$", re.IGNORECASE)


def get_profile(gpu_model: str, name: str | int, catalog: pd.DataFrame | None = None) -> Profile:
    """Look a profile up by name (``3g.20gb``, ``MIG 3g.20gb``, ``nvidia.com/mig-1g.10gb.me``, ``1g.5gb+me``),
    by shorthand (``3g``: the smallest-memory profile with 3 compute slices, no media extension) or by
    profile ID (int). Raises :class:`UnknownProfile` naming the known profiles."""
    ps = profile_objects(gpu_model, catalog)
    if isinstance(name, int) and not isinstance(name, bool):
        for p in ps:
            if p.profile_id == name:
                return p
        raise UnknownProfile(
            f"no profile ID {name} on {gpu_model}; known: {', '.join(f'{p.name} ({p.profile_id})' for p in ps)}"
        )
    m = _PROFILE_RE.match(str(name).strip())
    if not m:
        raise UnknownProfile(f"{name!r} is not a MIG profile name like '3g.20gb' or '1g.10gb+me'")
    base, me = m.group(1).lower(), bool(m.group(2))
    for p in ps:
        if p.name.lower() == base + ("+me" if me else ""):
            return p
    if "." not in base:  # shorthand like "3g"
        cands = [p for p in ps if p.name.lower().startswith(base + ".") and p.media_ext == me]
        if cands:
            return min(cands, key=lambda p: (p.memory_slots, p.memory_gib))
    raise UnknownProfile(f"profile {name!r} does not exist on {gpu_model}; known: {', '.join(p.name for p in ps)}")


def device_memory_gib(device: str) -> float:
    """Memory CUDA sees on ``device``: a whole GPU (``H100-80GB``) or a MIG instance (``A100-40GB/3g.20gb``)."""
    if "/" in str(device):
        gpu, prof = str(device).split("/", 1)
        return get_profile(gpu, prof).memory_gib
    m = gpu_models().set_index("gpu_model").loc[resolve_gpu_model(device)]
    if str(m["whole_memory_mib"]) in ("", "nan"):
        raise InvalidParameter(f"no memory size on record for {device}; pass total_gib= explicitly")
    return float(m["whole_memory_mib"]) / 1024
