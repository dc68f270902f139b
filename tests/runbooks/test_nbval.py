"""nbval executes lessons cell by cell exactly as committed (no papermill parameter injection)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ["runbooks/learn/learn_storage.ipynb", "runbooks/learn/learn_sharing.ipynb"]


@pytest.mark.notebook
def test_lessons_pass_nbval_lax():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "-p",
            "no:xdist",
            *LESSONS,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:]
    code_cells = sum(
        1 for n in LESSONS for c in json.loads((ROOT / n).read_text())["cells"] if c["cell_type"] == "code"
    )
    assert f"{code_cells} passed" in p.stdout  # nbval collects one item per code cell
