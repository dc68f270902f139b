"""The kernel-log parser. ``parse_kernel_log(text)`` turns ``dmesg``, ``dmesg -T``, ``dmesg --time-format iso``,
``journalctl -k``
(short, short-iso, short-precise), syslog files and raw ``/dev/kmsg`` records into one row per ``NVRM: Xid``
line, plus one XID 79 row for a "fallen off the bus" message that no ``Xid 79`` line of the same GPU
accompanies: the driver prints it without an Xid when it finds the GPU gone at probe time
(``NVRM: The NVIDIA GPU dddd:bb:dd.f`` / ``(PCI ID: ...) installed in this system has`` / ``fallen off the bus
and is not responding to commands.``, NVIDIA/open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/src/osapi.c),
and NVIDIA's NVSentinel treats that message as a fatal RESTART_BM event
(NVIDIA/NVSentinel health-monitors/syslog-health-monitor/pkg/gpufallen/types.go @ 1275b0c3).
An Xid line cut after its code is kept (the code is there; the message says the line was cut).
It streams: pass a path or an open file and a multi-GB log is read line by line.
"""

from __future__ import annotations

import io
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd

from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.textio import as_text, clip

#: columns of :func:`parse_kernel_log`'s DataFrame, in order.
EVENT_COLUMNS = [
    "timestamp",
    "uptime_s",
    "host",
    "pci_bus_id",
    "gpu_i_id",
    "xid",
    "pid",
    "process",
    "message",
    "recovery_action",
    "link",
    "detail_words",
    "raw",
]


# ------------------------------------------------------------------------------ line prefixes
_MONTHS = {
    m: i for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}
_KMSG = re.compile(r"^<?\d+>?,(?P<seq>\d+),(?P<usec>\d+),[^;]*;")  # /dev/kmsg record
#: ISO stamp, then a host only where a syslog tag follows (``journalctl -o short-iso``, rsyslog); ``dmesg
#: --time-format iso`` has no host: ``2024-11-15T12:02:03,470068+00:00 NVRM: ...``
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"
    r"(?:(?P<host>[^\s:\[]+)\s+(?=kernel:|[^\s:]+\[\d+\]:))?"
)
_BSD = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<time>\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?P<host>\S+)\s+"
)
_DMESG_T = re.compile(
    r"^\[(?:[A-Z][a-z]{2}\s+)?(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<time>\d{2}:\d{2}:\d{2})\s+(?P<year>\d{4})\]\s*"
)
_UPTIME = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]\s*")
_THREAD = re.compile(r"^\[\s*[TC]\d+\]\s*")

# ---------------------------------------------------------------------------------- XID body
#: ``NVRM: Xid (PCI:0000:3b:00): 79, ...``; MIG: ``NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...``; the comma after the
#: code is optional (a cut line keeps its code), and text after a space is the message too (``154 (``: NVSentinel
#: parses it, NVIDIA/NVSentinel health-monitors/syslog-health-monitor/pkg/xid/parser/csv_test.go @ 3e97fd00)
_XID = re.compile(
    r"NVRM: Xid \((?P<pci>[^)\s]*)(?:\s+GPU-I:(?P<gi>\d+))?[^)]*\): (?P<xid>\d{1,6})(?:(?:,|\s+)(?P<rest>.*))?$"
)
_XID_NO_PCI = re.compile(r"NVRM: Xid (?P<xid>\d{1,6})(?:(?:,|\s+)(?P<rest>.*))?$")
_CUT = "(line cut after the XID code: the rest of the message, and possibly digits of the code, are missing)"
_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
#: ``NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.`` (one line); the PCI domain may be missing
#: (``NVRM: GPU 18:00.0: ...``: GPUd normalises it to 0000, leptonai/gpud components/accelerator/nvidia/xid/kmsg.go
#: and kmsg_test.go @ 4a8de33a)
_FALLEN_ONE = re.compile(
    r"NVRM: GPU (?P<pci>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?): "
    r"GPU has fallen off the bus"
)
#: first line of the probe-time message ``NVRM: The NVIDIA GPU 0000:b3:00.0`` (the text continues on later lines)
_FALLEN_HEAD = re.compile(rf"NVRM: The NVIDIA GPU (?P<pci>{_BDF})")
#: lines within which a "fallen off the bus" message and an Xid 79 line of the same GPU are one event
_PAIR_LINES = 20
_PID = re.compile(r"^\s*pid=(?P<pid>'<unknown>'|<unknown>|\d+)?,?")
_NAME = re.compile(r"^\s*name=(?P<name>[^,]*),?")
_RECOVERY = re.compile(
    r"recovery action changed (?:from 0x[0-9a-fA-F]+(?: \([^)]*\))? )?to (?P<code>0x[0-9a-fA-F]+|\d+)", re.I
)
_LINK = re.compile(r"\blink\s+(?P<link>-?\d+)", re.I)
_WORDS = re.compile(r"\((?P<words>(?:0x[0-9a-fA-F]+(?:,\s*|\s+))+0x[0-9a-fA-F]+)\)")


