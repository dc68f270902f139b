"""NCCL results -> findings: the verdict's finding (SOP step, commands and escalation from
``gpulib/data/nccl/nccl_sop.csv``), the finding of a capture judged against a band measured on itself, and the byte
formatting their messages share with the environment checks, and the findings of a failed job's logs (its cause
first, symptoms grouped under it; SOP rows ``job_*`` of ``nccl_sop.csv``).
"""

from __future__ import annotations

from gpulib.core.errors import GpulibError
from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import Sop, sop
from gpulib.core.validate import object_name
from gpulib.nccl.joblog import causes_table

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


# ------------------------------------------------------------------------------------ a failed job's logs
#: cause of a failed job (gpulib/nccl/jobcause.py) -> its nccl_sop.csv row; any other cause is not attributable.
#: A literal table, so that tests/nccl/test_nccl_sop.py can read every row the one sop() call below reaches.
_JOB_SOP = {
    "cuda_oom": "job_cuda_oom",
    "segfault": "job_segfault",
    "process_killed": "job_process_killed",
    "xid": "job_xid",
    "shm_too_small": "job_shm_too_small",
    "ibv_reg_mr": "job_ibv_reg_mr",
    "no_socket_interface": "job_no_socket_interface",
    "net_plugin_missing": "job_net_plugin_missing",
    "cuda_error": "job_cuda_error",
    "socket_refused": "job_socket_refused",
    "ib_path": "job_ib_path",
    "ib_platform": "job_ib_platform",
    "remote_died": "job_remote_died",
    "hang_suspect": "job_hang_suspect",
}


def _job_sop(kind: str, *, node, namespace, pod, host, peer, hca) -> Sop:
    """The nccl_sop.csv row of a job cause, filled with the values every ``job_*`` row may name."""
    return sop(
        "nccl_sop",
        _JOB_SOP.get(kind, "job_not_attributable"),
        node=node,
        namespace=namespace,
        pod=pod,
        host=host,
        peer=peer,
        hca=hca,
    )


def _pod_word(name: str | None) -> str:
    """A host name that is a valid pod name (a pod's hostname is its name), else the reader's placeholder."""
    try:
        return object_name(name, kind="pod") if name else "<pod>"
    except GpulibError:
        return "<pod>"


def _job_title(c, row: dict) -> str:
    who = ", ".join(
        x
        for x in (
            f"rank {c.rank}" if c.rank is not None else "",
            f"host {c.host}" if c.host else "",
            f"local GPU {c.gpu}" if c.gpu is not None and c.kind != "remote_died" else "",
        )
        if x
    )
    st = c.status or {}
    code = f"{st.get('name', 'status')} ({c.first.ib_status}" if c.first and c.first.ib_status is not None else ""
    code += f", vendor err {c.first.ib_vendor})" if code and c.first.ib_vendor is not None else (")" if code else "")
    if c.kind == "ib_platform":
        return (
            f"Same InfiniBand error on {len(c.hosts)} hosts: the platform (ACS / IOMMU, GPUDirect RDMA, "
            f"firmware), not one node - {code}"
        )
    if c.kind == "ib_path":
        return f"InfiniBand path fault between {c.host} and {c.peer_host or c.peer} - {code}"
    if c.kind == "remote_died":
        return f"A remote rank died first: look at {c.peer}" + (f" (host {c.peer_host})" if c.peer_host else "")
    if c.kind == "hang_suspect":
        return f"Collective timeout: {c.peer} lags" + (f" (host {c.host})" if c.host else "")
    if c.kind == "not_attributable":
        return "NCCL job failure not attributable from this text"
    return f"{row.get('title', c.kind)}: {who or 'the rank'} failed first"


def _symptom_lines(c) -> list[str]:
    groups: dict[str, list] = {}
    for e in c.symptoms:
        groups.setdefault(e.cause, []).append(e)
    out = []
    for cause, evs in groups.items():
        hosts = list(dict.fromkeys(e.host or "?" for e in evs))
        out.append(
            f"also: {len(evs)} '{cause.replace('_', ' ')}' line(s) on {', '.join(hosts[:5])}"
            + (f" and {len(hosts) - 5} more host(s)" if len(hosts) > 5 else "")
            + f" (symptom), e.g. {evs[0].text[:160]}"
        )
    return out


