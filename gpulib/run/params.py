"""A run's parameters: resolved and validated once (:func:`prepare`: the ``-p`` values, the data source, the live
backend's settings, :mod:`gpulib.inspection`), and checked against their source before any kernel starts
(:func:`check_targets`: a node or GPU named in ``-p`` that the source does not have is a usage error, exit 2,
answered in a second with the close names, instead of a notebook run that ends INCOMPLETE and enters the run index
as critical); every parameter that names a file or a folder (``Param.kind``) is found before any kernel starts
(:func:`check_paths`: a path that matches nothing, or names a FIFO or a device, is a usage error, and a relative path
becomes the absolute path of the file it names, so the kernel, which runs in the notebook's folder, and the fast
verdict, which runs here, read that file)."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib import connect
from gpulib.catalogue import NotebookInfo
from gpulib.core import validate
from gpulib.core.errors import InvalidParameter, SourceError, UnknownGPU, UnknownNode
from gpulib.core.files import kind_of
from gpulib.core.runbook import DIR, FILE, FILES_OR_DIRS
from gpulib.core.runbook import Param as Declared
from gpulib.inspection import choose_source, resolve_params, target_defaults
from gpulib.run.catalogue import defined, definition, lesson_defined
from gpulib.sources.prometheus import load_settings

#: parameters that reach a data source only to open it, never to be looked up there
_NOT_FOR_CONNECT = ("collect",)
#: the checkout (the folder above gpulib/): the packaged demo captures are named from it
#: (``-p nccl_log_file gpulib/data/demo/...``, as :func:`gpulib.nccl.joblog.log_paths` reads them)
_CHECKOUT = Path(__file__).resolve().parents[2]


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
    params.update(check_paths(info, params))
    check_backend(backend)
    return params


def path_params(name: str) -> dict[str, Declared]:
    """The parameters of runbook or lesson ``name`` that name a file or a folder (``Param.kind``), by name; empty for
    a notebook without a definition."""
    if not (defined(name) or lesson_defined(name)):
        return {}
    return {p.name: p for p in definition(name).params if p.kind}


def check_paths(info: NotebookInfo, params: Mapping[str, Any]) -> dict[str, Any]:
    """The path parameters of ``params`` that ``info`` declares (:func:`path_params`), each found and made absolute;
    InvalidParameter (a usage error, before any kernel starts) for one that matches nothing, is not of its kind
    (a FIFO, a device, a folder where a file is read) or cannot be read.

    A relative path is looked for in the current folder (the caller's), then in the notebook's folder (where its
    kernel runs, so where a run read it before this check) and the checkout (the packaged demo captures), and
    handed on as the absolute path found: the kernel and the fast verdict then read the file checked here."""
    out: dict[str, Any] = {}
    for name, p in path_params(info.name).items():
        value = params.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        parts = [v.strip() for v in value.split(",") if v.strip()] if p.kind == FILES_OR_DIRS else [value]
        found = [_found(p, raw, (Path.cwd(), Path(info.path).parent, _CHECKOUT)) for raw in parts]
        out[name] = ",".join(found) if p.kind == FILES_OR_DIRS else found[0]
    return out


def _found(p: Declared, raw: str, bases: Iterable[Path]) -> str:
    """``raw`` as the path to hand the run (unchanged when absolute), after checking what it names."""
    given = Path(raw).expanduser()
    path = given
    if not given.is_absolute():
        path = next((b / given for b in bases if (b / given).exists()), Path.cwd() / given)
    hint = f"{p.name}: {p.help}" if p.help else None
    noun = "file or folder" if p.kind == FILES_OR_DIRS else p.kind
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise InvalidParameter(f"{p.name}={raw!r}: no such {noun}", hint=hint) from None
    fits = {FILE: stat.S_ISREG(mode), DIR: stat.S_ISDIR(mode)}.get(p.kind, stat.S_ISREG(mode) or stat.S_ISDIR(mode))
    if not fits:
        what = "a file" if stat.S_ISREG(mode) else kind_of(mode)
        raise InvalidParameter(f"{p.name}={raw!r} is {what}, not a {noun}: not read", hint=hint)
    if not os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
        raise InvalidParameter(f"{p.name}={raw!r}: cannot be read (permission denied)", hint=hint)
    return raw if given.is_absolute() else os.path.abspath(path)


def check_backend(name: str) -> None:
    """Settings of a Prometheus backend (URL, timeout, retries, token) read before any notebook runs, so a
    mistyped variable is a usage error (exit 2), not a failed run."""
    if name in ("live", "prometheus"):
        load_settings()
