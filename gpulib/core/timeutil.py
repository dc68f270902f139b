"""Windows and timestamps: Prometheus-style durations (``30m``, ``6h``, ``7d``, ``1h30m``)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from gpulib.core.errors import InvalidWindow

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
#: the longest duration Prometheus can hold: a Go time.Duration, int64 nanoseconds, about 292 years
#: (https://pkg.go.dev/time#Duration); longer windows are refused before they overflow
MAX_SECONDS = (2**63 - 1) / 1e9


def parse_window(window: str | int | float | timedelta, *, name: str = "window") -> timedelta:
    """Parse a Prometheus duration. ``"6hours"`` raises :class:`InvalidWindow` naming the parameter."""
    if isinstance(window, timedelta):
        td = window
    elif isinstance(window, (int, float)) and not isinstance(window, bool):
        if not 0 < float(window) <= MAX_SECONDS:  # NaN fails too
            raise InvalidWindow(f"{name}={window!r} must be a positive number of seconds up to about 292 years")
        td = timedelta(seconds=float(window))
    elif isinstance(window, str):
        text = window.strip()
        if not text or _PART.sub("", text) != "" or not _PART.search(text):
            raise InvalidWindow(f"{name}={window!r} is not a duration")
        seconds = sum(int(num) * _UNITS[unit] for num, unit in _PART.findall(text))
        if seconds > MAX_SECONDS:
            raise InvalidWindow(f"{name}={window!r} is longer than Prometheus can express (about 292 years)")
        td = timedelta(seconds=seconds)
    else:
        raise InvalidWindow(f"{name}={window!r} is not a duration")
    if td.total_seconds() <= 0:
        raise InvalidWindow(f"{name}={window!r} must be longer than zero")
    return td


def format_duration(td: timedelta | float) -> str:
    """Render seconds as the shortest Prometheus duration (``5400`` → ``1h30m``)."""
    seconds = int(td.total_seconds() if isinstance(td, timedelta) else td)
    if seconds <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_utc(ts: datetime | str | float | int) -> datetime:
    """Accept an aware/naive datetime, ISO string or epoch seconds; return aware UTC."""
    if isinstance(ts, datetime):
        return ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts.astimezone(timezone.utc)
    if isinstance(ts, (int, float)):
        return datetime.fromtimestamp(ts, tz=timezone.utc)
    if isinstance(ts, str):
        try:
            return to_utc(datetime.fromisoformat(ts.replace("Z", "+00:00")))
        except ValueError as exc:
            raise InvalidWindow(f"time {ts!r} is not ISO-8601", hint="use e.g. 2026-11-30T04:00:00Z") from exc
    raise InvalidWindow(f"time {ts!r} is not a timestamp")
