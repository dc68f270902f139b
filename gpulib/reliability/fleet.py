"""The fleet's reliability over a window, from the nodes' history (``Source.node_history``) and the node list:
incidents per 1,000 GPU-days by XID class x pool x GPU model x driver, time between incidents per pool, time out
of service (cordon -> uncordon), repeat offenders ranked, alert outcomes per rule, before/after every driver or GPU
Operator change, and one fleet health score.

Exposure is observed GPU-days: a node's GPUs times the time its exporter sent data (exporter gaps are taken out),
so a gap never lowers a rate. Before/after: the same length of time on both sides of the change (the window start
bounds the before side), the nodes in the change's scope, one exact conditional Poisson rate-ratio test per
incident class (:mod:`gpulib.reliability.rates`); the classes of one change are tested together with Bonferroni's
correction (alpha / number of classes, https://en.wikipedia.org/wiki/Bonferroni_correction).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.knowledge import settings
from gpulib.reliability.rates import RateRatio, per_thousand, rate_ratio
from gpulib.reliability.timeline import Coverage, classify, coverage, incidents
from gpulib.reliability.verdict import rules
from gpulib.xid import soft_classes

#: incident classes that are not GPU hardware: XIDs whose immediate action in NVIDIA's catalog is IGNORE,
#: RESTART_APP or CHECK_UVM (:func:`gpulib.xid.soft_classes`), and events of no class
SOFT = soft_classes() | {""}
DAY = pd.Timedelta(days=1)
DRIVER_LABELS = ("nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver.major")


@dataclass
class FleetHistory:
    """The report's inputs: every node's events over [start, end], the nodes (pool, model, GPUs) and the signals."""

    events: pd.DataFrame
    nodes: pd.DataFrame  # node, pool, model, gpus, driver_now
    start: pd.Timestamp
    end: pd.Timestamp
    read: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)
    #: how far back ``events`` reach (the before side of a change early in the window reads history before it)
    history_start: pd.Timestamp | None = None

    @property
    def since(self) -> pd.Timestamp:
        return self.history_start or self.start


def node_table(nodes: pd.DataFrame, pool_label: str) -> pd.DataFrame:
    """node, pool (the ``pool_label`` label, else the instance type), model, GPUs, the driver its labels show now."""
    rows = []
    for _, n in nodes.iterrows():
        labels = n["labels"] if isinstance(n["labels"], dict) else {}
        full, major = (labels.get(k) for k in DRIVER_LABELS)
        driver = full or (f"{major}.x" if major else "unknown")
        gpus = n["gpu_count"] if pd.notna(n["gpu_count"]) else 0
        rows.append(
            {
                "node": n["node"],
                "pool": labels.get(pool_label) or n["instance_type"] or "unlabelled",
                "model": n["gpu_product"] or "unknown",
                "gpus": int(gpus),
                "driver_now": driver,
            }
        )
    return pd.DataFrame(rows, columns=["node", "pool", "model", "gpus", "driver_now"])


def driver_spans(fh: FleetHistory) -> pd.DataFrame:
    """node, driver, from, to: the driver each node ran over the window (from its driver_change events)."""
    ch = fh.events[fh.events["signal"] == "driver_change"].sort_values("time")
    per_node = {n: list(zip(g["time"], g["detail"])) for n, g in ch.groupby("node", sort=False)}
    rows = []
    for node, now in zip(fh.nodes["node"], fh.nodes["driver_now"]):
        t, cur = fh.start, None
        for at, detail in per_node.get(node, []):
            old, new = (detail.split(" -> ") + [""])[:2]
            rows.append({"node": node, "driver": cur or old, "from": t, "to": at})
            t, cur = at, new
        rows.append({"node": node, "driver": cur or now, "from": t, "to": fh.end})
    out = pd.DataFrame(rows, columns=["node", "driver", "from", "to"])
    return out[out["to"] > out["from"]]


def fleet_incidents(fh: FleetHistory) -> pd.DataFrame:
    """Every incident of the window (all XID classes, DBE, remap failures), with its pool, model and driver."""
    ev = classify(fh.events)
    ev = ev[(ev["gpu"] != "") & (ev["time"] >= fh.since)]
    classes = set(ev.loc[ev["incident_class"] != "", "incident_class"])
    inc = incidents(ev, classes)
    inc = inc.merge(fh.nodes[["node", "pool", "model"]], on="node", how="left")
    spans = driver_spans(fh)
    per_node = {n: list(zip(g["from"], g["to"], g["driver"])) for n, g in spans.groupby("node", sort=False)}
    inc["driver"] = [
        next((d for a, b, d in per_node.get(node, []) if a <= t < b), "unknown")
        for node, t in zip(inc["node"], inc["time"])
    ]
    inc["hardware"] = ~inc["incident_class"].isin(SOFT)
    return inc


def _coverages(fh: FleetHistory) -> dict:
    """node -> (GPUs, its exporter coverage over the history), computed once per history: exposure is asked for per
    node, per driver span and per change side, and each read of the events per node costs a scan of all of them."""
    if fh.__dict__.get("_cov") is None:
        gaps = fh.events[fh.events["signal"] == "no_data"]
        per_node = dict(list(gaps.groupby("node", sort=False)))
        fh._cov = {
            n: (g, coverage(per_node[n], n, fh.since, fh.end) if n in per_node else Coverage(fh.since, fh.end, []))
            for n, g in zip(fh.nodes["node"], fh.nodes["gpus"])
        }
        fh._cov_order = {n: i for i, n in enumerate(fh._cov)}
    return fh._cov


def exposure(fh: FleetHistory, nodes=None, a=None, b=None) -> float:
    """Observed GPU-days of ``nodes`` (default: all) over [a, b] (default: the window)."""
    a, b = a or fh.start, b or fh.end
    total = 0.0
    covs = _coverages(fh)
    # the asked nodes in the node table's order (the sum's order), without walking every node per call
    for n in covs if nodes is None else sorted((m for m in nodes if m in covs), key=fh._cov_order.get):
        gpus, cov = covs[n]
        total += gpus * (cov.observed(a, b) / DAY)
    return total


def rates_table(fh: FleetHistory, inc: pd.DataFrame) -> pd.DataFrame:
    """Incidents and incidents per 1,000 GPU-days by class x pool x model x driver (exposure split by driver)."""
    spans = driver_spans(fh).merge(fh.nodes, on="node")
    exp: dict[tuple, float] = {}
    for _, s in spans.iterrows():
        key = (s["pool"], s["model"], s["driver"])
        exp[key] = exp.get(key, 0.0) + exposure(fh, {s["node"]}, s["from"], s["to"])
    rows = []
    for (pool, model, driver), gd in sorted(exp.items()):
        sub = inc[(inc["pool"] == pool) & (inc["model"] == model) & (inc["driver"] == driver)]
        for cls in sorted(set(inc["incident_class"])):
            k = int((sub["incident_class"] == cls).sum())
            rows.append(
                {
                    "class": cls,
                    "pool": pool,
                    "model": model,
                    "driver": driver,
                    "incidents": k,
                    "GPU-days": round(gd, 1),
                    "per 1,000 GPU-days": per_thousand(k, gd),
                }
            )
    return pd.DataFrame(
        rows, columns=["class", "pool", "model", "driver", "incidents", "GPU-days", "per 1,000 GPU-days"]
    )


def time_between(fh: FleetHistory, inc: pd.DataFrame) -> pd.DataFrame:
    """Per pool: hardware incidents, observed GPU-days, GPU-days per incident and the median hours between them."""
    hw = inc[inc["hardware"]]
    rows = []
    for pool, grp in fh.nodes.groupby("pool"):
        mine = hw[hw["pool"] == pool].sort_values("time")
        gd = exposure(fh, set(grp["node"]))
        gaps = mine["time"].diff().dropna() / pd.Timedelta(hours=1)
        rows.append(
            {
                "pool": pool,
                "hardware incidents": len(mine),
                "GPU-days": round(gd, 1),
                "GPU-days per incident": round(gd / len(mine), 1) if len(mine) else math.nan,
                "median hours between": round(float(gaps.median()), 1) if len(gaps) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def out_of_service(fh: FleetHistory) -> pd.DataFrame:
    """Each cordon overlapping the window: node, pool, from, to (NaT: still cordoned), hours inside the window."""
    ev = fh.events
    last = ev["end"].where(ev["end"].notna(), fh.end)
    c = ev[(ev["signal"] == "cordon") & (last > fh.start) & (ev["time"] < fh.end)].merge(
        fh.nodes[["node", "pool", "gpus"]], on="node", how="left"
    )
    rows = []
    for _, r in c.iterrows():
        a, b = max(r["time"], fh.start), min(r["end"] if pd.notna(r["end"]) else fh.end, fh.end)
        rows.append(
            {
                "node": r["node"],
                "pool": r["pool"],
                "cordoned": r["time"],
                "uncordoned": r["end"],
                "hours": round((b - a) / pd.Timedelta(hours=1), 2),
                "GPU-hours": round((b - a) / pd.Timedelta(hours=1) * r["gpus"], 1),
            }
        )
    return pd.DataFrame(rows, columns=["node", "pool", "cordoned", "uncordoned", "hours", "GPU-hours"])


def _what(s: pd.Series) -> str:
    return ", ".join(sorted({w for ws in s for w in ws}))


def repeat_offenders(inc: pd.DataFrame) -> pd.DataFrame:
    """GPUs with at least the repeat-offender rule's count of hardware incidents in the window, most first."""
    floor = int(rules().loc["repeat_offender", "min_count"])
    hw = inc[inc["hardware"]]
    g = hw.groupby(["node", "gpu"]).agg(
        incidents=("time", "size"), first=("time", "min"), last=("time", "max"), what=("what", _what)
    )
    g = g[g["incidents"] >= floor].sort_values(["incidents", "last"], ascending=False).reset_index()
    return g


