"""Remove configured secrets from any text before it is rendered, saved or printed.

One place, used by :mod:`gpulib.core.errors` (every message and hint), :mod:`gpulib.core.findings`
(JSON, HTML and text), :mod:`gpulib.runbook` and :mod:`gpulib.cli`, so a server error body that echoes
the ``Authorization`` header never reaches an output file.

Secrets are the Prometheus token, password and the base64 ``user:password`` of HTTP basic auth
(RFC 7617, https://www.rfc-editor.org/rfc/rfc7617#section-2), from the environment variables
:mod:`gpulib.sources.prometheus` reads and from :func:`register`. Independently of configuration,
``Authorization`` values (``Bearer x``, ``Basic x``) and credentials in URLs (``scheme://user:pw@``)
are masked wherever they appear.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

MASK = "***"
_registered: set[str] = set()
_ENV = (
    "GPUOPS_PROMETHEUS_TOKEN",
    "GPUOPS_PROMETHEUS_PASSWORD",
    "GPUOPS_PAGERDUTY_ROUTING_KEY",
    "GPUOPS_SLACK_BOT_TOKEN",
)
#: shorter strings are not masked on their own (a one-letter password would mask every such letter)
MIN_LEN = 4

#: an Authorization value after its scheme (case-insensitive, RFC 9110 section 11.1): a Bearer token of one character
#: or more (RFC 6750 section 2.1), Basic credentials of four base64 characters or more (RFC 7617 section 2, the
#: base64 of ``user-id ":" password``, RFC 4648 section 4), so that plotly.js' ``#define BASIC 4`` stays as it is
_AUTH = re.compile(
    r"\b(Bearer|bearer|BEARER|Basic|basic|BASIC)(?:(?<=[rR])|(?=\s+[A-Za-z0-9+/=]{4}))(\s+)[A-Za-z0-9._~+/=\-]+"
)
_URL_CRED = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]{0,20}://)[^\s/@:]{1,256}:[^\s/@]{0,256}@")
#: how every match of the two patterns above begins (a word and a blank) and what every URL credential holds from
#: its ``://`` on: the regular expression engine scans for a literal start fast, and ``\b`` at the start of a pattern
#: keeps it from doing so (https://github.com/python/cpython/blob/main/Lib/re/_compiler.py ``_compile_info``), so a long
#: text (an executed notebook or its HTML, plotly.js inlined: about 6 MB) is scanned for these first, and the full
#: patterns are tried only where they can match: the same result as their ``sub`` over the whole text, at a tenth of
#: its time (tests/core/test_redact.py)
_AUTH_START = re.compile(r"(?:Bearer|bearer|BEARER|Basic|basic|BASIC)\s")
_URL_TAIL = re.compile(r"://[^\s/@:]{1,256}:[^\s/@]{0,256}@")


def _variants(secret: str) -> set[str]:
    s = secret.strip()
    out = {secret, s} if s else set()
    return {v for v in out if len(v) >= MIN_LEN}


def register(*secrets: str | None, user: str | None = None, password: str | None = None) -> None:
    """Add secrets to mask (a token, a password); with ``user`` and ``password`` also their basic-auth base64."""
    for s in secrets:
        if s:
            _registered.update(_variants(str(s)))
    if password:
        _registered.update(_variants(str(password)))
        if user is not None:
            _registered.add(base64.b64encode(f"{user}:{password}".encode()).decode())


def configured() -> set[str]:
    """Every secret known now: registered ones and those in the environment (token, token file, password)."""
    out = set(_registered)
    for key in _ENV:
        v = os.environ.get(key)
        if v:
            out |= _variants(v)
    tf = os.environ.get("GPUOPS_PROMETHEUS_TOKEN_FILE")
    if tf:
        try:
            out |= _variants(Path(tf).expanduser().read_text(errors="replace")[:8192])
        except OSError:
            pass
    user, pw = os.environ.get("GPUOPS_PROMETHEUS_USER"), os.environ.get("GPUOPS_PROMETHEUS_PASSWORD")
    if user is not None and pw:
        out.add(base64.b64encode(f"{user}:{pw}".encode()).decode())
    return out


def redact(text: object) -> str:
    """``text`` as a string with every secret, Authorization value and URL credential replaced by ``***``."""
    s = "" if text is None else str(text)
    for secret in sorted(configured(), key=len, reverse=True):
        if secret in s:
            s = s.replace(secret, MASK)
    s = _mask_auth(s)
    return _URL_CRED.sub(lambda m: f"{m.group(1)}{MASK}@", s) if _URL_TAIL.search(s) else s


def _mask_auth(s: str) -> str:
    """``_AUTH.sub`` (the value after the word masked), tried only where ``_AUTH_START`` found a start: no match of
    ``_AUTH`` starts anywhere else, and none starts inside another's start (the words hold no other word's first
    letter), so the matches and their order are those of ``sub``. ``match`` at a position reads the character
    before it for ``\b`` (https://docs.python.org/3/library/re.html#re.Pattern.match)."""
    out: list[str] = []
    last = 0
    for start in _AUTH_START.finditer(s):
        if start.start() < last:  # inside the value of the match before
            continue
        m = _AUTH.match(s, start.start())
        if m is not None:
            out += [s[last : m.start()], m.group(1), m.group(2), MASK]
            last = m.end()
    return "".join([*out, s[last:]]) if out else s


def redact_obj(obj):
    """Redact every string inside nested dicts/lists (for JSON documents)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj
