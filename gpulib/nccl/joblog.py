"""A failed multi-node job's logs, all ranks at once: one file, several files or a folder (the ``kubectl logs`` of a
PyTorchJob's pods, ``NCCL_DEBUG=WARN|INFO`` output with ``host:pid:tid [gpu]`` prefixes, PyTorch's
``ProcessGroupNCCL`` / ``DistBackendError`` lines, or one interleaved log) read into error events.

Each file is streamed in blocks (never read whole; a line longer than ``joblog_max_line_chars`` of
``gpulib/data/nccl/nccl_thresholds.csv`` is cut), a binary file is set aside with the reason, and each error line
becomes an :class:`Event` with its host, process, local GPU, rank, time and the cause row of
``gpulib/data/nccl/nccl_job_causes.csv`` it matches. Which event is the job's cause is
:mod:`gpulib.nccl.jobcause`. The line formats: NCCL's ``host:pid:tid [dev]`` prefix (NVIDIA/nccl: src/debug.cc
@5067397c), PyTorch's ``[rankN]:[E207 19:37:09.98 ProcessGroupNCCL.cpp:681]`` (pytorch/pytorch:
torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp @cf1380df), ``kubectl logs --timestamps`` RFC 3339 prefixes
(https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table, settings

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BLOCK = 1 << 20
_SNIFF = 1 << 16
_HEAD_CHARS = 2_000_000  # the start of the text kept for the communicator summary and the NCCL_* variables
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: ``kubectl logs --prefix``: ``[pod/<pod>/<container>] `` before each line
_KPREFIX = re.compile(r"^\[pod/([^/\]]+)/[^\]]*\]\s?")
_NCCL = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<gpu>\d+)\] ")
#: a crash report's prefix: UCX ``[host:pid:thread:tid]`` (NVIDIA/nccl#1419), Open MPI ``[host:pid]`` (NVIDIA/nccl#291)
_CRASH = re.compile(r"^\[(?P<host>[\w.-]+):(?P<pid>\d+)(?::\d+:\d+)?\] ")
_TORCH_RANK = re.compile(r"\[rank(?P<r>\d+)\]:|\[(?:PG [^\]]*?)?Rank (?P<r2>\d+)\]")
_ISO = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(?:[.,]\d+)?)(Z|[+-]\d\d:?\d\d)?")
_GLOG = re.compile(r"\[?[EWIF](\d{3,4}) (\d\d):(\d\d):(\d\d(?:\.\d+)?)")
_DMESG = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
_COMM = re.compile(r"comm 0x[0-9a-f]+ rank (\d+) nr?anks (\d+)", re.I)
_ADDR_OWN = re.compile(
    r"(?:Bootstrap\s*:\s*Using|OOB|NET/Socket\s*:\s*Using)\s+(?:\[\d+\])?[\w.-]+:([0-9a-fA-F.:]+?)<\d+>"
)
_PEER = re.compile(r"([\w.:%-]+)<\d+>")
_LOCAL_RANK = re.compile(r"Connection closed by localRank (\d+)")
_IB_STATUS = re.compile(r"(?:with error |status=(?:\w+\()?)(\d+)")
_IB_VENDOR = re.compile(r"vendor err (\d+)")
_LOCAL_GID = re.compile(r"localGid (\S+)")
_HCA = re.compile(r"\bhca (\w+)")
_SEQ = re.compile(r"SeqNum=(\d+)")
#: a torchrun "Root Cause" record names the host and rank of the first failed worker
_TR_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


@dataclass
class Event:
    """One error line of the job: where it came from, whom it is about and which cause row it matched."""

    order: int
    file: str
    line_no: int
    host: str | None
    pid: str | None
    gpu: str | None
    rank: int | None
    time: float | None
    time_kind: str | None
    stamp: str | None
    cause: str
    role: str
    text: str
    peer: str | None = None
    local_rank: str | None = None
    ib_status: int | None = None
    ib_vendor: int | None = None
    hca: str | None = None
    seq: int | None = None


@dataclass
class JobLog:
    """What the files said: error events, the host of each address, the rank of each process, what was skipped."""

    events: list[Event] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    lines: int = 0
    cut_lines: int = 0
    addr_host: dict[str, str] = field(default_factory=dict)
    proc_rank: dict[tuple[str, str], int] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    nranks: int | None = None
    head: str = ""

    def rank_host(self, rank: int | None) -> tuple[str, str] | None:
        """(host, pid) of a rank, when an NCCL ``comm ... rank N`` line said so."""
        if rank is None:
            return None
        for proc, r in self.proc_rank.items():
            if r == rank:
                return proc
        return None

    def host_of(self, addr: str | None) -> str | None:
        """The host an address or host name of a peer belongs to, when the logs say so."""
        if not addr:
            return None
        a = _bare(addr)
        if a in self.addr_host:
            return self.addr_host[a]
        for h in self.hosts:
            if a == h or a.startswith(h + ".") or a.startswith(h + "-"):
                return h
        return None


@lru_cache(maxsize=1)
def causes_table() -> pd.DataFrame:
    """``nccl_job_causes.csv``: the first row whose pattern matches an error line names its cause."""
    return load_table("nccl_job_causes").fillna("")


@lru_cache(maxsize=1)
def _matchers() -> list[tuple[str, str, re.Pattern]]:
    return [(r["id"], r["role"], re.compile(r["pattern"], re.I)) for r in causes_table().to_dict("records")]


@lru_cache(maxsize=1)
def _any_cause() -> re.Pattern:
    return re.compile("|".join(f"(?:{r['pattern']})" for r in causes_table().to_dict("records")), re.I)


def _bare(addr: str) -> str:
    a = addr.strip().strip("[]")
    if a.lower().startswith("::ffff:"):
        a = a[7:]
    return a


def classify(line: str) -> tuple[str, str] | None:
    """(cause id, role) of an error line, or None."""
    if not _any_cause().search(line):
        return None
    for cid, role, rx in _matchers():
        if rx.search(line):
            return cid, role
    return None


def _time(line: str) -> tuple[float | None, str | None, str | None]:
    """(seconds, kind, as written) of the first timestamp near the start of a line; times of different kinds are
    not compared (a glog stamp has no year)."""
    head = line[:64]
    if m := _ISO.search(head):
        try:
            t = datetime.fromisoformat(
                f"{m.group(1)}T{m.group(2).replace(',', '.')}{(m.group(3) or '').replace('Z', '+00:00')}"
            )
            return t.timestamp(), "iso" + ("" if m.group(3) else "-local"), m.group(0)
        except ValueError:
            return None, None, None
    if m := _GLOG.search(head):
        md, h, mi, s = m.groups()
        month, day = int(md[:-2]), int(md[-2:])
        return (month * 31 + day) * 86400 + int(h) * 3600 + int(mi) * 60 + float(s), "glog", m.group(0).lstrip("[")
    if m := _DMESG.search(head):
        try:
            return datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp(), "dmesg", m.group(1)
        except ValueError:
            return None, None, None
    return None, None, None


def _is_binary(sample: bytes) -> bool:
    if not sample:
        return False
    bad = sum(1 for b in sample if b < 9 or 13 < b < 27 or 27 < b < 32 or b == 127)
    return b"\x00" in sample[:4096] and bad > len(sample) * 0.05 or bad > len(sample) * 0.3


def stream_lines(fh, max_chars: int, block: int = _BLOCK):
    """(line, was_cut) of a binary file object, read ``block`` bytes at a time; never more than ``max_chars`` of
    one line are held (a file without newlines is read in bounded memory)."""
    carry = b""  # the start of the line that runs past the block read so far (at most max_chars bytes)
    over = False  # that line was longer than max_chars: the rest of it is skipped
    while chunk := fh.read(block):
        parts = chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            if carry or over:
                part = carry if over else carry + part
                cut = over or len(part) > max_chars
                carry, over = b"", False
            else:
                cut = len(part) > max_chars
            yield (part[:max_chars] if cut else part).decode("utf-8", errors="replace"), cut
        if not over:
            carry += tail
            if len(carry) > max_chars:
                carry, over = carry[:max_chars], True
    if carry or over:
        yield carry.decode("utf-8", errors="replace"), over


def log_paths(spec: str | Path | list) -> list[Path]:
    """The files of ``nccl_log_file``: a file, a folder (its files, sorted, one level of sub-folders), or several
    paths separated by commas. InvalidParameter for a path that does not exist or a folder without files."""
    items = spec if isinstance(spec, list) else [s for s in str(spec).split(",") if s.strip()]
    out: list[Path] = []
    for s in items:
        p = Path(str(s).strip()).expanduser()
        if not p.exists() and not p.is_absolute() and (_PACKAGE_ROOT / p).exists():
            p = _PACKAGE_ROOT / p  # a packaged demo log named from the checkout root (gpulib/data/demo/...)
        if p.is_dir():
            files = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not f.name.startswith(".") and len(f.relative_to(p).parts) <= 2
            )
            if not files:
                raise InvalidParameter(
                    f"nccl_log_file={str(s)!r}: the folder has no files", hint="give the folder of the pods' logs"
                )
            out += files
        elif p.is_file():
            out.append(p)
        else:
            raise InvalidParameter(
                f"nccl_log_file={str(s)!r}: no such file or folder",
                hint="a log file, several separated by commas, or the folder of kubectl logs of the job's pods",
            )
    return out


@dataclass
class _Ctx:
    host: str | None = None
    pid: str | None = None
    gpu: str | None = None
    rank: int | None = None
    time: tuple = (None, None, None)
    pending: str | None = None


def read_job_logs(spec: str | Path | list, *, default_host_from_file: bool | None = None) -> JobLog:
    """Read the job's log files into a :class:`JobLog` (streamed; binary files skipped with the reason).

    ``default_host_from_file``: a line without an NCCL prefix is about the host named by its file's name (the
    ``kubectl logs`` of one pod per file); default: when several files are given. InvalidParameter when nothing
    readable remains."""
    paths = log_paths(spec)
    per_file = len(paths) > 1 if default_host_from_file is None else default_host_from_file
    job = JobLog()
    max_chars = int(settings("nccl_thresholds")["joblog_max_line_chars"])
    head: list[str] = []
    head_len = 0
    for path in paths:
        with open(path, "rb") as fh:
            sample = fh.read(_SNIFF)
            if _is_binary(sample):
                job.skipped.append(f"{path.name}: binary data, not a text log")
                continue
            fh.seek(0)
            job.files.append(str(path))
            ctxs = {"": _Ctx(host=path.stem if per_file else None)}
            tr: dict = {}
            fname = path.name
            for n, (raw, cut) in enumerate(stream_lines(fh, max_chars), 1):
                job.lines += 1
                job.cut_lines += cut
                line = raw
                if "\x1b" in line:
                    line = _ANSI.sub("", line)
                if "\r" in line or "\x00" in line:
                    line = line.replace("\r", "").replace("\x00", "")
                pod = ""
                if line.startswith("[pod/") and (kp := _KPREFIX.match(line)):
                    pod, line = kp.group(1), line[kp.end() :]
                    if pod not in ctxs:
                        ctxs[pod] = _Ctx(host=pod)
                if head_len < _HEAD_CHARS:
                    head.append(line)
                    head_len += len(line) + 1
                _read_line(job, line, fname, n, ctxs[pod], tr)
    if not job.files:
        raise InvalidParameter(
            "nccl_log_file: nothing readable (" + "; ".join(job.skipped) + ")",
            hint="give the text logs of the job's pods (kubectl logs <pod> > <pod>.log)",
        )
    job.head = "\n".join(head)
    return job


#: the INFO lines read at once (ranks, addresses, a closed local rank, an abort); the others only set the context
_INFO_KEEP = re.compile(r"comm 0x|Using|OOB|closed by localRank|Abort COMPLETE")


def _read_line(job: JobLog, line: str, fname: str, n: int, ctx: _Ctx, tr: dict) -> None:
    if " NCCL INFO " in line and not _INFO_KEEP.search(line):
        ctx.pending = line  # the bulk of an INFO log: its prefix is read only when a later line needs the context
        return
    if ctx.pending is not None:
        _context(job, ctx.pending, ctx)
        ctx.pending = None
    m = _context(job, line, ctx)
    if " NCCL INFO " in line:
        _info(job, line, ctx)
        if "closed by localRank" not in line and "Abort COMPLETE" not in line:
            return
    if mt := _TORCH_RANK.search(line[:160]):
        ctx.rank = int(mt.group("r") or mt.group("r2"))
        proc = job.rank_host(ctx.rank)
        if proc and not m:
            ctx.host, ctx.pid = proc
    _torchrun_record(job, line, fname, n, ctx, tr)
    hit = classify(line)
    if hit is None:
        return
    cid, role = hit
    e = Event(
        order=len(job.events),
        file=fname,
        line_no=n,
        host=ctx.host,
        pid=ctx.pid,
        gpu=ctx.gpu,
        rank=ctx.rank,
        time=ctx.time[0],
        time_kind=ctx.time[1],
        stamp=ctx.time[2],
        cause=cid,
        role=role,
        text=(line[m.start() :] if m else line).strip()[:300],
    )
    if (lr := _LOCAL_RANK.search(line)) is not None:
        e.local_rank = lr.group(1)
    elif (p := _PEER.search(line)) is not None:
        e.peer = p.group(1)
    if cid == "ib_completion":
        st, ve = _IB_STATUS.search(line), _IB_VENDOR.search(line)
        e.ib_status = int(st.group(1)) if st else None
        e.ib_vendor = int(ve.group(1)) if ve else None
        if (g := _LOCAL_GID.search(line)) and ctx.host:
            job.addr_host.setdefault(_bare(g.group(1)), ctx.host)
        if h := _HCA.search(line):
            e.hca = h.group(1)
    if s := _SEQ.search(line):
        e.seq = int(s.group(1))
    job.events.append(e)


def _context(job: JobLog, line: str, ctx: _Ctx):
    """Update the context (host, process, GPU, rank, time) from a line's prefixes; the NCCL prefix match or None."""
    m = _NCCL.search(line)
    t = _time(line) if (m is None or m.start() > 0 or line[:1] == "[") else (None, None, None)
    if t[0] is not None:
        ctx.time = t
    if m:
        ctx.host, ctx.pid, ctx.gpu = m.group("host", "pid", "gpu")
        if ctx.host not in job.hosts:
            job.hosts.append(ctx.host)
        ctx.rank = job.proc_rank.get((ctx.host, ctx.pid))
    elif line[:1] == "[" and (c := _CRASH.match(line)):
        ctx.host, ctx.pid = c.group("host", "pid")
        ctx.gpu, ctx.rank = None, job.proc_rank.get((ctx.host, ctx.pid))
    return m


