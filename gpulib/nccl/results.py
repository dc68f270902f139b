"""nccl-tests output as data, and busbw recomputed from algbw.

The table is the one ``writeResultHeader`` prints (``NVIDIA/nccl-tests: src/util.cu`` @ a0b82b22); the bus factors
are those of ``NVIDIA/nccl-tests: doc/PERFORMANCE.md`` @ a0b82b22, kept in ``gpulib/data/nccl/nccl_bus_factors.csv``
and evaluated by :func:`gpulib.nccl.probe.factor_from_formula` (the probe is stdlib + torch only, so it holds the
formulas and this module imports them).
The parsers never raise on text. Units: GB/s with GB = 1e9 bytes, as nccl-tests prints them; times in microseconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table, settings
from gpulib.core.text import _lines
from gpulib.nccl.probe import factor_from_formula  # the formulas live in the self-contained probe

# --------------------------------------------------------------------------------------------
# data tables
# --------------------------------------------------------------------------------------------


def _thr(key: str) -> float:
    """One number from ``nccl_thresholds.csv``."""
    return settings("nccl_thresholds").number(key)


def _bus_factors() -> pd.DataFrame:
    return load_table("nccl_bus_factors").set_index("collective")


#: collectives nccl-tests knows, in the order of ``nccl_bus_factors.csv``
COLLECTIVES: tuple[str, ...] = tuple(load_table("nccl_bus_factors")["collective"])


def _canonical_collective(name: str) -> str:
    c = str(name).strip().lower().replace("-", "_")
    c = re.sub(r"_perf(_mpi)?$", "", c)
    c = {
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "reducescatter": "reduce_scatter",
        "all_to_all": "alltoall",
        "send_recv": "sendrecv",
    }.get(c, c)
    return c


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for ``collective`` over ``nranks`` ranks (``NVIDIA/nccl-tests: doc/PERFORMANCE.md`` @ a0b82b22,
    ``src/*.cu`` GetBw)."""
    c = _canonical_collective(collective)
    table = _bus_factors()
    if c not in table.index:
        raise InvalidParameter(f"collective={collective!r} is unknown", hint=f"use one of {', '.join(table.index)}")
    if not isinstance(nranks, (int,)) or isinstance(nranks, bool) or nranks < 1:
        raise InvalidParameter(f"nranks={nranks!r} must be a positive integer")
    return factor_from_formula(str(table.loc[c, "factor"]), nranks)


def busbw_from_algbw(collective: str, algbw: float, nranks: int) -> float:
    """busbw = algbw x factor (GB/s)."""
    return float(algbw) * bus_factor(collective, nranks)


def _num(tok: str) -> float:
    try:
        v = float(tok)
    except (TypeError, ValueError):
        return math.nan
    return v


# --------------------------------------------------------------------------------------------
# nccl-tests output
# --------------------------------------------------------------------------------------------

_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([A-Za-z_][\w]*)\s+(.*)$")
_RANK = re.compile(
    r"^#?\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([-+\d.eE]+|nan|inf)\s*(OK|FAILED)?", re.I)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.I)
_START = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"\b(" + "|".join(sorted({c for c in COLLECTIVES}, key=len, reverse=True)) + r")_perf(?:_mpi)?\b")
_ERROR = re.compile(
    r"Test (?:NCCL|CUDA) failure|^\s*\.\.\s.*Test failure|unhandled (?:system|cuda) error|^#\s*error:|"
    r"MPI_ABORT was invoked|exited on signal|Segmentation fault|terminate called|core dumped|"
    r"Invalid number of GPUs|srun: error:|ncclInternalError|ncclInvalidUsage|ncclRemoteError|Killed$",
    re.I,
)
_WARN = re.compile(r"NCCL WARN")
_HDR_KV = re.compile(
    r"(nThread|nGpus|minBytes|maxBytes|warmup iters|iters|agg iters|validation|graph|"
    r"step)\s*:?\s*(\d+)"
)
_REDOPS = {"sum", "prod", "max", "min", "avg", "none", "premulsum", "mulsum"}
_SIDE_STD = ["time_us", "algbw", "busbw", "wrong"]
_PER_ITER = {"i_min": "i_min_us", "i_max": "i_max_us", "i_p99": "i_p99_us", "i_cv%": "i_cv_pct"}
_LEAD = ["size_bytes", "count", "type", "redop", "root"]
TABLE_COLUMNS = _LEAD + [f"oop_{c}" for c in _SIDE_STD] + [f"ip_{c}" for c in _SIDE_STD]


