"""NCCL checks: nccl-tests / ``nvidia-smi topo -m`` / ``NCCL_DEBUG=INFO`` parsers, the expected-bandwidth
model, verdicts and environment checks (issue 5; facts.md §4 and §5).

Everything here is a pure function over text, dicts or DataFrames so a notebook, the CLI and the
tests use the same code. The numbers (bus factors, link speeds, published busbw bands, tolerances,
failure signatures, known variables) live in ``gpulib/data/nccl_*.csv`` with their sources.

Units: bandwidths are GB/s with GB = 1e9 bytes, as nccl-tests prints them; times are microseconds.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.findings import Finding, FindingList, Severity
from gpulib.core.knowledge import load_table, settings

__all__ = [
    "NcclTestResult", "parse_nccl_tests", "parse_nccl_tests_all", "Topology", "parse_topology",
    "LogSummary", "summarize_log", "diagnose_log", "bus_factor", "busbw_from_algbw", "check_busbw",
    "infer_nranks", "Band", "expected_busbw", "Verdict", "verdict", "check_environment",
    "check_pod_spec", "collect_environment", "probe", "COLLECTIVES", "job_manifest",
]

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

_FACTOR_FORMULAS = {"2(n-1)/n": lambda n: 2.0 * (n - 1) / n, "(n-1)/n": lambda n: (n - 1) / n, "1": lambda n: 1.0}


def _canonical_collective(name: str) -> str:
    c = str(name).strip().lower().replace("-", "_")
    c = re.sub(r"_perf(_mpi)?$", "", c)
    c = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
         "all_to_all": "alltoall", "send_recv": "sendrecv"}.get(c, c)
    return c


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for ``collective`` over ``nranks`` ranks (facts.md §4.2, nccl-tests GetBw)."""
    c = _canonical_collective(collective)
    table = _bus_factors()
    if c not in table.index:
        raise InvalidParameter(f"collective={collective!r} is unknown",
                               hint=f"use one of {', '.join(table.index)}")
    if not isinstance(nranks, (int,)) or isinstance(nranks, bool) or nranks < 1:
        raise InvalidParameter(f"nranks={nranks!r} must be a positive integer")
    return _FACTOR_FORMULAS[str(table.loc[c, "factor"])](nranks)


def busbw_from_algbw(collective: str, algbw: float, nranks: int) -> float:
    """busbw = algbw x factor (GB/s)."""
    return float(algbw) * bus_factor(collective, nranks)


# --------------------------------------------------------------------------------------------
# line cleaning shared by the parsers
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIXES = [
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),            # OpenMPI --tag-output
    re.compile(r"^\s*\d+:\s(?=\s*[#\d\w.])"),                     # srun -l "0: "
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s*"),          # NCCL_DEBUG timestamps
    re.compile(r"^\s*\(\w+ pid=\d+\)\s*"),                        # Ray worker prefix
]


def _to_text(text: Any) -> str:
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise InvalidParameter(f"expected text (str or bytes), got {type(text).__name__}",
                               hint="pass the file contents, e.g. Path('out.txt').read_text()")
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
    return [_clean_line(ln) for ln in _to_text(text).split("\n")]


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
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([-+\d.eE]+|nan|inf)\s*(OK|FAILED)?", re.I)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.I)
_START = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"\b(" + "|".join(sorted({c for c in COLLECTIVES}, key=len, reverse=True)) + r")_perf(?:_mpi)?\b")
_ERROR = re.compile(
    r"Test (?:NCCL|CUDA) failure|^\s*\.\.\s.*Test failure|unhandled (?:system|cuda) error|^#\s*error:|"
    r"MPI_ABORT was invoked|exited on signal|Segmentation fault|terminate called|core dumped|"
    r"Invalid number of GPUs|srun: error:|ncclInternalError|ncclInvalidUsage|ncclRemoteError|Killed$", re.I)
_WARN = re.compile(r"NCCL WARN")
_HDR_KV = re.compile(r"(nThread|nGpus|minBytes|maxBytes|warmup iters|iters|agg iters|validation|graph|"
                     r"step)\s*:?\s*(\d+)")
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
        return (f"{self.collective or 'unknown collective'}: {len(self.table)} sizes, {self.nranks or '?'} ranks, "
                f"peak busbw {peak if peak is not None else 'n/a'} GB/s, avg busbw {avg}, {state}"
                + (f", {len(self.errors)} error line(s)" if self.errors else ""))


def _header_columns(line: str) -> tuple[list[str], list[str]] | None:
    """From a ``#  size count type redop root time algbw ...`` line, the lead and per-side columns."""
    toks = line.lstrip("#").split()
    if len(toks) < 5 or toks[0] != "size" or "count" not in toks[:3]:
        return None
    try:
        t = next(i for i, x in enumerate(toks) if x in ("time", "cputime"))
    except StopIteration:
        return None
    lead = [{"size": "size_bytes"}.get(x, x) for x in toks[:t]]
    side: list[str] = []
    for x in toks[t + 1:]:
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
    for prefix, chunk in (("oop_", rest[:w]), ("ip_", rest[w:2 * w])):
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
    starts = [i for i, ln in enumerate(lines)
              if _START.search(ln) or re.match(r"^#?\s*nThread\s+\d+\s+nGpus", ln.strip())]
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
                ranks.append({"rank": int(m.group(1)), "group": int(m.group(2)) if m.group(2) else 0,
                              "pid": int(m.group(3)) if m.group(3) else pd.NA, "host": m.group(4),
                              "device": int(m.group(5)), "busId": m.group(6), "model": m.group(7)})
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
    return NcclTestResult(collective=collective and _canonical_collective(collective) or found_coll,
                          table=table, avg_busbw=avg, ranks=_ranks_frame(ranks), errors=errors,
                          complete=complete, warnings=warnings, out_of_bounds=oob, header=header, layout=layout)


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
            out.append({"size_bytes": int(r["size_bytes"]), "side": side, "time_us": t, "algbw": a,
                        "algbw_expected": a_exp, "busbw": b, "busbw_expected": b_exp, "ok": not problems,
                        "problem": "; ".join(problems)})
    return pd.DataFrame(out, columns=cols)


# --------------------------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------------------------

