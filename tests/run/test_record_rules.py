"""The rules about a run's home (docs/architecture.md, "One run, one engine"), read from the source with
:mod:`ast` (nothing imported): the file names of a run folder and the run status words live only in
``gpulib.run.record``; front ends (``cli``, ``serve``, ``mcp``) import only ``run``, ``core`` and ``kube`` (and
themselves), less an explicit allow-list that may only shrink. Each checker is shown to catch a planted case."""

from __future__ import annotations

import ast
from pathlib import Path

from gpulib.run import record
from tests.helpers.archrules import module_name

ROOT = Path(__file__).resolve().parents[2]
GPULIB = ROOT / "gpulib"
HOME = GPULIB / "run" / "record.py"
#: the file names of a run folder, as record.py names them
FILES = {
    record.FINDINGS_FILE,
    record.VERDICT_FILE,
    record.STATUS_FILE,
    record.SERVE_FILE,
    record.SUMMARY_FILE,
    record.PARAMS_FILE,
    record.OUTCOME_FILE,
    record.INDEX_FILE,
    record.INDEX_LOCK,
}
WORDS = {s.value for s in record.Status} | {r.value for r in record.Render}
#: the modules where a run's status is read or set: the run layer and the front ends
RUN_SIDE = ("run", "serve", "mcp", "cli.py", "cli_tools.py", "execute.py", "warm.py", "runbook.py")
#: status words still spelled outside record.py, with why (shrink only; empty now: keep it so)
STATUS_ALLOWED: set[str] = set()
#: what front ends may import besides run, core, kube and themselves (shrink only); each is a move still to make
FRONT_ENDS = ("cli", "cli_tools", "serve", "mcp")
FRONT_END_ALLOWED = {
    "gpulib",  # gpulib.__version__ and the lazy top-level names
    "gpulib.inspection",  # parameter reading: to move into gpulib.run.params
    "gpulib.warm",  # warm kernels: to move into gpulib.run.render
    "gpulib.cost",  # gpuops report's price table and namespace list
    "gpulib.demo",
    "gpulib.xid",  # gpuops mcp's XID catalog tool
    "gpulib.mixin",  # gpuops mixin: the command of the file generator (gpulib/mixin/build.py), not a run
}


def _part(root: Path, name: str) -> bool:
    return (root / name).is_dir() or (root / f"{name}.py").is_file()


def _py(paths) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def file_names(root: Path) -> list[str]:
    """String constants that are exactly a run-folder file name, outside record.py."""
    bad = []
    for path in _py([root]):
        if path.name == "record.py" and path.parent.name == "run":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in FILES:
                bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: {node.value!r}")
    return bad


def _statusish(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "status" in text or "render" in text


def _words(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in WORDS]


def status_words(root: Path) -> list[str]:
    """Run status words spelled outside record.py where a status is read or set: compared with something named
    ``status``/``render``, passed as ``status=``/``render=``, or the value of a ``"status"``/``"render"`` key."""
    bad = []
    paths = [root / p for p in RUN_SIDE if (root / p).exists()] + [root / a for a in STATUS_ALLOWED]
    for path in _py(paths):
        rel = str(path.relative_to(root))
        if rel == "run/record.py" or rel in STATUS_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            found: list[str] = []
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_statusish(s) for s in sides):
                    found = [w for s in sides for w in _words(s)]
            elif isinstance(node, ast.keyword) and node.arg in ("status", "render"):
                found = _words(node.value)
            elif isinstance(node, ast.Dict):
                found = [
                    w
                    for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value in ("status", "render")
                    for w in _words(v)
                ]
            bad += [f"{rel}:{getattr(node, 'lineno', 0)}: {w!r}" for w in found]
    return bad


def front_end_imports(root: Path) -> list[str]:
    """Imports of front-end modules that reach past run, core, kube and the front ends themselves."""
    bad = []
    for path in _py([root / "cli.py", root / "cli_tools.py", root / "serve", root / "mcp"]):
        if not path.exists():
            continue
        mod = module_name(root, path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
                if node.module == "gpulib":  # `from gpulib import x`: x counts when it is a part of the package
                    names += [f"gpulib.{a.name}" for a in node.names if _part(root, a.name)]
            for name in names:
                bits = name.split(".")
                if bits[0] != "gpulib" or (len(bits) > 1 and bits[1] in ("run", "core", "kube", *FRONT_ENDS)):
                    continue
                allowed = name in FRONT_END_ALLOWED or ".".join(bits[:2]) in FRONT_END_ALLOWED
                if node.module == "gpulib" and isinstance(node, ast.ImportFrom) and name == "gpulib":
                    allowed = True  # counted by its names
                if not allowed:
                    bad.append(f"{mod}:{node.lineno}: {name}")
    return bad


def test_run_folder_file_names_are_spelled_only_in_run_record():
    assert file_names(GPULIB) == []


def test_run_status_words_are_spelled_only_in_run_record():
    assert status_words(GPULIB) == []


def test_front_ends_import_only_run_core_kube_and_the_allow_list():
    assert front_end_imports(GPULIB) == []


def test_the_allow_lists_only_shrink():
    """Every allowed exception is still used: one no longer needed is taken off the list."""
    used = set()
    for path in _py([GPULIB / "cli.py", GPULIB / "cli_tools.py", GPULIB / "serve", GPULIB / "mcp"]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                used |= {node.module, ".".join(node.module.split(".")[:2])}
            elif isinstance(node, ast.Import):
                used |= {a.name for a in node.names} | {".".join(a.name.split(".")[:2]) for a in node.names}
    assert FRONT_END_ALLOWED - used == set()
    for rel in STATUS_ALLOWED:
        planted = GPULIB / rel
        assert _words_in(planted), f"{rel} no longer spells a status word: take it off STATUS_ALLOWED"


def _words_in(path: Path) -> bool:
    return any(
        isinstance(n, ast.Constant) and n.value in WORDS for n in ast.walk(ast.parse(path.read_text()))
    )


def test_the_checkers_catch_planted_cases(tmp_path):
    root = tmp_path / "gpulib"
    (root / "run").mkdir(parents=True)
    (root / "serve").mkdir()
    (root / "mcp").mkdir()
    (root / "core").mkdir()
    (root / "run" / "index_page.py").write_text('active = status in ("queued", "running")\n')
    (root / "run" / "record.py").write_text('F = "findings.json"\nS = "bad parameter"\n')
    (root / "serve" / "store.py").write_text(
        'p = folder / "run.json"\n'
        'if rec["status"] in ("queued", "running"):\n    pass\n'
        'store.update(run_id, status="failed")\n'
        'out = {"status": "done", "render": "skipped"}\n'
        'from gpulib.fleet import merge\n'
        'from gpulib.run.record import Status\n'
    )
    assert file_names(root) == ["gpulib/serve/store.py:1: 'run.json'"]
    assert sorted(status_words(root)) == sorted(
        [
            "serve/store.py:2: 'queued'",
            "serve/store.py:2: 'running'",
            "serve/store.py:4: 'failed'",
            "serve/store.py:5: 'done'",
            "serve/store.py:5: 'skipped'",
            "run/index_page.py:1: 'queued'",
            "run/index_page.py:1: 'running'",
        ]
    )
    assert front_end_imports(root) == ["gpulib.serve.store:6: gpulib.fleet"]
