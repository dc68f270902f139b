"""The test harness itself: a server a test starts does not outlive a killed test process; the collected test modules
are out of the garbage collector's full passes (tests/conftest.py)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import subprocess, sys, time
from tests.helpers.procs import die_with_parent
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], preexec_fn={pre})
print(p.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _grandchild_after_parent_killed(pre: str) -> bool:
    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(pre=pre)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    return alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_started_with_die_with_parent_dies_with_a_killed_test_process():
    assert _grandchild_after_parent_killed("die_with_parent") is False
    assert _grandchild_after_parent_killed("None") is True  # without it the child lives on (the leak it prevents)


def test_the_collected_modules_are_frozen_out_of_the_collectors_passes():
    """tests/conftest.py freezes what is alive after collection: pandas' and the test modules' objects alone are
    hundreds of thousands, which a full pass would scan again and again."""
    assert gc.get_freeze_count() > 100_000