_LINK_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|C2C|P2C|N/A)$")
_AFFINITY_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class Topology:
    """``nvidia-smi topo -m`` as data.

    ``links``: device x device DataFrame of link codes (X, NV#, PIX, PXB, PHB, NODE, SYS).
    ``affinity``: one row per GPU with cpu_affinity, numa_affinity, gpu_numa_id (strings, "N/A" kept).
    ``nics``: one row per NIC column with its legend name (``NIC0`` -> ``mlx5_0``).
    """

    gpus: list[str]
    nics: pd.DataFrame
    links: pd.DataFrame
    affinity: pd.DataFrame

    @property
    def gpu_links(self) -> pd.DataFrame:
        return self.links.loc[self.gpus, self.gpus] if self.gpus else self.links.iloc[0:0, 0:0]

    def link(self, a: str | int, b: str | int) -> str:
        a, b = (f"GPU{x}" if isinstance(x, int) else x for x in (a, b))
        if a not in self.links.index or b not in self.links.columns:
            raise InvalidParameter(f"device {a!r} or {b!r} is not in the topology",
                                   hint=f"devices: {', '.join(self.links.index)}")
        return str(self.links.loc[a, b])

    def nvlink_count(self, a: str | int, b: str | int) -> int:
        """Number of bonded NVLinks between two devices (0 when not NV#)."""
        m = re.fullmatch(r"NV(\d+)", self.link(a, b))
        return int(m.group(1)) if m else 0

    @property
    def gpu_pair_codes(self) -> list[str]:
        g = self.gpus
        return [str(self.links.loc[g[i], g[j]]) for i in range(len(g)) for j in range(len(g)) if i != j]

    @property
    def interconnect(self) -> str:
        """``"NVLink"`` when every GPU pair is NV#, ``"PCIe"`` when none is, ``"mixed"``, ``"single"``."""
        codes = self.gpu_pair_codes
        if not codes:
            return "single"
        nv = [c.startswith("NV") and c != "NVB" for c in codes]
        return "NVLink" if all(nv) else ("PCIe" if not any(nv) else "mixed")

    @property
    def min_nvlinks(self) -> int:
        counts = [int(c[2:]) for c in self.gpu_pair_codes if re.fullmatch(r"NV\d+", c)]
        return min(counts) if counts else 0

    def nearest_nics(self, gpu: str | int) -> list[str]:
        """NICs with the closest link code to ``gpu`` (legend names when known)."""
        g = f"GPU{gpu}" if isinstance(gpu, int) else gpu
        order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
        cand = [(order.index(self.link(g, n)), n) for n in self.nics["nic"] if self.link(g, n) in order]
        if not cand:
            return []
        best = min(c[0] for c in cand)
        names = dict(zip(self.nics["nic"], self.nics["name"]))
        return [names.get(n) or n for k, n in cand if k == best]


def _join_labels(toks: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(toks):
        if toks[i:i + 3] == ["GPU", "NUMA", "ID"]:
            out.append("GPU NUMA ID"); i += 3
        elif toks[i:i + 2] in (["CPU", "Affinity"], ["NUMA", "Affinity"]):
            out.append(" ".join(toks[i:i + 2])); i += 2
        else:
            out.append(toks[i]); i += 1
    return out


def parse_topology(text: str | bytes) -> Topology:
    """Parse ``nvidia-smi topo -m`` (tabs or spaces, ANSI underline codes, ``NIC Legend``, the
    ``CPU Affinity``/``NUMA Affinity``/``GPU NUMA ID`` columns, old ``mlx5_0`` NIC columns).
    Never raises on text: without a matrix, ``gpus`` is empty."""
    lines = _lines(text)
    devices: list[str] = []
    extra: list[str] = []
    matrix: dict[str, list[str]] = {}
    aff_rows = []
    legend: dict[str, str] = {}
    for line in lines:
        toks = line.split()
        if not toks:
            continue
        if not devices and re.fullmatch(r"GPU\d+", toks[0]) and (len(toks) == 1 or not _LINK_CODE.match(toks[1])):
            labels = _join_labels(toks)
            devices = [t for t in labels if t not in _AFFINITY_LABELS]
            extra = [t for t in labels if t in _AFFINITY_LABELS]
            continue
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if m:
            legend[m.group(1)] = m.group(2)
            continue
        if devices and toks[0] in devices and toks[0] not in matrix:
            codes = toks[1:1 + len(devices)]
            if len(codes) < len(devices) or not all(_LINK_CODE.match(c) for c in codes):
                continue
            matrix[toks[0]] = codes
            rest = toks[1 + len(devices):]
            if toks[0].startswith("GPU"):
                row = {"gpu": toks[0], "cpu_affinity": None, "numa_affinity": None, "gpu_numa_id": None}
                keys = dict(zip(_AFFINITY_LABELS, ("cpu_affinity", "numa_affinity", "gpu_numa_id")))
                for label, tok in zip(extra, rest):
                    row[keys[label]] = tok
                aff_rows.append(row)
    names = [d for d in devices if d in matrix]
    links = pd.DataFrame([[matrix[r][devices.index(c)] for c in names] for r in names], index=names, columns=names)
    gpus = [d for d in names if re.fullmatch(r"GPU\d+", d)]
    nic_cols = [d for d in names if d not in gpus]
    nics = pd.DataFrame({"nic": nic_cols, "name": [legend.get(n, n) for n in nic_cols]}, dtype="object")
    affinity = pd.DataFrame(aff_rows, columns=["gpu", "cpu_affinity", "numa_affinity", "gpu_numa_id"])
    return Topology(gpus=gpus, nics=nics, links=links, affinity=affinity)


# --------------------------------------------------------------------------------------------
# NCCL_DEBUG=INFO logs
# --------------------------------------------------------------------------------------------

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+(cuda[\d.]+))?")
_VIA = re.compile(r"via (P2P/[\w/ ]+?|SHM/[\w/]+|NET/[\w/]+|NVLS|CollNet\S*)(?:\s|$|,)")
_NRANKS = re.compile(r"nranks (\d+)", re.I)
_NNODES = re.compile(r"nNodes (\d+)")
_ENVSET = re.compile(r"(NCCL_\w+) set by environment to (\S+?)\.?(?:\s|$)")
_NETWORK = re.compile(r"Using network (\S.*?)\s*$")


