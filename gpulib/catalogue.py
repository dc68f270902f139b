"""The one list of runbooks, reports and lessons: name -> domain -> notebook, with their parameters.

The CLI (`gpuops list|run`), `Finding.runbook` links, the alert rules' runbook URLs, `gpuops serve` and the
tests all iterate :func:`catalogue`, so a runbook that is named anywhere exists.
The parameters come from each notebook's cell tagged ``parameters`` (papermill's convention:
https://papermill.readthedocs.io/en/latest/usage-parameterize.html).
"""
from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulib.core.errors import InvalidParameter

NOTEBOOK_DIRS = ("runbooks", "reports", "runbooks/learn")

#: runbook/report name -> the gpulib domain package that implements it (lessons map to ``learn``)
DOMAINS = {
    "fleet_overview": "fleet",
    "xid_ecc_triage": "xid",
    "nccl_check": "nccl",
    "mig_sizing": "mig",
    "operator_install": "gpu_operator",
    "vllm_deploy": "vllm",
    "gpu_utilization_report": "cost",
}


def project_root() -> Path:
    """Folder holding ``runbooks/`` (``$GPUOPS_HOME``, the package's checkout, or the current folder)."""
    for cand in (os.environ.get("GPUOPS_HOME"), Path(__file__).resolve().parent.parent, Path.cwd()):
        if cand and (Path(cand) / "runbooks").is_dir():
            return Path(cand)
    raise InvalidParameter("cannot find the runbooks/ folder; set GPUOPS_HOME to the gpu-runbooks checkout")


@dataclass
class Param:
    name: str
    default: Any
    help: str = ""


@dataclass
class NotebookInfo:
    name: str
    path: Path
    kind: str
    domain: str = ""
    title: str = ""
    description: str = ""
    params: list[Param] = field(default_factory=list)


def _parse_params(source: str) -> list[Param]:
    params = []
    lines = source.splitlines()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = ast.unparse(node.value)
            line = lines[node.lineno - 1]
            comment = line.split("#", 1)[1].strip() if "#" in line else ""
            params.append(Param(node.targets[0].id, value, comment))
    return params


def notebook_info(path: Path) -> NotebookInfo:
    nb = json.loads(path.read_text())
    kind = "report" if path.parent.name == "reports" else "learn" if path.parent.name == "learn" else "runbook"
    info = NotebookInfo(name=path.stem, path=path, kind=kind,
                        domain="learn" if kind == "learn" else DOMAINS.get(path.stem, ""))
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", []))
        if cell["cell_type"] == "markdown" and not info.title:
            head = [ln for ln in src.splitlines() if ln.strip()]
            info.title = head[0].lstrip("# ").strip() if head else ""
            info.description = next((ln.strip() for ln in head[1:] if not ln.startswith("#")), "")
        if cell["cell_type"] == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            info.params = _parse_params(src)
    return info


def catalogue() -> dict[str, NotebookInfo]:
    root = project_root()
    out = {}
    for d in NOTEBOOK_DIRS:
        for p in sorted((root / d).glob("*.ipynb")):
            out[p.stem] = notebook_info(p)
    return out


def find_notebook(name: str) -> NotebookInfo:
    cat = catalogue()
    key = Path(name).stem
    if key not in cat:
        import difflib
        close = difflib.get_close_matches(key, list(cat), n=3, cutoff=0.6) or [
            n for n in cat if key.lower() in n.lower() or n.lower() in key.lower()]
        raise InvalidParameter(f"no runbook or report named {name!r}; "
                               f"{'did you mean ' + ', '.join(close) + '?' if close else 'available: ' + ', '.join(sorted(cat))}",
                               hint="`gpuops list` shows every runbook with its parameters")
    return cat[key]


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


#: parameters that name a node or a GPU: their notebook defaults are demo-fleet names
TARGET_PARAMS = ("node", "gpu")


def target_defaults(info: NotebookInfo, given: dict[str, Any], source: str) -> dict[str, Any]:
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
                    f"{info.name} needs -p {p.name} with --source {source}: its default {p.default!r} is a demo-fleet name",
                    hint=f"give the {p.name} from the alert with -p {p.name} NAME")
    return out


def resolve_params(info: NotebookInfo, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    known = {p.name: p for p in info.params}
    out = {}
    for key, raw in pairs:
        if key not in known:
            raise InvalidParameter(f"{info.name} has no parameter {key!r}; parameters: {', '.join(known) or 'none'}")
        out[key] = coerce(known[key], raw)
    if "window" in out:
        from gpulib.core.timeutil import parse_window
        parse_window(out["window"])
    check_values(out)
    return out


def check_values(params: dict[str, Any]) -> None:
    """Validate the parameters that reach PromQL, a manifest or a shell command (gpulib.core.validate);
    InvalidParameter (a usage error) for a value that is not a name of its kind. Empty means 'all'."""
    from gpulib.core import validate

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
