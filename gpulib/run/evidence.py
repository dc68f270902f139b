"""No OK without evidence, for every runbook: what each decision needs (``gpulib/data/core/evidence.csv``) against
what the run actually read.

A :class:`Reads` watches the run's source (:func:`watch`): every read that came back with data marks its input present
under the name a reader knows it by (the canonical DCGM field, whatever name the exporter served it under; ``nodes``,
``pods``, ``kernel log``, ``history:<signal>``, a ``vllm:`` metric). After the steps ran, :func:`check` raises
:class:`~gpulib.core.errors.NoInput` (the run is INCOMPLETE, exit 3) for each decision none of whose inputs was
present, naming the inputs under every name each dcgm-exporter generation gives them
(``gpulib/data/sources/signals.csv``) and how to enable one. :func:`finding_inputs` gives each finding the inputs
its decision rested on.

A field read but empty (no row, or only NaN values) is not evidence: a snapshot's ``increase`` is NaN, a stopped
exporter returns no rows. The XID triage checks its decisions per node in its own step (:mod:`gpulib.xid.evidence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from gpulib.core.errors import NoInput
from gpulib.core.knowledge import load_table
from gpulib.sources.signals import GENERATIONS, aliases, canonical, name_in

#: source reads that take no field, with the input name they stand for
NAMED_READS = {
    "nodes": "nodes",
    "pods": "pods",
    "kernel_log": "kernel log",
    "smi_query": "nvidia-smi -q",
    "diag_report": "dcgmi diag",
}
#: metric names a PromQL text may hold (dcgm-exporter, kube-state-metrics, vLLM): a query's result without
#: ``__name__`` (an aggregation) still names what it read
_METRIC = re.compile(r"\b(DCGM_[A-Z0-9_]+|kube_[a-z0-9_]+|vllm:[a-z0-9_:]+)")
#: the step whose error says which decisions had no evidence
STEP = "Evidence behind the verdict"


@dataclass(frozen=True)
class Need:
    """One decision of a runbook: it rests on any one of ``inputs``; ``categories``: the findings it decides."""

    runbook: str
    decision: str
    inputs: tuple[str, ...]
    categories: tuple[str, ...]
    why: str
    how: str


@lru_cache(maxsize=1)
def _table() -> tuple[Need, ...]:
    df = load_table("core/evidence").fillna("")
    return tuple(
        Need(
            str(r["runbook"]),
            str(r["decision"]),
            tuple(i.strip() for i in str(r["inputs"]).split("|") if i.strip()),
            tuple(c.strip() for c in str(r["categories"]).split("|") if c.strip()),
            str(r["why"]),
            str(r["how"]),
        )
        for r in df.to_dict("records")
    )


def needs(runbook: str) -> list[Need]:
    """The decisions of ``runbook`` and the inputs each rests on (empty for a runbook without rows)."""
    return [n for n in _table() if n.runbook == runbook]


def runbooks() -> list[str]:
    """Every runbook the table has decisions for."""
    return sorted({n.runbook for n in _table()})


@dataclass
class Reads:
    """What a run's source returned: ``present`` (with data) and ``absent`` (read, nothing came back)."""

    present: set[str] = field(default_factory=set)
    absent: set[str] = field(default_factory=set)

    def saw(self, name: str, ok: bool) -> None:
        (self.present if ok else self.absent).add(name)


def _has_data(out: Any) -> bool:
    if out is None:
        return False
    if isinstance(out, str):
        return bool(out.strip())
    if hasattr(out, "empty") and hasattr(out, "columns"):
        if out.empty:
            return False
        return bool(out["value"].notna().any()) if "value" in out.columns else True
    if isinstance(out, (list, tuple, dict, set)):
        return bool(out)
    return True


def _watched(real: Callable, names: Callable[[tuple, dict, Any], list[str]], reads: Reads) -> Callable:
    """``real`` (a bound Source method) recording the inputs ``names`` says it read, present when data came back."""

    def watched(*a, **k):
        try:
            out = real(*a, **k)
        except Exception:
            for n in names(a, k, None):
                reads.saw(n, False)
            raise
        ok = _has_data(out)
        for n in names(a, k, out):
            reads.saw(n, ok)
        return out

    return watched