@dataclass
class LogSummary:
    version: str | None
    cuda: str | None
    nranks: int | None
    nnodes: int | None
    transports: list[str]
    network: str | None
    channels: int
    trees: int
    nvls: bool
    env: dict[str, str]
    warnings: list[str]


def _transport_family(via: str) -> str:
    v = via.strip()
    if v.startswith("P2P"):
        return "P2P/IPC" if "IPC" in v else ("P2P/CUMEM" if "CUMEM" in v else "P2P")
    if v.startswith("SHM"):
        return "SHM"
    if v.startswith("NET/IB") or v.startswith("NET/IBext"):
        return "NET/IB"
    if v.startswith("NET/Socket"):
        return "NET/Socket"
    if v.startswith("NET/"):
        return "NET/" + v.split("/")[1]
    return v


def summarize_log(text: str | bytes) -> LogSummary:
    """Facts from an ``NCCL_DEBUG=INFO`` log: version, ranks, nodes, transports, rings/trees, env."""
    lines = _lines(text)
    version = cuda = network = None
    nranks = nnodes = None
    transports: list[str] = []
    channels: set[str] = set()
    trees = 0
    nvls = False
    env: dict[str, str] = {}
    warns: list[str] = []
    for ln in lines:
        if version is None and (m := _VERSION.search(ln)):
            version, cuda = m.group(1), m.group(2)
        if (m := _VIA.search(ln)):
            fam = _transport_family(m.group(1))
            if fam not in transports:
                transports.append(fam)
        if "NCCL INFO" in ln and (m := _NRANKS.search(ln)):
            nranks = max(nranks or 0, int(m.group(1)))
        if (m := _NNODES.search(ln)):
            nnodes = max(nnodes or 0, int(m.group(1)))
        if (m := re.search(r"Channel (\d+)/(\d+)\s*:\s+\d", ln)) and "via" not in ln:
            channels.add(m.group(1))
        if "Trees [" in ln:
            trees += 1
        if re.search(r"NVLS multicast support is available|Connected NVLS|NVLS comm", ln) or \
                re.search(r"[1-9]\d* nvls channels", ln):
            nvls = True
        if (m := _ENVSET.search(ln)):
            env[m.group(1)] = m.group(2)
        if (m := _NETWORK.search(ln)) and "NCCL INFO" in ln:
            network = m.group(1)
        if "NCCL WARN" in ln:
            warns.append(ln.strip())
    if nvls and "NVLS" not in transports:
        transports.append("NVLS")
    return LogSummary(version=version, cuda=cuda, nranks=nranks, nnodes=nnodes, transports=transports,
                      network=network, channels=len(channels), trees=trees, nvls=nvls, env=env, warnings=warns)


def _signatures() -> pd.DataFrame:
    return load_table("nccl_signatures").fillna("")


def diagnose_log(text: str | bytes, *, node: str | None = None) -> FindingList:
    """Findings from an ``NCCL_DEBUG=INFO`` log: one INFO finding with the version, transports,
    rings/trees and the NCCL_* variables NCCL reports, one finding per matched failure signature
    (``nccl_signatures.csv``: cause, fix, commands) and one for unrecognised WARN lines."""
    lines = [ln.strip() for ln in _lines(text)]
    s = summarize_log(text)
    out = FindingList()
    ev = [f"NCCL {s.version or 'version not in log'}" + (f" ({s.cuda})" if s.cuda else ""),
          f"transports: {', '.join(s.transports) or 'none seen (connections are logged at INFO level)'}",
          f"rings/channels: {s.channels}, tree lines: {s.trees}, NVLS: {'yes' if s.nvls else 'no'}"]
    if s.nranks:
        ev.append(f"ranks: {s.nranks}" + (f", nodes: {s.nnodes}" if s.nnodes else ""))
    if s.network:
        ev.append(f"network: {s.network}")
    if s.env:
        ev.append("set by environment: " + ", ".join(f"{k}={v}" for k, v in s.env.items()))
    out.append(Finding(Severity.INFO, "NCCL communicator summary", evidence=ev, category="nccl", node=node,
                       data={"version": s.version, "transports": s.transports, "nranks": s.nranks,
                             "nnodes": s.nnodes, "env": s.env, "nvls": s.nvls}))
    matched_lines: set[int] = set()
    multi_node = bool(s.nnodes and s.nnodes > 1)
    for _, sig in _signatures().iterrows():
        rx = re.compile(sig["pattern"], re.I)
        hits = [i for i, ln in enumerate(lines) if rx.search(ln)]
        if not hits:
            continue
        matched_lines.update(hits)
        sev = Severity(sig["severity"])
        if sig["id"] in ("ib_no_device", "net_plugin_missing") and not multi_node and s.nnodes is not None:
            sev = Severity.INFO  # single node: sockets/plugins do not matter
        evidence = [lines[i][:300] for i in hits[:3]] + ([f"... {len(hits) - 3} more line(s)"] if len(hits) > 3 else [])
        out.append(Finding(sev, sig["title"], summary=f"Likely cause: {sig['cause']}", sop_step=sig["fix"],
                           commands=[c.strip() for c in sig["commands"].split(";;") if c.strip()],
                           evidence=evidence, escalation=sig["escalation"], category="nccl", node=node,
                           confidence=0.9 if sev != Severity.INFO else 0.7,
                           data={"signature": sig["id"], "count": len(hits), "source": sig["source"]}))
    if multi_node and s.network and "socket" in s.network.lower():
        out.append(Finding(Severity.WARNING, "Inter-node traffic goes over TCP sockets",
                           summary="NCCL chose the socket transport across nodes; expect a fraction of RDMA bandwidth.",
                           sop_step="expose the HCAs to the pods (RDMA/SR-IOV resources), check NCCL_IB_DISABLE and the net plugin",
                           commands=["ibv_devinfo", "env | grep NCCL_"], evidence=[f"Using network {s.network}",
                                                                                    f"nodes: {s.nnodes}"],
                           category="nccl", node=node))
    for var, val in s.env.items():
        if var in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE") and val == "1":
            out.append(Finding(Severity.WARNING, f"{var}=1 is set", summary="a transport is disabled; bandwidth drops",
                               sop_step=f"remove {var} unless it is a deliberate workaround",
                               commands=["env | grep NCCL_"], evidence=[f"{var} set by environment to {val}"],
                               category="nccl", node=node))
    other = [ln for i, ln in enumerate(lines) if "NCCL WARN" in ln and i not in matched_lines]
    if other:
        out.append(Finding(Severity.WARNING, "Unrecognised NCCL warnings", summary=f"{len(other)} NCCL WARN line(s) "
                           "match no known signature", sop_step="read the first WARN line; search it in the NCCL "
                           "troubleshooting guide and GitHub issues", evidence=[o[:300] for o in other[:5]],
                           category="nccl", node=node, confidence=0.5))
    return out