def job_findings(
    causes, job, *, nodes: dict | None = None, node_evidence: dict | None = None, pods: dict | None = None
) -> list[Finding]:
    """Findings of a failed job's logs (:func:`gpulib.nccl.jobcause.analyze`): its cause first (critical; warning
    when not attributable, info when no error was logged), then other independent failures (warning). ``nodes``:
    host -> the source's node it is or runs on (the finding is about that node and its node commands run there);
    ``node_evidence``: host -> lines (placement, NotReady, XIDs) joined from the source; ``pods``: host -> the
    namespace of the pod of that name in the source."""
    rows = {r["id"]: r for r in causes_table().to_dict("records")}
    nodes, node_evidence, pods = nodes or {}, node_evidence or {}, pods or {}
    out: list[Finding] = []
    tail = [f"read {len(job.files)} file(s), {job.lines} line(s)"]
    tail += [f"skipped {s}" for s in job.skipped]
    if job.cut_lines:
        tail.append(f"{job.cut_lines} line(s) longer than the line limit were cut")
    for i, c in enumerate(causes):
        if c.kind == "none":
            out.append(
                Finding(
                    Severity.INFO,
                    "No NCCL or rank error in the job's logs",
                    summary="no error line of nccl_job_causes.csv matched",
                    evidence=tail,
                    category="nccl",
                    data={"check": "none", "files": job.files},
                )
            )
            continue
        row = rows.get(c.kind, rows.get("ib_completion", {}) if c.kind.startswith("ib_") else {})
        host = c.peer_host if c.kind == "remote_died" else c.host
        step = _job_sop(
            c.kind,
            node=nodes.get(host),
            namespace=pods.get(host, "<namespace>"),
            pod=_pod_word(host),
            host=host or "<host>",
            peer=c.peer_host or c.peer or "<peer>",
            hca=c.first.hca if c.first and c.first.hca else "<hca>",
        )
        ev = []
        if c.first is not None:
            ev.append(
                f"first: {c.first.file}:{c.first.line_no}"
                + (f" at {c.first.stamp}" if c.first.stamp else "")
                + f": {c.first.text[:240]}"
            )
        if c.status:
            ev.append(f"{c.status['name']}: {c.status['meaning']}; check on each host: {c.status['check_each_host']}")
            if c.status.get("vendor_notes"):
                ev.append(f"vendor err {c.status['vendor_notes']}")
        if len(c.events) > 1:
            ev.append(f"{len(c.events)} such line(s) on " + ", ".join(dict.fromkeys(e.host or "?" for e in c.events)))
        ev += c.notes + _symptom_lines(c)
        for h in [host] if host else c.hosts:
            ev += node_evidence.get(h, [])
        sev = Severity.CRITICAL if i == 0 and c.attributable else Severity.WARNING
        out.append(
            Finding(
                sev,
                _job_title(c, row),
                summary=(row.get("cause", "") if c.attributable else (c.notes[-1] if c.notes else "")),
                sop_step=step.sop_step,
                commands=step.commands,
                escalation=step.escalation,
                evidence=ev + (tail if i == 0 else []),
                category="nccl",
                node=nodes.get(host, host) if c.attributable and c.kind != "ib_platform" else None,
                confidence=0.9 if c.attributable else 0.4,
                data={
                    "check": c.kind,
                    "host": host,
                    "rank": c.rank,
                    "local_gpu": c.gpu,
                    "pid": c.pid,
                    "peer": c.peer,
                    "hosts": c.hosts,
                    "attributable": c.attributable,
                    "symptoms": len(c.symptoms),
                    "source": row.get("source", "") + (f"; {c.status['source']}" if c.status else ""),
                },
            )
        )
    return out
