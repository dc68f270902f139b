"""The one list of runbooks, reports and lessons: name -> domain -> notebook, with their parameters.

The CLI (`gpuops list|run`), `Finding.runbook` links, the alert rules' runbook URLs, `gpuops serve` and the
tests all iterate :func:`catalogue`, so a runbook that is named anywhere exists.
The parameters come from each notebook's cell tagged ``parameters`` (papermill's convention:
https://papermill.readthedocs.io/en/latest/usage-parameterize.html), read by :mod:`gpulib.inspection`.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.core.errors import InvalidParameter
from gpulib.inspection import Param, notebook_params

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
    "node_health": "reliability",
    "gpu_reliability_report": "reliability",
}


def project_root() -> Path:
    """Folder holding ``runbooks/`` (``$GPUOPS_HOME``, the package's checkout, or the current folder)."""
    for cand in (os.environ.get("GPUOPS_HOME"), Path(__file__).resolve().parent.parent, Path.cwd()):
        if cand and (Path(cand) / "runbooks").is_dir():
            return Path(cand)
    raise InvalidParameter("cannot find the runbooks/ folder; set GPUOPS_HOME to the gpu-runbooks checkout")


@dataclass
class NotebookInfo:
    name: str
    path: Path
    kind: str
    domain: str = ""
    title: str = ""
    description: str = ""
    params: list[Param] = field(default_factory=list)


def notebook_info(path: Path) -> NotebookInfo:
    nb = json.loads(path.read_text())
    kind = "report" if path.parent.name == "reports" else "learn" if path.parent.name == "learn" else "runbook"
    info = NotebookInfo(
        name=path.stem, path=path, kind=kind, domain="learn" if kind == "learn" else DOMAINS.get(path.stem, "")
    )
    for cell in nb.get("cells", []):
        if cell["cell_type"] == "markdown" and not info.title:
            head = [ln for ln in "".join(cell.get("source", [])).splitlines() if ln.strip()]
            info.title = head[0].lstrip("# ").strip() if head else ""
            info.description = next((ln.strip() for ln in head[1:] if not ln.startswith("#")), "")
    info.params = notebook_params(path, nb)
    return info


def _paths() -> dict[str, Path]:
    root = project_root()
    return {p.stem: p for d in NOTEBOOK_DIRS for p in sorted((root / d).glob("*.ipynb"))}


def catalogue() -> dict[str, NotebookInfo]:
    return {name: notebook_info(p) for name, p in _paths().items()}


def find_notebook(name: str) -> NotebookInfo:
    """The notebook ``name`` (only that one is read); InvalidParameter with close names for a typo."""
    cat = _paths()
    key = Path(name).stem
    if key not in cat:
        close = difflib.get_close_matches(key, list(cat), n=3, cutoff=0.6) or [
            n for n in cat if key.lower() in n.lower() or n.lower() in key.lower()
        ]
        raise InvalidParameter(
            f"no runbook or report named {name!r}; "
            f"{'did you mean ' + ', '.join(close) + '?' if close else 'available: ' + ', '.join(sorted(cat))}",
            hint="`gpuops list` shows every runbook with its parameters",
        )
    return notebook_info(cat[key])