# --------------------------------------------------------------------------------------------
# expected bandwidth
# --------------------------------------------------------------------------------------------

#: families in matching order (GH200 before H200, GB200 before B200)
_FAMILIES = ["GH200", "GB200", "H200", "H100", "H800", "A100", "A800", "B200", "B100"]


def gpu_family(model: str | None) -> str | None:
    """``"NVIDIA H200"`` -> ``"H200"``; None when unknown."""
    if not model:
        return None
    up = str(model).upper()
    return next((f for f in _FAMILIES if f in up), None)


@dataclass
class Band:
    """Expected large-message busbw band (GB/s) and where it comes from."""

    collective: str
    low: float
    high: float
    basis: str
    source: str
    inferred: bool
    link_peak: float | None = None
    unit: str = "GB/s"

    def __str__(self) -> str:
        return f"{self.collective} {self.low:.0f}-{self.high:.0f} {self.unit} ({self.basis})"


def _nvlink_gen(family: str | None, nvlinks: int | None) -> str | None:
    links = load_table("nccl_link_bandwidth")
    if family:
        for _, r in links[links["kind"] == "nvlink"].iterrows():
            if family in str(r["gpu_models"]).split("|"):
                return str(r["link"])
    if nvlinks:  # NV12 -> NVLink3; NV18 is NVLink4 unless the model says NVLink5
        return {12: "NVLink3", 18: "NVLink4"}.get(nvlinks)
    return None


def expected_busbw(collective: str = "all_reduce", *, topology: Topology | None = None, gpu_model: str | None = None,
                   interconnect: str | None = None, gpus_per_node: int | None = None, nodes: int = 1,
                   nic_gbit: float | None = None, nics_per_node: int | None = None, nvls: bool = False,
                   pcie_gen: int | None = None) -> Band | None:
    """Expected busbw band for ``collective`` at large message sizes.

    Inputs: a parsed :class:`Topology` and/or ``gpu_model`` (``"NVIDIA H200"``), ``interconnect``
    (``NVLink3/4/5``, ``NVLink-bridge``, ``PCIe``), GPUs per node, nodes, NIC line rate (Gbit/s) and
    NICs per node, NVLS on/off. A published figure (``nccl_expected_busbw.csv``) wins; otherwise the
    band is derived: NVLink per-GPU bandwidth x ring efficiency, PCIe spec x efficiency, and for
    several nodes the NIC sum (``nccl_thresholds.csv``); derived bands have ``inferred=True``.
    None when there is no basis (e.g. alltoall, unknown GPU).
    """
    coll = _canonical_collective(collective)
    if coll not in _bus_factors().index:
        raise InvalidParameter(f"collective={collective!r} is unknown", hint=f"use one of {', '.join(COLLECTIVES)}")
    if nodes < 1:
        raise InvalidParameter(f"nodes={nodes!r} must be >= 1")
    family = gpu_family(gpu_model)
    nvlinks = topology.min_nvlinks if topology is not None else None
    if gpus_per_node is None and topology is not None:
        gpus_per_node = len(topology.gpus) or None
    if interconnect is None and topology is not None:
        ic = topology.interconnect
        interconnect = _nvlink_gen(family, nvlinks) if ic == "NVLink" else ("PCIe" if ic in ("PCIe", "mixed") else None)
    if interconnect is None and family:
        interconnect = _nvlink_gen(family, None)
    if interconnect and interconnect.lower() == "nvlink":
        interconnect = _nvlink_gen(family, nvlinks)
    if not interconnect:
        return None
    use_nvls = bool(nvls) and coll == "all_reduce" and (gpus_per_node or 0) > 4
    pub = load_table("nccl_expected_busbw")
    q = pub[(pub["collective"] == coll) & (pub["interconnect"] == interconnect) & (pub["nodes"] == nodes)
            & (pub["nvls"] == ("yes" if use_nvls else "no"))]
    if family:
        q = q[q["gpu_family"] == family]
    if gpus_per_node:
        q = q[q["gpus_per_node"] == gpus_per_node]
    if nodes > 1 and nic_gbit:
        q = q[(q["nic_gbit"] == nic_gbit) & ((q["nics_per_node"] == nics_per_node) | q["nics_per_node"].isna())]
    if family and gpus_per_node and len(q):
        r = q.iloc[0]
        return Band(coll, float(r["low_gbs"]), float(r["high_gbs"]), f"published: {r['note']}", str(r["source"]),
                    r["inferred"] == "yes", link_peak=_link_peak(interconnect, nvlinks))
    if use_nvls:
        return None  # NVLS bands exist only as published 8-GPU figures
    if coll not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        return None
    intra = _intra_band(interconnect, nvlinks, pcie_gen, family)
    if intra is None:
        return None
    low, high, peak, basis, source = intra
    if nodes > 1:
        if not nic_gbit or not nics_per_node:
            return None
        per_nic = nic_gbit / 8.0
        nlow = nics_per_node * per_nic * _thr("nic_efficiency_low") * _thr("multinode_nic_sum_low")
        nhigh = nics_per_node * per_nic * _thr("nic_efficiency_high") * _thr("multinode_nic_sum_high")
        if nlow < low or nhigh < high:
            basis += f"; capped by {nics_per_node} x {nic_gbit:g} Gb/s NICs per node x NIC efficiency"
            source += "; nccl_thresholds.csv nic_efficiency_* and multinode_nic_sum_* (facts.md 4.3)"
        low, high = min(low, nlow), min(high, nhigh)
    return Band(coll, round(low, 1), round(high, 1), f"derived: {basis}", source, True, link_peak=peak)


def _link_peak(interconnect: str, nvlinks: int | None) -> float | None:
    links = load_table("nccl_link_bandwidth").set_index("link")
    if interconnect in links.index:
        r = links.loc[interconnect]
        if r["kind"] == "nvlink" and nvlinks:
            return float(r["per_link_gbps_uni"]) * nvlinks
        return float(r["gbps_uni_per_gpu"])
    return None


def _intra_band(interconnect: str, nvlinks: int | None, pcie_gen: int | None, family: str | None):
    links = load_table("nccl_link_bandwidth").set_index("link")
    if interconnect.startswith("NVLink") and interconnect in links.index:
        peak = _link_peak(interconnect, nvlinks)
        lo, hi = _thr("nvlink_ring_efficiency_low"), _thr("nvlink_ring_efficiency_high")
        what = f"{interconnect} {peak:g} GB/s per GPU" + (f" (NV{nvlinks})" if nvlinks else "")
        return peak * lo, peak * hi, peak, f"{what} x ring efficiency {lo:g}-{hi:g}", str(links.loc[interconnect, "source"])
    if interconnect.upper().startswith("PCIE"):
        gen = pcie_gen or (5 if family in ("H100", "H200", "H800", "B200", "B100") else 4)
        key = f"PCIe{gen}"
        if key not in links.index:
            return None
        peak = float(links.loc[key, "gbps_uni_per_gpu"])
        lo, hi = _thr("pcie_efficiency_low"), _thr("pcie_efficiency_high")
        return peak * lo, peak * hi, peak, f"{key} x16 {peak:g} GB/s x efficiency {lo:g}-{hi:g}", str(links.loc[key, "source"])
    return None


@dataclass
class Verdict:
    """healthy / degraded / broken / unknown, with the reasons and a Finding for the runbook."""

    status: str
    collective: str | None
    measured_busbw: float | None
    size_bytes: int | None
    band: Band | None
    reasons: list[str]
    finding: Finding

    def __str__(self) -> str:
        m = "n/a" if self.measured_busbw is None else f"{self.measured_busbw:g} GB/s"
        return f"{self.status}: {self.collective} busbw {m} vs {self.band or 'no expected band'}"


_SEV = {"healthy": Severity.OK, "degraded": Severity.WARNING, "broken": Severity.CRITICAL, "unknown": Severity.INFO}


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def verdict(result: NcclTestResult, band: Band | None = None, *, node: str | None = None, **model: Any) -> Verdict:
    """Judge a measured run against the expected band.

    ``band`` defaults to :func:`expected_busbw` for the result's collective with ``model`` keywords
    (``topology=``, ``gpu_model=``, ``nodes=`` ...; ``gpus_per_node`` defaults to the rank count of a
    single-node run). Broken: a crash, a cut table without rows, wrong results (#wrong > 0) or out
    of bounds values. Degraded: best large-message busbw below the band (minus ``band_tolerance``).
    Healthy otherwise. Unknown: no band, or a single rank (busbw is 0 by definition).
    """
    reasons: list[str] = []
    coll = result.collective
    n = result.nranks
    if band is None and coll:
        kw = dict(model)
        hosts = result.ranks["host"].nunique() if len(result.ranks) else 1
        if "nodes" not in kw and hosts > 1:
            kw["nodes"] = int(hosts)
        if "gpus_per_node" not in kw and n and "topology" not in kw:
            kw["gpus_per_node"] = n // kw.get("nodes", 1)
        if "gpu_model" not in kw and len(result.ranks):
            kw["gpu_model"] = str(result.ranks["model"].iloc[0])
        try:
            band = expected_busbw(coll, **kw)
        except InvalidParameter as exc:
            reasons.append(str(exc))
    measured, size = _best_busbw(result)
    wrong = 0.0
    if not result.table.empty:
        wrong = float(result.table[["oop_wrong", "ip_wrong"]].fillna(0).clip(lower=0).to_numpy().sum())
    status = "unknown"
    if result.errors:
        status = "broken"
        reasons.append(f"the run crashed: {result.errors[0][:200]}")
    if wrong > 0:
        status = "broken"
        reasons.append(f"{wrong:g} wrong element(s) reported: data corruption (check Xid/ECC, run dcgmi diag -r 3)")
    if result.out_of_bounds:
        status = "broken"
        reasons.append(f"{result.out_of_bounds} out-of-bounds value(s)")
    if result.table.empty and status != "broken":
        status = "broken" if not result.complete else "unknown"
        reasons.append("no result rows: the table is missing or was cut before the first size")
    elif not result.complete and not result.errors:
        reasons.append("table incomplete (no 'Avg bus bandwidth' trailer): the run was cut or is still running")
    if n == 1:
        reasons.append("single rank: busbw is 0 by definition, and NCCL only copies the send buffer into the receive "
                       "buffer on one rank (out-of-place algbw is a device copy rate, in-place calls are no-ops); "
                       "run on 2 or more GPUs")
        band = None
    if status != "broken" and measured is not None and n != 1:
        if size is not None and size < _thr("verdict_min_bytes"):
            reasons.append(f"largest size is {_fmt_bytes(size)}; published bands are for >= {_fmt_bytes(int(_thr('verdict_min_bytes')))} messages")
        if band is None:
            reasons.append("no expected band for this setup; pass gpu_model=/topology=/interconnect=")
        else:
            floor = band.low * (1 - _thr("band_tolerance"))
            ratio = measured / band.low if band.low else math.nan
            if measured >= floor:
                status = "healthy"
                reasons.append(f"busbw {measured:g} GB/s at {_fmt_bytes(size)} meets the expected {band.low:g}-{band.high:g} GB/s "
                               f"(within {_thr('band_tolerance'):.0%} tolerance)")
                if measured > band.high * _thr("above_band_note"):
                    reasons.append("above the band: NVLS (NVLink SHARP) or a hierarchical algorithm is likely in use")
            else:
                status = "degraded"
                reasons.append(f"busbw {measured:g} GB/s at {_fmt_bytes(size)} is {ratio:.0%} of the expected low end {band.low:g} GB/s")
                reasons.extend(_degraded_hints(measured, band))
    cons = check_busbw(result)
    if len(cons) and not cons["ok"].all():
        bad = cons[~cons["ok"]]
        reasons.append(f"{len(bad)} row(s) where busbw/algbw disagree with the {coll} factor for {n} ranks "
                       f"(first: {_fmt_bytes(int(bad['size_bytes'].iloc[0]))} {bad['problem'].iloc[0]}): wrong rank count or an edited table")
    f = _verdict_finding(status, coll, measured, size, band, reasons, node)
    return Verdict(status, coll, measured, size, band, reasons, f)


