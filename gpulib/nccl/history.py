"""NCCL results history: one CSV per cluster of judged runs, so busbw can be charted over
time per node group (the hosts of a run: one node, or a node pair) and instance type.

A row is one collective of one run: when, where (cluster, hosts, instance type, GPU model, ranks), the
verdict's status, the best large-message busbw and the expected band. :func:`rows_from_run` builds rows from
parsed results and their verdicts, :func:`append` adds them to ``<root>/<cluster>.csv`` (default root
``reports/nccl_history``), :func:`load` reads a history back and :func:`history_findings` reports a latest run that
dropped below the earlier runs of the same group (SOP text from ``gpulib/data/nccl/nccl_sop.csv``). The chart of
busbw over time is :func:`gpulib.nccl.view.history_chart`.

The demo's history (the real 2xH200 capture plus synthetic earlier runs) is built by
:func:`gpulib.demo.nccl_history.demo_nccl_history` from these functions.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import sop
from gpulib.nccl.bands import Verdict
from gpulib.nccl.results import NcclTestResult, _thr

__all__ = [
    "HISTORY_COLUMNS",
    "DEFAULT_ROOT",
    "default_path",
    "rows_from_run",
    "append",
    "load",
    "load_cluster",
    "history_findings",
    "group_label",
]

HISTORY_COLUMNS = [
    "timestamp",
    "cluster",
    "hosts",
    "instance_type",
    "gpu_model",
    "nranks",
    "collective",
    "status",
    "busbw_gbs",
    "size_bytes",
    "band_low_gbs",
    "band_high_gbs",
    "link_peak_gbs",
    "origin",
]
DEFAULT_ROOT = "reports/nccl_history"
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NUMERIC = ["nranks", "busbw_gbs", "size_bytes", "band_low_gbs", "band_high_gbs", "link_peak_gbs"]
_STRINGS = ["cluster", "hosts", "instance_type", "gpu_model", "collective", "status", "origin"]


def _check_cluster(cluster: str) -> str:
    if not isinstance(cluster, str) or not _CLUSTER.match(cluster):
        raise InvalidParameter(f"cluster={cluster!r} is not usable as a file name: letters, digits, '.', '_', '-'")
    return cluster


def default_path(cluster: str, root: str | Path = DEFAULT_ROOT) -> Path:
    """``<root>/<cluster>.csv``."""
    return Path(root).expanduser() / f"{_check_cluster(cluster)}.csv"


def _utc(ts: Any) -> pd.Timestamp:
    t = pd.Timestamp(ts if ts is not None else datetime.now(timezone.utc))
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def rows_from_run(
    results: Sequence[NcclTestResult],
    verdicts: Sequence[Verdict],
    *,
    cluster: str,
    timestamp: Any = None,
    instance_type: str = "",
    hosts: str | None = None,
    origin: str = "",
) -> pd.DataFrame:
    """History rows (``HISTORY_COLUMNS``) for one run: one per collective, from its result and verdict.
    ``hosts`` defaults to the host names of the run's ``#  Rank`` lines (comma-joined); ``timestamp`` to now."""
    _check_cluster(cluster)
    if len(results) != len(verdicts):
        raise InvalidParameter(f"{len(results)} results but {len(verdicts)} verdicts: pass one verdict per result")
    ts = _utc(timestamp)
    rows = []
    for r, v in zip(results, verdicts):
        run_hosts = hosts
        if run_hosts is None:
            run_hosts = ",".join(dict.fromkeys(str(h) for h in r.ranks["host"])) if len(r.ranks) else ""
        model = str(r.ranks["model"].iloc[0]) if len(r.ranks) else ""
        b = v.band
        rows.append(
            {
                "timestamp": ts,
                "cluster": cluster,
                "hosts": run_hosts,
                "instance_type": instance_type or "",
                "gpu_model": model,
                "nranks": r.nranks,
                "collective": v.collective or r.collective or "",
                "status": v.status,
                "busbw_gbs": v.measured_busbw,
                "size_bytes": v.size_bytes,
                "band_low_gbs": b.low if b else None,
                "band_high_gbs": b.high if b else None,
                "link_peak_gbs": b.link_peak if b else None,
                "origin": origin,
            }
        )
    return _typed(pd.DataFrame(rows, columns=HISTORY_COLUMNS))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["timestamp"] = pd.to_datetime(out["timestamp"], utc=True, format="ISO8601")
    for c in _NUMERIC:
        out[c] = pd.to_numeric(out[c], errors="coerce")
    for c in _STRINGS:
        out[c] = out[c].fillna("").astype(str)
    return out


