"""No OK without evidence: each decision of the triage (XID, memory, thermal) rests on at least one of its inputs
(``gpulib/data/xid/xid_evidence.csv``). With none of them present the decision was not made, and the run says so
(INCOMPLETE, exit 3) instead of an all-clear whose evidence reads "inputs checked: none"."""

from __future__ import annotations

from dataclasses import dataclass

from gpulib.core.errors import NoInput
from gpulib.core.knowledge import load_table
from gpulib.sources.signals import aliases


@dataclass(frozen=True)
class EvidenceGroup:
    decision: str
    inputs: tuple[str, ...]
    why: str
    how: str


def evidence_groups() -> list[EvidenceGroup]:
    df = load_table("xid/xid_evidence")
    return [
        EvidenceGroup(r["decision"], tuple(r["inputs"].split("|")), r["why"], r["how"]) for r in df.to_dict("records")
    ]


def present_inputs(inp) -> set[str]:
    """The inputs of a :class:`gpulib.xid.steps.TriageInputs` that were there, with rows: the kernel log, nvidia-smi -q
    for at least one GPU, and each DCGM field that came back with rows for the node."""
    out = set()
    if inp.kernel_log is not None:
        out.add("kernel log")
    if inp.smi is not None and len(inp.smi):
        out.add("nvidia-smi -q")
    for name, frame in (*inp.summaries.items(), *inp.series.items()):
        if frame is not None and len(frame):
            out.add(name)
    return out


def missing_evidence(inp) -> list[EvidenceGroup]:
    """The decisions none of whose inputs were present."""
    have = present_inputs(inp)
    return [g for g in evidence_groups() if not have & set(g.inputs)]


def _every_name(name: str) -> str:
    """A DCGM field with every name dcgm-exporter has given it (gpulib/data/sources/signals.csv)."""
    names = aliases(name) if name.startswith("DCGM_") else [name]
    return names[0] + (f" (also exported as {', '.join(names[1:])})" if len(names) > 1 else "")


def check_evidence(inp, commands: list[str]) -> None:
    """NoInput naming every decision that has no input, its inputs, why it matters and how to get one of them
    (``commands``: the node's collection commands, shown for the kernel log)."""
    gone = missing_evidence(inp)
    if not gone:
        return
    parts = [f"{g.decision}: none of {', '.join(map(_every_name, g.inputs))} ({g.why})" for g in gone]
    raise NoInput(
        f"no evidence for {len(gone)} decision(s) on {inp.node}: " + "; ".join(parts),
        hint="; ".join(g.how for g in gone) + (f"; by hand: {commands[0]}" if commands else ""),
    )