def alert_outcomes(fh: FleetHistory) -> pd.DataFrame:
    """Per alert rule: serve runs, how many ended critical/warning, how many cleared (OK), the cleared share."""
    s = fh.events[(fh.events["signal"] == "serve_verdict") & (fh.events["time"] >= fh.start)]
    rows = []
    for rule, grp in s.groupby("code"):
        bad = int(grp["detail"].isin(["critical", "warning"]).sum())
        rows.append(
            {
                "alert rule": rule,
                "runs": len(grp),
                "critical or warning": bad,
                "cleared (ok)": len(grp) - bad,
                "cleared share": round((len(grp) - bad) / len(grp), 2),
            }
        )
    return pd.DataFrame(rows, columns=["alert rule", "runs", "critical or warning", "cleared (ok)", "cleared share"])


@dataclass
class ChangeResult:
    kind: str
    detail: str
    at: pd.Timestamp
    scope: str
    what: str
    test: RateRatio
    regression: bool
    before_text: str
    after_text: str


def changes(fh: FleetHistory, inc: pd.DataFrame) -> list[ChangeResult]:
    """Every driver/GPU Operator change in the window, one result per incident class seen around it. On each node
    the before side is as long as the after side (from the change to the window end) and both stop at the node's
    previous and next other change, so one change's effect is not counted as another's."""
    cfg = settings("reliability_settings")
    ch = fh.events[fh.events["signal"].isin(["driver_change", "operator_change"])]
    out = []
    # per node once: its change times, its incidents, its coverage (a change on every node of a large fleet would
    # otherwise scan every event and every node per node: O(nodes^2))
    times_of = {n: g["time"].tolist() for n, g in ch.groupby("node", sort=False)}
    inc_of = {
        n: list(zip(g["time"].tolist(), g["incident_class"].tolist())) for n, g in inc.groupby("node", sort=False)
    }
    covs = _coverages(fh)

    def node_exposure(n, a, b) -> float:
        return 0.0 + covs[n][0] * (covs[n][1].observed(a, b) / DAY) if n in covs else 0.0

    for (kind, detail, at), grp in ch[ch["time"] >= fh.start].groupby(["signal", "detail", "time"]):
        nodes = set(grp["node"])
        pools = sorted(set(fh.nodes[fh.nodes["node"].isin(nodes)]["pool"]))
        scope = "every pool" if nodes == set(fh.nodes["node"]) else ", ".join(pools)
        sides = {}
        for n in nodes:
            other = [t for t in times_of.get(n, []) if t != at]
            a = max([fh.since, at - (fh.end - at)] + [t for t in other if t < at])
            b = min([fh.end] + [t for t in other if t > at])
            sides[n] = (a, b)
        t0 = sum(node_exposure(n, a, at) for n, (a, _) in sides.items())
        t1 = sum(node_exposure(n, at, b) for n, (_, b) in sides.items())
        if t0 <= 0 or t1 <= 0:
            continue
        before = Counter(c for n, (a, _) in sides.items() for t, c in inc_of.get(n, []) if a <= t < at)
        after = Counter(c for n, (_, b) in sides.items() for t, c in inc_of.get(n, []) if at <= t < b)
        classes = sorted(set(before) | set(after))
        alpha = float(cfg["rate_alpha"]) / max(len(classes), 1)
        for cls in classes:
            k0, k1 = before[cls], after[cls]
            rr = rate_ratio(k0, t0, k1, t1, confidence=1.0 - alpha)  # the interval at the test's own level
            reg = rr.p_value < alpha and k1 >= int(cfg["min_after_incidents"])
            out.append(
                ChangeResult(
                    kind,
                    detail,
                    at,
                    scope,
                    cls,
                    rr,
                    reg,
                    f"{per_thousand(k0, t0):.1f}/1,000 GPU-days",
                    f"{per_thousand(k1, t1):.1f}/1,000 GPU-days",
                )
            )
    return out


