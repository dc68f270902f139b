"""Data sources: one interface (:class:`~gpulib.sources.base.Source`), several backends.

``connect("demo")`` (default), ``connect("live")`` (Prometheus + Kubernetes), ``connect("snapshot", path=DIR)``
and ``connect("prometheus", url=...)`` (Prometheus only, with an optional ``kube=``).
"""

from __future__ import annotations

from gpulib.sources.base import Capabilities, Source, capabilities_from
from gpulib.sources.registry import available, get_source_class, register

__all__ = ["connect", "Source", "Capabilities", "available", "capabilities_from", "get_source_class", "register"]


def connect(source: str = "demo", **kwargs) -> Source:
    """Open a source by name; keyword arguments go to the backend's constructor as they are (a snapshot's folder
    is ``path=``). A run's ``source`` / ``snapshot_dir`` parameters are mapped to these by the one source mapping,
    :func:`gpulib.inspection.choose_source` and its ``connect_kwargs``."""
    if isinstance(source, Source):
        return source
    return get_source_class(source)(**kwargs)
