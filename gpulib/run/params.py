"""A run's parameters: resolved and validated once (:func:`prepare`: the ``-p`` values, the data source, the live
backend's settings, :mod:`gpulib.inspection`), and checked against their source before any kernel starts
(:func:`check_targets`: a node or GPU named in ``-p`` that the source does not have is a usage error, exit 2,
answered in a second with the close names, instead of a notebook run that ends INCOMPLETE and enters the run index
as critical)."""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib import connect
from gpulib.catalogue import NotebookInfo
from gpulib.core import validate
from gpulib.core.errors import SourceError, UnknownGPU, UnknownNode
from gpulib.inspection import choose_source, resolve_params, target_defaults
from gpulib.sources.prometheus import load_settings

#: parameters that reach a data source only to open it, never to be looked up there
_NOT_FOR_CONNECT = ("collect",)


def check_targets(params: Mapping[str, Any]) -> None:
    """UnknownNode / UnknownGPU when ``params`` name a ``node`` (and a GPU index on it) that their source does not
    have. The source is opened as the run will open it (without ``collect``: no pod is started to check a name); a
    source that cannot be opened or listed is left to the run, which reports it as missing data."""
    node = str(params.get("node") or "").strip()
    if not node:
        return
    node = validate.node_name(node)
    choice = choose_source(params.get("source") or "demo", params.get("snapshot_dir") or None)
    if choice is None:
        return
    try:
        src = connect(
            choice.name, **choice.connect_kwargs({k: v for k, v in params.items() if k not in _NOT_FOR_CONNECT})
        )
        known = src.known_nodes()
    except SourceError:
        return
    if known and node not in known:
        close = difflib.get_close_matches(node, known, n=3, cutoff=0.6)
        raise UnknownNode(
            f"node={node!r} is not a GPU node of {src.describe()}"
            + (f"; did you mean {' or '.join(close)}?" if close else "")
            + f" Known: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}"
        )
    gpu = str(params.get("gpu") or "").strip()
    if gpu.isdigit():
        n = src.nodes().set_index("node")
        count = n.loc[node, "gpu_count"] if node in n.index and "gpu_count" in n.columns else None
        if count is not None and not pd.isna(count) and str(count) != "" and int(gpu) >= int(count):
            raise UnknownGPU(f"gpu={gpu} on node {node!r}: the node has {int(count)} GPUs (0..{int(count) - 1})")


def prepare(
    info: NotebookInfo,
    pairs: Iterable[tuple[str, str]] = (),
    *,
    source: str | None = None,
    snapshot: str | None = None,
    given: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The parameters of one run of ``info``, resolved and validated once; InvalidParameter (a usage error)
    before any kernel starts.

    ``source`` / ``snapshot``: ``--source`` and ``--snapshot`` (:func:`gpulib.inspection.choose_source`);
    ``pairs``: ``-p KEY VALUE`` strings, typed and checked (:func:`gpulib.inspection.resolve_params`); ``given``:
    values that are already typed and checked (``gpuops serve`` checks a request's parameters when it arrives).
    The source the run will use is then checked as a whole (``-p source=...`` included), a non-demo source gets
    no demo node/GPU names (:func:`gpulib.inspection.target_defaults`), and a live backend's settings are read.
    """
    choice = choose_source(source, snapshot)
    params: dict[str, Any] = choice.notebook_params(info) if choice else {}
    params.update(resolve_params(info, list(pairs)))
    params.update(given or {})
    declared = {p.name: p.default for p in info.params}
    backend = ""
    if "source" in declared:
        snap = params.get("snapshot_dir", declared.get("snapshot_dir")) or (choice.snapshot_dir if choice else "")
        used = choose_source(params.get("source", declared["source"]), snap)
        backend = used.name if used else ""
        if used and used.snapshot_dir and "snapshot_dir" in params:
            params["snapshot_dir"] = used.snapshot_dir
    params.update(target_defaults(info, params, backend))
    check_backend(backend)
    return params


def check_backend(name: str) -> None:
    """Settings of a Prometheus backend (URL, timeout, retries, token) read before any notebook runs, so a
    mistyped variable is a usage error (exit 2), not a failed run."""
    if name in ("live", "prometheus"):
        load_settings()
