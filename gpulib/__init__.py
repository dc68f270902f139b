"""gpulib: GPU-on-Kubernetes analytics behind the gpu-runbooks notebooks.

Flow (``docs/architecture.md``): a *source* (demo | live | snapshot | nvml) gives tidy DataFrames, pure
analysis functions turn them into :class:`~gpulib.core.findings.Finding` objects, and notebooks,
the ``gpuops`` CLI and the reports render them.

Imports are lazy so the GPU-facing modules (``gpulib.nvidia.nvml``, ``gpulib.nccl.results``) load on a GPU node
that has only numpy/pandas/nvidia-ml-py installed.
"""

from __future__ import annotations

from gpulib.core.lazy import defer_iri_grammars

defer_iri_grammars()  # before anything imports jsonschema

from gpulib.core.errors import GpulibError  # noqa: E402
from gpulib.core.findings import Finding, FindingList, Severity  # noqa: E402
from gpulib.sources import connect as _connect  # noqa: E402

__version__ = "0.1.0"
__all__ = ["connect", "Finding", "FindingList", "Severity", "GpulibError", "__version__"]


def connect(source: str = "demo", **kwargs):
    """Open a data source: ``"demo"`` (default), ``"live"`` (Prometheus + Kubernetes) or ``"snapshot"``.

    See :mod:`gpulib.sources` for each backend's keyword arguments.
    """
    return _connect(source, **kwargs)
