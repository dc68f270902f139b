"""gpulib.inspection: a notebook's parameters as papermill reads them, typed; the one mapping of the data source
(``--source`` / ``--snapshot``, the ``source`` / ``snapshot_dir`` parameters) and the connect arguments it gives."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from gpulib.catalogue import catalogue, find_notebook, notebook_info
from gpulib.core.errors import InvalidParameter
from gpulib.inspection import (
    PARAMS_ENV,
    Param,
    SourceChoice,
    choose_source,
    notebook_params,
    params_env,
    params_from_env,
)
from tests.helpers.pinned import ROOT

PARAMS_CELL = """source = "demo"  # demo | live | snapshot
window = '6h'   # Prometheus duration: 30m, 6h
gpus = 4  # GPUs per replica
headroom = 0.2
apply = False  # dry run unless true
names = ["a", "b"]  # a list
hours = 24 * 7  # an expression, not a literal
"""


def _planted(tmp_path: Path, params: str = PARAMS_CELL) -> Path:
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Planted runbook\n\nWhat it is for."),
            new_code_cell(params, metadata={"tags": ["parameters"]}),
            new_code_cell("x = 1"),
        ],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    (tmp_path / "runbooks").mkdir(exist_ok=True)
    path = tmp_path / "runbooks" / "planted.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_parameters_are_papermills_with_typed_defaults_and_help(tmp_path):
    assert notebook_params(_planted(tmp_path)) == [
        Param("source", "demo", "demo | live | snapshot"),
        Param("window", "6h", "Prometheus duration: 30m, 6h"),
        Param("gpus", 4, "GPUs per replica"),
        Param("headroom", 0.2, ""),
        Param("apply", False, "dry run unless true"),
        Param("names", ["a", "b"], "a list"),
        Param("hours", "24 * 7", "an expression, not a literal"),
    ]


def test_title_description_and_kind_stay_read_from_the_notebook(tmp_path):
    info = notebook_info(_planted(tmp_path))
    assert (info.name, info.kind, info.title, info.description) == (
        "planted",
        "runbook",
        "Planted runbook",
        "What it is for.",
    )
    assert [p.name for p in info.params][:2] == ["source", "window"]


def test_every_catalogued_parameter_cell_reads_as_its_assignments():
    """The cells papermill reads are plain ``name = literal  # help`` lines: each parameter's default is the
    literal written in the cell (read here with json/ast, not papermill)."""
    import ast

    info = find_notebook("xid_ecc_triage")
    cell = next(c for c in json.loads(info.path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    written = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in ast.parse("".join(cell["source"])).body
        if isinstance(n, ast.Assign)
    }
    assert {p.name: p.default for p in info.params} == written
    assert next(p for p in info.params if p.name == "gpu").help.startswith("GPU index, GPU UUID or MIG UUID")


# ------------------------------------------------------------------------------------- the source
def test_source_names_folders_and_snapshot_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "incident").mkdir()
    (tmp_path / "demo").mkdir()  # a folder named like a backend does not shadow it
    snap = str((tmp_path / "incident").resolve())
    assert choose_source(None) is None and choose_source("", "") is None
    assert choose_source("demo") == SourceChoice("demo")
    assert choose_source("live") == SourceChoice("live")
    assert choose_source("prometheus") == SourceChoice("prometheus")  # any registered backend
    assert choose_source("incident") == SourceChoice("snapshot", snap)  # a folder is a snapshot of it
    assert choose_source("snapshot", "incident") == SourceChoice("snapshot", snap)
    assert choose_source(None, "incident") == SourceChoice("snapshot", snap)  # a snapshot folder alone
    assert choose_source("./demo") == SourceChoice("snapshot", str((tmp_path / "demo").resolve()))
    with pytest.raises(InvalidParameter, match="needs --snapshot DIR"):
        choose_source("snapshot")
    with pytest.raises(InvalidParameter, match=r"^--source 'prod': use demo, live, snapshot"):
        choose_source("prod")
    with pytest.raises(InvalidParameter, match="only with --source snapshot"):
        choose_source("live", "incident")


def test_a_registered_third_party_backend_is_a_source_and_is_named_when_one_is_wrong(monkeypatch):
    from gpulib.sources import registry

    monkeypatch.setitem(registry._REGISTRY, "mysource", "mypkg.source:MySource")
    assert choose_source("mysource") == SourceChoice("mysource")
    with pytest.raises(InvalidParameter, match=r"or a snapshot folder \(also registered: mysource\) \(hint"):
        choose_source("prod")


def test_the_choice_as_notebook_parameters_names_only_what_the_notebook_declares(tmp_path):
    snap = SourceChoice("snapshot", str(tmp_path))
    assert snap.notebook_params(find_notebook("fleet_overview")) == {
        "source": "snapshot",
        "snapshot_dir": str(tmp_path),
    }
    assert snap.notebook_params(find_notebook("learn_cost")) == {"source": "snapshot"}  # a lesson has no snapshot_dir
    assert SourceChoice("demo").notebook_params(find_notebook("fleet_overview")) == {"source": "demo"}


def test_connect_arguments_are_the_backends_options_only(tmp_path):
    assert SourceChoice("snapshot", str(tmp_path)).connect_kwargs({}) == {"path": str(tmp_path)}
    assert SourceChoice("demo").connect_kwargs({"demo_operator_state": "gfd_missing"}) == {
        "operator_scenario": "gfd_missing"
    }
    assert SourceChoice("live").connect_kwargs({"demo_operator_state": "gfd_missing"}) == {}
    assert SourceChoice("live").connect_kwargs({"collect": "yes"}) == {"collect": True}
    assert SourceChoice("live").connect_kwargs({"collect": False}) == {}
    assert SourceChoice("demo").connect_kwargs({"collect": True}) == {}


def test_the_runbook_connect_step_uses_the_same_rules(tmp_path, monkeypatch):
    """Runbook(source=<folder>) opens a snapshot of that folder as ``--source <folder>`` does, and a snapshot
    without a folder is a usage error (exit 2), not a crash or a demo run."""
    from gpulib.runbook import Runbook

    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    rb = Runbook("fleet_overview", source=str(tmp_path))
    assert rb.src is not None and rb.src.name == "snapshot" and not rb.usage_errors
    bad = Runbook("fleet_overview", source="snapshot", snapshot_dir="")
    assert bad.src is None and "needs --snapshot DIR" in bad.usage_errors[0]
    top = bad.finish()[0]
    assert top.title.startswith("Runbook incomplete: bad parameter") and top.sop_step.startswith(
        "Correct the parameter"
    )


def test_the_parameters_handed_to_the_kernel_are_the_ones_papermill_read(tmp_path):
    """The engine hands each kernel the parameters it read (``params_env``) so the kernel does not import papermill
    again; what the kernel reads back must be papermill's list, for every catalogued notebook and the planted one."""
    infos = [notebook_info(_planted(tmp_path))] + [find_notebook(n) for n in catalogue()]
    for info in infos:
        env = params_env(info.name, info.params)
        assert env, info.name
        assert params_from_env(info.name, env) == notebook_params(info.path), info.name
        assert params_from_env("another_notebook", env) is None  # another notebook's list is never used


