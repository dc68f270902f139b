"""A rule group's evaluation phase, computed the way Prometheus computes it, so that a test can choose it.

Prometheus evaluates a group at ``base + offset`` with ``offset = hash % interval`` (nanoseconds) and ``hash`` the
xxHash64 of the labels ``{file="<rule file path>", name="<group name>"}`` (prometheus/prometheus:
rules/manager.go @ 225c6112, ``Group.hash`` and ``Group.EvalTimestamp``; ``Labels.Hash`` in model/labels/labels.go
@ 225c6112: each label's name and value followed by the byte 0xff, labels sorted by name, hashed with
cespare/xxhash's ``Sum64``, seed 0). ``promtool tsdb create-blocks-from rules`` aligns its evaluations the same way
(cmd/promtool/rules.go @ 225c6112, ``importRule``: ``grp.EvalTimestamp(...)``), with the file path as given on its
command line; its range query's start goes through the HTTP API, which rounds to the millisecond (web/api/v1/api.go
@ 225c6112, ``parseTime``), where a running Prometheus truncates (model/timestamp/timestamp.go @ 225c6112,
``FromTime``). 225c6112 is v2.42.0, Debian's prometheus.

XXH64 itself follows the specification (Cyan4973/xxHash: doc/xxhash_spec.md @ 810f9d20).
"""

from __future__ import annotations

MASK = (1 << 64) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * P2) & MASK, 31) * P1) & MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the specification's steps 1-6)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & MASK, (seed + P2) & MASK, seed & MASK, (seed - P1) & MASK]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], int.from_bytes(data[i + 8 * k : i + 8 * k + 8], "little"))
            i += 32
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & MASK
        for lane in v:
            acc = ((acc ^ _round(0, lane)) * P1 + P4) & MASK
    else:
        acc = (seed + P5) & MASK
    acc = (acc + n) & MASK
    while i + 8 <= n:
        acc ^= _round(0, int.from_bytes(data[i : i + 8], "little"))
        acc = (_rotl(acc, 27) * P1 + P4) & MASK
        i += 8
    if i + 4 <= n:
        acc ^= (int.from_bytes(data[i : i + 4], "little") * P1) & MASK
        acc = (_rotl(acc, 23) * P2 + P3) & MASK
        i += 4
    while i < n:
        acc ^= (data[i] * P5) & MASK
        acc = (_rotl(acc, 11) * P1) & MASK
        i += 1
    acc ^= acc >> 33
    acc = (acc * P2) & MASK
    acc ^= acc >> 29
    acc = (acc * P3) & MASK
    return acc ^ (acc >> 32)


def group_offset_ns(group: str, rule_file: str, interval_s: float) -> int:
    """The group's evaluation offset in nanoseconds within its interval (``Group.hash() % interval``)."""
    key = b"".join(k.encode() + b"\xff" + v.encode() + b"\xff" for k, v in (("file", rule_file), ("name", group)))
    return xxh64(key) % int(interval_s * 1e9)


def promtool_phase_ms(group: str, rule_file: str, interval_s: float) -> int:
    """The millisecond within the interval at which promtool writes the group's samples (the offset rounded to the
    millisecond, as the HTTP API parses a range query's start)."""
    return round(group_offset_ns(group, rule_file, interval_s) / 1e6) % int(interval_s * 1000)


def file_for_phase(group: str, directory: str, interval_s: float, lo_ms: int, hi_ms: int, limit: int = 10**6) -> str:
    """The first rule file path ``<directory>/rules-<k>.yaml`` (k = 0, 1, ...) that puts ``group``'s promtool
    phase in [lo_ms, hi_ms]."""
    for k in range(limit):
        path = f"{directory}/rules-{k}.yaml"
        if lo_ms <= promtool_phase_ms(group, path, interval_s) <= hi_ms:
            return path
    raise LookupError(f"no rules-<k>.yaml under {directory} within {limit} tries gives phase {lo_ms}-{hi_ms} ms")
