"""The demo fleet's description: GPU devices (physical GPUs and MIG instances) built from a scenario
(``gpulib/data/demo/demo_fleet.yaml`` by default), and incident times relative to the scenario end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulib.core.errors import GpulibError
from gpulib.core.timeutil import parse_window

DAY = 86400.0
MIG_SLICES = {"1g": 1, "2g": 2, "3g": 3, "4g": 4, "7g": 7}


@dataclass
class Device:
    """A physical GPU, or a MIG instance of one (``gi_id`` set)."""

    node: str
    index: int
    uuid: str
    model: str
    model_name: str
    pci_bus_id: str
    memory_mib: float
    tdp_w: float
    max_clock: float
    nvlink: bool
    hbm: bool
    persona: str = "free"
    since: float | None = None  # persona start (epoch s); before it the device is "dev"
    pod: str = ""
    namespace: str = ""
    container: str = ""
    gi_profile: str = ""
    gi_id: str = ""
    mig_uuid: str = ""  # a MIG instance's own UUID (``nvidia-smi -L`` prints ``MIG-<uuid>``)
    mig_enabled: bool = False
    slices: int = 7
    incidents: list[dict] = field(default_factory=list)

    @property
    def is_instance(self) -> bool:
        return bool(self.gi_id)


def _rel(spec: str | None, end: float) -> float | None:
    """Resolve ``"-2h"`` relative to the scenario end."""
    if spec is None:
        return None
    s = str(spec).strip()
    sign = -1 if s.startswith("-") else 1
    return end + sign * parse_window(s.lstrip("+-"), name="incident time").total_seconds()


def _mig_memory_mib(profile: str) -> float:
    m = re.match(r"\d+g\.(\d+)gb", profile)
    if not m:
        raise GpulibError(f"MIG profile {profile!r} is not of the form <n>g.<m>gb")
    return float(m.group(1)) * 1024