def test_a_default_json_would_change_is_not_handed_over():
    assert params_env("nb", [Param("shape", (1, 2))]) == {}  # a tuple would come back a list
    assert params_from_env("nb", {}) is None
    assert params_from_env("nb", {"GPUOPS_NOTEBOOK_PARAMETERS": "{not json"}) is None


def test_a_run_kernel_gets_its_notebooks_parameters(tmp_path, monkeypatch):
    """The run engine puts the parameters into the kernel's own environment (beside the findings path)."""
    from gpulib.run import render

    seen = {}
    real = render.kernel_manager

    def spy(env, *a, **kw):
        seen.update(env)
        return real(env, *a, **kw)

    monkeypatch.setattr(render, "kernel_manager", spy)
    info = notebook_info(_planted(tmp_path))
    render.execute(info, {}, tmp_path / "out", progress=False, summary=False)
    assert json.loads(seen[PARAMS_ENV])["notebook"] == "planted"
    assert [p[0] for p in json.loads(seen[PARAMS_ENV])["params"]] == [p.name for p in info.params]


def test_choose_source_is_the_only_mapping_of_snapshot_dir(tmp_path, monkeypatch):
    """The ``snapshot_dir`` parameter reaches the snapshot backend only through choose_source/connect_kwargs (as
    ``path=``); gpulib.connect passes keywords to the backend as they are and maps nothing itself."""
    import gpulib
    from gpulib.core.errors import SnapshotError
    from gpulib.runbook import Runbook

    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    rb = Runbook("fleet_overview", source="snapshot", snapshot_dir=str(tmp_path))
    assert rb.src is not None and rb.src.path == tmp_path.resolve() and not rb.usage_errors
    assert gpulib.connect("snapshot", path=tmp_path).path == tmp_path
    with pytest.raises(SnapshotError, match="path="):
        gpulib.connect("snapshot", snapshot_dir=str(tmp_path))


TRICKY_CELLS = [
    PARAMS_CELL,
    'a = {"x": 1,\n     "y": 2}  # a dict over two lines\nb = 1  # help = with an equals sign\nc: int = 3  # typed\n',
    "# only a comment\n\nx = 'a#b'  # the value holds a hash\ny=2\n",
]


@pytest.mark.parametrize("cell", TRICKY_CELLS)
def test_the_parameters_are_read_as_papermill_reads_them_without_importing_it(tmp_path, cell):
    """notebook_params reads the cell itself (importing papermill costs ~1 s of CPU a process); papermill's own
    inspection is the reference, on planted cells and on every notebook of the catalogue."""
    import ast

    import papermill

    def papermills(path):
        out = []
        for p in papermill.inspect_notebook(str(path)).values():
            try:
                default = ast.literal_eval(p["default"])
            except (ValueError, SyntaxError):
                default = p["default"]
            out.append(Param(p["name"], default, p["help"]))
        return out

    planted = _planted(tmp_path, cell)
    assert notebook_params(planted) == papermills(planted)
    for info in catalogue().values():
        assert notebook_params(info.path) == papermills(info.path), info.name


def test_reading_a_runbooks_parameters_does_not_import_papermill():
    """A fast verdict or ``gpuops list`` reads every parameter without papermill (nbformat, jsonschema)."""
    import subprocess
    import sys

    code = (
        "import sys; from gpulib.catalogue import catalogue; catalogue(); "
        "print(sorted(m for m in ('papermill', 'nbformat', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
