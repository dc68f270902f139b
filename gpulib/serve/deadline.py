"""The wall-clock deadline of every fast verdict of ``gpuops serve`` (``verdict_deadline_s``,
``gpulib/data/serve/serve_limits.csv``): the verdicter is called in a thread of its own and waited for that long.
Past it the run is INCOMPLETE (:func:`incomplete`, exit-3 semantics), the verdicter is told to replace its worker
(:meth:`gpulib.serve.runner.ProcessVerdicter.expire` kills the worker processes and starts new ones) and the verdict
thread of the server takes the next run. A call that still runs ``verdict_stuck_grace_s`` after its deadline (one
that ignores being stopped) is counted by :meth:`Deadlined.stuck`, which /healthz and /readyz report."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from gpulib.core.errors import VerdictDeadline
from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import sop
from gpulib.run.record import outcome, save_verdict, verdict_of

Verdicter = Callable[[Path, str, dict[str, Any]], Optional[dict[str, Any]]]


class Deadlined:
    def __init__(self, verdicter: Verdicter, deadline_s: float, grace_s: float):
        self.verdicter, self.deadline_s, self.grace_s = verdicter, float(deadline_s), float(grace_s)
        self._late: list[tuple[threading.Thread, float]] = []  # calls past their deadline, with when it passed
        self._lock = threading.Lock()
        self.expired = 0

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any]) -> Optional[dict[str, Any]]:
        box: dict[str, Any] = {}

        def call():
            try:
                box["out"] = self.verdicter(folder, runbook, params)
            except BaseException as exc:  # handed to the waiting thread as it is
                box["exc"] = exc

        t = threading.Thread(target=call, name=f"gpuops-verdict-{folder.name}", daemon=True)
        t.start()
        t.join(self.deadline_s)
        if t.is_alive():
            with self._lock:
                self._late.append((t, time.monotonic()))
                self.expired += 1
            expire = getattr(self.verdicter, "expire", None)
            if expire is not None:  # its worker is replaced; the call above then ends with an error nobody reads
                expire()
            raise VerdictDeadline(
                f"the verdict did not finish within its {self.deadline_s:g} s deadline (a data source answered too "
                "slowly); the worker was replaced"
            )
        if "exc" in box:
            raise box["exc"]
        return box.get("out")

    def stuck(self) -> int:
        """Calls still running ``grace_s`` after their deadline passed (the ones that ended are forgotten)."""
        now = time.monotonic()
        with self._lock:
            self._late = [(t, at) for t, at in self._late if t.is_alive()]
            return sum(1 for _t, at in self._late if now - at > self.grace_s)


def incomplete(folder: Path, runbook: str, params: dict[str, Any], exc: VerdictDeadline) -> dict[str, Any]:
    """The outcome of a run whose verdict passed its deadline: INCOMPLETE, with the "Runbook incomplete" finding of
    ``core_sop.csv`` (``missing_data``) as its verdict, also written to ``folder/verdict.json``."""
    s = sop("core_sop", "missing_data")
    error = str(exc)
    f = Finding(
        Severity.WARNING,
        "Runbook incomplete: the verdict passed its deadline",
        category="data",
        summary=s.summary,
        evidence=[error],
        sop_step=s.sop_step,
    )
    save_verdict(folder, [f], runbook=runbook, parameters=params, errors=[error])
    return outcome(None, [], [error], verdict_of([f], {"worst": "warning", "errors": [error]}))
