"""A run's parameters checked against its source before any kernel starts: a node or GPU named in ``-p`` that the
source does not have is a usage error (exit 2) answered in a second, with the close names, instead of a notebook run
that ends INCOMPLETE and enters the run index as critical."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from gpulib import connect
from gpulib.core import validate
from gpulib.core.errors import SourceError, UnknownGPU, UnknownNode
from gpulib.inspection import choose_source

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
        if count is not None and str(count) not in ("", "nan") and int(gpu) >= int(count):
            raise UnknownGPU(f"gpu={gpu} on node {node!r}: the node has {int(count)} GPUs (0..{int(count) - 1})")
