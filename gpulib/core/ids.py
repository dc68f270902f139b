"""Identifier normalisation shared by every layer: PCI bus ids (kernel log, nvidia-smi, DCGM, NVML)."""

from __future__ import annotations

import re
from typing import Any

_PCI_RE = re.compile(
    r"^(?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)


def normalise_pci_bus_id(value: Any) -> str | None:
    """Canonical PCI bus id ``dddd:bb:dd.f`` in lower case, or None when ``value`` is not one.

    Accepts the kernel's ``0000:3b:00``, nvidia-smi's ``00000000:3B:00.0``, DCGM's labels and
    ``PCI:0000:3b:00``; the 8-digit nvidia-smi domain keeps its last four digits.
    """
    if value is None or (isinstance(value, float) and value != value):
        return None
    m = _PCI_RE.match(str(value).strip())
    if not m:
        return None
    dom = (m.group("dom") or "0").lower()[-4:].rjust(4, "0")
    return f"{dom}:{m.group('bus').lower().rjust(2, '0')}:{m.group('dev').lower().rjust(2, '0')}.{m.group('fn') or '0'}"
