"""NCCL results -> findings: the verdict's finding (SOP step, commands and escalation from
``gpulib/data/nccl/nccl_sop.csv``), the finding of a capture judged against a band measured on itself, and the byte
formatting their messages share with the environment checks.
"""

from __future__ import annotations

from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import Sop, sop

_SEV = {"healthy": Severity.OK, "degraded": Severity.WARNING, "broken": Severity.CRITICAL, "unknown": Severity.INFO}


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _verdict_sop(status: str) -> Sop:
    """The nccl_sop.csv row of a verdict; a healthy run has no step."""
    if status == "degraded":
        return sop("nccl_sop", "verdict_degraded")
    if status == "broken":
        return sop("nccl_sop", "verdict_broken")
    if status == "unknown":
        return sop("nccl_sop", "verdict_unknown")
    return Sop("healthy")


def _verdict_finding(status, coll, measured, size, band, reasons, node) -> Finding:
    title = {
        "healthy": "NCCL bandwidth healthy",
        "degraded": "NCCL bandwidth degraded",
        "broken": "NCCL test broken",
        "unknown": "NCCL bandwidth not judged",
    }[status]
    step = _verdict_sop(status)
    ev = []
    if measured is not None:
        ev.append(f"best busbw {measured:g} GB/s at {_fmt_bytes(size)}")
    if band is not None:
        ev.append(f"expected {band}" + (f"; link peak {band.link_peak:g} GB/s" if band.link_peak else ""))
    return Finding(
        _SEV[status],
        title + (f" ({coll})" if coll else ""),
        summary=reasons[0] if reasons else "",
        sop_step=step.sop_step,
        commands=step.commands,
        evidence=ev + reasons[1:],
        category="nccl",
        node=node,
        escalation=step.escalation,
        confidence=0.6 if (band is not None and band.inferred) else 0.9,
        data={
            "status": status,
            "measured_busbw": measured,
            "size_bytes": size,
            "band": None
            if band is None
            else {
                "low": band.low,
                "high": band.high,
                "basis": band.basis,
                "source": band.source,
                "inferred": band.inferred,
            },
        },
    )


def reference_finding(v, host: str | None) -> Finding:
    """A run judged against a band measured on that very capture: not a verdict on any node."""
    return Finding(
        Severity.INFO,
        f"Reference capture, not judged ({v.collective})",
        node=host,
        category="nccl",
        summary=(
            f"The expected band ({v.band.low:g}-{v.band.high:g} GB/s) was measured on this very "
            f"capture from host {host or 'unknown'}, so comparing them says nothing about any node. "
            "Run the probe on your nodes and give its output as nccl_tests_file for a verdict."
        ),
        evidence=[
            f"best busbw {v.measured_busbw:g} GB/s" if v.measured_busbw is not None else "no busbw",
            f"band source: {v.band.source}",
        ],
        data={"status": "reference", "host": host},
    )