def _naive_utc(ts: pd.Timestamp | None, tz: str) -> pd.Timestamp | None:
    if ts is None or pd.isna(ts):
        return None
    if ts.tzinfo is None:
        ts = ts.tz_localize(tz)
    return ts.tz_convert("UTC")


def _split_prefix(line: str, year: int, tz: str) -> tuple[pd.Timestamp | None, float | None, str | None, str]:
    """Strip syslog/journal/dmesg prefixes. Returns (timestamp, uptime seconds, host, rest)."""
    ts: pd.Timestamp | None = None
    uptime: float | None = None
    host: str | None = None
    rest = line.lstrip("\ufeff")
    m = _KMSG.match(rest)
    if m:
        uptime = int(m.group("usec")) / 1e6
        rest = rest[m.end() :]
    m = _ISO.match(rest)
    if m:
        ts = _naive_utc(pd.Timestamp(m.group("ts").replace(",", ".")), tz)
        host, rest = m.group("host"), rest[m.end() :]  # no host for `dmesg --time-format iso` (see _ISO)
    else:
        m = _BSD.match(rest)
        if m and m.group("mon") in _MONTHS:
            ts = _naive_utc(
                pd.Timestamp(f"{year}-{_MONTHS[m.group('mon')]:02d}-{int(m.group('day')):02d} {m.group('time')}"), tz
            )
            host, rest = m.group("host"), rest[m.end() :]
    if rest.startswith("kernel:"):
        rest = rest[len("kernel:") :].lstrip()
    m = _DMESG_T.match(rest)
    if m and m.group("mon") in _MONTHS:
        ts = _naive_utc(
            pd.Timestamp(
                f"{m.group('year')}-{_MONTHS[m.group('mon')]:02d}-{int(m.group('day')):02d} {m.group('time')}"
            ),
            tz,
        )
        rest = rest[m.end() :]
    m = _UPTIME.match(rest)
    if m:
        uptime = float(m.group("up"))
        rest = rest[m.end() :]
    m = _THREAD.match(rest)
    if m:
        rest = rest[m.end() :]
    return ts, uptime, host, rest


def _parse_body(rest: str) -> dict[str, Any] | None:
    at = rest.find("NVRM: Xid ")  # one anchored match at the first marker: linear in the line
    if at < 0:
        return None
    m = _XID.match(rest, at)
    pci = None
    if m:
        pci = normalise_pci_bus_id(m.group("pci"))
    else:
        m = _XID_NO_PCI.match(rest, at)
        if not m:
            return None
    tail = m.group("rest")
    if tail is None:
        tail = " " + _CUT
    gi = m.groupdict().get("gi")
    pid: int | None = None
    process: str | None = None
    pm = _PID.match(tail)
    if pm:
        if pm.group("pid") and pm.group("pid").isdigit():
            pid = int(pm.group("pid"))
        tail = tail[pm.end() :]
        nm = _NAME.match(tail)
        if nm:
            name = nm.group("name").strip()
            process = None if name in ("", "<unknown>") else name
            tail = tail[nm.end() :]
    message = tail.strip()
    rec = _RECOVERY.search(message)
    link = _LINK.search(message)
    words = _WORDS.search(message)
    return {
        "pci_bus_id": pci,
        "gpu_i_id": str(int(gi)) if gi else None,
        "xid": int(m.group("xid")),
        "pid": pid,
        "process": process,
        "message": message,
        "recovery_action": int(rec.group("code"), 0) if rec else None,
        "link": int(link.group("link")) if link else None,
        "detail_words": tuple(int(w, 16) for w in re.findall(r"0x[0-9a-fA-F]+", words.group("words")))
        if words
        else None,
    }


def parse_line(line: str, *, year: int | None = None, tz: str = "UTC") -> dict[str, Any] | None:
    """Parse one log line; a dict with :data:`EVENT_COLUMNS` for an XID line, else None. Never raises."""
    if "Xid" not in line:
        return None
    try:
        raw = line.rstrip("\r\n")
        ts, uptime, host, rest = _split_prefix(raw, year or datetime.now(timezone.utc).year, tz)
        body = _parse_body(rest)
    except (ValueError, OverflowError, TypeError):  # impossible dates, absurd numbers: keep going
        return None
    if body is None:
        return None
    return {"timestamp": ts, "uptime_s": uptime, "host": host, **body, "raw": raw}


#: message of an Xid 79 line printed inside the driver's multi-line fallen-off-the-bus message (the line ends at its
#: code because the message goes on in the next line; NVSentinel reads it as that Xid:
#: NVIDIA/NVSentinel health-monitors/syslog-health-monitor/pkg/gpufallen/gpufallen_handler_test.go @ 1275b0c3)
_IN_FALLEN = (
    "GPU has fallen off the bus (the Xid line is part of the driver's multi-line fallen-off-the-bus message: {text})"
)


def _fallen_event(pci: str | None, ts, uptime, host, text: str, raw: str) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "uptime_s": uptime,
        "host": host,
        "pci_bus_id": normalise_pci_bus_id(pci),
        "gpu_i_id": None,
        "xid": 79,
        "pid": None,
        "process": None,
        "message": f"GPU has fallen off the bus (kernel message without an Xid line: {text.strip()})",
        "recovery_action": None,
        "link": None,
        "detail_words": None,
        "raw": raw,
    }


def iter_kernel_log(lines: Iterable[str], *, year: int | None = None, tz: str = "UTC") -> Iterator[dict[str, Any]]:
    """Yield one dict per XID line of ``lines`` (streaming; memory stays flat for any log size), and one XID 79
    dict per "fallen off the bus" message with no ``Xid 79`` line of the same GPU within :data:`_PAIR_LINES` lines
    (that dict comes out once those lines have been read)."""
    y = year or datetime.now(timezone.utc).year
    pending: list[tuple[int, dict[str, Any]]] = []  # inferred XID 79 events waiting for a matching Xid line
    last79: dict[str | None, int] = {}
    head: tuple[int, str, Any, Any, Any, str] | None = None  # "NVRM: The NVIDIA GPU <pci>" seen on line n
    held: dict[str, Any] | None = None  # a cut-looking Xid 79 line inside a fallen message, until the next line
    for n, line in enumerate(lines):
        while pending and n - pending[0][0] > _PAIR_LINES:
            yield pending.pop(0)[1]
        if held is not None:
            if "fallen off the bus" in line:
                held["message"] = _IN_FALLEN.format(text=line.strip())
                head = None
                yield held
                held = None
                continue
            yield held
            held = None
        ev = parse_line(line, year=y, tz=tz)
        if ev is not None:
            if ev["xid"] == 79:
                last79[ev["pci_bus_id"]] = n
                pending = [p for p in pending if p[1]["pci_bus_id"] != ev["pci_bus_id"]]
                if (
                    head is not None
                    and n - head[0] <= 3
                    and ev["message"] == _CUT
                    and normalise_pci_bus_id(head[1]) == ev["pci_bus_id"]
                ):
                    held = ev
                    continue
            yield ev
            continue
        if "NVRM" not in line and "fallen off the bus" not in line:
            continue
        try:
            raw = line.rstrip("\r\n")
            ts, uptime, host, rest = _split_prefix(raw, y, tz)
        except (ValueError, OverflowError, TypeError):
            continue
        found = None
        m = _FALLEN_ONE.search(rest)
        hm = _FALLEN_HEAD.search(rest)
        if m:
            found = _fallen_event(m.group("pci"), ts, uptime, host, rest, raw)
        elif hm:
            head = (n, hm.group("pci"), ts, uptime, host, raw)
            if "fallen off the bus" in rest:
                found = _fallen_event(hm.group("pci"), ts, uptime, host, rest, raw)
        elif "fallen off the bus" in rest and head is not None and n - head[0] <= 3:
            found = _fallen_event(head[1], head[2], head[3], head[4], rest, head[5] + "\n" + raw)
        if found is not None:
            head = None
            seen = last79.get(found["pci_bus_id"])
            if seen is None or n - seen > _PAIR_LINES:
                pending.append((n, found))
    if held is not None:
        yield held
    for _, ev in pending:
        yield ev


