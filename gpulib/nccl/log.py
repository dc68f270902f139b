"""``NCCL_DEBUG=INFO`` logs: what NCCL set up (version, ranks, nodes, transports, variables set by environment)
and which known failure signature a log shows (``gpulib/data/nccl/nccl_signatures.csv``, each row with its source);
the SOP step of the other log findings is a row of ``gpulib/data/nccl/nccl_sop.csv``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from gpulib.core.findings import Finding, FindingList, Severity
from gpulib.core.knowledge import load_table
from gpulib.core.sop import sop
from gpulib.core.text import _lines
from gpulib.core.textio import clip

# --------------------------------------------------------------------------------------------
# NCCL_DEBUG=INFO logs
# --------------------------------------------------------------------------------------------

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+(cuda[\d.]+))?")
_VIA = re.compile(r"via (P2P/[\w/ ]+?|SHM/[\w/]+|NET/[\w/]+|NVLS|CollNet\S*)(?:\s|$|,)")
_NRANKS = re.compile(r"nranks (\d+)", re.I)
_NNODES = re.compile(r"nNodes (\d+)")
_ENVSET = re.compile(r"(NCCL_\w+) set by environment to (\S+?)\.?(?:\s|$)")
_NETWORK = re.compile(r"Using network (\S.*?)\s*$")


@dataclass
class LogSummary:
    version: str | None
    cuda: str | None
    nranks: int | None
    nnodes: int | None
    transports: list[str]
    network: str | None
    channels: int
    trees: int
    nvls: bool
    env: dict[str, str]
    warnings: list[str]


def _transport_family(via: str) -> str:
    v = via.strip()
    if v.startswith("P2P"):
        return "P2P/IPC" if "IPC" in v else ("P2P/CUMEM" if "CUMEM" in v else "P2P")
    if v.startswith("SHM"):
        return "SHM"
    if v.startswith("NET/IB") or v.startswith("NET/IBext"):
        return "NET/IB"
    if v.startswith("NET/Socket"):
        return "NET/Socket"
    if v.startswith("NET/"):
        return "NET/" + v.split("/")[1]
    return v


def summarize_log(text: str | bytes) -> LogSummary:
    """Facts from an ``NCCL_DEBUG=INFO`` log: version, ranks, nodes, transports, rings/trees, env."""
    lines = _lines(text)
    version = cuda = network = None
    nranks = nnodes = None
    transports: list[str] = []
    channels: set[str] = set()
    trees = 0
    nvls = False
    env: dict[str, str] = {}
    warns: list[str] = []
    for ln in lines:
        if version is None and (m := _VERSION.search(ln)):
            version, cuda = m.group(1), m.group(2)
        if m := _VIA.search(ln):
            fam = _transport_family(m.group(1))
            if fam not in transports:
                transports.append(fam)
        if "NCCL INFO" in ln and (m := _NRANKS.search(ln)):
            nranks = max(nranks or 0, int(m.group(1)))
        if m := _NNODES.search(ln):
            nnodes = max(nnodes or 0, int(m.group(1)))
        if (m := re.search(r"Channel (\d+)/(\d+)\s*:\s+\d", ln)) and "via" not in ln:
            channels.add(m.group(1))
        if "Trees [" in ln:
            trees += 1
        if re.search(r"NVLS multicast support is available|Connected NVLS|NVLS comm", ln) or re.search(
            r"[1-9]\d* nvls channels", ln
        ):
            nvls = True
        if m := _ENVSET.search(ln):
            env[m.group(1)] = m.group(2)
        if "NCCL INFO" in ln and (at := ln.find("Using network ")) >= 0 and ln[at + 14 :].strip():
            network = ln[at + 14 :].strip()
        if "NCCL WARN" in ln:
            warns.append(ln.strip())
    if nvls and "NVLS" not in transports:
        transports.append("NVLS")
    return LogSummary(
        version=version,
        cuda=cuda,
        nranks=nranks,
        nnodes=nnodes,
        transports=transports,
        network=network,
        channels=len(channels),
        trees=trees,
        nvls=nvls,
        env=env,
        warnings=warns,
    )


def _signatures() -> pd.DataFrame:
    return load_table("nccl_signatures").fillna("")


def diagnose_log(text: str | bytes, *, node: str | None = None, signatures: bool = True) -> FindingList:
    """Findings from an ``NCCL_DEBUG=INFO`` log: one INFO finding with the version, transports,
    rings/trees and the NCCL_* variables NCCL reports, one finding per matched failure signature
    (``nccl_signatures.csv``: cause, fix, commands) and one for unrecognised WARN lines.

    ``signatures=False``: the summary and the transport checks only (the errors of a job's logs are judged all
    ranks at once by :mod:`gpulib.nccl.jobcause`)."""
    lines = [ln.strip() for ln in _lines(text)]
    s = summarize_log(text)
    out = FindingList()
    ev = [
        f"NCCL {s.version or 'version not in log'}" + (f" ({s.cuda})" if s.cuda else ""),
        f"transports: {', '.join(s.transports) or 'none seen (connections are logged at INFO level)'}",
        f"rings/channels: {s.channels}, tree lines: {s.trees}, NVLS: {'yes' if s.nvls else 'no'}",
    ]
    if s.nranks:
        ev.append(f"ranks: {s.nranks}" + (f", nodes: {s.nnodes}" if s.nnodes else ""))
    if s.network:
        ev.append(f"network: {s.network}")
    if s.env:
        ev.append("set by environment: " + ", ".join(f"{k}={v}" for k, v in s.env.items()))
    out.append(
        Finding(
            Severity.INFO,
            "NCCL communicator summary",
            evidence=ev,
            category="nccl",
            node=node,
            data={
                "version": s.version,
                "transports": s.transports,
                "nranks": s.nranks,
                "nnodes": s.nnodes,
                "env": s.env,
                "nvls": s.nvls,
            },
        )
    )
    matched_lines: set[int] = set()
    multi_node = bool(s.nnodes and s.nnodes > 1)
    for _, sig in _signatures().iterrows() if signatures else ():
        rx = re.compile(sig["pattern"], re.I)
        hits = [i for i, ln in enumerate(lines) if rx.search(clip(ln))]
        if not hits:
            continue
        matched_lines.update(hits)
        sev = Severity(sig["severity"])
        if sig["id"] in ("ib_no_device", "net_plugin_missing") and not multi_node and s.nnodes is not None:
            sev = Severity.INFO  # single node: sockets/plugins do not matter
        evidence = [lines[i][:300] for i in hits[:3]] + ([f"... {len(hits) - 3} more line(s)"] if len(hits) > 3 else [])
        out.append(
            Finding(
                sev,
                sig["title"],
                summary=f"Likely cause: {sig['cause']}",
                sop_step=sig["fix"],
                commands=[c.strip() for c in sig["commands"].split(";;") if c.strip()],
                evidence=evidence,
                escalation=sig["escalation"],
                category="nccl",
                node=node,
                confidence=0.9 if sev != Severity.INFO else 0.7,
                data={"signature": sig["id"], "count": len(hits), "source": sig["source"]},
            )
        )
    if multi_node and s.network and "socket" in s.network.lower():
        step = sop("nccl_sop", "log_inter_node_sockets")
        out.append(
            Finding(
                Severity.WARNING,
                "Inter-node traffic goes over TCP sockets",
                summary="NCCL chose the socket transport across nodes; expect a fraction of RDMA bandwidth.",
                sop_step=step.sop_step,
                commands=step.commands,
                evidence=[f"Using network {s.network}", f"nodes: {s.nnodes}"],
                category="nccl",
                node=node,
            )
        )
    for var, val in s.env.items():
        if var in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE") and val == "1":
            step = sop("nccl_sop", "log_transport_disabled", name=var)
            out.append(
                Finding(
                    Severity.WARNING,
                    f"{var}=1 is set",
                    summary="a transport is disabled; bandwidth drops",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"{var} set by environment to {val}"],
                    category="nccl",
                    node=node,
                )
            )
    other = [ln for i, ln in enumerate(lines) if signatures and "NCCL WARN" in ln and i not in matched_lines]
    if other:
        out.append(
            Finding(
                Severity.WARNING,
                "Unrecognised NCCL warnings",
                summary=f"{len(other)} NCCL WARN line(s) match no known signature",
                sop_step=sop("nccl_sop", "log_unrecognised_warnings").sop_step,
                evidence=[o[:300] for o in other[:5]],
                category="nccl",
                node=node,
                confidence=0.5,
            )
        )
    return out
