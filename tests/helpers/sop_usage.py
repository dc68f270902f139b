"""The SOP rows a domain's code asks for, read from its syntax tree: every ``sop("<table>", <key>, ...)`` call of
:func:`gpulib.core.sop.sop` in ``gpulib/<domain>/``, with the keywords it passes, so that a test can hold the table
and the code against each other (a key built at run time could name a row that does not exist, and values passed as
``**values`` could leave a placeholder unfilled, and no test would see it).

What the reader accepts, all of it readable without running the code:

- the key: a string literal; or a module-level dict of string literals (``_KEYS = {"oom": "job_oom", ...}``) looked
  up as ``_KEYS[x]`` or ``_KEYS.get(x, "<literal default>")``: the call then stands for every value of the dict (and
  the default), and each of those rows must be filled by the call's keywords;
- the keywords: ``name=value``, and ``**{"name": value, ...}`` with string-literal names.

Anything else (a key built at run time, ``**values`` from a variable) reads as unknown (``None``), which
:func:`call_problems` reports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _literal_maps(tree: ast.Module) -> dict[str, list[object]]:
    """Module-level ``NAME = {literal: ..., ...}`` -> its values (a value that is not a string literal as None)."""
    out = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            out[target.id] = [_literal(v) for v in node.value.values]
    return out


def _literal(node) -> object:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keys(node, maps: dict[str, list[object]]) -> list[object]:
    """The row keys a key argument can take; None for one the reader cannot know."""
    if node is None:
        return [None]
    if isinstance(node, ast.Constant):
        return [_literal(node)]
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) in maps:  # KEYS[x]
        return list(dict.fromkeys(maps[node.value.id]))
    f = node.func if isinstance(node, ast.Call) else None
    if (
        isinstance(f, ast.Attribute)
        and f.attr == "get"
        and getattr(f.value, "id", None) in maps
        and len(node.args) == 2
        and not node.keywords
    ):  # KEYS.get(x, "default")
        return list(dict.fromkeys([*maps[f.value.id], _literal(node.args[1])]))
    return [None]


def _given(call: ast.Call) -> set[str] | None:
    """The keyword names a call passes; None when it passes ``**`` something that is not a literal dict."""
    names = set()
    for k in call.keywords:
        if k.arg:
            names.add(k.arg)
        elif isinstance(k.value, ast.Dict) and all(_literal(n) for n in k.value.keys):
            names |= {n.value for n in k.value.keys}
        else:
            return None
    return names


def sop_calls(domain: str, table: str, root: Path = ROOT) -> list[tuple[str, object, set[str] | None]]:
    """(``file:line``, key or None when the reader cannot know it, keywords passed or None when it cannot know
    them) of each row each ``sop(table, ...)`` call in ``root/gpulib/<domain>/`` can ask for."""
    out = []
    for path in sorted((root / "gpulib" / domain).glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        maps = _literal_maps(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "sop"):
                continue
            if not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == table):
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            given = _given(node)
            for key in _keys(node.args[1] if len(node.args) > 1 else None, maps):
                out.append((where, key, given))
    return out


def call_problems(where: str, key: object, given: set[str] | None, rows: dict[str, dict]) -> list[str]:
    """What is wrong with one (call, row) of :func:`sop_calls` against the table's rows (key -> row): a key the
    reader cannot know, keywords it cannot know, a key that is no row, a placeholder the call does not give."""
    if key is None:
        return [f"{where}: the SOP key is not a string literal (nor a lookup in a module-level dict of literals)"]
    if given is None:
        return [f"{where}: values passed as **name: the reader cannot see which placeholders of {key!r} are filled"]
    if key not in rows:
        return [f"{where}: the table has no row {key!r}"]
    missing = placeholders(rows[key]) - given
    return [f"{where}: row {key!r} fills {sorted(missing)}, not given"] if missing else []


def placeholders(row: dict) -> set[str]:
    """The ``{names}`` the text and command cells of an SOP row fill (``{{`` and ``}}`` are literal braces)."""
    import string

    names = set()
    for col in ("summary", "sop_step", "escalation", "commands"):
        for _, name, _, _ in string.Formatter().parse(str(row.get(col) or "")):
            if name:
                names.add(name.split(".")[0].split("[")[0])
    return names
