"""What on-call pastes about a broken GPU Operator install: the operand pods (``kubectl get pods -n gpu-operator
[-o wide]`` as text, or ``-o json``) and operand logs, read defensively (a size cap on the tail, binary and cut
input), and the cause table ``gpulib/data/gpu_operator/operator_causes.csv`` matched against the logs and the pods'
termination messages: Secure Boot, nouveau, kernel headers, fabric manager, runtime config, validator init.

Pure functions over text and objects; :func:`gpulib.gpu_operator.post_install.verify` turns the matches into
findings (:func:`cause_findings`) with their SOP from ``operator_sop.yaml``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table
from gpulib.gpu_operator.findings import sop
from gpulib.gpu_operator.knowledge import _components, gpucluster_components, setting

__all__ = ["PastedPod", "parse_pods_text", "pods_from_objects", "read_text", "load_pasted", "match_causes"]

#: a Kubernetes object name as kubectl prints it (DNS-1123 subdomain); anything else never reaches a command
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
#: one row of ``kubectl get pods`` (NAMESPACE first with -A): NAME READY STATUS RESTARTS AGE [IP NODE ...]
_ROW = re.compile(
    r"^(?P<name>\S+)\s+(?P<ready>\d+/\d+)\s+(?P<status>\S+)\s+(?P<restarts>\d+(?:\s+\([^)]*\))?)\s+(?P<age>\S+)"
    r"(?:\s+(?P<ip>\S+)\s+(?P<node>\S+))?"
)


@dataclass
class PastedPod:
    """One operand pod as pasted: its name, node ("" when the listing had no NODE column), status column,
    readiness, restarts, the operand it belongs to, and its log / termination message text when known."""

    name: str
    node: str = ""
    status: str = ""
    ready: bool = True
    restarts: int = 0
    component: str = ""
    log: str = ""
    log_note: str = ""
    namespace: str = ""
    extra: dict = field(default_factory=dict)


@lru_cache(maxsize=1)
def _prefixes() -> tuple[tuple[str, str], ...]:
    """(pod-name prefix, component), longest first: the operand DaemonSets of both stacks and the CUDA validator."""
    pairs = [(r["daemonset"] + "-", c) for c, r in _components().iterrows() if r["daemonset"]]
    pairs += [(r.daemonset + "-", r.component) for r in gpucluster_components().itertuples()]
    pairs += [("nvidia-cuda-validator-", "cuda_validator")]
    return tuple(sorted(pairs, key=lambda p: -len(p[0])))


def component_of(pod: str) -> str:
    """The operand a pod belongs to from its name (``nvidia-driver-daemonset-x7k2p`` -> ``driver``), "" if none."""
    return next((c for p, c in _prefixes() if pod.startswith(p)), "")


def _clean(name: str) -> str:
    return name if _NAME.match(name or "") else ""


def parse_pods_text(text: str) -> list[PastedPod]:
    """Rows of pasted ``kubectl get pods [-A] [-o wide]`` output. Lines that are not a pod row (headers, prompts,
    blank lines, a row cut mid-line) are skipped; a name that is not a Kubernetes name is dropped."""
    out: list[PastedPod] = []
    has_ns = False
    limit = int(setting("pasted_line_max_chars"))
    for raw in text.splitlines():
        line = raw.strip()[:limit]
        if line.startswith("NAME") or line.startswith("NAMESPACE"):
            has_ns = line.startswith("NAMESPACE")
            continue
        ns = ""
        if has_ns and " " in line:
            ns, line = line.split(None, 1)
        m = _ROW.match(line)
        if not m or not _clean(m["name"]):
            continue
        have, want = m["ready"].split("/")
        node = _clean(m["node"] or "") if m["node"] not in (None, "<none>") else ""
        out.append(
            PastedPod(
                name=m["name"],
                node=node,
                status=m["status"],
                ready=have == want and m["status"] in ("Running", "Completed"),
                restarts=int(m["restarts"].split()[0]),
                component=component_of(m["name"]),
                namespace=_clean(ns),
            )
        )
    return out


def _termination_messages(pod: dict) -> str:
    """Every container's (last) termination message: with ``terminationMessagePolicy: FallbackToLogsOnError`` the
    tail of a crashed container's log."""
    st = pod.get("status") or {}
    msgs = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                term = state.get("terminated") if isinstance(state, dict) else None
                if isinstance(term, dict) and term.get("message"):
                    msgs.append(str(term["message"]))
    return "\n".join(msgs)