def load(path: str | Path) -> pd.DataFrame:
    """Read one history CSV (``HISTORY_COLUMNS``), timestamps as UTC, sorted by time."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameter(
            f"history file {str(p)!r} does not exist",
            hint="append a run first (gpulib.nccl.history.append) or check history_dir / cluster",
        )
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InvalidParameter(f"history file {str(p)!r} is not a readable CSV: {exc}") from exc
    missing = [c for c in HISTORY_COLUMNS if c not in df.columns]
    if missing:
        raise InvalidParameter(
            f"history file {str(p)!r} lacks columns {missing}",
            hint=f"a history CSV has the columns {', '.join(HISTORY_COLUMNS)}",
        )
    df = df[HISTORY_COLUMNS].replace("", pd.NA)
    try:
        out = _typed(df)
    except (ValueError, TypeError) as exc:
        raise InvalidParameter(f"history file {str(p)!r} has a timestamp that is not ISO 8601: {exc}") from exc
    return out.sort_values("timestamp", kind="stable").reset_index(drop=True)


def load_cluster(cluster: str, root: str | Path = DEFAULT_ROOT) -> pd.DataFrame:
    """:func:`load` of ``<root>/<cluster>.csv``."""
    return load(default_path(cluster, root))


def append(
    rows: pd.DataFrame, path: str | Path | None = None, *, cluster: str | None = None, root: str | Path = DEFAULT_ROOT
) -> Path:
    """Add ``rows`` to a history CSV (``path``, else ``<root>/<cluster>.csv``; ``cluster`` defaults to the rows'
    one cluster). A row already there (same timestamp, hosts and collective) is replaced, not duplicated."""
    if not isinstance(rows, pd.DataFrame) or [c for c in HISTORY_COLUMNS if c not in rows.columns]:
        raise InvalidParameter("rows must be a DataFrame with the HISTORY_COLUMNS (use rows_from_run)")
    if rows.empty:
        raise InvalidParameter("rows is empty: nothing to append")
    if path is None:
        clusters = sorted(set(rows["cluster"].astype(str)))
        if cluster is None:
            if len(clusters) != 1:
                raise InvalidParameter(f"rows name clusters {clusters}: pass cluster= or path=")
            cluster = clusters[0]
        path = default_path(cluster, root)
    p = Path(path).expanduser()
    new = _typed(rows[HISTORY_COLUMNS])
    both = pd.concat([load(p), new], ignore_index=True) if p.exists() else new
    both = both.drop_duplicates(["timestamp", "hosts", "collective"], keep="last")
    both = both.sort_values("timestamp", kind="stable")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    out = both.assign(timestamp=both["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    out.to_csv(tmp, index=False)
    tmp.replace(p)
    return p


def group_label(df: pd.DataFrame) -> pd.Series:
    """``hosts (instance type)`` per row: the line a chart draws per node group."""
    it = df["instance_type"].fillna("").astype(str)
    hosts = df["hosts"].fillna("").replace("", "unknown hosts").astype(str)
    return hosts.where(it == "", hosts + " (" + it + ")")


def history_findings(df: pd.DataFrame) -> list[Finding]:
    """Per node group and collective: the latest run against the median of the earlier ones. A drop of more
    than ``history_drop_tolerance`` (``nccl_thresholds.csv``) is a WARNING; otherwise one OK finding."""
    if df is None or df.empty:
        return []
    tol = _thr("history_drop_tolerance")
    min_runs = int(_thr("history_min_runs"))
    d = df.assign(group=group_label(df)).dropna(subset=["busbw_gbs"]).sort_values("timestamp")
    out: list[Finding] = []
    judged = 0
    for (g, coll), dg in d.groupby(["group", "collective"], sort=True):
        if len(dg) < min_runs + 1:
            continue
        judged += 1
        last, earlier = dg.iloc[-1], dg.iloc[:-1]
        med = float(earlier["busbw_gbs"].median())
        if med > 0 and last["busbw_gbs"] < med * (1 - tol):
            step = sop("nccl_sop", "history_drop")
            out.append(
                Finding(
                    Severity.WARNING,
                    f"NCCL busbw dropped on {g} ({coll})",
                    summary=f"latest run {last['busbw_gbs']:.1f} GB/s is {last['busbw_gbs'] / med:.0%} of the median "
                    f"{med:.1f} GB/s of {len(earlier)} earlier runs",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[
                        f"{last['timestamp']:%Y-%m-%d %H:%M} UTC: {last['busbw_gbs']:.1f} GB/s ({last['status']})",
                        f"median of earlier runs {med:.1f} GB/s; tolerance {tol:.0%}",
                    ],
                    category="nccl-history",
                    node=str(last["hosts"]) or None,
                    data={"group": g, "collective": coll, "latest": float(last["busbw_gbs"]), "median": med},
                )
            )
    if judged and not out:
        out.append(
            Finding(
                Severity.OK,
                "NCCL busbw steady over time",
                summary=f"{judged} node group/collective series: the latest run is within {tol:.0%} "
                "of the median of the earlier runs",
                category="nccl-history",
            )
        )
    return out
