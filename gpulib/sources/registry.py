"""Source registry: backend name -> dotted path of its class, imported on first use.

Shaped like papermill's engine registry (``papermill/engines.py``, ``EngineRegistry``:
https://github.com/nteract/papermill/blob/main/papermill/engines.py): built-in backends are listed by
dotted path, so this package never imports the demo simulator (``gpulib.demo``) or the Kubernetes client
until a caller asks for that backend; third-party backends register through the ``gpulib.sources``
entry-point group or :func:`register`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from gpulib.core.errors import InvalidParameter

if TYPE_CHECKING:  # pragma: no cover
    from gpulib.sources.base import Source

#: built-in backends: name -> "module:Class"
BUILTIN: dict[str, str] = {
    "demo": "gpulib.demo.source:DemoSource",
    "live": "gpulib.sources.live:LiveSource",
    "prometheus": "gpulib.sources.prometheus:PrometheusSource",
    "snapshot": "gpulib.sources.snapshot:SnapshotSource",
}

_REGISTRY: dict[str, "type[Source] | str"] = dict(BUILTIN)
_ENTRY_POINTS_LOADED = False


def register(name: str, cls: "type[Source] | str") -> None:
    """Register a backend class (or its ``"module:Class"`` path) under ``name``."""
    _REGISTRY[name] = cls


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in entry_points(group="gpulib.sources"):
        _REGISTRY.setdefault(ep.name, ep.value)


def get_source_class(name: str) -> "type[Source]":
    """The backend class registered under ``name`` (imported now if registered by path)."""
    _load_entry_points()
    if name not in _REGISTRY:
        raise InvalidParameter(f"source={name!r}; use one of {', '.join(sorted(_REGISTRY))}")
    target = _REGISTRY[name]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr)
        _REGISTRY[name] = target
    return target


def available() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)
