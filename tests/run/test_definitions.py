"""Each runbook and each lesson is defined once (gpulib/run/catalogue.py, each domain's RUNBOOK, each
gpulib/learn/<topic>.py's) and its notebook only renders that definition: the parameters cell is generated from
``RUNBOOK.params`` (papermill reads the same names, defaults and help back), the code cells are ``start``, one
``rb.step`` per step of the definition, in its order, and ``finish``: no condition, no display code, no second
hand-over of parameters. The checks are shown to catch planted cells."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from gpulib.catalogue import catalogue, find_notebook
from gpulib.core.runbook import LESSON, RUNBOOK, Runbook, Step
from gpulib.inspection import notebook_params
from gpulib.run.catalogue import LESSONS, RUNBOOKS, defined, definition, lesson_defined
from gpulib.run.verdict import supports

ROOT = Path(__file__).resolve().parents[2]
DEFINED = [n for n in RUNBOOKS if defined(n)] + [n for n in LESSONS if lesson_defined(n)]
_STEP = re.compile(r'^rb\.step\("([^"\\]+)"\)$')
_ALLOWED = (
    re.compile(r"^from gpulib\.run\.notebook import start$"),
    re.compile(r"^from gpulib\.[a-z_]+\.[a-z_]+ import RUNBOOK$"),
    re.compile(r"^rb = start\(RUNBOOK, globals\(\)\)$"),
    _STEP,
    re.compile(r"^findings = rb\.finish\(\)$"),
)


def cell_problems(cells: list[str], step_titles: list[str]) -> list[str]:
    """Why these code cells (the parameters cell left out) are not a rendering of a definition with these steps."""
    out: list[str] = []
    seen: list[str] = []
    for i, src in enumerate(cells):
        for line in filter(None, (ln.strip() for ln in src.splitlines())):
            if not any(p.match(line) for p in _ALLOWED):
                out.append(f"cell {i}: {line!r} is not start, rb.step or finish")
            m = _STEP.match(line)
            if m:
                seen.append(m.group(1))
    if seen != step_titles:
        out.append(f"steps {seen} are not the definition's {step_titles}")
    joined = "\n".join(cells)
    if joined.count("rb = start(") != 1 or joined.count("rb.finish()") != 1:
        out.append("start and finish once each")
    return out


def _code_cells(nb: dict) -> tuple[str, list[str]]:
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    rest = ["".join(c["source"]) for c in code if c not in params]
    return "".join(params[0]["source"]), rest


@pytest.mark.parametrize("name", DEFINED)
def test_the_parameters_cell_is_generated_from_the_definition(name):
    rb = definition(name)
    info = find_notebook(name)
    params_cell, _ = _code_cells(json.loads(info.path.read_text()))
    assert params_cell.rstrip("\n") == rb.parameters_cell().rstrip("\n")
    assert [(p.name, p.default, p.help) for p in notebook_params(info.path)] == [
        (p.name, p.default, p.help) for p in rb.params
    ]


@pytest.mark.parametrize("name", DEFINED)
def test_the_notebooks_code_cells_render_the_definitions_steps_and_nothing_else(name):
    rb = definition(name)
    _, cells = _code_cells(json.loads(find_notebook(name).path.read_text()))
    assert cell_problems(cells, [s.title for s in rb.steps]) == []


def test_the_cell_check_catches_planted_cells():
    good = [
        "from gpulib.run.notebook import start\nfrom gpulib.xid.steps import RUNBOOK\n\nrb = start(RUNBOOK, globals())",
        'rb.step("Meaning")',
        "findings = rb.finish()",
    ]
    assert cell_problems(good, ["Meaning"]) == []
    assert cell_problems(good, ["Meaning", "Impact"])  # a step the notebook never renders
    bad = [*good[:2], 'if rb.ready(inp):\n    rb.step("Impact")', good[2]]
    assert any("if rb.ready" in p for p in cell_problems(bad, ["Meaning", "Impact"]))
    html = [*good[:2], 'nb.note(f"<b>{node}</b>")', good[2]]
    assert any("nb.note" in p for p in cell_problems(html, ["Meaning"]))
    twice = [*good, "findings = rb.finish()"]
    assert "start and finish once each" in cell_problems(twice, ["Meaning"])


def test_a_runbook_name_is_spelled_only_in_the_catalogue_within_run():
    """Nothing in gpulib/run/ but catalogue.py names a runbook: the run layer never branches on which one it runs."""
    names = set(RUNBOOKS) | set(LESSONS)
    found = []
    for path in sorted((ROOT / "gpulib" / "run").glob("*.py")):
        if path.name == "catalogue.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [f"{path.name}: {n}" for n in names if n in node.value]
    assert found == []


def test_core_runbook_imports_only_core_and_the_standard_library():
    tree = ast.parse((ROOT / "gpulib" / "core" / "runbook.py").read_text())
    mods = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    outside = [m for m in mods if m and m.startswith("gpulib") and not m.startswith("gpulib.core")]
    assert outside == [] and not {"IPython", "papermill", "plotly"} & {m.split(".")[0] for m in mods if m}


@pytest.mark.parametrize("name", DEFINED)
def test_jupyterlab_opens_the_runbook_with_its_code_hidden_but_its_parameters_shown(name):
    """In JupyterLab a runbook reads as its headings, verdict and charts: every code cell but the parameters cell is
    collapsed (the cell metadata JupyterLab honours: https://jupyterlab.readthedocs.io/en/stable/user/notebook.html)."""
    nb = json.loads(find_notebook(name).path.read_text())
    for c in (c for c in nb["cells"] if c["cell_type"] == "code"):
        hidden = c.get("metadata", {}).get("jupyter", {}).get("source_hidden", False)
        is_params = "parameters" in c.get("metadata", {}).get("tags", [])
        assert hidden is (not is_params), "".join(c["source"])[:60]


def test_every_lesson_notebook_is_defined_as_a_lesson_and_every_runbook_as_a_runbook():
    """Lessons are runbooks too: every notebook of runbooks/learn/ has a definition of kind lesson; the
    runbooks keep kind runbook, and a lesson gets no fast verdict (it has no findings to give one)."""
    lessons = sorted(i.name for i in catalogue().values() if i.kind == "learn")
    assert lessons and sorted(n for n in LESSONS if lesson_defined(n)) == lessons
    assert {definition(n).kind for n in lessons} == {LESSON}
    assert {definition(n).kind for n in RUNBOOKS if defined(n)} == {RUNBOOK}
    assert not [n for n in lessons if defined(n) or supports(n, {})]


def test_a_lesson_has_no_findings():
    with pytest.raises(ValueError, match="no findings"):
        Runbook("learn_x", "learn", (), (Step("a"),), findings=lambda c: [], kind=LESSON)
    with pytest.raises(ValueError, match="kind"):
        Runbook("x", "learn", (), (Step("a"),), kind="tutorial")