@dataclass
class NcclTestResult:
    """One nccl-tests run (one collective).

    ``table`` columns: size_bytes, count, type, redop, root, oop_time_us, oop_algbw, oop_busbw,
    oop_wrong, ip_time_us, ip_algbw, ip_busbw, ip_wrong (GB/s; ``*_wrong`` is NaN for ``N/A``),
    plus i_min_us/i_max_us/i_p99_us/i_cv_pct per side and ``timestamp`` when the run printed them.
    ``ranks`` columns: rank, group, pid, host, device, busId, model.
    """

    collective: str | None
    table: pd.DataFrame
    avg_busbw: float | None
    ranks: pd.DataFrame
    errors: list[str]
    complete: bool
    warnings: list[str] = field(default_factory=list)
    out_of_bounds: int | None = None
    header: dict[str, Any] = field(default_factory=dict)
    layout: str = "unknown"  # "current" (redop+root), "redop" (no root), "legacy" (no redop/root)

    @property
    def nranks(self) -> int | None:
        """Number of ranks: the ``#  Rank`` lines, else inferred from busbw/algbw."""
        if len(self.ranks):
            return int(len(self.ranks))
        return infer_nranks(self)

    @property
    def peak_busbw(self) -> float | None:
        if self.table.empty:
            return None
        v = pd.concat([self.table["oop_busbw"], self.table["ip_busbw"]]).max()
        return None if pd.isna(v) else float(v)

    def busbw_at(self, size_bytes: int) -> float | None:
        row = self.table[self.table["size_bytes"] == size_bytes]
        if row.empty:
            return None
        return float(row[["oop_busbw", "ip_busbw"]].max(axis=1).iloc[0])

    def summary(self) -> str:
        state = "complete" if self.complete else "INCOMPLETE"
        avg = "n/a" if self.avg_busbw is None else f"{self.avg_busbw:g} GB/s"
        peak = self.peak_busbw
        return (
            f"{self.collective or 'unknown collective'}: {len(self.table)} sizes, {self.nranks or '?'} ranks, "
            f"peak busbw {peak if peak is not None else 'n/a'} GB/s, avg busbw {avg}, {state}"
            + (f", {len(self.errors)} error line(s)" if self.errors else "")
        )


def _header_columns(line: str) -> tuple[list[str], list[str]] | None:
    """From a ``#  size count type redop root time algbw ...`` line, the leading columns (size, count, type, ...)
    and the columns each side repeats."""
    toks = line.lstrip("#").split()
    if len(toks) < 5 or toks[0] != "size" or "count" not in toks[:3]:
        return None
    try:
        t = next(i for i, x in enumerate(toks) if x in ("time", "cputime"))
    except StopIteration:
        return None
    lead = [{"size": "size_bytes"}.get(x, x) for x in toks[:t]]
    side: list[str] = []
    for x in toks[t + 1 :]:
        if x in ("time", "cputime"):
            break
        side.append(x)
    side_cols = ["time_us"]
    for x in side:
        if x in ("algbw", "busbw"):
            side_cols.append(x)
        elif x in ("#wrong", "error", "wrong"):
            side_cols.append("wrong")
        elif x in _PER_ITER:
            side_cols.append(_PER_ITER[x])
    return lead, side_cols


def _parse_row(m: re.Match, lead: list[str] | None, side: list[str]) -> dict[str, Any] | None:
    size, count, dtype, rest = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4).split()
    row: dict[str, Any] = {"size_bytes": size, "count": count, "type": dtype, "redop": pd.NA, "root": pd.NA}
    if lead is None:  # no header seen: guess from the tokens
        lead = ["size_bytes", "count", "type"]
        if rest and rest[0].lower() in _REDOPS:
            lead.append("redop")
            if len(rest) > 1 and re.fullmatch(r"-?\d+", rest[1]):
                lead.append("root")
    extra = [c for c in lead[3:]]
    # gather/broadcast/alltoall/sendrecv rows may leave the redop (and root) cells blank under a header that
    # names them (nccl-tests prints an empty op name for collectives without a reduction): the blank cells
    # are the leading ones, recognised by the first token not being an op name
    blank = set()
    if "redop" in extra and rest and rest[0].lower() not in _REDOPS:
        blank.add("redop")
        if "root" in extra and not re.fullmatch(r"-?\d+", rest[0]):
            blank.add("root")
    extra = [c for c in extra if c not in blank]
    if len(rest) < len(extra):
        return None
    for c in extra:
        tok = rest.pop(0)
        if c == "redop":
            if tok.lower() not in _REDOPS:
                return None
            row["redop"] = tok
        elif c == "root":
            if not re.fullmatch(r"-?\d+", tok):
                return None
            row["root"] = int(tok)
    # a trailing timestamp (-S 1) is two tokens "YYYY-MM-DD HH:MM:SS"
    if len(rest) >= 2 and re.fullmatch(r"\d{4}-\d\d-\d\d", rest[-2]):
        row["timestamp"] = f"{rest[-2]} {rest[-1]}"
        rest = rest[:-2]
    w = len(side)
    if len(rest) < min(3, w):
        return None
    for prefix, chunk in (("oop_", rest[:w]), ("ip_", rest[w : 2 * w])):
        for name, tok in zip(side, chunk):
            row[prefix + name] = _num(tok)
    if len(rest) > 2 * w:  # more numbers than the header promised: not a table row
        return None
    vals = [row.get(f"oop_{c}") for c in ("time_us", "algbw", "busbw")]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
        return None
    return row


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64") for c in TABLE_COLUMNS})