def _best_busbw(result: NcclTestResult) -> tuple[float | None, int | None]:
    t = result.table
    if t.empty:
        return None, None
    best = t[["oop_busbw", "ip_busbw"]].max(axis=1)
    big = t["size_bytes"] >= _thr("verdict_min_bytes")
    if big.any():
        i = best[big].idxmax()
    else:
        i = t["size_bytes"].idxmax()
    v = best.loc[i]
    return (None if pd.isna(v) else float(v)), int(t.loc[i, "size_bytes"])


def _degraded_hints(measured: float, band: Band) -> list[str]:
    hints = []
    pcie = float(load_table("nccl_link_bandwidth").set_index("link").loc["PCIe5", "gbps_uni_per_gpu"])
    if band.link_peak and band.link_peak > pcie and measured < pcie:
        hints.append("busbw is at PCIe/host-memory level although the GPUs have NVLink: NVLink P2P is probably not "
                     "used (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL, links down) - check `nvidia-smi nvlink -s` and "
                     "`nvidia-smi nvlink -e`, `nvidia-smi topo -m`, and 'via P2P' vs 'via SHM' in an NCCL_DEBUG=INFO log")
    hints.append("check NCCL_* variables (NCCL_P2P_DISABLE, NCCL_ALGO/NCCL_PROTO left from debugging), "
                 "NVLink errors (`nvidia-smi nvlink -e`), the topology (`nvidia-smi topo -m`), other processes on "
                 "the GPUs and clock throttling (`nvidia-smi -q -d PERFORMANCE`)")
    return hints


def _verdict_finding(status, coll, measured, size, band, reasons, node) -> Finding:
    title = {"healthy": "NCCL bandwidth healthy", "degraded": "NCCL bandwidth degraded",
             "broken": "NCCL test broken", "unknown": "NCCL bandwidth not judged"}[status]
    cmds = []
    sop = ""
    if status == "degraded":
        sop = "Compare with the expected band; look for disabled P2P, NVLink errors and topology problems; rerun with NCCL_DEBUG=INFO"
        cmds = ["env | grep NCCL_", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "nvidia-smi topo -m",
                "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH <rerun>"]
    elif status == "broken":
        sop = "Read the first error and the first NCCL WARN line (rerun with NCCL_DEBUG=INFO); wrong results mean cordon the node and run diagnostics"
        cmds = ["NCCL_DEBUG=INFO <rerun>", "dmesg -T | grep -i xid", "kubectl cordon <node>", "dcgmi diag -r 3"]
    ev = []
    if measured is not None:
        ev.append(f"best busbw {measured:g} GB/s at {_fmt_bytes(size)}")
    if band is not None:
        ev.append(f"expected {band}" + (f"; link peak {band.link_peak:g} GB/s" if band.link_peak else ""))
    return Finding(_SEV[status], title + (f" ({coll})" if coll else ""), summary=reasons[0] if reasons else "",
                   sop_step=sop, commands=cmds, evidence=ev + reasons[1:], category="nccl", node=node,
                   escalation="hardware team / RMA when wrong results or NVLink errors repeat on one node" if status != "healthy" else "",
                   confidence=0.6 if (band is not None and band.inferred) else 0.9,
                   data={"status": status, "measured_busbw": measured, "size_bytes": size,
                         "band": None if band is None else {"low": band.low, "high": band.high, "basis": band.basis,
                                                            "source": band.source, "inferred": band.inferred}})


# --------------------------------------------------------------------------------------------
# environment and pod checks
# --------------------------------------------------------------------------------------------

_DEBUG_VALUES = {"NCCL_DEBUG": {"INFO", "TRACE"}, "NCCL_P2P_DISABLE": {"1"}, "NCCL_SHM_DISABLE": {"1"}}


def _ifname_matches(spec: str, iface: str) -> bool:
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    parts = [p for p in spec.split(",") if p]
    hit = any(iface == p if exact else iface.startswith(p) for p in parts)
    return not hit if exclude else hit