def _field_of(a: tuple, k: dict, _out: Any) -> list[str]:
    f = a[0] if a else k.get("field")
    return [canonical(str(f))] if f else []


def _promql_names(a: tuple, k: dict, out: Any) -> list[str]:
    text = str(a[0] if a else k.get("promql", ""))
    got = {canonical(m) for m in _METRIC.findall(text)}
    for r in out or ():
        name = (r.get("metric") or {}).get("__name__") if isinstance(r, dict) else None
        if name:
            got.add(canonical(str(name)))
    return sorted(got)


def _history_names(_a: tuple, _k: dict, out: Any) -> list[str]:
    """A history read: ``node history`` and each signal it read (:class:`gpulib.sources.history.NodeHistory`)."""
    if out is None:
        return ["node history"]
    return ["node history", *(f"history:{s}" for s in sorted(out.read) if s not in out.missing)]


def watch(src: Any) -> Reads:
    """Record every read of ``src`` through the Source interface (this object only: its methods are wrapped on the
    instance, so ``isinstance`` and the class stay as they are). A history read marks each signal it read as
    ``history:<signal>`` (one it lists as missing as absent); an object read marks the kind (``daemonsets``, ...)."""
    reads = Reads()
    if src is None:
        return reads
    named = {m: (lambda a, k, out, _n=name: [_n]) for m, name in NAMED_READS.items()}
    methods = {
        "series": (src.series, _field_of),
        "summary": (src.summary, _field_of),
        "last_seen": (src.last_seen, _field_of),
        "nodes": (src.nodes, named["nodes"]),
        "pods": (src.pods, named["pods"]),
        "kernel_log": (src.kernel_log, named["kernel_log"]),
        "smi_query": (src.smi_query, named["smi_query"]),
        "diag_report": (src.diag_report, named["diag_report"]),
        "objects": (src.objects, lambda a, k, out: [str(a[0] if a else k.get("kind", ""))]),
        "query": (src.query, _promql_names),
        "range_query": (src.range_query, _promql_names),
        "node_history": (src.node_history, _history_names),
    }
    for name, (real, names) in methods.items():
        setattr(src, name, _watched(real, names, reads))
    return reads


def every_name(name: str) -> str:
    """An input with the name each dcgm-exporter generation gives it where it was renamed
    (``DCGM_FI_DEV_GPU_TEMP (4.8: DCGM_FI_DEV_GPU_TEMP; 4.9: ...; 4.10: ...)``), else the name."""
    if len(aliases(name)) < 2:
        return name
    return f"{name} ({'; '.join(f'{g}: {name_in(name, g)}' for g in GENERATIONS)})"


def missing(runbook: str, reads: Reads) -> list[Need]:
    """The decisions of ``runbook`` this run tried to make (it asked for at least one of their inputs) none of whose
    inputs came back with data. A decision whose inputs the run never asked for was not made (a recorded nccl-tests
    file without a node, a MIG plan sized from named models): it cannot have been made without its evidence."""
    asked = reads.absent | reads.present
    history = "node history" in asked  # a history read asks for every signal (it lists the missing ones)
    return [
        n
        for n in needs(runbook)
        if not reads.present & set(n.inputs)
        and any(i in asked or (history and i.startswith("history:")) for i in n.inputs)
    ]


def check(runbook: str, reads: Reads) -> None:
    """NoInput naming every decision of ``runbook`` that had no evidence: its inputs under every name, why it
    matters and how to enable one of them."""
    gone = missing(runbook, reads)
    if not gone:
        return
    parts = [
        f"{n.decision}: none of {', '.join(map(every_name, n.inputs))} came back with data ({n.why})" for n in gone
    ]
    raise NoInput(
        f"no evidence for {len(gone)} decision(s) of {runbook}: " + "; ".join(parts),
        hint="; ".join(n.how for n in gone),
    )


def finding_inputs(runbook: str, reads: Reads, category: str) -> list[str]:
    """The inputs a finding of ``category`` rests on: those of its decisions that came back with data, else
    (a finding no decision of the table covers) every input the run read with data."""
    rows = [n for n in needs(runbook) if category in n.categories]
    if rows:
        return sorted({i for n in rows for i in n.inputs if i in reads.present})
    return sorted(reads.present)
