"""Every repository path and test that ``docs/architecture.md`` names exists, so the page a new engineer reads
first sends them to files that are there.

A path is a name starting with one of the repository's top folders (``gpulib/xid/triage.py``,
``tests/runbooks/test_xid_ecc_triage.py``); a ``file::name`` reference must name a function or class of that
file. Names with a placeholder (``gpulib/<domain>/``, ``runbooks/*.ipynb``) are patterns and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
TOP = ("gpulib", "tests", "docs", "runbooks", "reports", "deploy", "benchmarks")
NAMED = re.compile(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w./<>*{{}}-]*)(?:::(\w+))?")


def page_problems(text: str, root: Path = ROOT) -> list[str]:
    """The paths and ``file::name`` references of ``text`` that do not exist under ``root``."""
    problems = []
    for m in NAMED.finditer(text):
        path, name = m.group(1).rstrip("."), m.group(2)
        if re.search(r"[<>*{}]", path):
            continue
        p = root / path
        if not p.exists():
            problems.append(f"{path}: no such file or folder")
        elif name and not re.search(rf"^\s*(?:async\s+)?(?:def|class) {name}\b", p.read_text(), re.M):
            problems.append(f"{path}::{name}: no such function or class")
    return sorted(set(problems))


def test_every_path_and_test_the_page_names_exists():
    assert page_problems(PAGE.read_text()) == []


def test_the_check_catches_a_moved_file_and_a_renamed_test(tmp_path):
    (tmp_path / "tests" / "xid").mkdir(parents=True)
    (tmp_path / "tests" / "xid" / "test_steps.py").write_text("def test_kept():\n    pass\n")
    text = (
        "See `tests/xid/test_steps.py::test_kept`, `tests/xid/test_steps.py::test_renamed`, "
        "`tests/test_steps.py` and `gpulib/<domain>/steps.py`."
    )
    assert page_problems(text, tmp_path) == [
        "tests/test_steps.py: no such file or folder",
        "tests/xid/test_steps.py::test_renamed: no such function or class",
    ]
