"""Alert storms: one run per node and incident, repeat rules per XID class, run priorities.

* **Incident**: the runbook and its parameters less the GPU (for ``xid_ecc_triage``: the node). An alert of an open
  incident whose GPU the run already covers is *attached* to that run (listed on its page); another GPU of the node
  widens a run that is still queued to every GPU of the node (``gpu=""``, the runbook's own "every GPU" value,
  the alerted GPUs kept in the record's ``gpus``); a run already under way gets one follow-up run for every GPU of
  the node (``gpu=""``, so later alerts of the node attach to it rather than each opening a run). An
  incident stays open for the server's dedupe window; an alert after it opens the node's next run (a repeat).
  Grouping the XIDs of one node as one incident is what NVIDIA's Fleet Intelligence does with XID bursts
  (https://docs.nvidia.com/fleet-intel/user-guide/xid-bursts).
* **Repeat rules** (``gpulib/data/xid/xid_alert_repeat.csv``, each row with its source): NVIDIA's health-events
  analyzer counts an XID's occurrences on the *same GPU* over 24 h (NVIDIA/NVSentinel:
  distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml @09dfc8f9, RepeatedXID13OnSameGPCAndTPC,
  RepeatedXID31OnSameGPU). An alert whose code has a repeat row (13, 31, 43) is *held* until that many occurrences
  of the code on its (node, GPU) fall within the row's window, timed by the alerts' ``startsAt``. The last-XID gauge
  does not change on a same-code repeat, so its alert does not fire again; occurrences are counted from two
  sources, the larger taken and named in the run's ``trigger.repeat_evidence``: each *re-fire* of an alert (a new
  ``startsAt``), and the *XID count metric* (``DCGM_EXP_XID_ERRORS_COUNT``'s alert ``GPUXidRepeatCount``, whose
  summary says "seen N times" within the exporter's window: each of its firings adds its N). The GPC/TPC of XID
  13 are compared by the run, from the kernel log (:mod:`gpulib.xid.xid13`). A *solo* row (XID 45) opens the
  incident at its first alert unless another code was seen on the same GPU within its window; then it is
  ignored (held, "not solo"). A re-post of an alert already counted (same name, ``startsAt`` and count) is a
  dedupe.
* **Replicas** (``--claims kubernetes``): before a replica opens a run for an incident it claims the
  ``coordination.k8s.io`` Lease ``gpuops-incident-<hash of the incident key>`` for the incident window
  (:func:`gpulib.kube.lease.claim`, the Lease mechanism of the cordon cap); a replica that loses the claim answers
  the alert as run ``elsewhere``. A claim that cannot be checked (API down) runs the incident here: an alert is never
  lost, at the price of a possible second run.
* **Priorities**: critical before warning before the rest, then a node's first run before its repeats, then
  arrival order (:func:`priority`). A run older than the run store keeps (``retain_days``) no longer makes the
  node's next run a repeat.
* **Bounded memory**: :class:`Storms` drops what no decision can use any more (an incident past the dedupe window,
  sightings past the longest repeat window, run counts past ``retain_days``) once its tables have doubled since
  they were last pruned, so a server that sees new nodes for months keeps tables of what is live.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpulib.core.knowledge import load_table
from gpulib.kube.client import KubeCluster
from gpulib.kube.lease import claim
from gpulib.serve.config import limit
from gpulib.serve.routing import PRUNE_MIN

#: the table of repeat rules per XID class
REPEAT_TABLE = "xid_alert_repeat"
#: alert ``severity`` label -> rank (lower runs first); anything else ranks after warning
SEVERITY_RANK = {"critical": 0, "warning": 1}
OTHER_RANK = 2
#: a run asked for by a person (GET /run/...): someone is waiting on the page
MANUAL_PRIORITY = (0, 0)
#: how our alert rules name the code in the summary annotation (deploy/prometheus/gpu-alerts.yaml: ``XID {{ $value }}``)
_SUMMARY_XID = re.compile(r"^XID (\d+)\b")


@dataclass(frozen=True)
class RepeatRule:
    xid_class: str
    alerts_to_open: int
    window_s: float
    #: > 0: the code opens only when no other code was seen on its GPU within this many seconds (XID 45)
    solo_window_s: float = 0.0


#: how our count alert's summary gives the count (gpulib/xid/alerts.py: ``XID {{ $labels.xid }} seen {{ $value }}
#: times``)
_SUMMARY_SEEN = re.compile(r"^XID \d+ seen (\d+(?:\.\d+)?) times\b")
COUNT_EVIDENCE = "XID count metric (DCGM_EXP_XID_ERRORS_COUNT, alert GPUXidRepeatCount)"
REFIRE_EVIDENCE = "alert re-fire (a new startsAt of the XID alert)"


@dataclass(frozen=True)
class Sighting:
    """One firing of an XID alert on one GPU: when it started, its code, and the count alert's N (None: a gauge
    alert, one occurrence)."""

    t: float
    code: int
    seen: int | None


@dataclass(frozen=True)
class Decision:
    """What the repeat rules make of an alert: ``open``, ``hold``, ``ignore`` (held, not solo) or ``dedupe``."""

    action: str
    occurrences: int = 0
    evidence: str = ""
    reason: str = ""


def load_rules() -> tuple[dict[int, RepeatRule], RepeatRule]:
    """(code -> rule, the default rule) from :data:`REPEAT_TABLE`."""
    by_code: dict[int, RepeatRule] = {}
    default = None
    for row in load_table(REPEAT_TABLE).to_dict("records"):
        rule = RepeatRule(
            str(row["xid_class"]), int(row["alerts_to_open"]), float(row["window_s"]), float(row["solo_window_s"])
        )
        if str(row["codes"]).strip() == "*":
            default = rule
            continue
        for c in str(row["codes"]).split(";"):
            by_code[int(c)] = rule
    if default is None:
        raise ValueError(f"{REPEAT_TABLE}.csv has no default row (codes '*')")
    return by_code, default


def xid_code(labels: dict[str, str], annotations: dict[str, str]) -> int | None:
    """The XID code an alert is about: its ``xid`` label (the count alerts), else the code our rules put first in
    the summary annotation; None when it names none."""
    for text, pat in ((labels.get("xid", ""), re.compile(r"^(\d+)$")), (annotations.get("summary", ""), _SUMMARY_XID)):
        m = pat.match(text.strip())
        if m:
            return int(m.group(1))
    return None


def seen_count(annotations: dict[str, str]) -> int | None:
    """N of a count alert's summary ("XID 13 seen 2 times ..."), None for any other alert."""
    m = _SUMMARY_SEEN.match(annotations.get("summary", "").strip())
    return max(1, int(float(m.group(1)))) if m else None


