"""Kubernetes extended resources that expose MIG devices under the device plugin's ``single`` and ``mixed``
strategies (``NVIDIA/k8s-device-plugin: README.md`` @ 1b826acc).
"""

from __future__ import annotations

from typing import Iterable

from gpulib.core.errors import InvalidParameter


def resource_name(profile: str, strategy: str = "mixed") -> str:
    """Kubernetes extended resource that exposes a MIG device (``NVIDIA/k8s-device-plugin: README.md`` @ 1b826acc):
    ``nvidia.com/gpu`` under the ``single`` strategy, ``nvidia.com/mig-<profile>`` under ``mixed`` (``+me`` advertised
    as ``.me``)."""
    strategy = str(strategy).lower()
    if strategy == "single":
        return "nvidia.com/gpu"
    if strategy == "mixed":
        return "nvidia.com/mig-" + profile.replace("+", ".")
    if strategy == "none":
        raise InvalidParameter("MIG strategy 'none' advertises whole GPUs only; MIG devices need 'single' or 'mixed'")
    raise InvalidParameter(f"MIG strategy must be 'single' or 'mixed', got {strategy!r}")


def pod_resources(profile: str, strategy: str = "mixed", count: int = 1) -> dict:
    """``resources`` block for a container that uses ``count`` MIG devices (requests = limits, integers)."""
    if int(count) < 1:
        raise InvalidParameter(f"count must be a positive integer, got {count}")
    r = {resource_name(profile, strategy): int(count)}
    return {"requests": dict(r), "limits": dict(r)}


def single_strategy_ok(layouts: Iterable[dict[str, int]]) -> tuple[bool, str]:
    """The ``single`` strategy needs every MIG device of a node to be the same profile."""
    kinds = {k for lay in layouts for k, v in lay.items() if v}
    if len(kinds) <= 1:
        return True, f"all MIG devices are {next(iter(kinds))}" if kinds else "no MIG devices"
    names = sorted(kinds)
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    return False, f"node mixes profiles {listed}: use the mixed strategy (nvidia.com/mig-<profile>)"
