"""NCCL results -> findings: the verdict's finding and the byte formatting its messages share with the
environment checks.
"""
from __future__ import annotations

from gpulib.core.findings import Finding, Severity


_SEV = {"healthy": Severity.OK, "degraded": Severity.WARNING, "broken": Severity.CRITICAL, "unknown": Severity.INFO}


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _verdict_finding(status, coll, measured, size, band, reasons, node) -> Finding:
    title = {"healthy": "NCCL bandwidth healthy", "degraded": "NCCL bandwidth degraded",
             "broken": "NCCL test broken", "unknown": "NCCL bandwidth not judged"}[status]
    cmds = []
    sop = ""
    if status == "degraded":
        sop = "Compare with the expected band; look for disabled P2P, NVLink errors and topology problems; rerun with NCCL_DEBUG=INFO"
        cmds = ["env | grep NCCL_", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "nvidia-smi topo -m",
                "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH <rerun>"]
    elif status == "broken":
        sop = "Read the first error and the first NCCL WARN line (rerun with NCCL_DEBUG=INFO); wrong results mean cordon the node and run diagnostics"
        cmds = ["NCCL_DEBUG=INFO <rerun>", "dmesg -T | grep -i xid", "kubectl cordon <node>", "dcgmi diag -r 3"]
    ev = []
    if measured is not None:
        ev.append(f"best busbw {measured:g} GB/s at {_fmt_bytes(size)}")
    if band is not None:
        ev.append(f"expected {band}" + (f"; link peak {band.link_peak:g} GB/s" if band.link_peak else ""))
    return Finding(_SEV[status], title + (f" ({coll})" if coll else ""), summary=reasons[0] if reasons else "",
                   sop_step=sop, commands=cmds, evidence=ev + reasons[1:], category="nccl", node=node,
                   escalation="hardware team / RMA when wrong results or NVLink errors repeat on one node" if status != "healthy" else "",
                   confidence=0.6 if (band is not None and band.inferred) else 0.9,
                   data={"status": status, "measured_busbw": measured, "size_bytes": size,
                         "band": None if band is None else {"low": band.low, "high": band.high, "basis": band.basis,
                                                            "source": band.source, "inferred": band.inferred}})
