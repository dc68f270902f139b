"""Which catalog GPU model a device is: by PCI device id where the label or NVML gives it, else by exact name.

Never by substring: "NVIDIA GB200" is not a B200 (different MIG profiles), and "GH200 480GB" (PCI 0x2342) is in
mig-parted's H100-96GB group, not GH200-144GB. Ids and names live in ``gpulib/data/mig/gpu_model_names.csv``, whose
id groups follow NVIDIA/mig-parted ``deployments/systemd/config-default.yaml`` (all-balanced device filters).

A name is normalised before the exact lookup: upper case, ``-``/``_`` -> space, a leading ``NVIDIA``/``TESLA``
dropped, and the GPU Feature Discovery suffixes ``-SHARED`` (time-slicing) and ``-MIG-<profile>`` (single
strategy) removed, so ``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`` and ``NVIDIA A100-SXM4-40GB`` are the same name.
"""

from __future__ import annotations

import re
from functools import lru_cache

from gpulib.core.knowledge import load_table

__all__ = ["normalise_name", "normalise_pci_id", "model_by_pci_id", "model_by_name"]


def normalise_name(name: str) -> str:
    s = re.sub(r"[-_]", " ", str(name).upper())
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s+SHARED$", "", s)
    s = re.sub(r"\s+MIG\s+\d+C?\.?\d*G\.\S+$", "", s)
    s = re.sub(r"\s+MIG\s+\S+$", "", s)
    return re.sub(r"^(NVIDIA|TESLA)\s+", "", s)


def normalise_pci_id(value: str | int | None) -> str | None:
    """``0x2342``, ``2342``, ``0x234210DE`` -> ``0x234210DE`` (device id + NVIDIA vendor id 10DE); None if not an id."""
    if value is None:
        return None
    s = str(value).strip().lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{4}(10de)?", s):
        return None
    return "0x" + (s[:4] + "10de").upper().replace("0X", "0x")


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, str], dict[str, str]]:
    t = load_table("gpu_model_names")
    ids = {normalise_pci_id(v): m for m, k, v in zip(t["gpu_model"], t["kind"], t["value"]) if k == "pci_device_id"}
    names = {normalise_name(v): m for m, k, v in zip(t["gpu_model"], t["kind"], t["value"]) if k == "name"}
    return ids, names


def model_by_pci_id(value: str | int | None) -> str | None:
    key = normalise_pci_id(value)
    return _tables()[0].get(key) if key else None


def model_by_name(name: str) -> str | None:
    return _tables()[1].get(normalise_name(name))
