"""One way to reach a node: the printed ``kubectl debug`` line of every node command an SOP table names.

A command line of an SOP table (``gpulib/data/<domain>/*_sop.csv``, ``xid_sop.csv``, ``operator_sop.yaml``) that
must run on a node starts with its route instead of "``# on NODE``" (which assumed SSH)::

    @node journalctl -k --since=-24h | grep -i 'NVRM: Xid'   # the XID lines
    @driver nvidia-smi -q -i {gpu} -d ECC

:func:`expand` turns it into the ``kubectl`` line of that route (``gpulib/data/core/node_access.csv``, the one
place the form lives): ``@node`` runs the command in the host's root, ``@driver`` in the root that holds the
driver (the host's, or the GPU Operator's driver container's at ``/run/nvidia/driver``). Only the part before the
first ``|`` or ``>`` runs on the node; the rest of the pipeline and the ``# comment`` stay on the reader's machine.
The node is one shell word (:func:`gpulib.core.validate.shell_quote`); the values in the command are the caller's,
already shell-quoted (:func:`gpulib.core.sop.sop`).
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

from gpulib.core.errors import GpulibError
from gpulib.core.knowledge import load_table
from gpulib.core.validate import shell_quote

ROUTES = ("node", "driver")
_LINE = re.compile(r"^@(?P<route>[a-z_]+)\s+(?P<rest>.*)$", re.S)
#: a remote command made only of these characters needs no shell on the node
_PLAIN = re.compile(r"^[A-Za-z0-9_./=:,+\- ]+$")


@lru_cache(maxsize=1)
def _templates() -> dict[str, str]:
    t = load_table("core/node_access")
    return dict(zip(t["route"].astype(str), t["template"].astype(str)))


def _split(rest: str) -> tuple[str, str, str]:
    """(remote command, local tail from the first ``|`` or ``>``, ``# comment``), outside quotes."""
    quote, cut, comment = "", None, len(rest)
    for i, ch in enumerate(rest):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "|>" and cut is None:
            cut = i
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            comment = i
            break
    end = comment if cut is None or cut > comment else cut
    return rest[:end].strip(), rest[end:comment].strip(), rest[comment:].strip()


def on_node(route: str, node: str, cmd: str) -> str:
    """The ``kubectl`` line that runs ``cmd`` (one shell command, values already quoted) on ``node`` by ``route``."""
    templates = _templates()
    if route not in ROUTES:
        raise GpulibError(f"node route @{route} is not one of {', '.join('@' + r for r in ROUTES)}")
    node = shell_quote(f"node/{node}")
    if route == "driver":
        script = templates["driver_root"].format(cmd=cmd)
        return templates["driver"].format(node_ref=node, script=shlex.quote(script))
    remote = cmd if _PLAIN.match(cmd) or cmd.startswith("sh -c ") else "sh -c " + shlex.quote(cmd)
    return templates["node"].format(node_ref=node, cmd=remote)


def expand(line: str, node: str) -> str:
    """``line`` with a leading ``@route`` turned into its ``kubectl`` line (:func:`on_node`); other lines as they
    are."""
    m = _LINE.match(line.strip())
    if not m:
        return line
    remote, local, comment = _split(m.group("rest"))
    return " ".join(p for p in (on_node(m.group("route"), node, remote), local, comment) if p)


def strip_route(line: str) -> str:
    """``line`` without its ``@route`` (a command that needs no particular node, printed for a GPU model)."""
    m = _LINE.match(line.strip())
    return m.group("rest").strip() if m else line
