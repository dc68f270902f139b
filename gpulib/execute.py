"""The run engine's former address, kept for the tests and scripts that import it: the engine is
:mod:`gpulib.run.render`, the parameters :mod:`gpulib.run.params`, a run's outcome :mod:`gpulib.run.record`."""

from __future__ import annotations

from gpulib.run.params import check_backend, prepare
from gpulib.run.render import (
    KERNEL_ARGS,
    RunResult,
    descendants,
    execute,
    export_html,
    kernel_manager,
    kill_tree,
    outcome,
    run_code,
    shutdown_kernel,
)

_kernel_manager, _shutdown = kernel_manager, shutdown_kernel

__all__ = [
    "KERNEL_ARGS",
    "RunResult",
    "check_backend",
    "descendants",
    "execute",
    "export_html",
    "kill_tree",
    "outcome",
    "prepare",
    "run_code",
]