def changes_table(results: list[ChangeResult]) -> pd.DataFrame:
    rows = [
        {
            "change": f"{c.kind.replace('_', ' ')} {c.detail}",
            "at": c.at,
            "scope": c.scope,
            "class": c.what,
            "before": c.test.k0,
            "after": c.test.k1,
            "rate ratio": c.test.ratio,
            "CI low": c.test.low,
            "CI high": c.test.high,
            "p (one-sided)": c.test.p_value,
            "regression": "yes" if c.regression else "no",
        }
        for c in results
    ]
    return pd.DataFrame(rows)


@dataclass
class Score:
    score: float
    incident_term: float
    availability: float
    offender_term: float
    hw_rate: float


def health_score(fh: FleetHistory, inc: pd.DataFrame, oos: pd.DataFrame, offenders: pd.DataFrame) -> Score:
    """100 x (w_i x R / (R + r) + w_a x A + w_o x (1 - O / G)): r the hardware incidents per 1,000 GPU-days,
    R the reference rate (``score_reference_rate``: scores half), A the share of GPU-hours not cordoned, O repeat
    offender GPUs of G GPUs; the weights from ``reliability_settings.csv``."""
    cfg = settings("reliability_settings")
    gd = exposure(fh)
    r = per_thousand(int(inc["hardware"].sum()), gd)
    ref = float(cfg["score_reference_rate"])
    term_i = ref / (ref + r) if not math.isnan(r) else 0.0
    gpu_hours = float(fh.nodes["gpus"].sum()) * (fh.end - fh.start) / pd.Timedelta(hours=1)
    avail = 1.0 - (float(oos["GPU-hours"].sum()) / gpu_hours if gpu_hours else 0.0)
    gpus = max(int(fh.nodes["gpus"].sum()), 1)
    term_o = 1.0 - len(offenders) / gpus
    w = [float(cfg[k]) for k in ("score_weight_incidents", "score_weight_availability", "score_weight_offenders")]
    return Score(100.0 * (w[0] * term_i + w[1] * avail + w[2] * term_o), term_i, avail, term_o, r)
