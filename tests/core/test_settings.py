"""gpulib/core/settings.py: every environment variable gpulib reads is declared once (gpulib/data/core/environment.csv),
documented in docs/settings.md (generated), and read with its declared default. The scan that finds the reads is
shown to catch planted ones."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpulib.core.errors import UnknownSetting
from gpulib.core.settings import env, environment_settings, markdown_table, serve_options, serve_options_table

ROOT = Path(__file__).resolve().parents[2]
#: names read from the environment by prefix, each a family the table declares member by member
PREFIXES = ("GPUOPS_PROMETHEUS_",)
#: variables of other programs that a GPU-node probe passes through to them rather than configuring gpulib
PASSED_THROUGH = re.compile(r"^(NCCL_|CUDA_VISIBLE|TORCH_NCCL|RANK$|WORLD_SIZE$|LOCAL_RANK$)")


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def environment_reads(root: Path) -> list[tuple[str, str]]:
    """(file, variable) for every read of the environment by a known key: ``os.environ[K]``, ``os.environ.get(K)``,
    ``os.getenv(K)``, ``env.get(K)`` on a copy named ``env``, ``K in os.environ``; K a literal, a module constant, or
    an f-string (its literal prefix, ending in ``*``)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        consts = _constants(tree)
        rel = str(path.relative_to(root.parent))

        def key(node: ast.AST) -> str | None:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            if isinstance(node, ast.Name):
                return consts.get(node.id)
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                return str(node.values[0].value) + "*"
            return None

        for node in ast.walk(tree):
            k = None
            if isinstance(node, ast.Subscript) and _is_environ(node.value):
                k = key(node.slice)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                f = node.func
                if f.attr == "get" and (
                    _is_environ(f.value) or (isinstance(f.value, ast.Name) and f.value.id == "env")
                ):
                    k = key(node.args[0])
                elif f.attr == "getenv":
                    k = key(node.args[0])
            elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
                k = key(node.left)
            if k and (k.isupper() or k.endswith("*")) and not PASSED_THROUGH.match(k):
                out.append((rel, k))
    return out


def undeclared(reads: list[tuple[str, str]], declared: set[str]) -> list[str]:
    bad = []
    for where, k in reads:
        if k.endswith("*"):
            if k[:-1] not in PREFIXES or not any(d.startswith(k[:-1]) for d in declared):
                bad.append(f"{where}: {k}")
        elif k not in declared:
            bad.append(f"{where}: {k}")
    return sorted(set(bad))


def test_every_environment_variable_the_package_reads_is_declared():
    reads = environment_reads(ROOT / "gpulib")
    assert len(reads) > 20  # the scan finds the package's reads (it is not looking at an empty tree)
    assert undeclared(reads, set(environment_settings())) == []


