"""The SOP rows a domain asks for and the ones its table holds, read from the source with :mod:`ast`.

A domain's findings fill SOP text from its table with ``sop("<table>", "<key>", ...)`` (:func:`gpulib.core.sop.sop`).
:func:`unknown_keys` lists the literal keys the code asks for that the table lacks (a KeyError-like data error at run
time, on the one path that reaches it); :func:`unused_rows` lists the rows whose key appears nowhere in the domain's
code (a row nobody reads: dead text, or a key that was renamed on one side only). A key chosen at run time (an action
name, a verdict) counts as used when the code spells it as a string anywhere in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path


def _calls(tree: ast.AST, table: str) -> set[str]:
    names = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value == table
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out = set()
    for n in ast.walk(tree):
        if not (
            isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) == "sop" and len(n.args) >= 2
        ):
            continue
        first, key = n.args[0], n.args[1]
        is_table = (isinstance(first, ast.Constant) and first.value == table) or (
            isinstance(first, ast.Name) and first.id in names
        )
        if is_table and isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return out


def scan(package: Path, table: str) -> tuple[set[str], set[str]]:
    """(literal keys asked of ``table`` by the modules of ``package``, every string constant of those modules)."""
    asked: set[str] = set()
    strings: set[str] = set()
    for path in sorted(Path(package).glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        asked |= _calls(tree, table)
        strings |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return asked, strings


def unknown_keys(package: Path, table: str, rows: set[str]) -> list[str]:
    asked, _ = scan(package, table)
    return sorted(asked - rows)


def unused_rows(package: Path, table: str, rows: set[str]) -> list[str]:
    _, strings = scan(package, table)
    return sorted(rows - strings)
