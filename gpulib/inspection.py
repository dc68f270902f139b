"""A notebook's parameters and how given values become them: one rule set for ``gpuops``, ``gpuops serve`` and
the Runbook's connect step.

The parameters come from the cell tagged ``parameters`` as :func:`papermill.inspect_notebook` reads it (name,
default text, help comment: https://github.com/nteract/papermill/blob/main/papermill/inspection.py); the
default text is turned into a value with :func:`ast.literal_eval`, so :func:`coerce` converts ``-p key value``
to the default's type. The data source (``--source`` / ``--snapshot``, the ``source`` and ``snapshot_dir``
parameters) is mapped by :func:`choose_source` alone.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

from gpulib.core import validate
from gpulib.core.errors import InvalidParameter
from gpulib.core.timeutil import parse_window
from gpulib.sources.registry import BUILTIN, available  # on use: the registry reads entry points


@dataclass
class Param:
    name: str
    default: Any
    help: str = ""


class Declares(Protocol):
    """What these functions read of a notebook (:class:`gpulib.catalogue.NotebookInfo`): its name and parameters."""

    name: str
    params: list[Param]


#: how a report ships plotly.js in its HTML: ``gpuops report --charts`` (:func:`gpulib.runbook.plotly_js`)
PLOTLY_JS_MODES = ("inline", "cdn", "shared")
#: a parameter that, when a runbook declares it, chooses how its HTML ships plotly.js (empty: the run's way)
CHARTS_PARAM = "charts"

#: the environment variable through which the run engine hands a notebook's parameters (read once, with papermill) to
#: the notebook's own kernel, so that :class:`gpulib.runbook.Runbook` does not import papermill again to learn them
#: (importing papermill loads nbformat and jsonschema, about 1 s of CPU per kernel: benchmarks/RESULTS.md)
PARAMS_ENV = "GPUOPS_NOTEBOOK_PARAMETERS"


def params_env(name: str, params: list[Param]) -> dict[str, str]:
    """``{PARAMS_ENV: json}`` for the kernel of notebook ``name``, or ``{}`` when a default does not survive JSON
    unchanged (a tuple, an expression kept as text is fine): then the kernel inspects the notebook itself."""
    rows = [[p.name, p.default, p.help] for p in params]
    text = json.dumps({"notebook": name, "params": rows})
    back = json.loads(text)["params"]
    if any(type(b[1]) is not type(p.default) or b[1] != p.default for b, p in zip(back, params)):
        return {}
    return {PARAMS_ENV: text}


def params_from_env(name: str, environ: Mapping[str, str] | None = None) -> list[Param] | None:
    """The parameters the engine handed to this kernel for notebook ``name`` (:func:`params_env`), or ``None``
    when it handed none, or handed another notebook's (a kernel started by hand, or a planted runbook)."""
    text = (os.environ if environ is None else environ).get(PARAMS_ENV)
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("notebook") != name:
        return None
    return [Param(n, d, h) for n, d, h in doc.get("params", [])]


#: one line of a parameters cell as papermill's Python translator reads it (``name = value  # help``; the pattern of
#: papermill 2.7.0: https://github.com/nteract/papermill/blob/2.7.0/papermill/translators.py#L145-L147), kept here
#: so that reading a notebook's parameters does not import papermill (papermill -> nbformat -> jsonschema ->
#: rfc3987_syntax compiles its lark grammars on import, ~1 s of CPU per process:
#: https://github.com/python-jsonschema/jsonschema/issues/1428); tests/test_inspection.py holds it equal to papermill
_PARAM_LINE = re.compile(
    r"^(?P<target>\w[\w_]*)\s*(:\s*[\"']?(?P<annotation>\w[\w_\[\],\s]*)[\"']?\s*)?=\s*(?P<value>.*?)"
    r"(\s*#\s*(type:\s*(?P<type_comment>[^\s]*)\s*)?(?P<help>.*))?$"
)


def _parameters_cell(nb: Mapping[str, Any]) -> str:
    """The source of the first cell tagged ``parameters`` (papermill's convention), or ``""``."""
    for cell in nb.get("cells", []):
        if "parameters" in (cell.get("metadata", {}).get("tags") or []):
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else src
    return ""