def _names_of(tree: ast.Module, consts: dict[str, set[str]]) -> set[str]:
    """The strings a module spells, literally or through a module constant of the package (imported or its own)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
        elif isinstance(node, ast.Name):
            out |= consts.get(node.id, set())
        elif isinstance(node, ast.alias):
            out |= consts.get(node.asname or node.name, set())
    return out


def test_every_declared_variable_is_named_where_the_table_says_it_is_read():
    """A row naming a module that no longer spells its variable (or the family prefix, for GPUOPS_PROMETHEUS_*) is
    stale."""
    trees = {str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in (ROOT / "gpulib").rglob("*.py")}
    consts: dict[str, set[str]] = {}
    for tree in trees.values():
        for name, value in _constants(tree).items():
            consts.setdefault(name, set()).add(value)
    stale = []
    for s in environment_settings().values():
        for where in s.read_by:
            names = _names_of(trees[where], consts)
            if s.variable not in names and not any(s.variable.startswith(p) and p in names for p in PREFIXES):
                stale.append(f"{s.variable}: not named in {where}")
    assert stale == []


def test_the_scan_catches_planted_reads(tmp_path):
    pkg = tmp_path / "gpulib"
    pkg.mkdir()
    (pkg / "planted.py").write_text(
        "import os\nNAME_ENV = 'GPUOPS_PLANTED_CONST'\n"
        "a = os.environ.get('GPUOPS_PLANTED_GET')\nb = os.environ['GPUOPS_PLANTED_ITEM']\n"
        "c = os.getenv(NAME_ENV)\nd = os.environ.get(f'GPUOPS_OTHER_{a}')\ne = 'GPUOPS_PLANTED_IN' in os.environ\n"
        "f = os.environ.get('NCCL_DEBUG')\n"
    )
    got = undeclared(environment_reads(pkg), {"GPUOPS_END"})
    assert got == [
        "gpulib/planted.py: GPUOPS_OTHER_*",
        "gpulib/planted.py: GPUOPS_PLANTED_CONST",
        "gpulib/planted.py: GPUOPS_PLANTED_GET",
        "gpulib/planted.py: GPUOPS_PLANTED_IN",
        "gpulib/planted.py: GPUOPS_PLANTED_ITEM",
    ]


def test_docs_settings_md_is_the_generated_table():
    text = (ROOT / "docs" / "settings.md").read_text()
    inside = text.split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert inside == markdown_table()


def test_a_declared_default_applies_when_unset_and_an_undeclared_variable_is_refused():
    assert env("GPUOPS_LOCK_NAMESPACE", {}) == "default"
    assert env("GPUOPS_LOCK_NAMESPACE", {"GPUOPS_LOCK_NAMESPACE": "gpu-ops"}) == "gpu-ops"
    with pytest.raises(UnknownSetting, match="GPUOPS_LOCK_NAMESPAC'"):
        env("GPUOPS_LOCK_NAMESPAC", {})


def test_every_secret_is_masked_by_redact():
    """A variable declared secret is one gpulib/core/redact.py masks (it reads the same names)."""
    text = (ROOT / "gpulib" / "core" / "redact.py").read_text() + (ROOT / "gpulib" / "serve" / "config.py").read_text()
    text += (ROOT / "gpulib" / "mcp" / "server.py").read_text()
    secrets = [s.variable for s in environment_settings().values() if s.secret]
    assert secrets and [v for v in secrets if v not in text] == []


def test_docs_settings_md_lists_the_serve_options_from_their_table():
    text = (ROOT / "docs" / "settings.md").read_text()
    inside = text.split("<!-- serve-options:begin -->\n", 1)[1].split("<!-- serve-options:end -->", 1)[0]
    assert inside == serve_options_table()


def test_serve_options_are_declared_once():
    """gpuops serve's command line and ServeConfig take every option's default (and the command line its help) from
    gpulib/data/serve/serve_options.csv: none is declared a second time (--warm-kernels was once 2 on the command
    line and 0 in ServeConfig)."""
    from dataclasses import fields

    import typer.main

    from gpulib.serve.command import serve_cmd
    from gpulib.serve.config import ServeConfig

    table = serve_options()
    app = typer.Typer(add_completion=False)
    app.command()(serve_cmd)
    command = typer.main.get_command(app)  # one command: the command itself
    given = {p.name: p for p in command.params}
    assert sorted(given) == sorted(table)  # every option is a row, every row an option
    for name, o in table.items():
        assert (given[name].default, given[name].help, tuple(given[name].opts + given[name].secondary_opts)) == (
            o.default,
            o.help,
            o.flags,
        ), name
    # a ServeConfig built without options has the command line's defaults (the required ones given alike)
    built = {f.name: f for f in fields(ServeConfig)}
    cfg = ServeConfig(out=given["out"].default, token="t" * 40)
    shared = [n for n in table if n in built and n != "out"]
    assert len(shared) == len(table) - 2  # all but --out (required) and --token-file (read by build, never kept)
    mismatched = {n: (getattr(cfg, n), given[n].default) for n in shared if given[n].default is not None}
    assert {n: pair for n, pair in mismatched.items() if pair[0] != pair[1]} == {}
    assert cfg.warm_kernels == given["warm_kernels"].default


def test_every_environment_variable_of_a_serve_option_is_declared():
    declared = set(environment_settings())
    named = {o.env for o in serve_options().values() if o.env}
    assert named and named - declared == set()
