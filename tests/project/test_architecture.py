"""The rules of the house (docs/architecture.md), enforced: layering, domain boundaries, no cycles,
only sources/ knows the backend, short modules. The checker itself is shown to catch planted violations."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import archrules

ROOT = Path(__file__).resolve().parents[2]
GPULIB = ROOT / "gpulib"


@pytest.fixture(scope="module", autouse=True)
def _parsed_once():
    """Every check of this module reads the modules archrules parsed once (its caches), emptied when it ends."""
    yield
    archrules.forget()


def test_imports_point_down_and_domains_meet_through_init():
    assert archrules.violations(GPULIB) == []


def test_no_module_over_the_limit():
    assert archrules.long_modules(GPULIB) == []


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "gpulib"
    shutil.copytree(GPULIB, dst, ignore=shutil.ignore_patterns("data", "__pycache__"))
    return dst


def test_checker_catches_a_planted_upward_import(tmp_path):
    tree = _copy(tmp_path)
    target = tree / "core" / "schema.py"
    target.write_text(
        target.read_text()
        + "\n\ndef _planted():\n    from gpulib.cli import app  # lazy upward import\n    return app\n"
    )
    found = archrules.violations(tree)
    assert any("gpulib.core.schema" in v and "upward import of gpulib.cli" in v and "(lazy)" in v for v in found), found


def test_checker_catches_a_planted_cycle(tmp_path):
    tree = _copy(tmp_path)
    # cost -> vllm and vllm -> cost
    (tree / "cost" / "planted_a.py").write_text("from gpulib.vllm import get_model  # noqa\n")
    (tree / "vllm" / "planted_b.py").write_text("from gpulib.cost import load_prices  # noqa\n")
    found = archrules.violations(tree)
    assert any(v.startswith("import cycle:") and "cost" in v and "vllm" in v for v in found), found


def test_no_module_level_import_cycle():
    """No module of gpulib reaches itself again through imports, counting the ones deferred into functions and a
    package ``__init__``'s ``_EXPORTS`` (a submodule imports names from the module defining them, never from its
    own package)."""
    assert archrules.module_cycles(GPULIB) == []


def test_cycle_checker_catches_a_cycle_hidden_in_a_function(tmp_path):
    tree = _copy(tmp_path)
    (tree / "cost" / "planted_d.py").write_text("def f():\n    from gpulib.cost.planted_e import g  # noqa\n")
    (tree / "cost" / "planted_e.py").write_text("from gpulib.cost.planted_d import f  # noqa\n\n\ndef g():\n    pass\n")
    (tree / "mig" / "planted_f.py").write_text("import gpulib.mig as mig  # noqa: the package exports this module\n")
    init = tree / "mig" / "__init__.py"
    init.write_text(init.read_text().replace("_EXPORTS = {", "_EXPORTS = {\n    'planted': 'planted_f',"))
    found = archrules.module_cycles(tree)
    assert ["gpulib.cost.planted_d", "gpulib.cost.planted_e"] in found
    assert ["gpulib.mig", "gpulib.mig.planted_f"] in found


def test_imports_sit_at_module_top_except_the_deferred_heavy_libraries():
    """An import inside a function hides a dependency (and a cycle: see the test above); the only ones allowed are
    the heavy optional libraries of archrules.DEFERRED_IMPORTS, each with its reason."""
    assert archrules.function_imports(GPULIB) == []


def test_function_import_checker_catches_a_planted_case(tmp_path):
    tree = _copy(tmp_path)
    target = tree / "cost" / "analysis.py"
    target.write_text(
        target.read_text()
        + "\n\ndef _planted():\n    import json\n    from gpulib.xid import lookup\n"
        + "    from scipy.optimize import milp  # on the list\n    return json, lookup, milp\n"
    )
    (tree / "kube" / "planted_i.py").write_text("class C:\n    def f(self):\n        from . import labels\n")
    found = [f for f in archrules.function_imports(tree) if "planted" in f or "analysis.py" in f]
    assert [f.split(": ", 1)[1] for f in found] == [
        "import json",
        "from gpulib.xid import lookup",
        "from . import labels",
    ]
    assert all(f.startswith(("gpulib/cost/analysis.py:", "gpulib/kube/planted_i.py:3")) for f in found), found


def test_checker_catches_a_reach_into_another_domain(tmp_path):
    tree = _copy(tmp_path)
    (tree / "cost" / "planted_c.py").write_text("from gpulib.xid.catalog import lookup  # noqa\n")
    found = archrules.violations(tree)
    assert any("gpulib.cost.planted_c" in v and "reaches into gpulib.xid.catalog" in v for v in found), found


def _notebooks() -> list[Path]:
    return sorted(list((ROOT / "runbooks").rglob("*.ipynb")) + list((ROOT / "reports").glob("*.ipynb")))


def test_only_sources_know_where_data_came_from():
    assert archrules.backend_sniffing(GPULIB, _notebooks(), base=ROOT) == []


def test_checker_catches_backend_attributes_read_by_name(tmp_path):
    """``getattr(x, "kube", None)`` (and a loop over such names) asks which backend ``x`` is: caught in any
    module outside sources/ and demo/; a capability call (``x.kube_cluster()``) is not."""
    tree = _copy(tmp_path)
    (tree / "kube" / "planted_d.py").write_text(
        "def as_cluster(cluster):\n"
        "    for attr in ('kube', 'cluster', 'k8s'):\n"
        "        inner = getattr(cluster, attr, None)\n"
        "        if inner is not None:\n"
        "            return inner\n"
        "    return cluster.kube_cluster()\n"
    )
    (tree / "xid" / "planted_e.py").write_text(
        "def f(s):\n    return getattr(s, 'kube', None) or hasattr(s, \"sim\")\n"
    )
    found = archrules.backend_sniffing(tree)
    assert [h.split(": ")[0] for h in found] == ["gpulib/kube/planted_d.py:3", "gpulib/xid/planted_e.py:2"], found
    # the same lines inside sources/ are where they belong
    (tree / "sources" / "planted_f.py").write_text("def f(s):\n    return getattr(s, 'kube', None)\n")
    assert not any("sources/planted_f" in h for h in archrules.backend_sniffing(tree))


def test_no_package_name_is_both_an_export_and_a_submodule():
    """``gpulib.mig.plan`` must mean one thing: importing a submodule binds its name on the package, so an
    exported function of the same name would be shadowed by the module (``mig.plan(...)``: module not callable)."""
    assert archrules.export_clashes(GPULIB) == []


def test_checker_catches_a_planted_export_clash(tmp_path):
    tree = _copy(tmp_path)
    init = tree / "mig" / "__init__.py"
    init.write_text(init.read_text().replace("_EXPORTS = {", "_EXPORTS = {\n    'catalog': 'catalog',", 1))
    assert archrules.export_clashes(tree) == ["gpulib/mig: catalog"]


def test_domains_define_and_read_no_demo_data():
    """Simulated data (the demo fleet's series, histories, objects) is the demo backend's (gpulib/demo/),
    served through the Source interface; no domain module defines a demo name or names a demo data file."""
    assert archrules.demo_knowledge(GPULIB) == []


def test_checker_catches_planted_demo_data_in_a_domain(tmp_path):
    tree = _copy(tmp_path)
    (tree / "cost" / "planted_g.py").write_text(
        '"""Docstrings may say gpulib/data/demo/demo_fleet.yaml."""\n'
        "from gpulib.core.knowledge import load_table\n\n"
        "_DEMO_PRICES = {'H100': 1.0}\n\n\n"
        "def prices(demo=False):\n"
        "    return load_table('demo/demo_gpu_models')\n\n\n"
        "def fleet():\n"
        "    return open('gpulib/data/demo/demo_fleet.yaml').read()\n"
    )
    (tree / "demo" / "planted_h.py").write_text("DEMO_OK = 'demo/demo_gpu_models'  # the demo's own data\n")
    found = [v for v in archrules.demo_knowledge(tree) if "planted" in v]
    assert found == [
        "gpulib.cost.planted_g:4: defines _DEMO_PRICES",
        "gpulib.cost.planted_g:7: defines demo",
        "gpulib.cost.planted_g:8: names demo data 'demo/demo_gpu_models'",
        "gpulib.cost.planted_g:12: names demo data 'gpulib/data/demo/demo_fleet.yaml'",
    ]


def test_every_domain_has_the_same_rooms():
    assert archrules.room_problems(GPULIB) == []


def test_only_views_and_the_notebook_plumbing_import_plotly():
    assert archrules.plotly_importers(GPULIB) == []


def test_no_sop_sentence_is_written_in_code():
    assert archrules.inline_sop(GPULIB) == []


def test_room_checks_catch_a_missing_room_a_stray_plotly_import_and_an_inline_sop(tmp_path):
    tree = _copy(tmp_path)
    (tree / "vllm" / "view.py").unlink()
    (tree / "nccl" / "runbook.py").write_text("")
    (tree / "cost" / "analysis.py").write_text(
        (tree / "cost" / "analysis.py").read_text()
        + "\n\ndef _planted():\n    import plotly.graph_objects as go\n    return go\n"
    )
    (tree / "fleet" / "planted.py").write_text(
        "from gpulib.core.findings import Finding\n\n"
        "def f(node):\n    return Finding('warning', 't', sop_step=f'Cordon {node}', escalation='Call ' + "
        "'the vendor')\n"
    )
    assert "gpulib/vllm/ has no view.py" in archrules.room_problems(tree)
    assert any("gpulib/nccl/runbook.py" in p for p in archrules.room_problems(tree))
    assert any(p.startswith("gpulib/cost/analysis.py:") for p in archrules.plotly_importers(tree))
    found = archrules.inline_sop(tree)
    assert any("fleet/planted.py" in p and "sop_step" in p for p in found), found
    assert any("fleet/planted.py" in p and "escalation" in p for p in found), found