def _definitions(src: str) -> list[str]:
    """The cell's assignments, each flattened to one line, grouped as papermill's ``PythonTranslator.inspect`` groups
    them: blank and comment lines skipped, a line with two ``=`` skipped, a line without one continues the one
    before (only the last line's comment is kept as the help)."""
    groups: list[list[str]] = [[]]
    for line in src.splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        if line.count("=") > 1:
            groups.append([])
            continue
        if "=" in line:
            groups.append([])
        groups[-1].append(line)
    flat = []
    for g in groups:
        head = "".join(ln[: ln.index("#")].strip() if "#" in ln else ln.strip() for ln in g[:-1])
        flat.append(head + (g[-1].strip() if g else ""))
    return [f for f in flat if f]


def notebook_params(path: Path, nb: Mapping[str, Any] | None = None) -> list[Param]:
    """The parameters of the notebook at ``path`` (or its JSON ``nb``, already read), in cell order, as
    :func:`papermill.inspect_notebook` reads them; a default that is not a Python literal (an expression) stays its
    text."""
    nb = json.loads(Path(path).read_text()) if nb is None else nb
    out = []
    for definition in _definitions(_parameters_cell(nb)):
        m = _PARAM_LINE.match(definition)
        if m is None:
            continue
        text = m.group("value").strip()
        try:
            default = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            default = text
        out.append(Param(m.group("target").strip(), default, (m.group("help") or "").strip()))
    return out


def coerce(param: Param, raw: str) -> Any:
    """Convert a ``-p key value`` string to the type of the parameter's default."""
    d = param.default
    try:
        if isinstance(d, bool):
            low = raw.strip().lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if isinstance(d, int):
            return int(raw)
        if isinstance(d, float):
            return float(raw)
        if isinstance(d, (list, tuple)):
            return [x.strip() for x in raw.split(",") if x.strip()]
    except ValueError:
        raise InvalidParameter(f"parameter {param.name}={raw!r}: expected {type(d).__name__} like {d!r}") from None
    return raw


