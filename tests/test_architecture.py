"""The rules of the house (docs/architecture.md), enforced: layering, domain boundaries, no cycles,
only sources/ knows the backend, short modules. The checker itself is shown to catch planted violations."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import archrules

ROOT = Path(__file__).resolve().parents[1]
GPULIB = ROOT / "gpulib"


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
    target.write_text(target.read_text() + "\n\ndef _planted():\n    from gpulib.cli import app  # lazy upward import\n    return app\n")
    found = archrules.violations(tree)
    assert any("gpulib.core.schema" in v and "upward import of gpulib.cli" in v and "(lazy)" in v for v in found), found


def test_checker_catches_a_planted_cycle(tmp_path):
    tree = _copy(tmp_path)
    # cost -> vllm and vllm -> cost
    (tree / "cost" / "planted_a.py").write_text("from gpulib.vllm import get_model  # noqa\n")
    (tree / "vllm" / "planted_b.py").write_text("from gpulib.cost import load_prices  # noqa\n")
    found = archrules.violations(tree)
    assert any(v.startswith("import cycle:") and "cost" in v and "vllm" in v for v in found), found


def test_checker_catches_a_reach_into_another_domain(tmp_path):
    tree = _copy(tmp_path)
    (tree / "cost" / "planted_c.py").write_text("from gpulib.xid.catalog import lookup  # noqa\n")
    found = archrules.violations(tree)
    assert any("gpulib.cost.planted_c" in v and "reaches into gpulib.xid.catalog" in v for v in found), found


#: ways of asking where data came from; only gpulib/sources/ (and the demo backend) may use them
BACKEND_SNIFFING = [
    re.compile(r"hasattr\(\s*(rb\.)?src\b"), re.compile(r"getattr\(\s*(rb\.)?src\s*,"),
    re.compile(r"\bsrc\.(kube|sim|operator_scenario|prom|settings)\b"),
    re.compile(r"source\s*==\s*['\"](live|demo|snapshot|prometheus)['\"]"),
    re.compile(r"isinstance\([^)]*(DemoSource|PrometheusSource|SnapshotSource|LiveSource)"),
]


def _code_texts():
    for p in sorted(GPULIB.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if rel.parts[1] in ("sources", "demo"):
            continue
        yield str(rel), p.read_text()
    for p in sorted(list((ROOT / "runbooks").rglob("*.ipynb")) + list((ROOT / "reports").glob("*.ipynb"))):
        nb = json.loads(p.read_text())
        src = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        yield str(p.relative_to(ROOT)), src


#: where a backend is chosen by name (to pass its arguments to connect()), the name may be compared
CONNECT_SITES = {"gpulib/cli.py", "gpulib/runbook.py"}


def test_only_sources_know_where_data_came_from():
    hits = []
    for name, text in _code_texts():
        rules = BACKEND_SNIFFING[:3] + BACKEND_SNIFFING[4:] if name in CONNECT_SITES else BACKEND_SNIFFING
        for i, line in enumerate(text.splitlines(), 1):
            if any(rx.search(line) for rx in rules):
                hits.append(f"{name}:{i}: {line.strip()}")
    assert hits == []



def test_no_package_name_is_both_an_export_and_a_submodule():
    """``gpulib.mig.plan`` must mean one thing: importing a submodule binds its name on the package, so an
    exported function of the same name would be shadowed by the module (``mig.plan(...)``: module not callable)."""
    assert archrules.export_clashes(GPULIB) == []


def test_checker_catches_a_planted_export_clash(tmp_path):
    tree = _copy(tmp_path)
    init = tree / "mig" / "__init__.py"
    init.write_text(init.read_text().replace("_EXPORTS = {", "_EXPORTS = {\n    'catalog': 'catalog',", 1))
    assert archrules.export_clashes(tree) == ["gpulib/mig: catalog"]