def pods_from_objects(pods: list[dict]) -> list[PastedPod]:
    """Pod objects (``kubectl get pods -o json`` items, or the source's operand pods) as :class:`PastedPod`, their
    termination messages as the log."""
    out = []
    for p in pods:
        if not isinstance(p, dict):
            continue
        meta, st = p.get("metadata") or {}, p.get("status") or {}
        name = _clean(str(meta.get("name", "")))
        if not name:
            continue
        statuses = st.get("containerStatuses") or []
        reason = next(
            (
                (cs.get("state") or {}).get("waiting", {}).get("reason", "")
                for cs in (st.get("initContainerStatuses") or []) + statuses
                if (cs.get("state") or {}).get("waiting")
            ),
            "",
        )
        out.append(
            PastedPod(
                name=name,
                node=_clean(str((p.get("spec") or {}).get("nodeName", ""))),
                status=reason or str(st.get("phase", "")),
                ready=st.get("phase") == "Succeeded" or (bool(statuses) and all(c.get("ready") for c in statuses)),
                restarts=sum(int(c.get("restartCount") or 0) for c in statuses),
                component=component_of(name),
                log=_termination_messages(p),
                namespace=_clean(str(meta.get("namespace", ""))),
            )
        )
    return out


def read_text(path: Path) -> tuple[str, str]:
    """(text, note) of a pasted file: at most ``pasted_log_max_bytes`` of its tail (the note says what was
    skipped), decoded with replacement. InvalidParameter for binary content (NUL bytes or mostly undecodable)."""
    cap = int(setting("pasted_log_max_bytes"))
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size > cap:
            fh.seek(size - cap)
        data = fh.read(cap)
    sample = data[:65536]
    if b"\x00" in sample or (sample and sample.decode("utf-8", "replace").count("\ufffd") > len(sample) // 10):
        raise InvalidParameter(f"{path.name} is binary, not a log or a kubectl listing")
    text = data.decode("utf-8", "replace")
    note = ""
    if size > cap:
        text = text.split("\n", 1)[1] if "\n" in text else text  # drop the line the cut landed in
        note = f"{path.name}: read the last {cap // 1048576} MiB of {size / 1048576:.0f} MiB"
    return text, note


def _pods_file(folder: Path) -> Path | None:
    for name in ("gpu-operator-pods.json", "gpu-operator-pods.txt"):
        if (folder / name).is_file():
            return folder / name
    return None


def load_pasted(snapshot_dir: str = "", operator_logs: str = "") -> tuple[list[PastedPod], list[str]]:
    """The pasted operand pods (``gpu-operator-pods.txt`` / ``.json`` of the snapshot folder) with their logs
    (``logs/<pod>.log`` there, or the file / folder ``operator_logs``: a file named after a pod, or any file
    whose name starts with an operand's pod prefix), and the problems met reading them (one line each)."""
    pods: list[PastedPod] = []
    problems: list[str] = []
    folder = Path(snapshot_dir) if snapshot_dir else None
    f = _pods_file(folder) if folder and folder.is_dir() else None
    if f is not None:
        try:
            text, note = read_text(f)
            if f.suffix == ".json":
                doc = json.loads(text)
                pods = pods_from_objects(doc.get("items", []) if isinstance(doc, dict) else [])
            else:
                pods = parse_pods_text(text)
            if not pods:
                problems.append(f"{f.name}: no pod rows found (expected kubectl get pods -o wide output)")
        except (InvalidParameter, ValueError, OSError) as exc:
            problems.append(f"{f.name}: {exc}")
    logs: list[Path] = []
    if folder and (folder / "logs").is_dir():
        logs += sorted(p for p in (folder / "logs").iterdir() if p.is_file())
    if operator_logs:
        p = Path(operator_logs)
        if p.is_dir():
            logs += sorted(q for q in p.iterdir() if q.is_file())
        elif p.is_file():
            logs.append(p)
        else:
            raise InvalidParameter(f"operator_logs {operator_logs!r} is neither a file nor a folder")
    by_name = {p.name: p for p in pods}
    for path in logs:
        stem = path.name[: -len(".log")] if path.name.endswith(".log") else path.stem
        try:
            text, note = read_text(path)
        except (InvalidParameter, OSError) as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        pod = by_name.get(stem)
        if pod is None:
            pod = PastedPod(name=_clean(stem) or "", component=component_of(stem))
            if pod.name:
                pods.append(pod)
                by_name[pod.name] = pod
        if pod.name:
            pod.log = (pod.log + "\n" + text) if pod.log else text
            pod.log_note = note
    return pods, problems


@lru_cache(maxsize=1)
def _causes() -> list[tuple[str, re.Pattern, set[str], str]]:
    t = load_table("gpu_operator/operator_causes").sort_values("priority")
    return [
        (r.cause, re.compile(r.pattern, re.IGNORECASE), set(str(r.components).split(";")), r.source)
        for r in t.itertuples()
    ]


def match_causes(text: str, component: str = "") -> list[tuple[str, list[str]]]:
    """The causes of the cause table whose pattern a line of ``text`` matches, most specific first, each with its
    first matching lines; causes whose ``components`` exclude ``component`` are skipped (an unknown component is
    matched against all)."""
    limit, keep = int(setting("pasted_line_max_chars")), int(setting("pasted_evidence_lines"))
    table = [c for c in _causes() if not component or component in c[2]]
    hits: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw[:limit]
        for cause, rx, _, _ in table:
            if rx.search(line) and len(hits.setdefault(cause, [])) < keep:
                hits[cause].append(line.strip()[:300])
    return [(c, hits[c]) for c, *_ in table if c in hits]


def cause_findings(pods: list[PastedPod], *, namespace: str) -> list[Finding]:
    """One finding per node (or per pod where the node is unknown): the most specific cause matched in its operand
    pods' logs, the other causes and pods listed under it (``also:``)."""
    groups: dict[str, list[tuple[PastedPod, str, list[str]]]] = {}
    order = [c for c, *_ in _causes()]
    for p in pods:
        if not p.log:
            continue
        for cause, lines in match_causes(p.log, p.component):
            groups.setdefault(p.node or f"pod:{p.name}", []).append((p, cause, lines))
    out = []
    for key, hits in groups.items():
        hits.sort(key=lambda h: order.index(h[1]))
        pod, cause, lines = hits[0]
        ev = [f"{pod.name}{' on ' + pod.node if pod.node else ''}: {pod.status or '?'}, restarts {pod.restarts}"]
        ev += [f"log: {ln}" for ln in lines]
        if pod.log_note:
            ev.append(pod.log_note)
        also = sorted({f"{c.removeprefix('cause_')} ({p.name})" for p, c, _ in hits[1:]})
        if also:
            ev.append("also: " + ", ".join(also))
        if not pod.node:
            ev.append("node unknown: paste kubectl get pods -o wide to attribute it")
        where = pod.node or "node unknown"
        out.append(
            sop(
                cause,
                node=pod.node or None,
                host=where,
                pod=pod.name,
                ns=namespace,
                evidence=ev,
                component=pod.component,
            )
        )
    return out


def unreadable_findings(problems: list[str], *, namespace: str) -> list[Finding]:
    """A WARNING per pasted input that could not be read (binary, no rows): never silently ignored."""
    return [
        sop("pasted_unreadable", what=p.split(":", 1)[0], why=p + ".", ns=namespace, evidence=[p]) for p in problems
    ]