def resolve_params(info: Declares, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """``-p`` pairs as typed, validated parameters of ``info`` (InvalidParameter on an unknown name or bad value)."""
    known = {p.name: p for p in info.params}
    out = {}
    for key, raw in pairs:
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            raise InvalidParameter(
                f"{info.name} has no parameter {key!r}"
                + (f"; did you mean {close[0]}?" if close else "")
                + f" Parameters: {', '.join(known) or 'none'}",
                hint=f"`gpuops list {info.name}` lists them with what each takes",
            )
        out[key] = coerce(known[key], raw)
    if "window" in out:
        parse_window(out["window"])
    check_values(out)
    return out


#: parameters a caller of a server (``gpuops serve``, ``gpuops mcp``) may never set: the data source, what
#: changes state (history, remediation) and anything that names a path on the server
SERVER_ONLY = ("source", "snapshot_dir", "record_history", "apply", "dry_run", "confirm")


def server_only(name: str) -> bool:
    """Whether only the server sets parameter ``name`` (:data:`SERVER_ONLY`, ``*_file``, ``*_dir``)."""
    return name in SERVER_ONLY or name.endswith("_file") or name.endswith("_dir")


def check_values(params: dict[str, Any]) -> None:
    """Validate the parameters that reach PromQL, a manifest or a shell command (gpulib.core.validate);
    InvalidParameter (a usage error) for a value that is not a name of its kind. Empty means 'all'."""
    for key, value in params.items():
        if value in ("", None):
            continue
        if key == "node":
            validate.node_name(value)
        elif key == "gpu":
            validate.gpu_ref(value)
        elif key == "namespace":
            validate.namespace(value)
        elif key == "namespaces":
            for ns in str(value).split(","):
                if ns.strip():
                    validate.namespace(ns.strip(), param="namespaces")
        elif key == "deployment":
            validate.object_name(value, param="deployment", kind="deployment")
        elif key == "cluster":
            validate.object_name(value, param="cluster", kind="cluster")


# ---------------------------------------------------------------------------------- the source
@dataclass(frozen=True)
class SourceChoice:
    """The data source of one run: a backend name for :func:`gpulib.connect`, and the folder a snapshot reads."""

    name: str
    snapshot_dir: str = ""

    def notebook_params(self, info: Declares) -> dict[str, Any]:
        """This choice as the parameters ``info`` declares (``source``, ``snapshot_dir``)."""
        names = {p.name for p in info.params}
        out: dict[str, Any] = {}
        if "source" in names:
            out["source"] = self.name
        if self.snapshot_dir and "snapshot_dir" in names:
            out["snapshot_dir"] = self.snapshot_dir
        return out

    def connect_kwargs(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments of :func:`gpulib.connect` for this choice and the run's other parameters: the
        snapshot folder, the demo's GPU Operator scenario (``demo_operator_state``,
        :data:`gpulib.demo.operator_objects.SCENARIOS`), the live source's node-evidence pod (``collect``,
        :mod:`gpulib.kube.collect`)."""
        kwargs: dict[str, Any] = {}
        if self.name == "snapshot":
            kwargs["path"] = self.snapshot_dir
        if self.name == "demo" and params.get("demo_operator_state"):
            kwargs["operator_scenario"] = params["demo_operator_state"]
        if self.name == "live" and str(params.get("collect", "")).lower() in ("true", "1", "yes"):
            kwargs["collect"] = True
        return kwargs


def choose_source(source: str | None, snapshot: str | None = None) -> SourceChoice | None:
    """The one mapping of ``--source`` / ``--snapshot`` (and of the ``source`` / ``snapshot_dir`` parameters).

    A backend name is that backend (a folder of that name is given as ``./demo``); a folder given as the
    source is a snapshot of that folder; a snapshot folder given alone means the snapshot source;
    ``snapshot`` needs a folder and a folder is read only by ``snapshot``; any other name must be a registered
    backend (:func:`gpulib.sources.registry.available`). Neither given: ``None`` (the notebook's default). The folder is
    made absolute, so the kernel (which runs in the notebook's folder)
    reads the folder the caller meant.
    """
    source = source or None
    snapshot = str(snapshot) if snapshot else None
    if source is None and snapshot is None:
        return None
    if source is not None and source not in available() and Path(source).is_dir():
        source, snapshot = "snapshot", source
    source = source or "snapshot"
    if source == "snapshot":
        if not snapshot:
            raise InvalidParameter("--source snapshot needs --snapshot DIR")
        return SourceChoice("snapshot", str(Path(snapshot).resolve()))
    if source not in available():
        others = [n for n in available() if n not in BUILTIN]  # a third-party backend is named too
        raise InvalidParameter(
            f"--source {source!r}: use demo, live, snapshot (with --snapshot DIR) or a snapshot folder"
            + (f" (also registered: {', '.join(others)})" if others else "")
        )
    if snapshot:
        raise InvalidParameter(f"--snapshot {snapshot} is read only with --source snapshot, not --source {source}")
    return SourceChoice(source)


#: parameters that name a node or a GPU: their notebook defaults are demo-fleet names
TARGET_PARAMS = ("node", "gpu")


def target_defaults(info: Declares, given: dict[str, Any], source: str) -> dict[str, Any]:
    """For a non-demo ``source``: the node/GPU parameters the user did not give. One whose help says what
    empty means (``empty: every GPU``) becomes empty; one that must name something is an InvalidParameter
    naming it, so a live run never silently looks at the demo's ``dgx-h100-1``."""
    if source in ("", "demo"):
        return {}
    out: dict[str, Any] = {}
    for p in info.params:
        if p.name in TARGET_PARAMS and p.name not in given and p.default not in ("", None):
            if "empty" in (p.help or "").lower():
                out[p.name] = ""
            else:
                raise InvalidParameter(
                    (
                        f"{info.name} needs -p {p.name} with --source {source}: its default {p.default!r} is a "
                        "demo-fleet name"
                    ),
                    hint=f"give the {p.name} from the alert with -p {p.name} NAME",
                )
    return out
