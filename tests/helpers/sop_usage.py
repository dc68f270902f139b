"""The SOP rows a domain's code asks for, read from its syntax tree: every ``sop("<table>", "<key>", name=...)``
call of :func:`gpulib.core.sop.sop` in ``gpulib/<domain>/``, with the keywords it passes. The key must be a string
literal, so that a test can hold the table and the code against each other (a key built at run time could name a
row that does not exist and no test would see it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sop_calls(domain: str, table: str) -> list[tuple[str, object, set[str]]]:
    """(``file:line``, key or None when it is not a string literal, keywords passed) of each ``sop(table, ...)`` call."""
    out = []
    for path in sorted((ROOT / "gpulib" / domain).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "sop"):
                continue
            if not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == table):
                continue
            key = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            out.append((where, key, {k.arg for k in node.keywords if k.arg}))
    return out


def placeholders(row: dict) -> set[str]:
    """The ``{names}`` the text and command cells of an SOP row fill (``{{`` and ``}}`` are literal braces)."""
    import string

    names = set()
    for col in ("summary", "sop_step", "escalation", "commands"):
        for _, name, _, _ in string.Formatter().parse(str(row.get(col) or "")):
            if name:
                names.add(name.split(".")[0].split("[")[0])
    return names
