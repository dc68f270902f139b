"""The tree passes ``ruff check`` with the project's settings (``[tool.ruff]`` in pyproject.toml), as ``make test``
runs it before pytest; the check is shown to catch a planted long line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install -e '.[test]')"
)


def ruff_check(*paths: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -m ruff check`` on ``paths`` with the settings of this repository's pyproject.toml."""
    cmd = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--config",
        str(ROOT / "pyproject.toml"),
        *map(str, paths),
    ]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_ruff_check_is_clean():
    res = ruff_check(".")
    assert res.returncode == 0, f"ruff check . found problems:\n{res.stdout}{res.stderr}"


def test_ruff_check_catches_a_planted_long_line_and_an_unused_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\nMESSAGE = " + repr("x" * 130) + "\n")
    res = ruff_check(planted, cwd=tmp_path)
    assert res.returncode == 1
    assert "E501" in res.stdout and "F401" in res.stdout, res.stdout