def _lines(source: Any) -> Iterable[str]:
    if source is None:
        return []
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and len(source) < 4096 and os.path.isfile(source)
    ):
        return _file_lines(Path(source))
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = as_text(source)
    if isinstance(source, str):
        return (clip(ln) for ln in io.StringIO(source))
    return (clip(as_text(ln)) for ln in source)  # an open file or any iterable of lines


def _file_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for ln in fh:
            yield clip(ln)


def parse_kernel_log(text: Any, *, year: int | None = None, tz: str = "UTC") -> pd.DataFrame:
    """XID events from a kernel log, one row per ``NVRM: Xid`` line.

    ``text`` is the log as a string, a path to a log file, an open file or any iterable of lines.
    Columns (:data:`EVENT_COLUMNS`): ``timestamp`` (UTC; NaT for plain ``dmesg`` lines that only carry
    seconds since boot, which go to ``uptime_s``), ``host``, ``pci_bus_id`` (``0000:3b:00.0`` form),
    ``xid`` (int), ``pid`` (Int64, NA when ``<unknown>``/absent), ``process``, ``message`` (text after
    ``name=``), ``recovery_action`` (XID 154's new NVML recovery action, 0-5), ``link`` (NVLink index
    when the message names one), ``detail_words`` (tuple of the hex words in parentheses), ``raw``.

    ``gpu_i_id`` is the MIG GPU instance of a ``GPU-I:`` Xid (decimal string). A "fallen off the bus" message
    without its Xid 79 line gives an XID 79 row whose message says so.

    Syslog-style stamps without a year (``Sep 19 10:30:06 host kernel: ...``) take ``year``
    (default: the current UTC year); stamps without a zone are read in ``tz``. Lines that are not
    XIDs, and XID lines cut before their code, are skipped.
    """
    rows = list(iter_kernel_log(_lines(text), year=year, tz=tz))
    df = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    for col in ("xid",):
        df[col] = df[col].astype("int64")
    for col in ("pid", "recovery_action", "link"):
        df[col] = pd.array(df[col].tolist(), dtype="Int64")
    df["uptime_s"] = pd.to_numeric(df["uptime_s"], errors="coerce").astype("float64")
    for col in ("host", "pci_bus_id", "gpu_i_id", "process", "message", "raw"):
        df[col] = df[col].astype("string")
    return df


def kernel_log_history(text: Any, node: str, ids: pd.DataFrame | None = None) -> pd.DataFrame:
    """The XIDs of a node's kernel log as node-history rows (``gpulib.core.schema.HISTORY_COLUMNS``, signal
    ``xid``): one per ``NVRM: Xid`` line with a time (``dmesg -T``, ``journalctl -k``, syslog; plain ``dmesg``
    uptime stamps have none and are left out). ``gpu`` is the GPU index where ``ids`` (columns ``gpu`` and
    ``pci_bus_id``, :func:`gpulib.nvidia.gpu_ids.gpu_id_map`) names the line's PCI bus id, else the bus id."""
    cols = ["time", "end", "node", "gpu", "signal", "code", "value", "detail", "origin"]
    ev = parse_kernel_log(text)
    ev = ev[ev["timestamp"].notna()]
    index = {}
    if ids is not None and len(ids):
        index = {str(p): str(g) for g, p in zip(ids["gpu"], ids["pci_bus_id"]) if p and g not in (None, "")}
    gpus = [index.get(str(p), str(p) if not pd.isna(p) else "") for p in ev["pci_bus_id"]]
    return pd.DataFrame(
        {
            "time": ev["timestamp"],
            "end": pd.NaT,
            "node": node,
            "gpu": gpus,
            "signal": "xid",
            "code": ev["xid"].astype(int).astype(str),
            "value": 1.0,
            "detail": ev["message"].fillna("").astype(str),
            "origin": "kernel log",
        },
        columns=cols,
    )
