"""``gpuops serve`` whose fast verdict never returns (every verdict thread blocked), for the kill -9 test of
tests/serve/test_restart.py: ``python -m tests.helpers.blocked_serve ARGS`` takes the arguments of ``gpuops serve``."""

from __future__ import annotations

import sys
import threading

import gpulib.serve.service as service
from gpulib.cli import main


class Blocked:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, folder, runbook, params):
        threading.Event().wait()


if __name__ == "__main__":
    service.FastVerdicter = Blocked
    main(["serve", "--verdict-in", "threads", *sys.argv[1:]])