def alert_time(starts_at: str, default: float) -> float:
    """An alert's ``startsAt`` as epoch seconds (``default`` when it has none or cannot be read)."""
    try:
        return datetime.fromisoformat(starts_at.strip().replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return default


def priority(severity: str, repeat: bool) -> tuple[int, int]:
    """The queue priority of a run: severity rank, then a node's first run (0) before its repeats (1)."""
    return (SEVERITY_RANK.get(severity, OTHER_RANK), 1 if repeat else 0)


def incident_key(runbook: str, params: dict[str, Any]) -> tuple:
    """A run's incident: the runbook and its parameters less the GPU."""
    return (runbook, tuple(sorted((k, str(v)) for k, v in params.items() if k != "gpu")))


@dataclass
class Incident:
    run_id: str
    opened: float
    #: the GPUs the run covers ("" in the set: every GPU of the node)
    gpus: set[str] = field(default_factory=set)


class Storms:
    """The server's open incidents, held alerts and run counts per incident. Thread-safe."""

    def __init__(self, window: float, repeat_s: float | None = None):
        self.window = window
        self.rules, self.default_rule = load_rules()
        self._open: dict[tuple, Incident] = {}
        #: incident key -> (runs opened, when the last one was)
        self._runs: dict[tuple, tuple[int, float]] = {}
        #: (incident key, GPU) -> (alert name, startsAt) -> sighting, kept for the longest window
        self._sightings: dict[tuple, dict[tuple, Sighting]] = {}
        #: (incident key, GPU) -> when (this server's clock) an alert of it was last sighted
        self._sighted: dict[tuple, float] = {}
        self._keep_s = max([r.window_s for r in self.rules.values()] + [r.solo_window_s for r in self.rules.values()])
        #: how long a node's run makes its next one a repeat: as long as the run store keeps runs
        self.repeat_s = float(limit("retain_days")) * 86400 if repeat_s is None else float(repeat_s)
        #: table -> its size that sets off the next pruning (twice what the last one left)
        self._prune_at = {"open": PRUNE_MIN, "sightings": PRUNE_MIN, "runs": PRUNE_MIN}
        self.lock = threading.RLock()

    def sizes(self) -> dict[str, int]:
        """Entries of each table (open incidents, GPUs with sightings, incidents with run counts)."""
        with self.lock:
            return {"open": len(self._open), "sightings": len(self._sightings), "runs": len(self._runs)}

    def prune(self, now: float) -> None:
        """Drop what no decision can use at ``now``: incidents past the window, the sightings of a GPU with no alert
        for the longest repeat window, run counts past :attr:`repeat_s`."""
        with self.lock:
            self._open = {k: v for k, v in self._open.items() if now - v.opened < self.window}
            self._runs = {k: v for k, v in self._runs.items() if now - v[1] < self.repeat_s}
            self._sighted = {k: t for k, t in self._sighted.items() if now - t < self._keep_s}
            self._sightings = {k: m for k, m in self._sightings.items() if k in self._sighted}
            self._prune_at = {k: max(PRUNE_MIN, 2 * n) for k, n in self.sizes().items()}

    def _grown(self, now: float) -> None:
        if any(n > self._prune_at[k] for k, n in self.sizes().items()):
            self.prune(now)

    def rule(self, code: int | None) -> RepeatRule:
        return self.rules.get(code, self.default_rule) if code is not None else self.default_rule

    def sight(
        self, key: tuple, code: int, firing: tuple, t: float, seen: int | None, now: float | None = None
    ) -> Decision:
        """Record one XID alert of a GPU (``key``: incident key and GPU; ``firing``: alert name and ``startsAt``;
        ``t``: its start; ``seen``: a count alert's N; ``now``: the clock, for pruning) and decide by its code's
        rule."""
        rule = self.rule(code)
        now = time.time() if now is None else now
        with self.lock:
            self._grown(now)
            self._sighted[key] = now
            mem = self._sightings.setdefault(key, {})
            for f in [f for f, s in mem.items() if s.t < t - self._keep_s]:
                del mem[f]
            old = mem.get(firing)
            new = old is None or (seen is not None and seen > (old.seen or 0))
            mem[firing] = Sighting(t, code, seen if old is None or seen is None else max(seen, old.seen or 0))
            if not new and rule.alerts_to_open > 1:
                return Decision("dedupe")
            if rule.solo_window_s > 0:
                others = sorted({s.code for s in mem.values() if s.code != code and abs(t - s.t) <= rule.solo_window_s})
                if others:
                    return Decision(
                        "ignore",
                        reason=f"XID {code} is not solo: XID {', '.join(map(str, others))} on this GPU within "
                        f"{rule.solo_window_s:g} s (follow the other XID)",
                    )
            if rule.alerts_to_open <= 1:
                return Decision("open", 1)
            same = [s for s in mem.values() if s.code == code and t - rule.window_s < s.t <= t]
            refires = sum(1 for s in same if s.seen is None)
            counted = sum(s.seen for s in same if s.seen is not None)
            n, evidence = (counted, COUNT_EVIDENCE) if counted > refires else (refires, REFIRE_EVIDENCE)
            if n >= rule.alerts_to_open:
                return Decision("open", n, evidence)
            return Decision(
                "hold",
                n,
                evidence,
                f"XID {code} seen {n} time(s) on this GPU in the last {rule.window_s / 3600:g} h "
                f"({evidence}); {rule.alerts_to_open} open the incident",
            )

    def open_incident(self, key: tuple, now: float | None = None) -> Incident | None:
        now = time.time() if now is None else now
        with self.lock:
            inc = self._open.get(key)
            return inc if inc and now - inc.opened < self.window else None

    def is_repeat(self, key: tuple, now: float | None = None) -> bool:
        """Whether the incident had a run within :attr:`repeat_s`."""
        now = time.time() if now is None else now
        with self.lock:
            count, last = self._runs.get(key, (0, 0.0))
            return count > 0 and now - last < self.repeat_s

    def opened(self, key: tuple, run_id: str, gpu: str | None, now: float | None = None) -> Incident:
        now = time.time() if now is None else now
        with self.lock:
            inc = Incident(run_id, now, {gpu} if gpu is not None else set())
            self._open[key] = inc
            self._runs[key] = (self._runs.get(key, (0, 0.0))[0] + 1, now)
            self._grown(now)
            return inc


def covers(inc: Incident, gpu: str | None) -> bool:
    """Whether the incident's run already looks at ``gpu`` (None: a runbook without a GPU parameter)."""
    return gpu is None or "" in inc.gpus or gpu in inc.gpus


def lease_name(key: tuple) -> str:
    """The Lease of an incident (a DNS-1123 name: lowercase hex of the key's hash)."""
    return "gpuops-incident-" + hashlib.sha256(repr(key).encode()).hexdigest()[:24]


class KubeClaims:
    """``claim(incident key) -> bool`` through a Lease per incident (:func:`gpulib.kube.lease.claim`)."""

    def __init__(self, window: float, cluster=None):
        if cluster is None:
            cluster = KubeCluster.from_environment()
        self.cluster, self.seconds = cluster, max(1, int(window))
        self.holder = f"gpuops-serve@{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"

    def __call__(self, key: tuple) -> bool:

        return claim(self.cluster, lease_name(key), seconds=self.seconds, holder=self.holder)
