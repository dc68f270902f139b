"""Files written whole: a reader never sees half of one (run folders, the run index, status records); and files read
within bounds from a folder given by someone else (a snapshot): only regular files inside the folder, up to a size."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

MIB = 1024 * 1024
#: bytes read per call while a bounded file is read
_CHUNK = 1024 * 1024


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path`` (atomic on POSIX), so a
    reader never sees a half-written file and concurrent writers leave one whole version."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def kind_of(mode: int) -> str:
    """What a file of stat mode ``mode`` is that is not a regular file, in words (a FIFO, a device, a folder)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def read_regular(path: Path, *, root: Path, max_bytes: int, refuse: Callable[[str], Exception]) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` (after every symlink is resolved) of at most
    ``max_bytes``; ``refuse(message)`` is raised otherwise: a symlink leaving ``root`` is not followed, a FIFO is
    never waited on (opened non-blocking), a device or socket is not read, a larger file is not read (and one that
    grows past the bound while it is read is given up)."""
    path = Path(path)
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(Path(root).resolve(strict=True))
    except (OSError, RuntimeError) as exc:  # missing, unreadable, a symlink loop (RuntimeError before 3.13)
        raise refuse(f"{path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if not inside:
        raise refuse(f"{path} is a symlink to a file outside the folder {root}: not followed")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise refuse(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(f"{path} is {kind_of(st.st_mode)}, not a regular file: not read")
        too_big = f"{path} is larger than {max_bytes / MIB:g} MB, the bound on one snapshot file: not read"
        if st.st_size > max_bytes:
            raise refuse(too_big)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                raise refuse(too_big)
            chunks.append(chunk)
    except OSError as exc:
        raise refuse(f"{path} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