def _info(job: JobLog, line: str, ctx: _Ctx) -> None:
    if ctx.host and "comm 0x" in line and (m := _COMM.search(line)):
        job.proc_rank[(ctx.host, ctx.pid)] = int(m.group(1))
        ctx.rank = int(m.group(1))
        job.nranks = max(job.nranks or 0, int(m.group(2)))
    if ctx.host and ("Using" in line or "OOB" in line):
        for a in _ADDR_OWN.findall(line):
            job.addr_host.setdefault(_bare(a), ctx.host)


def _torchrun_record(job: JobLog, line: str, fname: str, n: int, ctx: _Ctx, tr: dict) -> None:
    """torchrun's failure record (``host : ...``, ``rank : N (local_rank: M)``, ``exitcode : -9``): a worker killed
    by a signal, with its host and rank (pytorch/pytorch: torch/distributed/elastic/multiprocessing/errors/__init__.py
    @0140b62d, _FAILURE_FORMAT_TEMPLATE)."""
    if m := _TR_HOST.match(line):
        tr.clear()
        tr["host"] = m.group(1).split(".")[0]
    elif (m := _TR_RANK.match(line)) and "host" in tr:
        tr["rank"] = int(m.group(1))
    elif (m := _TR_EXIT.match(line)) and "rank" in tr:
        if int(m.group(1)) < 0:
            ctx.host, ctx.rank, ctx.pid, ctx.gpu = tr["host"], tr["rank"], None, None
        tr.clear()
