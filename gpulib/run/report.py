"""How a finished run reads in a terminal and what it exits with, for every front end: the status word (the one rule
of :func:`gpulib.run.record.status_of`), the lines printed for a run, the exit code and the usage exit.

Exit codes: 0 = ran, no finding at or above ``--fail-on``; 1 = a finding at or above ``--fail-on`` stands (default:
critical); 2 = bad usage (unknown runbook, parameter or value); 3 = the run failed or a step could not get its data.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import NoReturn

from gpulib.core.errors import GpulibError, usage_text
from gpulib.core.findings import Severity, sort_findings
from gpulib.core.redact import redact
from gpulib.run.record import FINDINGS_FILE, Status
from gpulib.run.render import RunResult

EXIT_FINDING, EXIT_USAGE, EXIT_FAILED = 1, 2, 3
#: the values ``--fail-on`` takes
FAIL_ON = ("critical", "warning", "info", "never")


def fail(exc: GpulibError) -> NoReturn:
    """A usage error: its text on standard error, exit 2."""
    print(usage_text(exc), file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def header(res: RunResult) -> str:
    """``== <runbook>: <STATUS> · ...``: no verdict for a run that did not finish, else the worst finding and the
    findings counted by severity."""
    status = res.status.upper() if res.status != Status.DONE else str(Status.DONE)
    if res.failed:
        return f"== {res.name}: {status} · no verdict: the run did not finish"
    by = Counter(f.severity.value for f in res.findings)
    split = ", ".join(f"{by[s.value]} {s.value}" for s in Severity if by[s.value])
    return f"== {res.name}: {status} · worst finding: {res.worst} · {len(res.findings)} finding(s)" + (
        f": {split}" if split else ""
    )


def result_lines(res: RunResult, limit: int = 5) -> list[tuple[str, bool]]:
    """What a front end prints for one run, as (text, for standard error): the header, the errors, the top ``limit``
    findings, every other critical and warning by title, then where the notebook and its HTML are."""
    out: list[tuple[str, bool]] = [("\n" + header(res), False)]
    if res.failed:
        out.append((f"   error: {redact(res.failed)}", True))
    out += [(f"   error: {redact(e)}", True) for e in res.usage_errors]
    out += [(f"   missing data: {redact(e)}", True) for e in res.errors]
    ordered = sort_findings(res.findings)
    out += [("   " + f.as_text().replace("\n", "\n   "), False) for f in ordered[:limit]]
    rest = ordered[limit:]  # every critical and warning is named; only informational ones are left to findings.json
    out += [
        (f"   [{f.severity.value.upper()}] {f.title}" + (f" ({f.where})" if f.where else ""), False)
        for f in rest
        if f.severity.rank <= 1
    ]
    quiet = [f for f in rest if f.severity.rank > 1]
    if quiet:
        out.append((f"   ... {len(quiet)} informational finding(s) more in {res.out_dir / FINDINGS_FILE}", False))
    out.append((f"   notebook: {res.notebook}\n   html:     {res.html}", False))
    return out


def exit_code(results: list[RunResult], fail_on: str) -> int:
    if any(r.usage_errors for r in results):
        return EXIT_USAGE
    if any(r.failed or r.errors for r in results):
        return EXIT_FAILED
    if fail_on == "never":
        return 0
    limit = Severity(fail_on).rank
    if any(f.severity.rank <= limit for r in results for f in r.findings):
        return EXIT_FINDING
    return 0
