"""Line cleaning shared by the command-output parsers (nccl-tests, ``NCCL_DEBUG=INFO`` logs,
``nvidia-smi topo -m``): ANSI codes, carriage returns and launcher prefixes (OpenMPI ``--tag-output``,
``srun -l``, NCCL timestamps, Ray worker prefixes) are stripped before a line is matched.
"""

from __future__ import annotations

import re
from typing import Any

from gpulib.core.errors import InvalidParameter
from gpulib.core.textio import clip

# --------------------------------------------------------------------------------------------
# line cleaning shared by the parsers
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIXES = [
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),  # OpenMPI --tag-output
    re.compile(r"^\s*\d+:\s(?=\s*[#\d\w.])"),  # srun -l "0: "
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s*"),  # NCCL_DEBUG timestamps
    re.compile(r"^\s*\(\w+ pid=\d+\)\s*"),  # Ray worker prefix
]


def _to_text(text: Any) -> str:
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise InvalidParameter(
            f"expected text (str or bytes), got {type(text).__name__}",
            hint="pass the file contents, e.g. Path('out.txt').read_text()",
        )
    return text


def _clean_line(line: str) -> str:
    line = _ANSI.sub("", line).replace("\r", "")
    for _ in range(3):  # prefixes can stack: "[1,0]<stdout>:[2025-...] ..."
        before = line
        for p in _PREFIXES:
            line = p.sub("", line, count=1)
        if line == before:
            break
    return line


def _lines(text: str) -> list[str]:
    """Cleaned lines, each cut at gpulib.core.textio.MAX_LINE first (bounded regex work per line)."""
    return [_clean_line(clip(ln)) for ln in _to_text(text).split("\n")]
