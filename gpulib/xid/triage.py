"""XID / ECC triage rules: from XID events, nvidia-smi, DCGM summaries and the pod list to one result per GPU.

Pure functions over the tidy frames of :mod:`gpulib.core.schema` and the parsers in :mod:`gpulib.xid.kernel_log`
and :mod:`gpulib.nvidia.smi`. Each GPU of the node becomes a :class:`CaseResult`: its XID verdict (NVIDIA's
resolution bucket for the codes seen, ``gpulib/data/xid/xid_catalog.csv``), the memory rules (DBE, row-remap
pending/failure, retired pages) and the thermal/clock-event rules that fired, each naming its row of
``gpulib/data/xid/xid_sop.csv``. :mod:`gpulib.xid.findings` turns the results into Findings with that row's SOP.

DCGM_FI_DEV_XID_ERRORS is a *sticky gauge* holding the last XID code (``NVIDIA/dcgm-exporter:
etc/default-counters.csv`` @ d5e5f510, https://github.com/NVIDIA/dcgm-exporter/issues/190): it is read for
changes, never summed, and an XID already seen in the kernel log is not counted again from it.

The Prometheus rules file built from the same data files is :mod:`gpulib.xid.alerts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

import gpulib.xid.nvlink5 as nvlink5
from gpulib.core.findings import Severity
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.knowledge import load_table, settings, threshold
from gpulib.core.timeutil import parse_window
from gpulib.nvidia.gpu_ids import gpu_id_map
from gpulib.xid.catalog import lookup
from gpulib.xid.sops import pod_impact, pod_index, sop
from gpulib.xid.xid13 import Workflow
from gpulib.xid.xid13 import workflow as workflow_xid13
from gpulib.xid.xid31 import Workflow31
from gpulib.xid.xid31 import workflow as workflow_xid31

XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
SBE_VOL = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
UNC_REMAP = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"

#: most drastic first: the bucket that wins when a GPU logged several XIDs.
BUCKET_PRIORITY = [
    "RESTART_BM",
    "WORKFLOW_XID_48",
    "RESET_GPU",
    "WORKFLOW_NVLINK_ERR",
    "WORKFLOW_NVLINK5_ERR",
    "CHECK_MECHANICALS",
    "RESTART_VM",
    "DRAIN_P2P",
    "CONTACT_SUPPORT",
    "UPDATE_SWFW",
    "CHECK_UVM",
    "WORKFLOW_XID_13",
    "WORKFLOW_XID_31",
    "RESTART_APP",
    "WORKFLOW_XID_45",
    "XID_154",
    "IGNORE",
]
#: buckets whose SOP takes the GPU out of service.
DRAIN_BUCKETS = {
    "RESTART_BM",
    "WORKFLOW_XID_48",
    "RESET_GPU",
    "WORKFLOW_NVLINK_ERR",
    "WORKFLOW_NVLINK5_ERR",
    "CHECK_MECHANICALS",
    "RESTART_VM",
    "DRAIN_P2P",
}
APP_BUCKETS = {"RESTART_APP", "WORKFLOW_XID_13", "WORKFLOW_XID_31", "CHECK_UVM"}
#: NVIDIA's workflow buckets, decided by their own repeat rules (xid13.py, xid31.py), never by the pid count
WORKFLOWS = {"WORKFLOW_XID_13": workflow_xid13, "WORKFLOW_XID_31": workflow_xid31}
#: the branches of those workflows that suspect the GPU (the DCGM EUD)
HARDWARE_BRANCHES = {"same_unit", "same_gpu"}
#: buckets that only follow another XID (never the verdict while another XID is present).
SYMPATHETIC_BUCKETS = {"WORKFLOW_XID_45", "XID_154", "IGNORE"}


def _setting(key: str) -> float:
    """A value from ``alert_settings.csv`` (project policy knobs that thresholds.csv does not carry)."""
    return settings("alert_settings").number(key)


def _bucket_for(code: int, recovery_action: Any = None, events: pd.DataFrame | None = None) -> str:
    """NVIDIA's immediate bucket for an XID; XID 13 and 31 use their workflows; XID 154 follows the announced action;
    NVLink5 XIDs 144-150 follow the decode of their status words (:mod:`gpulib.xid.nvlink5`), the worst one
    when several events of the code decode differently."""
    rec = lookup(code)
    if code in nvlink5.CODES and events is not None and "detail_words" in events.columns:
        decoded = [
            nvlink5.bucket(code, w, str(m) if isinstance(m, str) else "")
            for w, m in zip(events["detail_words"], events.get("message", pd.Series([""] * len(events))))
            if isinstance(w, tuple)
        ]
        decoded = [b for b in decoded if b]
        if decoded and len(decoded) == sum(isinstance(w, tuple) for w in events["detail_words"]):
            return _worst_bucket(decoded)
    if code in (13, 31):  # NVIDIA's investigatory workflows (xid13.py, xid31.py)
        return f"WORKFLOW_XID_{code}"
    if code == 154 and recovery_action is not None and not pd.isna(recovery_action):
        t = load_table("xid_recovery_actions").set_index("code")
        if int(recovery_action) in t.index:
            return str(t.loc[int(recovery_action), "bucket"])
    return rec.immediate_action or "CONTACT_SUPPORT"


def state_severity(*, xid: int | None = None, rule: str | None = None) -> Severity:
    """The one severity of a GPU state, whichever runbook reports it (xid_ecc_triage, node_health, fleet_overview):
    the ``severity`` of its ``gpulib/data/xid/xid_sop.csv`` row, for an XID the row of its NVIDIA bucket (the row the
    triage prints), else the memory/thermal rule named (``DBE_ERRORS``, ``ROW_REMAP_FAILURE``, ...)."""
    key = _bucket_for(int(xid), None, None) if xid is not None else str(rule)
    return Severity(str(sop(key)["severity"]))


def _worst_bucket(buckets: Iterable[str]) -> str:
    bs = [b for b in buckets if b]
    if not bs:
        return "IGNORE"
    rank = {b: i for i, b in enumerate(BUCKET_PRIORITY)}
    return min(bs, key=lambda b: rank.get(b, rank["CONTACT_SUPPORT"]))


# --------------------------------------------------------------------------- counters & gauges
def counter_increase(values: Iterable[float]) -> float:
    """Increase of a monotonic counter over ordered samples; a drop is a reset (the new value counts whole)."""
    total, prev = 0.0, None
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        v = float(v)
        if prev is not None:
            total += v - prev if v >= prev else v
        prev = v
    return total


def xid_events_from_gauge(series: pd.DataFrame | None) -> pd.DataFrame:
    """XID events from a SERIES frame of the sticky ``DCGM_FI_DEV_XID_ERRORS`` gauge.

    An event is a change of the gauge to a non-zero code. The first sample of each series can only
    say "the last XID before the window was N" and is returned with ``carried_over=True``.
    """
    cols = ["timestamp", "node", "gpu", "uuid", "xid", "source", "carried_over"]
    if series is None or len(series) == 0:
        return pd.DataFrame(columns=cols)
    out = []
    df = series.sort_values("timestamp")
    for (node, gpu, uuid), g in df.groupby(["node", "gpu", "uuid"], dropna=False, sort=False):
        # the samples with a value, as codes; a change is a code unlike the one before it (the first sample has
        # none before it: carried over), found over whole arrays since a gauge has a sample per scrape
        vals = pd.to_numeric(g["value"], errors="coerce").to_numpy(dtype=float)
        at = np.flatnonzero(~np.isnan(vals))
        codes = np.trunc(vals[at]).astype(np.int64)
        changed = np.ones(len(codes), dtype=bool)
        changed[1:] = codes[1:] != codes[:-1]
        for k in np.flatnonzero(changed & (codes != 0)):
            out.append(
                {
                    "timestamp": g["timestamp"].iloc[at[k]],
                    "node": node,
                    "gpu": str(gpu),
                    "uuid": uuid,
                    "xid": int(codes[k]),
                    "source": XID_GAUGE,
                    "carried_over": bool(k == 0),
                }
            )
    return pd.DataFrame(out, columns=cols)


def _summary_value(
    frames: dict[str, pd.DataFrame], field: str, node: str, gpu: str | None, uuid: str | None = None
) -> tuple[float, str] | None:
    """(value, stat) of a SUMMARY frame for one GPU (max over pods/MIG rows), or counter increase of a SERIES frame."""
    df = frames.get(field)
    if df is None or len(df) == 0:
        return None
    sel = df[df["node"] == node] if "node" in df.columns else df
    if gpu is not None and "gpu" in sel.columns:
        by_gpu = sel["gpu"].astype(str) == str(gpu)
        if uuid and "uuid" in sel.columns:
            by_gpu = by_gpu | (sel["uuid"] == uuid)
        sel = sel[by_gpu]
    if len(sel) == 0:
        return None
    if "timestamp" in sel.columns and "stat" not in sel.columns:
        return counter_increase(sel.sort_values("timestamp")["value"]), "increase (resets handled)"
    vals = pd.to_numeric(sel["value"], errors="coerce").dropna()
    if vals.empty:
        return None
    return float(vals.max()), str(sel["stat"].iloc[0]) if "stat" in sel.columns else "value"


# ----------------------------------------------------------------------------------- results
@dataclass
class _GpuCase:
    gpu: str | None
    uuid: str | None = None
    pci_bus_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


@dataclass
class XidVerdict:
    """What the XIDs of one GPU call for: the resolution bucket whose ``xid_sop.csv`` row is the SOP step."""

    codes: list[int]
    #: the bucket the SOP follows (after :attr:`processes` made an application XID a hardware suspect)
    bucket: str
    #: NVIDIA's bucket for the codes (the worst one; sympathetic buckets only when nothing else is there)
    nvidia_bucket: str
    #: the code whose description is the finding's summary
    headline: int
    evidence: list[str]
    #: every event came from the sticky DCGM gauge (none from the kernel log)
    gauge_only: bool
    #: > 0: application-class XIDs from this many different processes on the GPU, so the GPU is suspect
    processes: int = 0
    #: NVIDIA's WORKFLOW_XID_13 branch for the GPU's XID 13s (repeats, GPC/TPC), when that is the bucket
    xid13: Workflow | None = None
    #: NVIDIA's WORKFLOW_XID_31 branch for the GPU's XID 31s (repeats on this GPU), when that is the bucket
    xid31: Workflow31 | None = None

    @property
    def flow(self) -> Workflow | Workflow31 | None:
        """The workflow branch whose xid_sop.csv row the finding follows: XID 13's or XID 31's."""
        return (
            self.xid13 if self.bucket == "WORKFLOW_XID_13" else self.xid31 if self.bucket == "WORKFLOW_XID_31" else None
        )


@dataclass
class RuleHit:
    """A memory or thermal rule that fired: its ``xid_sop.csv`` row, the evidence, and a severity other than the
    row's where the rule grades it (None: the row's)."""

    key: str
    evidence: list[str]
    severity: Severity | None = None


@dataclass
class CaseResult:
    """One GPU of the node: its identifiers, the pods on it, and what the rules found."""

    case: _GpuCase
    impact: pd.DataFrame
    xid: XidVerdict | None
    memory: list[RuleHit]
    thermal: list[RuleHit]


def xid_verdict(case: _GpuCase, impact: pd.DataFrame) -> XidVerdict | None:
    """The bucket the XIDs of ``case`` call for (None without an XID event). Application-class XIDs from
    ``app_xid_distinct_workloads`` different processes (``alert_settings.csv``) make the GPU a hardware suspect:
    the verdict becomes ``RESET_GPU``; not where an NVIDIA workflow decides the repeats (XID 13 and 31: :mod:`xid13`,
    :mod:`xid31`)."""
    if not case.events:
        return None
    ev = pd.DataFrame(case.events)
    codes = sorted(set(int(x) for x in ev["xid"]))
    buckets = {
        c: _bucket_for(
            c,
            ev.loc[ev["xid"] == c, "recovery_action"].dropna().max() if "recovery_action" in ev.columns else None,
            ev[ev["xid"] == c],
        )
        for c in codes
    }
    driving = [b for b in buckets.values() if b not in SYMPATHETIC_BUCKETS] or list(buckets.values())
    bucket = nvidia_bucket = _worst_bucket(driving)
    # NVIDIA's workflows of the codes seen (xid13.py, xid31.py); where both are, the one that suspects the GPU leads
    flows = {b: WORKFLOWS[b](ev) for b in buckets.values() if b in WORKFLOWS} if bucket in WORKFLOWS else {}
    if len(flows) > 1 and flows[bucket].key not in HARDWARE_BRANCHES:
        bucket = nvidia_bucket = next((b for b, f in flows.items() if f.key in HARDWARE_BRANCHES), bucket)
    flow = flows.get(bucket)
    evidence = [e for f in flows.values() for e in f.evidence]
    for c in codes:
        rec, sub = lookup(c), ev[ev["xid"] == c]
        times = (
            pd.to_datetime(sub["timestamp"], utc=True, errors="coerce").dropna()
            if "timestamp" in sub
            else pd.Series([], dtype="datetime64[ns, UTC]")
        )
        when = f", last {times.max():%Y-%m-%d %H:%M:%S} UTC" if len(times) else ""
        srcs = ", ".join(sorted(set(sub["source"].astype(str))))
        evidence.append(
            f"XID {c} {rec.mnemonic} x{len(sub)}{when} [{srcs}]: {rec.description}; NVIDIA bucket "
            f"{rec.immediate_action or '-'} / {rec.investigatory_action or '-'}; fatal={'yes' if rec.fatal else 'no'}"
        )
    if (ev["source"] == XID_GAUGE).any():
        evidence.append(
            f"{XID_GAUGE} is a sticky gauge holding the last XID code, not a count: only changes are "
            "events, repeats of the same code are invisible, codes already in the kernel log are not recounted"
        )
    processes = 0
    # NVIDIA's workflows (XID 13) decide repeats themselves; a restarted job has a new pid, so pids count for no more
    if bucket in APP_BUCKETS and flow is None:
        need = int(_setting("app_xid_distinct_workloads"))
        workloads = max(len(set(ev["pid"].dropna())) if "pid" in ev.columns else 0, len(impact))
        if workloads >= need and len(set(ev.get("pid", pd.Series(dtype=object)).dropna())) >= need:
            bucket, processes = "RESET_GPU", workloads
            evidence.append(f"application XIDs came from {workloads} different processes on this GPU (>= {need})")
    headline = (
        codes[0]
        if len(codes) == 1
        else min(codes, key=lambda c: BUCKET_PRIORITY.index(buckets[c]) if buckets[c] in BUCKET_PRIORITY else 99)
    )
    return XidVerdict(
        codes,
        bucket,
        nvidia_bucket,
        headline,
        evidence,
        bool((ev["source"] == XID_GAUGE).all()),
        processes,
        flows.get("WORKFLOW_XID_13"),
        flows.get("WORKFLOW_XID_31"),
    )


def _smi_row(smi: pd.DataFrame | None, case: _GpuCase) -> dict[str, Any] | None:
    if smi is None or len(smi) == 0:
        return None
    for col, val in (("uuid", case.uuid), ("pci_bus_id", case.pci_bus_id)):
        if val and col in smi.columns and (smi[col] == val).any():
            return smi[smi[col] == val].iloc[0].to_dict()
    if case.gpu not in (None, "") and "index" in smi.columns:
        m = pd.to_numeric(smi["index"], errors="coerce") == float(case.gpu)
        if m.any():
            return smi[m].iloc[0].to_dict()
    return None


def _pos(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and np.isnan(v)) and float(v) > 0


def memory_rules(
    node: str,
    case: _GpuCase,
    smi_row: dict[str, Any] | None,
    dcgm: dict[str, pd.DataFrame],
    window: str,
    fold_into_xid: bool,
) -> list[RuleHit]:
    """DBE / remap / retired-page rules. With ``fold_into_xid`` (the GPU's XID SOP already resets or
    reboots it) DBE and pending-remap facts become evidence of the XID finding (``case.evidence``) instead of
    rules of their own."""
    out: list[RuleHit] = []
    s = smi_row or {}
    fail_dcgm = _summary_value(dcgm, REMAP_FAILURE, node, case.gpu, case.uuid)
    dbe = _summary_value(dcgm, DBE_VOL, node, case.gpu, case.uuid)
    unc = _summary_value(dcgm, UNC_REMAP, node, case.gpu, case.uuid)
    pend_dcgm = _summary_value(dcgm, REMAP_PENDING, node, case.gpu, case.uuid)
    ret_pend = _summary_value(dcgm, RETIRED_PENDING, node, case.gpu, case.uuid)
    sbe = _summary_value(dcgm, SBE_VOL, node, case.gpu, case.uuid)
    ev_mem: list[str] = []
    if dbe and _pos(dbe[0]):
        ev_mem.append(f"{DBE_VOL} {dbe[1]} {dbe[0]:.0f} over {window or 'the window'}")
    if _pos(s.get("ecc_dbe_volatile")):
        ev_mem.append(
            f"nvidia-smi: {s['ecc_dbe_volatile']:.0f} uncorrectable ECC errors since the last reset "
            f"(aggregate {s.get('ecc_dbe_aggregate', float('nan')):.0f})"
        )
    if unc and _pos(unc[0]):
        ev_mem.append(f"{UNC_REMAP} {unc[1]} {unc[0]:.0f}")
    failed = (fail_dcgm and _pos(fail_dcgm[0])) or s.get("remapped_rows_failure") == 1.0
    if failed:
        ev = ([f"{REMAP_FAILURE} {fail_dcgm[1]} {fail_dcgm[0]:.0f}"] if fail_dcgm and _pos(fail_dcgm[0]) else []) + (
            ["nvidia-smi: Remapping Failure Occurred: Yes"] if s.get("remapped_rows_failure") == 1.0 else []
        )
        out.append(RuleHit("ROW_REMAP_FAILURE", ev + ev_mem))
    elif ev_mem and not fold_into_xid:
        out.append(RuleHit("DBE_ERRORS", ev_mem))
    elif ev_mem:
        case.evidence.extend(ev_mem)
    pending = (pend_dcgm and _pos(pend_dcgm[0])) or s.get("remapped_rows_pending") == 1.0
    if pending and not failed and fold_into_xid:
        case.evidence.append("row remap pending: the GPU reset / reboot of this SOP activates it")
    elif pending and not failed:
        ev = (["nvidia-smi: Remapped Rows Pending: Yes"] if s.get("remapped_rows_pending") == 1.0 else []) + (
            [f"{REMAP_PENDING} {pend_dcgm[1]} {pend_dcgm[0]:.0f}"] if pend_dcgm and _pos(pend_dcgm[0]) else []
        )
        out.append(RuleHit("ROW_REMAP_PENDING", ev))
    if (ret_pend and _pos(ret_pend[0])) or s.get("retired_pages_pending") == 1.0:
        out.append(
            RuleHit(
                "RETIRED_PAGES_PENDING",
                ["page retirement pending (nvidia-smi Pending Page Blacklist / DCGM_FI_DEV_RETIRED_PENDING)"],
            )
        )
    if sbe and window:
        hours = parse_window(window).total_seconds() / 3600.0
        rate, limit = sbe[0] / hours if hours else 0.0, threshold("ecc_sbe_rate_warn")
        if rate >= limit:
            out.append(
                RuleHit("SBE_RATE", [f"{SBE_VOL} {sbe[1]} {sbe[0]:.0f} over {window} = {rate:.0f}/h >= {limit:.0f}/h"])
            )
    return out


def thermal_rules(
    node: str, case: _GpuCase, smi_row: dict[str, Any] | None, dcgm: dict[str, pd.DataFrame], window: str
) -> list[RuleHit]:
    """GPU temperature against ``gpu_temp_warn_c`` / ``gpu_temp_crit_c`` (thresholds.csv) and the thermal and power
    clock-event reasons nvidia-smi reports."""
    out: list[RuleHit] = []
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    s = smi_row or {}
    ev: list[str] = []
    sev = None
    temp = _summary_value(dcgm, GPU_TEMP, node, case.gpu, case.uuid)
    if temp and temp[1] != "increase (resets handled)" and temp[0] >= warn:
        ev.append(
            f"{GPU_TEMP} {temp[1]} {temp[0]:.0f} C over {window or 'the window'} (warn {warn:.0f} C, "
            f"critical {crit:.0f} C)"
        )
        sev = Severity.CRITICAL if temp[0] >= crit else Severity.WARNING
    t_now = s.get("temperature_gpu_c")
    if t_now is not None and not np.isnan(t_now) and t_now >= warn:
        ev.append(f"nvidia-smi: GPU at {t_now:.0f} C (warn {warn:.0f} C, critical {crit:.0f} C)")
        sev = Severity.CRITICAL if t_now >= crit else (sev or Severity.WARNING)
    reasons = s.get("clock_event_reasons") or []
    thermal = [r for r in reasons if r in ("SW_THERMAL", "HW_THERMAL", "HW_SLOWDOWN")]
    if thermal:
        ev.append("nvidia-smi clock-event reasons active: " + ", ".join(thermal))
        sev = sev or Severity.WARNING
    if ev:
        out.append(RuleHit("THERMAL", ev, sev))
    power = [r for r in reasons if r in ("HW_POWER_BRAKE", "SW_POWER_CAP")]
    if power:
        sev_p = Severity.WARNING if "HW_POWER_BRAKE" in power else Severity.INFO
        out.append(RuleHit("POWER", ["nvidia-smi clock-event reasons active: " + ", ".join(power)], sev_p))
    return out


def node_gpu_ids(node: str, *frames: pd.DataFrame | None) -> pd.DataFrame:
    """GPU index <-> UUID <-> PCI bus id of ``node`` (:func:`gpulib.nvidia.gpu_ids.gpu_id_map`) from nvidia-smi/NVML
    frames (one node's, no ``node`` column) and SERIES/SUMMARY frames restricted to ``node``'s rows."""
    own = []
    for f in frames:
        if f is None or len(f) == 0:
            continue
        own.append(f[f["node"] == node] if "node" in f.columns else f)
    return gpu_id_map(*own)


def _cases(
    node: str, gpu: str | None, xid_events: pd.DataFrame | None, smi: pd.DataFrame | None, dcgm: dict[str, pd.DataFrame]
) -> dict[str, _GpuCase]:
    """One case per GPU of the node, keyed by GPU index (or PCI id when the index is unknown).

    Kernel-log XIDs carry only the PCI bus id; it is joined to the GPU index and UUID through
    nvidia-smi and the ``pci_bus_id`` label of this node's DCGM rows (bus ids repeat across nodes of
    the same platform, so other nodes' rows never take part in the join).
    """
    idmap = node_gpu_ids(node, smi, *dcgm.values()).to_dict("records")
    cases: dict[str, _GpuCase] = {}

    def case_for(g: str | None = None, uuid: str | None = None, pci: str | None = None) -> _GpuCase:
        for r in idmap:
            if (
                (pci and r["pci_bus_id"] == pci)
                or (uuid and r["uuid"] == uuid)
                or (g not in (None, "") and r["gpu"] == g)
            ):
                g, uuid, pci = r["gpu"] or g, r["uuid"] or uuid, r["pci_bus_id"] or pci
                break
        key = g if g not in (None, "") else (pci or uuid or "?")
        c = cases.setdefault(key, _GpuCase(gpu=g if g not in (None, "") else None))
        c.uuid, c.pci_bus_id = c.uuid or uuid, c.pci_bus_id or pci
        return c

    kernel_codes: dict[str, set[int]] = {}
    if xid_events is not None and len(xid_events):
        ev = xid_events
        if "node" in ev.columns:
            ev = ev[ev["node"].isna() | (ev["node"] == node)]
        for r in ev.to_dict("records"):
            c = case_for(
                str(r["gpu"]) if r.get("gpu") not in (None, "") and not pd.isna(r.get("gpu")) else None,
                r.get("uuid") if isinstance(r.get("uuid"), str) else None,
                normalise_pci_bus_id(r.get("pci_bus_id")),
            )
            r = dict(r, source=r.get("source") if isinstance(r.get("source"), str) else "kernel log")
            c.events.append(r)
            if r["source"] != XID_GAUGE:
                kernel_codes.setdefault(id(c), set()).add(int(r["xid"]))
    gauge = dcgm.get(XID_GAUGE)
    if gauge is not None and len(gauge):
        g = gauge[gauge["node"] == node]
        events = (
            xid_events_from_gauge(g)
            if "timestamp" in g.columns
            else g.assign(xid=pd.to_numeric(g["value"], errors="coerce"), source=XID_GAUGE, carried_over=True)
        )
        for r in events.to_dict("records"):
            if pd.isna(r["xid"]) or int(r["xid"]) == 0:
                continue
            c = case_for(str(r["gpu"]), r.get("uuid") or None)
            if int(r["xid"]) in kernel_codes.get(id(c), set()):
                continue  # already counted from the kernel log
            c.events.append({"xid": int(r["xid"]), "timestamp": r.get("timestamp"), "source": XID_GAUGE})
    if smi is not None and len(smi):
        for r in smi.to_dict("records"):
            case_for(None if pd.isna(r.get("index")) else str(int(r["index"])), r.get("uuid"), r.get("pci_bus_id"))
    for f in dcgm.values():
        if f is not None and len(f) and "node" in f.columns:
            for r in f[f["node"] == node][["gpu", "uuid"]].drop_duplicates().to_dict("records"):
                case_for(str(r["gpu"]), r["uuid"] or None)
    if (
        gpu is not None
    ):  # a case whose index could not be found (e.g. XID 79: no nvidia-smi block) may be this GPU: kept
        cases = {
            k: c
            for k, c in cases.items()
            if c.gpu is None
            or str(c.gpu) == str(gpu)
            or c.uuid == gpu
            or (c.pci_bus_id is not None and c.pci_bus_id == normalise_pci_bus_id(gpu))
        }
    return cases


def triage_cases(
    node: str,
    *,
    gpu: str | None = None,
    window: str = "",
    xid_events: pd.DataFrame | None = None,
    smi: pd.DataFrame | None = None,
    dcgm: dict[str, pd.DataFrame] | None = None,
    pods: pd.DataFrame | None = None,
) -> list[CaseResult]:
    """The rules on one node (optionally one GPU): one :class:`CaseResult` per GPU, in the order the GPUs were met.

    * ``xid_events``: :func:`gpulib.xid.kernel_log.parse_kernel_log` output (``pci_bus_id``) and/or rows with
      ``gpu``/``uuid`` columns; a ``node`` column, if present, is filtered to ``node``.
    * ``smi``: :func:`gpulib.nvidia.smi.parse_query` output for the node (ECC, remap, temperature, clock events).
    * ``dcgm``: DCGM field name -> SUMMARY frame (``XID_ERRORS`` last value, ``ECC_DBE_VOL_TOTAL`` increase,
      ``ROW_REMAP_FAILURE`` max, ``GPU_TEMP`` p95 ...) or SERIES frame (gauge changes / counter increase).
    * ``pods``: POD_COLUMNS frame; pods on the GPU come from DCGM's pod labels, else the node's GPU pods.
    """
    dcgm = {k: v for k, v in (dcgm or {}).items() if v is not None}
    out: list[CaseResult] = []
    index = pod_index(node, pods, dcgm)
    for case in _cases(node, gpu, xid_events, smi, dcgm).values():
        impact = pod_impact(node, case.gpu, pods=pods, uuid=case.uuid, index=index)
        smi_row = _smi_row(smi, case)
        verdict = xid_verdict(case, impact)
        fold = verdict is not None and verdict.bucket in DRAIN_BUCKETS
        mem = memory_rules(node, case, smi_row, dcgm, window, fold)  # folded facts land in case.evidence
        out.append(CaseResult(case, impact, verdict, mem, thermal_rules(node, case, smi_row, dcgm, window)))
    return out