def check_environment(env: Mapping[str, Any], *, interfaces: Sequence[str] | None = None,
                      hcas: Sequence[str] | None = None, shm_bytes: int | None = None,
                      memlock_bytes: int | str | None = None, multi_node: bool | None = None,
                      node: str | None = None) -> FindingList:
    """Check NCCL-related settings given as plain values (testable without a machine).

    ``env``: the process environment (only ``NCCL_*`` keys are judged). ``interfaces``: network
    interface names present; ``hcas``: RDMA devices present; ``shm_bytes``: size of /dev/shm;
    ``memlock_bytes``: ``ulimit -l`` in bytes, ``-1`` or ``"unlimited"``. Checks unknown variable
    names (typos), debugging variables left set, NCCL_SOCKET_IFNAME / NCCL_IB_HCA matching nothing,
    /dev/shm size and memlock (``nccl_thresholds.csv``).
    """
    if not isinstance(env, Mapping):
        raise InvalidParameter(f"env must be a mapping of variable -> value, got {type(env).__name__}")
    known = load_table("nccl_env_vars").set_index("name")
    out = FindingList()
    nccl = {str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_")}
    for name, val in nccl.items():
        if name not in known.index:
            close = difflib.get_close_matches(name, list(known.index), n=1, cutoff=0.8)
            out.append(Finding(Severity.WARNING if close else Severity.INFO, f"Unknown NCCL variable {name}",
                               summary=(f"did you mean {close[0]}? NCCL ignores misspelt variables" if close else
                                        "not in the project's catalog of NCCL variables (it may be newer or a plugin's)"),
                               sop_step=f"rename to {close[0]}" if close else "check the NCCL user guide (env.html)",
                               evidence=[f"{name}={val}"], category="nccl-env", node=node, confidence=0.8 if close else 0.4))
            continue
        cat = str(known.loc[name, "category"])
        noisy = name in _DEBUG_VALUES and val.strip().upper() in _DEBUG_VALUES[name]
        if noisy or (cat == "debug" and name not in _DEBUG_VALUES and name not in ("NCCL_DEBUG_FILE",)):
            out.append(Finding(Severity.WARNING, f"Debugging variable {name} left set",
                               summary=f"{known.loc[name, 'meaning']}; NCCL's docs say debugging variables should not stay in production",
                               sop_step=f"unset {name} unless it is a deliberate, documented workaround",
                               commands=["env | grep NCCL_"], evidence=[f"{name}={val}"], category="nccl-env", node=node))
    spec = nccl.get("NCCL_SOCKET_IFNAME")
    if spec and interfaces is not None:
        hits = [i for i in interfaces if _ifname_matches(spec, i)]
        if not hits:
            out.append(Finding(Severity.CRITICAL, "NCCL_SOCKET_IFNAME matches no interface",
                               summary="NCCL will fail with 'Bootstrap : no socket interface found'",
                               sop_step="set NCCL_SOCKET_IFNAME to an interface present in the pod (prefix, =exact or ^exclude)",
                               commands=["ip -o link"], evidence=[f"NCCL_SOCKET_IFNAME={spec}",
                                                                  f"interfaces: {', '.join(interfaces) or 'none'}"],
                               category="nccl-env", node=node))
    hca = nccl.get("NCCL_IB_HCA")
    if hca and hcas is not None:
        names = [h.split(":")[0] for h in hcas]
        spec_names = hca.lstrip("^=").split(",")
        if not hca.startswith("^") and not any(any(n.startswith(p.split(":")[0]) for n in names) for p in spec_names if p):
            out.append(Finding(Severity.CRITICAL, "NCCL_IB_HCA matches no RDMA device",
                               summary="NCCL finds no HCA and falls back to sockets (or fails)",
                               sop_step="fix NCCL_IB_HCA or expose the HCAs to the pod", commands=["ibv_devinfo -l"],
                               evidence=[f"NCCL_IB_HCA={hca}", f"devices: {', '.join(hcas) or 'none'}"],
                               category="nccl-env", node=node))
    if multi_node and nccl.get("NCCL_IB_DISABLE") == "1":
        out.append(Finding(Severity.WARNING, "NCCL_IB_DISABLE=1 on a multi-node job",
                           summary="inter-node traffic uses TCP sockets", sop_step="unset NCCL_IB_DISABLE when RDMA is available",
                           evidence=["NCCL_IB_DISABLE=1"], category="nccl-env", node=node))
    if shm_bytes is not None:
        floor = _thr("shm_min_bytes")
        if shm_bytes < floor:
            out.append(Finding(Severity.WARNING, "/dev/shm is small for NCCL",
                               summary=f"/dev/shm is {_fmt_bytes(int(shm_bytes))}; NCCL's SHM transport fails with 'No space left on device' (container default 64 MiB)",
                               sop_step="mount an emptyDir with medium: Memory at /dev/shm (sizeLimit of a few GiB)",
                               commands=["df -h /dev/shm"], evidence=[f"/dev/shm {shm_bytes} bytes < {int(floor)} bytes"],
                               category="nccl-env", node=node))
    if memlock_bytes is not None:
        unlimited = str(memlock_bytes).strip().lower() in ("unlimited", "-1", "infinity")
        if not unlimited:
            sev = Severity.WARNING if multi_node or hcas else Severity.INFO
            out.append(Finding(sev, "memlock limit is not unlimited",
                               summary="RDMA memory registration (ibv_reg_mr) can fail with 'Cannot allocate memory'",
                               sop_step="set memlock to unlimited (container runtime LimitMEMLOCK=infinity, IPC_LOCK capability)",
                               commands=["ulimit -l"], evidence=[f"memlock {memlock_bytes} bytes"],
                               category="nccl-env", node=node))
    return out


def _quantity_bytes(q: Any) -> int | None:
    if q is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTPE]i?|[kmgtpe])?\s*", str(q))
    if not m:
        return None
    mult = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}[m.group(2) or ""]
    return int(float(m.group(1)) * mult)


