"""Which event of a failed job is its cause (:mod:`gpulib.nccl.joblog` reads the events): the first rank's own
failure by causal order, then by time (clocks of different hosts may disagree: ``joblog_clock_tolerance_s`` of
``gpulib/data/nccl/nccl_thresholds.csv``), with the peers' lost connections, wrappers and timeouts grouped under
it as symptoms.

- A rank's own failure (``role=primary`` in ``gpulib/data/nccl/nccl_job_causes.csv``) outranks a symptom even when
  the symptom is logged first; one that a dead peer can also produce (``can_be_symptom``: connection refused, an
  InfiniBand retry-exceeded) outranks only symptoms.
- InfiniBand completion errors are judged together by status (``gpulib/data/nccl/nccl_ib_wc_status.csv``): the same
  status on ``joblog_platform_min_hosts`` hosts or more, or on paths that share no host, is the platform; else the
  path between the host that reports it and its peer.
- Only symptoms: the peer they name (``Connection closed by remote peer <addr>``, ``Broken pipe`` from ``<addr>``,
  ``closed by localRank N``) is the rank to look at; watchdog timeouts name the rank whose collective lags or that
  never timed out; else the cause is not attributable from the text, and the finding says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd

from gpulib.core.knowledge import load_table, settings
from gpulib.nccl.joblog import Event, JobLog, causes_table


@dataclass
class Cause:
    """The job's cause (or one more independent failure): who failed, the events and the symptoms under it."""

    kind: str
    first: Event | None = None
    host: str | None = None
    pid: str | None = None
    gpu: str | None = None
    rank: int | None = None
    peer: str | None = None
    peer_host: str | None = None
    hosts: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    symptoms: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: dict | None = None
    attributable: bool = True


@lru_cache(maxsize=1)
def ib_statuses() -> dict[int, dict]:
    """``nccl_ib_wc_status.csv`` by status number."""
    return {int(r["status"]): r for r in load_table("nccl_ib_wc_status").fillna("").to_dict("records")}


def _can_be_symptom(cause: str) -> bool:
    rows = causes_table().set_index("id")
    return cause in rows.index and str(rows.loc[cause, "can_be_symptom"]).strip() == "yes"


def _comparable(evs: list[Event]) -> bool:
    kinds = {e.time_kind for e in evs}
    return len(kinds) == 1 and None not in kinds and all(e.time is not None for e in evs)


def _ordered(evs: list[Event]) -> list[Event]:
    if _comparable(evs):
        return sorted(evs, key=lambda e: (e.time, e.order))
    return sorted(evs, key=lambda e: e.order)


def _who(e: Event) -> str:
    parts = [f"rank {e.rank}" if e.rank is not None else None, f"host {e.host}" if e.host else None]
    parts.append(f"GPU {e.gpu}" if e.gpu is not None else None)
    return ", ".join(p for p in parts if p) or f"{e.file} line {e.line_no}"


