"""The layering rules of docs/architecture.md, checked by walking every import of a package tree.

Every ``import``/``from ... import`` statement is read from the source with :mod:`ast`, including the lazy
ones inside functions and ``importlib.import_module("...")`` calls with a literal name, and the
``_EXPORTS`` tables of the lazy package ``__init__`` files. Nothing is imported, so a planted violation in a
copy of the tree is found without executing it.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

#: layer of each top-level part of gpulib; an import may point to the same layer or a lower one
LAYERS = {
    "core": 0,
    "sources": 1,
    "kube": 1,
    "nvidia": 1,
    "fleet": 2,
    "xid": 2,
    "nccl": 2,
    "mig": 2,
    "gpu_operator": 2,
    "vllm": 2,
    "cost": 2,
    "reliability": 2,
    "demo": 3,
    "runbook": 4,
    "run": 4,
    "mixin": 4,
    "verdict": 4,
    "warm": 4,
    "catalogue": 4,
    "inspection": 4,
    "execute": 4,
    "learn": 4,
    "cli": 5,
    "cli_tools": 5,
    "serve": 5,
    "mcp": 5,
}
DOMAINS = {k for k, v in LAYERS.items() if v == 2}
MAX_LINES = 600


@dataclass(frozen=True)
class Edge:
    src: str  # importing module, dotted
    dst: str  # imported module, dotted
    line: int
    lazy: bool


#: text of a module -> (its tree, its nodes in ``ast.walk`` order): every check reads every module of the tree, and
#: the planted tests a copy of it where all but a file or two are unchanged, so each distinct text is parsed and walked
#: once a process (the checks read the trees, never change them)
_PARSED: dict[str, tuple[ast.Module, tuple[ast.AST, ...]]] = {}


def _parse_text(text: str, filename: str = "<unknown>") -> tuple[ast.Module, tuple[ast.AST, ...]]:
    if text not in _PARSED:
        tree = ast.parse(text, filename=filename)
        _PARSED[text] = (tree, tuple(ast.walk(tree)))
    return _PARSED[text]


def forget() -> None:
    """Empty the caches of parsed modules (about 90 MB for gpulib/): tests/project/test_architecture.py calls it
    when its module ends, so the worker that ran it does not carry them through the rest of the session."""
    _PARSED.clear()
    for cached in (_module_edges, _function_imports, _attr_sniffing):
        cached.cache_clear()


def _parse(path: Path) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    """The module at ``path`` and its nodes in ``ast.walk`` order (:data:`_PARSED`)."""
    return _parse_text(path.read_text(), str(path))


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def edges(root: Path) -> list[Edge]:
    """Every gpulib-internal import edge of the tree under ``root`` (the ``gpulib`` folder)."""
    pkg = root.name
    paths = sorted(root.rglob("*.py"))
    files = {p.relative_to(root.parent).as_posix() for p in paths}
    out: list[Edge] = []
    for path in paths:
        mod = module_name(root, path)
        text = path.read_text()
        _parse_text(text, str(path))  # a syntax error names the file
        for target, line, lazy, submodule in _module_edges(text, mod, path.name == "__init__.py"):
            # `from gpulib.x import y` may name a submodule y: counted where the tree holds it
            if submodule is not None and not (f"{submodule}.py" in files or f"{submodule}/__init__.py" in files):
                continue
            if target == pkg or target.startswith(pkg + "."):
                out.append(Edge(mod, target, line, lazy))
    return out


@functools.lru_cache(maxsize=None)
def _module_edges(text: str, mod: str, is_pkg: bool) -> tuple[tuple[str, int, bool, str | None], ...]:
    """(target, line, lazy, submodule) for every import of one module's ``text``: ``submodule`` is the path (no
    suffix, relative to the package's parent) of the module a ``from x import y`` names if y is a submodule, for
    :func:`edges` to keep the target where the tree holds that file, else None."""
    tree, nodes = _parse_text(text)
    top = {id(n) for n in tree.body}
    out: list[tuple[str, int, bool, str | None]] = []
    for node in nodes:
        lazy = id(node) not in top
        targets: list[tuple[str, str | None]] = []
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, is_pkg, node.level, node.module)
            for a in node.names:
                # `from gpulib.x import y` may name a submodule y: count both the package and the name
                targets.append((base, None))
                targets.append((f"{base}.{a.name}", base.replace(".", "/") + "/" + a.name))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                targets = [(node.args[0].value, None)]
            lazy = True
        elif isinstance(node, ast.Assign) and is_pkg and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets):
            if isinstance(node.value, ast.Dict):
                targets = [(f"{mod}.{v.value}", None) for v in node.value.values if isinstance(v, ast.Constant)]
            lazy = True
        out += [(t, getattr(node, "lineno", 0), lazy, sub) for t, sub in targets]
    return tuple(out)


def part(dotted: str) -> str | None:
    bits = dotted.split(".")
    return bits[1] if len(bits) > 1 else None


def violations(root: Path) -> list[str]:
    """Human-readable rule violations of the tree under ``root``."""
    bad: list[str] = []
    es = edges(root)
    graph: dict[str, set[str]] = {}
    for e in es:
        a, b = part(e.src), part(e.dst)
        if a is None or b is None or a == b:
            continue
        la, lb = LAYERS.get(a), LAYERS.get(b)
        where = f"{e.src}:{e.line}{' (lazy)' if e.lazy else ''}"
        if la is None:
            bad.append(f"{where}: {a} is not in the layer table")
            continue
        if lb is None:
            bad.append(f"{where}: imports {e.dst}, which is not in the layer table")
            continue
        if lb > la:
            bad.append(f"{where}: upward import of {e.dst} ({a} is layer {la}, {b} is layer {lb})")
        if a in DOMAINS and b in DOMAINS and e.dst.count(".") > 1:
            bad.append(f"{where}: domain {a} reaches into {e.dst}; use the names of gpulib.{b}")
        graph.setdefault(a, set()).add(b)
    # cycles between parts
    seen: set[tuple[str, ...]] = set()

    def dfs(node: str, stack: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cyc = stack[stack.index(nxt) :] + [nxt]
                key = tuple(sorted(set(cyc)))
                if key not in seen:
                    seen.add(key)
                    bad.append("import cycle: " + " -> ".join(cyc))
            elif len(stack) < len(LAYERS):
                dfs(nxt, stack + [nxt])

    for n in sorted(graph):
        dfs(n, [n])
    return list(dict.fromkeys(bad))


def long_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    return [
        f"{p.relative_to(root.parent)}: {n} lines"
        for p in sorted(root.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > limit
    ]


def export_clashes(root: Path) -> list[str]:
    """``package: name`` for every ``_EXPORTS`` key of a package that is also the name of one of its submodules."""
    out: list[str] = []
    for init in sorted(root.rglob("__init__.py")):
        keys = {
            k.value
            for node in _parse(init)[0].body
            if isinstance(node, ast.Assign)
            and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets)
            and isinstance(node.value, ast.Dict)
            for k in node.value.keys
            if isinstance(k, ast.Constant)
        }
        subs = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if (p / "__init__.py").exists()
        }
        out += [f"{init.parent.relative_to(root.parent)}: {k}" for k in sorted(keys & subs)]
    return out


# --------------------------------------------------------------------------------------------
# only sources/ knows where data came from
# --------------------------------------------------------------------------------------------
#: ways of asking where data came from, as text; only gpulib/sources/ (and the demo backend) may use them
BACKEND_SNIFFING = [
    re.compile(r"hasattr\(\s*(rb\.)?src\b"),
    re.compile(r"getattr\(\s*(rb\.)?src\s*,"),
    re.compile(r"\bsrc\.(kube|sim|operator_scenario|prom|settings)\b"),
    re.compile(r"source\s*==\s*['\"](live|demo|snapshot|prometheus)['\"]"),
    re.compile(r"isinstance\([^)]*(DemoSource|PrometheusSource|SnapshotSource|LiveSource)"),
]
#: the rule above that compares a backend name; allowed only where a backend is chosen by name (to pass its
#: arguments to connect()): the one source mapping, gpulib.inspection.choose_source
BACKEND_NAME_RULE = 3
CONNECT_SITES = {"gpulib/inspection.py"}
#: attributes that only a backend object has (``self.<name> =`` in gpulib/sources/*.py and gpulib/demo/source.py):
#: reading one by name from any object (``getattr(x, "kube", None)``, ``hasattr(x, "sim")``, or a loop over such
#: names) is asking which backend it is; the capability is a Source method (``kube_cluster()``, ``objects()``)
BACKEND_ATTRS = frozenset(
    {"kube", "_kube", "k8s", "sim", "operator_scenario", "prom", "scrape", "scrape_files", "collect_dir"}
)
_ATTR_CALLS = {"getattr", "hasattr", "setattr", "delattr"}


@functools.lru_cache(maxsize=None)
def _attr_sniffing(code: str) -> tuple[int, ...]:
    """Lines of ``getattr``/``hasattr`` calls that read a backend attribute by name: a literal name, or a loop
    variable running over literal names of which one is a backend attribute."""
    try:
        _, nodes = _parse_text(code)
    except SyntaxError:
        return ()
    loop_vars: dict[int, set[str]] = {}  # id(call) -> names the loop variable of its second argument takes

    def names(node) -> set[str]:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return set()

    for loop in nodes:
        if isinstance(loop, (ast.For, ast.comprehension)) and isinstance(loop.target, ast.Name):
            vals = names(loop.iter)
            scope = loop.body if isinstance(loop, ast.For) else []
            for stmt in scope:
                for n in ast.walk(stmt):
                    if (
                        isinstance(n, ast.Call)
                        and len(n.args) > 1
                        and isinstance(n.args[1], ast.Name)
                        and n.args[1].id == loop.target.id
                    ):
                        loop_vars[id(n)] = vals
    hits = []
    for n in nodes:
        if not (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _ATTR_CALLS and len(n.args) > 1
        ):
            continue
        arg = n.args[1]
        if isinstance(arg, ast.Constant) and arg.value in BACKEND_ATTRS:
            hits.append(n.lineno)
        elif loop_vars.get(id(n), set()) & BACKEND_ATTRS:
            hits.append(n.lineno)
    return tuple(hits)


def code_texts(root: Path, notebooks: list[Path] = ()):
    """(name, code) of every module of the tree under ``root`` outside sources/ and demo/, and of the code
    cells of ``notebooks``."""
    import json

    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent)
        if rel.parts[1] in ("sources", "demo"):
            continue
        yield rel.as_posix(), p.read_text()
    for p in notebooks:
        nb = json.loads(p.read_text())
        src = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        yield p.as_posix(), src


def backend_sniffing(root: Path, notebooks: list[Path] = (), base: Path | None = None) -> list[str]:
    """``name:line: code`` for every place outside sources/ and demo/ that asks where data came from."""
    hits = []
    for name, text in code_texts(root, notebooks):
        if base is not None and Path(name).is_absolute():
            name = Path(name).relative_to(base).as_posix()
        rules = [r for i, r in enumerate(BACKEND_SNIFFING) if not (i == BACKEND_NAME_RULE and name in CONNECT_SITES)]
        lines = text.splitlines()
        for i, line in enumerate(lines, 1):
            if any(rx.search(line) for rx in rules):
                hits.append(f"{name}:{i}: {line.strip()}")
        hits += [f"{name}:{i}: {lines[i - 1].strip()} (backend attribute read by name)" for i in _attr_sniffing(text)]
    return list(dict.fromkeys(hits))


# --------------------------------------------------------------------------------------------
# the domains know nothing of the demo
# --------------------------------------------------------------------------------------------
#: a name that says it is demo data or a demo helper (``demo_vllm_series``, ``_DEMO_LOAD``, ``DemoSource``)
DEMO_NAME = re.compile(r"demo", re.IGNORECASE)
#: a string that names a demo data file: ``gpulib/data/demo/...``, a ``load_table("demo/...")`` key, ``demo_*.csv``
DEMO_DATA = re.compile(r"(^|[/\\])data[/\\]demo([/\\]|$)|^demo/|(^|[/\\])demo_\w+\.(csv|ya?ml|json|txt)\b")


def _docstrings(nodes: tuple[ast.AST, ...]) -> set[int]:
    out = set()
    for n in nodes:
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.add(id(first.value))
    return out


def demo_knowledge(root: Path) -> list[str]:
    """``module:line: what`` for every demo name a domain module binds (function, class, assignment, parameter,
    import alias) and every demo data file a domain module's code names (docstrings and comments excepted).
    The demo's data is served by the demo backend (gpulib/demo/) through the Source interface; a runbook may
    pass a demo default into a domain function, but the domain does not name it."""
    bad: list[str] = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(root, path)
        if part(mod) not in DOMAINS:
            continue
        _, nodes = _parse(path)
        docs = _docstrings(nodes)
        for n in nodes:
            names: list[str] = []
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [n.name]
            elif isinstance(n, ast.arg):
                names = [n.arg]
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names = [n.id]
            elif isinstance(n, ast.alias):
                names = [n.asname or n.name.split(".")[-1]]
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                for line in n.value.splitlines() or [""]:
                    if any(DEMO_DATA.search(tok) for tok in re.split(r"[\s()'\",;:]+", line)):
                        bad.append(f"{mod}:{n.lineno}: names demo data {line.strip()[:80]!r}")
                        break
            elif isinstance(n, ast.Dict) and path.name == "__init__.py":
                names = [k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            bad += [f"{mod}:{getattr(n, 'lineno', 0)}: defines {x}" for x in names if DEMO_NAME.search(x)]
    return list(dict.fromkeys(bad))


# --------------------------------------------------------------------------------------------
# module-level import cycles
# --------------------------------------------------------------------------------------------
def module_cycles(root: Path, parts: set[str] | None = None) -> list[list[str]]:
    """Sets of modules that import each other in a cycle (strongly connected components of the module graph), every
    import counted: the ones inside functions, ``TYPE_CHECKING`` blocks and a package's ``_EXPORTS`` (a package
    ``__init__`` points at each submodule it exports, so a submodule that imports its own package closes a cycle).
    ``parts``: only cycles touching those top-level parts of gpulib."""
    graph: dict[str, set[str]] = {}
    for e in edges(root):
        graph.setdefault(e.src, set()).add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return [c for c in out if parts is None or any(part(m) in parts for m in c)]


# --------------------------------------------------------------------------------------------
# imports at module top
# --------------------------------------------------------------------------------------------
#: the one list of imports that may sit inside a function in gpulib/: heavy libraries of an extra (README's extras
#: table), deferred on purpose so the modules that use them in one or two functions import without them, and
#: quickly. Key: an imported module (it and its submodules); value: why. Every other import is at module top
#: (tests/project/test_architecture.py::test_imports_sit_at_module_top_except_the_deferred_heavy_libraries).
DEFERRED_IMPORTS = {
    "kubernetes": "k8s extra, seconds to import: only the calls to an API server need it; kubectl JSON (kube/frames), "
    "snapshots and the demo are read without it",
    "kubernetes_validate": "k8s extra, loads the OpenAPI schemas (seconds): only when a manifest is validated",
    "urllib3": "arrives with kubernetes / requests: its errors are caught only around their calls",
    "prometheus_api_client": "prometheus extra: only the live Prometheus source's HTTP (sources/promhttp.py)",
    "requests": "prometheus extra: only the live Prometheus source's HTTP (sources/promhttp.py)",
    "scipy": "runbooks extra, seconds to import: only the MIG planner's exact solve (mig/plan.py)",
    "papermill": "runbooks extra, seconds to import: only when a notebook runs or its parameters are read; the CLI "
    "and serve import execute.py / inspection.py for every command",
    "nbformat": "runbooks extra: as papermill, only when a run's notebook is written",
    "nbconvert": "runbooks extra, seconds to import: only when a run's HTML is exported",
    "jupyter_client": "runbooks extra: only when a run's kernel is started",
    "jupyter_core": "runbooks extra: only when a run's kernel is stopped",
    "IPython": "present in a notebook kernel: runbook.py, the lessons and the operator view are imported outside one "
    "(the CLI, tests), where runbook.py prints instead",
    "torch": "nccl/probe.py runs with the standard library alone until it measures (--help, sizes, the ConfigMap "
    "copy; tests/nccl/test_probe.py)",
    "gpulib.serve": "FastAPI and uvicorn (serve extra) load with it: only `gpuops serve` needs them",
    "uvicorn": "serve/mcp extras: only when `gpuops serve` or `gpuops mcp --transport http` listens",
    "gpulib.mcp": "the mcp SDK (mcp extra) loads with it: only `gpuops mcp` needs it",
    "gpulib.mixin.dashboards": "grafana-foundation-sdk (mixin extra) loads with it: only the dashboards need it",
    "jsonschema": "mixin extra: only when `gpuops mixin --check` validates the dashboards against Grafana's schema",
}


def function_imports(root: Path, allowed: dict[str, str] = DEFERRED_IMPORTS) -> list[str]:
    """``gpulib/x.py:line: import y`` for every import inside a function of the tree under ``root`` whose module is
    not one of ``allowed`` (nor a submodule of one). Imports under ``if TYPE_CHECKING:`` or a module-level
    ``try:`` are at module level and not listed."""
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        _parse_text(text, str(path))  # a syntax error names the file
        for line, name, code in _function_imports(text, module_name(root, path), path.name == "__init__.py"):
            if not any(name == k or name.startswith(k + ".") for k in allowed):
                out.append(f"gpulib/{path.relative_to(root).as_posix()}:{line}: {code}")
    return list(dict.fromkeys(out))


@functools.lru_cache(maxsize=None)
def _function_imports(text: str, mod: str, is_pkg: bool) -> tuple[tuple[int, str, str], ...]:
    """(line, imported module, statement) for every import inside a function of one module's ``text``, in the
    order :func:`function_imports` lists them."""
    _, nodes = _parse_text(text)
    out = []
    for fn in nodes:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [_resolve(mod, is_pkg, node.level, node.module)]
            else:
                continue
            out += [(node.lineno, name, ast.unparse(node)) for name in names]
    return tuple(out)


# ------------------------------------------------------------------------------------------------ domain rooms
#: the files every domain package has (docs/architecture.md, "The inner shape of a domain")
ROOMS = ("__init__.py", "findings.py", "view.py", "steps.py")
#: modules outside a domain's view.py that may import plotly: the notebook plumbing (``gpulib.runbook.show``) and the
#: plotly.js file a report loads (gpulib/core/plotlyjs.py: the bundle, its version; no figure is made there)
PLOTLY_ALLOWED = {"gpulib/runbook.py", "gpulib/core/plotlyjs.py"}
#: Finding keywords whose text comes from data (an SOP table), never from a literal in code
SOP_KEYWORDS = ("sop_step", "escalation")


def room_problems(root: Path) -> list[str]:
    """A domain package missing one of :data:`ROOMS`, or still holding a ``runbook.py`` (now ``steps.py``)."""
    out = []
    for d in sorted(DOMAINS):
        pkg = root / d
        out += [f"gpulib/{d}/ has no {f}" for f in ROOMS if not (pkg / f).is_file()]
        if (pkg / "runbook.py").exists():
            out.append(f"gpulib/{d}/runbook.py: the notebook steps live in steps.py")
    return out


def plotly_importers(root: Path) -> list[str]:
    """Modules that import plotly other than a domain's ``view.py`` and :data:`PLOTLY_ALLOWED`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = "gpulib/" + path.relative_to(root).as_posix()
        if rel in PLOTLY_ALLOWED or (path.name == "view.py" and path.parent.name in DOMAINS):
            continue
        for node in _parse(path)[1]:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "plotly" or n.startswith("plotly.") for n in names):
                out.append(f"{rel}:{node.lineno} imports plotly")
    return out


def _literal_text(node: ast.AST) -> bool:
    """A string literal, an f-string, or a concatenation or parenthesised join of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(node.value.strip())
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_text(node.left) or _literal_text(node.right)
    return False


def inline_sop(root: Path) -> list[str]:
    """``sop_step=`` / ``escalation=`` given text written in code (the SOP sentence belongs in a data table)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in _parse(path)[1]:
            if isinstance(node, ast.keyword) and node.arg in SOP_KEYWORDS and _literal_text(node.value):
                out.append(
                    f"gpulib/{path.relative_to(root).as_posix()}:{node.value.lineno} {node.arg}= written in code"
                )
    return out