def check_pod_spec(pod: Mapping[str, Any], *, multi_node: bool = False) -> FindingList:
    """Check a Pod (``kubectl get pod -o json``, or a Job/PyTorchJob pod template ``spec``) for NCCL needs:
    /dev/shm as emptyDir ``medium: Memory``, hostIPC/hostNetwork, RDMA/SR-IOV resources, IPC_LOCK."""
    if not isinstance(pod, Mapping):
        raise InvalidParameter(f"pod must be a dict (kubectl get pod -o json), got {type(pod).__name__}")
    spec = pod.get("spec", pod) or {}
    name = (pod.get("metadata") or {}).get("name", "pod")
    out = FindingList()
    vols = {v.get("name"): v for v in spec.get("volumes", []) or []}
    containers = spec.get("containers", []) or []
    shm_vol = None
    for c in containers:
        for vm in c.get("volumeMounts", []) or []:
            if vm.get("mountPath", "").rstrip("/") == "/dev/shm":
                shm_vol = vols.get(vm.get("name"))
    if spec.get("hostIPC"):
        out.append(Finding(Severity.INFO, "hostIPC: /dev/shm is the node's", evidence=[f"{name}: hostIPC true"],
                           summary="NCCL SHM works across pods on the node; isolation is reduced", category="nccl-pod"))
    elif shm_vol is None:
        out.append(Finding(Severity.WARNING, "No /dev/shm volume in the pod",
                           summary="the container gets the 64 MiB default /dev/shm; NCCL fails with 'Error while creating shared memory segment'",
                           sop_step="add volume {name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}} mounted at /dev/shm",
                           evidence=[f"{name}: no volumeMount at /dev/shm"], category="nccl-pod"))
    else:
        ed = shm_vol.get("emptyDir")
        if ed is None or ed.get("medium") != "Memory":
            out.append(Finding(Severity.WARNING, "/dev/shm volume is not memory-backed",
                               sop_step="use emptyDir with medium: Memory for /dev/shm",
                               evidence=[f"{name}: volume {shm_vol.get('name')} = {shm_vol}"], category="nccl-pod"))
        elif ed.get("sizeLimit") is not None and (_quantity_bytes(ed["sizeLimit"]) or 0) < _thr("shm_min_bytes"):
            out.append(Finding(Severity.WARNING, "/dev/shm sizeLimit is small for NCCL",
                               sop_step="raise sizeLimit (a few GiB)", evidence=[f"sizeLimit {ed['sizeLimit']}"],
                               category="nccl-pod"))
    res_names: set[str] = set()
    caps: set[str] = set()
    for c in containers:
        r = c.get("resources") or {}
        for k in ("limits", "requests"):
            res_names.update((r.get(k) or {}).keys())
        caps.update(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
    rdma = sorted(n for n in res_names if n.startswith("rdma/") or "sriov" in n.lower() or n.startswith("nvidia.com/hostdev")
                  or n.startswith("openshift.io/") or "infiniband" in n.lower())
    if multi_node and not rdma and not spec.get("hostNetwork"):
        out.append(Finding(Severity.WARNING, "Multi-node job without RDMA resources",
                           summary="no rdma/* or SR-IOV resource requested and no hostNetwork: NCCL will use TCP sockets between nodes",
                           sop_step="request the RDMA/SR-IOV resource your cluster exposes (e.g. rdma/rdma_shared_device_a) or use hostNetwork",
                           evidence=[f"{name}: resources {sorted(res_names)}"], category="nccl-pod"))
    if rdma and "IPC_LOCK" not in caps and not any((c.get("securityContext") or {}).get("privileged") for c in containers):
        out.append(Finding(Severity.WARNING, "RDMA without IPC_LOCK capability",
                           summary="memory registration needs an unlimited memlock; add the IPC_LOCK capability",
                           sop_step="securityContext.capabilities.add: [IPC_LOCK]", evidence=[f"{name}: rdma resources {rdma}"],
                           category="nccl-pod"))
    if spec.get("hostNetwork"):
        out.append(Finding(Severity.INFO, "hostNetwork: NCCL sees the node's interfaces",
                           summary="set NCCL_SOCKET_IFNAME to the data interface so bootstrap does not pick a management NIC",
                           evidence=[f"{name}: hostNetwork true"], category="nccl-pod"))
    return out


def collect_environment() -> dict[str, Any]:
    """Read the local values :func:`check_environment` needs (env, interfaces, HCAs, /dev/shm, memlock)."""
    import os
    import resource

    def _ls(p: str) -> list[str]:
        try:
            return sorted(os.listdir(p))
        except OSError:
            return []
    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_frsize * st.f_blocks
    except OSError:
        shm = None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {"env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
            "interfaces": _ls("/sys/class/net"), "hcas": _ls("/sys/class/infiniband"), "shm_bytes": shm,
            "memlock_bytes": -1 if soft == resource.RLIM_INFINITY else soft}


# --------------------------------------------------------------------------------------------
# probe
# --------------------------------------------------------------------------------------------


class ProbeError(GpulibError):
    hint = "run `python3 -m gpulib.nccl.probe --help`; needs torch with CUDA and 2+ GPUs, or all_reduce_perf on PATH"


def probe(collectives: Iterable[str] = ("all_reduce", "all_gather"), *, min_bytes: str | int = "8",
          max_bytes: str | int = "1G", iters: int = 20, warmup: int = 5, nproc: int | None = None,
          use_nccl_tests: bool = True, timeout_s: float = 900) -> list[NcclTestResult]:
    """Run a bus-bandwidth sweep on the local GPUs and return parsed results (one per collective).

    Uses nccl-tests' ``<collective>_perf`` when it is on PATH (``use_nccl_tests``), otherwise
    ``python -m gpulib.nccl.probe`` (torch.distributed over NCCL, one process per GPU). NVLink SHARP
    stays off (``NCCL_NVLS_ENABLE=0``).
    """
    import os
    import shutil
    import subprocess
    import sys

    colls = [_canonical_collective(c) for c in collectives]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    results: list[NcclTestResult] = []
    binaries = {c: shutil.which(f"{c}_perf") for c in colls} if use_nccl_tests else {}
    if binaries and all(binaries.values()):
        ngpus = nproc or _visible_gpus()
        for c in colls:
            cmd = [binaries[c], "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-g", str(ngpus),
                   "-n", str(iters), "-w", str(warmup)]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
            results.append(parse_nccl_tests(p.stdout + p.stderr, collective=c))
        return results
    cmd = [sys.executable, "-m", "gpulib.nccl.probe", "--collectives", ",".join(colls), "--min-bytes", str(min_bytes),
           "--max-bytes", str(max_bytes), "--iters", str(iters), "--warmup", str(warmup)]
    if nproc:
        cmd += ["--nproc", str(nproc)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    res = parse_nccl_tests_all(p.stdout)
    if p.returncode != 0 and not any(len(r.table) for r in res):
        raise ProbeError(f"gpulib.nccl.probe exited with {p.returncode}: {(p.stderr or p.stdout)[-500:]}")
    return res


def _visible_gpus() -> int:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - any NVML failure means "cannot count"
        raise ProbeError(f"cannot count GPUs with NVML: {exc}") from exc


# --------------------------------------------------------------------------------------------
# in-cluster probe manifests and the results history (separate modules, reachable from here)
# --------------------------------------------------------------------------------------------


def job_manifest(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The in-cluster probe as a Kubernetes ``batch/v1`` Job: :func:`gpulib.nccl.job.job_manifest` (a
    multi-node Kubeflow PyTorchJob: :func:`gpulib.nccl.job.pytorchjob_manifest`)."""
    from gpulib.nccl.job import job_manifest as _job_manifest

    return _job_manifest(*args, **kwargs)


def __getattr__(name: str) -> Any:
    """``gpulib.nccl.history`` is :mod:`gpulib.nccl.history` (imported on first use)."""
    if name == "history":
        import gpulib.nccl.history as nccl_history

        return nccl_history
    raise AttributeError(f"module 'gpulib.nccl.analysis' has no attribute {name!r}")
