"""Data sources: one interface (:class:`~gpulib.sources.base.Source`), several backends.

``connect("demo")`` (default), ``connect("live")`` (Prometheus + Kubernetes), ``connect("snapshot", path=DIR)``
and ``connect("prometheus", url=...)`` (Prometheus only, with an optional ``kube=``).
"""

from __future__ import annotations

from gpulib.sources.base import Capabilities, Source, capabilities_from
from gpulib.sources.registry import available, get_source_class, register

__all__ = ["connect", "Source", "Capabilities", "available", "capabilities_from", "get_source_class", "register"]


def connect(source: str = "demo", **kwargs) -> Source:
    """Open a source by name; keyword arguments go to the backend's constructor."""
    if isinstance(source, Source):
        return source
    if source == "snapshot" and "path" not in kwargs:
        kwargs["path"] = kwargs.pop("snapshot_dir", None)
    return get_source_class(source)(**kwargs)