def _finish_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    if not rows:
        return _empty_table()
    df = pd.DataFrame(rows)
    for c in TABLE_COLUMNS:
        if c not in df.columns:
            df[c] = math.nan if c not in ("redop", "root") else pd.NA
    df["size_bytes"] = df["size_bytes"].astype("int64")
    df["count"] = df["count"].astype("int64")
    df["root"] = pd.array(df["root"], dtype="Int64")
    for c in df.columns:
        if c.startswith(("oop_", "ip_")):
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    rest = [c for c in df.columns if c not in TABLE_COLUMNS]
    return df[TABLE_COLUMNS + rest].reset_index(drop=True)


def _ranks_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    cols = ["rank", "group", "pid", "host", "device", "busId", "model"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    df = pd.DataFrame(rows, columns=cols).drop_duplicates(subset=["rank", "host", "device", "busId"])
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


def _split_blocks(lines: list[str]) -> list[list[str]]:
    """Split a capture holding several nccl-tests runs into one block per run."""
    starts = [
        i for i, ln in enumerate(lines) if _START.search(ln) or re.match(r"^#?\s*nThread\s+\d+\s+nGpus", ln.strip())
    ]
    # "Collective test starting" is printed just before the "# nThread" line: merge neighbours
    merged: list[int] = []
    for i in starts:
        if merged and i - merged[-1] <= 2:
            continue
        merged.append(i)
    if len(merged) <= 1:
        return [lines]
    cuts = [0] + merged[1:] + [len(lines)]
    return [lines[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _parse_block(lines: list[str], collective: str | None) -> NcclTestResult:
    lead: list[str] | None = None
    side = list(_SIDE_STD)
    rows: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    errors: list[str] = []
    warnings: list[str] = []
    header: dict[str, Any] = {}
    avg: float | None = None
    oob: int | None = None
    found_coll: str | None = None
    header_seen = False
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            continue
        stripped = line.strip()
        if found_coll is None:
            m = _START.search(stripped) or _BINARY.search(stripped)
            if m:
                found_coll = _canonical_collective(m.group(1))
        if stripped.startswith("#") or stripped.startswith("nThread") or stripped.startswith("Rank"):
            hc = _header_columns(stripped)
            if hc:
                lead, side = hc
                header_seen = True
                continue
            m = _RANK.match(stripped)
            if m:
                ranks.append(
                    {
                        "rank": int(m.group(1)),
                        "group": int(m.group(2)) if m.group(2) else 0,
                        "pid": int(m.group(3)) if m.group(3) else pd.NA,
                        "host": m.group(4),
                        "device": int(m.group(5)),
                        "busId": m.group(6),
                        "model": m.group(7),
                    }
                )
                continue
            m = _AVG.search(stripped)
            if m:
                avg = _num(m.group(1))
                avg = None if avg is None or math.isnan(avg) else avg
                if m.group(2):
                    header["avg_busbw_check"] = m.group(2).upper()  # NCCL_TESTS_MIN_BW was set
            m = _OOB.search(stripped)
            if m:
                oob = int(m.group(1))
            if "nThread" in stripped:
                for k, v in _HDR_KV.findall(stripped):
                    header[k.replace(" ", "_")] = int(v)
            m = re.search(r"nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?", stripped)
            if m:
                header["nccl_tests_version"] = m.group(1)
                if m.group(3):
                    header["nccl_library"] = int(m.group(3))
            if _ERROR.search(stripped):
                errors.append(stripped)
            continue
        m = _ROW.match(line)
        if m and not _WARN.search(line) and "NCCL INFO" not in line:
            row = _parse_row(m, lead, side)
            if row is not None:
                rows.append(row)
                continue
        if _WARN.search(line):
            warnings.append(stripped)
        if _ERROR.search(stripped):
            errors.append(stripped)
    table = _finish_table(rows)
    if lead is not None:
        layout = "current" if "root" in lead and "redop" in lead else ("redop" if "redop" in lead else "legacy")
    elif rows:
        layout = "current" if "root" in rows[0] and not pd.isna(rows[0]["root"]) else "legacy"
    else:
        layout = "unknown"
    complete = bool(header_seen or rows) and not table.empty and avg is not None and not errors
    return NcclTestResult(
        collective=collective and _canonical_collective(collective) or found_coll,
        table=table,
        avg_busbw=avg,
        ranks=_ranks_frame(ranks),
        errors=errors,
        complete=complete,
        warnings=warnings,
        out_of_bounds=oob,
        header=header,
        layout=layout,
    )


def parse_nccl_tests(text: str | bytes, *, collective: str | None = None) -> NcclTestResult:
    """Parse one nccl-tests run (``all_reduce_perf`` etc.) from its stdout.

    Tolerates the current header (``redop``/``root``/``#wrong``), older ones (``error`` column of
    floats, no ``redop``/``root``), in-place ``N/A``, MPI/srun prefixes (``[1,0]<stdout>:``, ``0: ``),
    NCCL INFO/WARN lines between table rows, ``-I 1`` per-iteration and ``-S 1`` timestamp columns.
    ``collective`` overrides the name found in the text (``# Collective test starting:`` or the
    binary name). When the text holds several runs, the first is returned (see
    :func:`parse_nccl_tests_all`). Never raises on text; a crash or a cut table gives
    ``complete=False`` and the crash lines in ``errors``.
    """
    blocks = _split_blocks(_lines(text))
    return _parse_block(blocks[0], collective)


def parse_nccl_tests_all(text: str | bytes) -> list[NcclTestResult]:
    """Parse every nccl-tests run in a capture (e.g. a script that runs several ``*_perf`` binaries)."""
    return [_parse_block(b, None) for b in _split_blocks(_lines(text))]


def infer_nranks(result: NcclTestResult) -> int | None:
    """Ranks implied by busbw/algbw (for tables whose ``#  Rank`` lines were cut off)."""
    if not result.collective or result.collective not in _bus_factors().index or result.table.empty:
        return None
    t = result.table
    ok = t["oop_algbw"] >= 1.0
    if not ok.any():
        return None
    ratio = float((t.loc[ok, "oop_busbw"] / t.loc[ok, "oop_algbw"]).median())
    formula = str(_bus_factors().loc[result.collective, "factor"])
    if formula == "1":
        return None
    scale = 2.0 if formula.startswith("2") else 1.0
    if ratio >= scale - 1e-6 or ratio <= 0:
        return None
    n = scale / (scale - ratio)
    return int(round(n)) if abs(n - round(n)) < 0.15 and round(n) >= 2 else None


def check_busbw(result: NcclTestResult, nranks: int | None = None) -> pd.DataFrame:
    """Recompute algbw (size/time) and busbw (algbw x factor) for every row and side.

    Returns one row per (size, side) with ``algbw``, ``algbw_expected`` (from size and time),
    ``busbw``, ``busbw_expected`` and ``ok``. Tolerances come from ``nccl_thresholds.csv``
    (values are printed with 2 decimals). Empty when the collective or rank count is unknown.
    """
    cols = ["size_bytes", "side", "time_us", "algbw", "algbw_expected", "busbw", "busbw_expected", "ok", "problem"]
    n = nranks or result.nranks
    if not result.collective or n is None or result.table.empty or result.collective not in _bus_factors().index:
        return pd.DataFrame(columns=cols)
    f = bus_factor(result.collective, int(n))
    abs_tol, rel_tol, alg_tol = _thr("busbw_abs_tolerance"), _thr("busbw_rel_tolerance"), _thr("algbw_rel_tolerance")
    out = []
    for _, r in result.table.iterrows():
        for side in ("oop", "ip"):
            t, a, b = r[f"{side}_time_us"], r[f"{side}_algbw"], r[f"{side}_busbw"]
            if any(pd.isna(x) for x in (t, a, b)):
                continue
            a_exp = r["size_bytes"] / (t * 1e3) if t > 0 else math.nan
            b_exp = a * f
            problems = []
            if abs(b - b_exp) > abs_tol + rel_tol * max(abs(b), abs(b_exp)) + 0.005 * f:
                problems.append(f"busbw {b:g} != algbw {a:g} x {f:.4g}")
            # time has 3-4 significant digits: only judge algbw when it is large enough to matter
            if a >= 1.0 and not math.isnan(a_exp) and abs(a - a_exp) > alg_tol * a_exp + 0.01:
                problems.append(f"algbw {a:g} != size/time {a_exp:.2f}")
            out.append(
                {
                    "size_bytes": int(r["size_bytes"]),
                    "side": side,
                    "time_us": t,
                    "algbw": a,
                    "algbw_expected": a_exp,
                    "busbw": b,
                    "busbw_expected": b_exp,
                    "ok": not problems,
                    "problem": "; ".join(problems),
                }
            )
    return pd.DataFrame(out, columns=cols)
