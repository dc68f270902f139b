"""Servers a test starts die with the test process, also when pytest or its xdist worker is killed (an out-of-memory
kill, a timeout): ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the child before it runs (``man 2 prctl``,
https://man7.org/linux/man-pages/man2/prctl.2.html). Without it a killed worker leaves its Prometheus servers running
for the rest of the machine's life."""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """``preexec_fn`` for :class:`subprocess.Popen`: the child gets SIGKILL when the process that started it ends."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