def first_errors(job: JobLog) -> pd.DataFrame:
    """The first error line of each host / process / local GPU (rank where known), in causal order: a rank's own
    failure before a symptom, then by time or reading order."""
    cols = ["host", "pid", "gpu", "rank", "time", "cause", "role", "file", "line"]
    seen: dict[tuple, Event] = {}
    for e in job.events:
        key = (e.host, e.pid, e.gpu, e.rank if e.pid is None else None)
        cur = seen.get(key)
        if cur is None or (cur.role != "primary" and e.role == "primary"):
            seen[key] = e
    rows = [
        {
            "host": e.host,
            "pid": e.pid,
            "gpu": e.gpu,
            "rank": e.rank,
            "time": e.stamp,
            "cause": e.cause,
            "role": e.role,
            "file": e.file,
            "line": e.text,
        }
        for e in _ordered(list(seen.values()))
    ]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values("role", key=lambda s: s.ne("primary"), kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------------ InfiniBand
def _ib_cause(job: JobLog, evs: list[Event]) -> Cause:
    """One cause for the InfiniBand completion errors of one status: the platform or one path."""
    first = _ordered(evs)[0]
    status = ib_statuses().get(first.ib_status or -1)
    reporters = list(dict.fromkeys(e.host for e in evs if e.host))
    pairs = {(e.host, job.host_of(e.peer) or (e.peer or "?")) for e in evs}
    common = set.intersection(*[set(p) for p in pairs]) if pairs else set()
    scope = (status or {}).get("scope", "")
    min_hosts = int(settings("nccl_thresholds")["joblog_platform_min_hosts"])
    c = Cause("ib_path", first=first, events=evs, status=status, hosts=reporters)
    if len(reporters) >= min_hosts or (len(pairs) > 1 and not common):
        c.kind, c.host = "ib_platform", None
        c.notes.append(
            f"the same completion status on {len(reporters)} host(s) ({', '.join(reporters)}) towards "
            f"{len({p[1] for p in pairs})} different peer(s): not one path or one node"
        )
        return c
    # the path: the host every failing pair shares (the reporter when the pair is one)
    counts: dict[str, int] = {}
    for a, b in pairs:
        counts[a] = counts.get(a, 0) + 1
        counts[b] = counts.get(b, 0) + 1
    suspect = first.host if first.host in common or not common else sorted(common)[0]
    others = sorted({b if a == suspect else a for a, b in pairs} - {suspect})
    c.host, c.pid, c.gpu, c.rank = suspect, first.pid, first.gpu, first.rank
    c.peer = first.peer if first.host == suspect else first.host
    c.peer_host = job.host_of(c.peer) or (c.peer if c.peer in job.hosts else None)
    c.notes.append(f"path between {suspect} and {', '.join(others) or c.peer}")
    if scope == "host" and len(reporters) > 1:
        c.notes.append(
            "with two hosts a platform setting and one path look the same: confirm with NCCL_NET_GDR_LEVEL=0"
        )
    return c


# ------------------------------------------------------------------------------------------ symptoms only
def _suspect_from_symptoms(job: JobLog, evs: list[Event]) -> Cause | None:
    """The rank the lost-connection lines point at: a local rank that closed, else the peer address, preferring a
    peer that is not the reporting host itself."""
    cands = []
    for e in evs:
        if e.local_rank is not None and e.local_rank != e.gpu:
            cands.append((0, e.order, e, e.host, f"local rank {e.local_rank} on {e.host}", e.local_rank))
        elif e.peer:
            ph = job.host_of(e.peer)
            cands.append((1 if ph == e.host else 0, e.order, e, ph, e.peer, None))
    if not cands:
        return None
    cands.sort(key=lambda t: (t[0], t[1]))
    _, _, e, ph, peer, lr = cands[0]
    c = Cause("remote_died", first=e, host=ph, peer=peer, peer_host=ph, gpu=lr)
    named = list(dict.fromkeys(t[4] for t in cands))
    reporters = list(dict.fromkeys(_who(t[2]) for t in cands))
    c.notes.append(f"{len(reporters)} rank(s) lost their connection to {peer}: {'; '.join(reporters[:4])}")
    if len(named) > 1:
        c.notes.append("other peers named: " + ", ".join(named[1:4]))
    if ph is None:
        c.notes.append(
            f"{peer} is not mapped to a host in these logs (NCCL INFO 'Bootstrap : Using' lines map addresses)"
        )
    return c


def _hang(job: JobLog, evs: list[Event]) -> Cause:
    """Watchdog timeouts only: the ranks that lag (a lower SeqNum) or never timed out, else not attributable."""
    seq: dict[int, int] = {}
    for e in evs:
        if e.rank is not None and e.seq is not None:
            seq[e.rank] = min(seq.get(e.rank, e.seq), e.seq)
    first = _ordered(evs)[0]
    c = Cause("hang_suspect", first=first, symptoms=evs)
    if seq and len(set(seq.values())) > 1:
        low = min(seq.values())
        lag = sorted(r for r, s in seq.items() if s == low)
        c.peer = "rank " + ", ".join(map(str, lag))
        c.rank = lag[0]
        proc = job.rank_host(lag[0])
        c.host = proc[0] if proc else next((e.host for e in evs if e.rank == lag[0] and e.host), None)
        c.notes.append(f"timed out at SeqNum {low} while the others reached {max(seq.values())}")
        return c
    silent = sorted(set(range(job.nranks)) - set(seq)) if job.nranks and seq else []
    if silent and len(silent) < (job.nranks or 0):
        c.peer, c.rank = "rank " + ", ".join(map(str, silent[:8])), silent[0]
        proc = job.rank_host(silent[0])
        c.host = proc[0] if proc else None
        c.notes.append(
            f"of {job.nranks} ranks, {len(seq)} timed out; rank(s) {c.peer[5:]} did not: they are stuck elsewhere"
        )
        return c
    c.kind, c.attributable = "not_attributable", False
    ranks = ", ".join(map(str, sorted(seq))) or "unknown"
    at = f" (SeqNum {next(iter(seq.values()))})" if seq else ""
    c.notes.append(
        f"every rank that logged (rank {ranks}) timed out on the same collective{at}; the rank they waited for "
        "logged nothing, and NCCL itself cannot name it"
    )
    return c


# ------------------------------------------------------------------------------------------ the cause
def analyze(job: JobLog) -> list[Cause]:
    """The job's cause first, then other independent failures; one ``none`` cause when no error was logged."""
    tol = float(settings("nccl_thresholds")["joblog_clock_tolerance_s"])
    evs = job.events
    ib = [e for e in evs if e.cause == "ib_completion"]
    ib_sym = [e for e in ib if (ib_statuses().get(e.ib_status or -1) or {}).get("scope") == "symptom"]
    ib_real = [e for e in ib if e not in ib_sym]
    prim = [e for e in evs if e.role == "primary" and e.cause != "ib_completion"]
    symptoms = [e for e in evs if e.role != "primary"] + ib_sym
    cands: list[Cause] = []
    per_proc: dict[tuple, Event] = {}
    for e in prim:
        per_proc.setdefault((e.cause, e.host, e.pid, e.gpu, e.rank), e)
    for e in per_proc.values():
        cands.append(Cause(e.cause, first=e, host=e.host, pid=e.pid, gpu=e.gpu, rank=e.rank, events=[e]))
    by_status: dict[int | None, list[Event]] = {}
    for e in ib_real:
        by_status.setdefault(e.ib_status, []).append(e)
    cands += [_ib_cause(job, group) for group in by_status.values()]
    if not cands:
        if not symptoms:
            return [Cause("none", attributable=False)]
        lost = [e for e in symptoms if e.cause == "peer_closed"]
        c = _suspect_from_symptoms(job, lost) if lost else None
        if c is None:
            hangs = [e for e in symptoms if e.cause == "watchdog_timeout"]
            c = _hang(job, hangs) if hangs else None
        if c is None:
            c = Cause("not_attributable", first=_ordered(symptoms)[0], attributable=False)
            c.notes.append(
                "the lines only report an error passed up the stack (wrappers such as 'unhandled system error' or "
                "DistBackendError) and name no rank, peer or host; the first NCCL WARN line with the cause is not in "
                "the text (was NCCL_DEBUG=WARN or INFO set on every rank?)"
            )
        c.symptoms = [e for e in symptoms if e is not c.first] if c.kind != "hang_suspect" else c.symptoms
        return [c]
    own = [
        c
        for c in cands
        if not (_can_be_symptom(c.kind) or (c.kind == "ib_path" and (c.status or {}).get("scope") == "path"))
    ]
    pool = own or cands
    firsts = _ordered([c.first for c in pool])
    top = next(c for c in pool if c.first is firsts[0])
    same = [c for c in pool if c is not top and c.kind == top.kind and c.kind not in ("ib_path", "ib_platform")]
    for c in same:
        top.events += c.events
    rest = [c for c in cands if c is not top and c not in same]
    if (
        len(firsts) > 1
        and _comparable(firsts[:2])
        and firsts[1].host != firsts[0].host
        and abs(firsts[1].time - firsts[0].time) < tol
    ):
        top.notes.append(
            f"{_who(firsts[0])} and {_who(firsts[1])} failed within {tol:g} s of each other: their order is not "
            "decided by timestamps from different clocks (read order used)"
        )
    if not own:
        top.notes.append("no rank logged a failure of its own; this error can also follow a peer that died first")
    top.symptoms = symptoms + [e for c in rest if c.kind in ("socket_refused", "ib_path") and own for e in c.events]
    rest = [c for c in rest if not (own and c.kind in ("socket_refused", "ib_path"))]
    _skew(top, tol)
    return [top] + rest


def _skew(top: Cause, tol: float) -> None:
    """A symptom timestamped before its cause by more than the tolerance: the clocks disagree (causal order used)."""
    f = top.first
    if f is None or f.time is None:
        return
    early = [
        e
        for e in top.symptoms
        if e.host and e.host != f.host and e.time_kind == f.time_kind and e.time is not None and f.time - e.time > tol
    ]
    if early:
        e = min(early, key=lambda x: x.time)
        top.notes.append(
            f"{e.host} logged '{e.cause.replace('_', ' ')}' at {e.stamp}, {f.time - e.time:.1f} s before the cause on "
            f"{f.host} by its own clock: the clocks differ; causal order used, not the timestamps"
        )
