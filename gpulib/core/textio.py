"""Text input for the parsers: accept ``str`` or ``bytes``, and bound the work any one line can cost.

Every parser (``nvidia-smi``, kernel log, NCCL, MIG, DCGM scrape) reads text an engineer pasted or a
tool wrote; a crafted or corrupted line must not cost more than linear time. Lines are cut at
:data:`MAX_LINE` characters before any regular expression sees them: the longest line these tools print
is the ``nvidia-smi`` table width (about 100 characters) or an NCCL/kernel message (well under 1 KB), so
nothing real is lost, and a pattern that backtracks costs at most ``MAX_LINE``² steps per line. (The DCGM
scrape parser does not cut lines: a label value may be long; it parses labels without regex
backtracking, see :mod:`gpulib.sources.dcgm`.)
"""

from __future__ import annotations

from typing import Any

#: characters of a line that parsers look at (inferred: 40x the widest real line of the tools above)
MAX_LINE = 4096


def as_text(value: Any) -> str:
    """``str`` unchanged; ``bytes``/``bytearray``/``memoryview`` decoded as UTF-8 (invalid bytes replaced);
    None as ``""``; anything else through ``str``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return "" if value is None else str(value)


def clip(line: str) -> str:
    """The first :data:`MAX_LINE` characters of a line."""
    return line if len(line) <= MAX_LINE else line[:MAX_LINE]


def lines(value: Any) -> list[str]:
    """:func:`as_text` split into lines, each :func:`clip`-ped."""
    return [clip(ln) for ln in as_text(value).splitlines()]
