"""A node's verdict from the rules of ``gpulib/data/reliability/node_health_rules.csv``: faulted (an open
hardware fault), repeat offender (an RMA candidate), degrading (a rising incident rate, by the exact Poisson
rate-ratio test of :mod:`gpulib.reliability.rates`), recovering (a reset or reboot then a passing diag, nothing
since), healthy. Every rule that matches gives a :class:`RuleHit`; the verdict is the one of lowest precedence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd

from gpulib.core.knowledge import load_table
from gpulib.core.timeutil import format_duration, parse_window
from gpulib.reliability.rates import RateRatio, rate_ratio
from gpulib.reliability.timeline import Coverage, classify, incidents


@lru_cache(maxsize=1)
def rules() -> pd.DataFrame:
    t = load_table("node_health_rules").fillna("")
    return t.sort_values("precedence").set_index("rule", drop=False)


def _classes(rule: pd.Series) -> set[str]:
    return {c for c in str(rule["incident_classes"]).split(";") if c}


def _window(rule: pd.Series, col: str = "lookback") -> pd.Timedelta:
    return pd.Timedelta(parse_window(str(rule[col])))


@dataclass
class RuleHit:
    """One rule that matched: its verdict, the node/GPU, and what the SOP row is filled with."""

    rule: str
    verdict: str
    severity: str
    node: str
    gpu: str = ""
    values: dict = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    test: RateRatio | None = None


@dataclass
class NodeVerdict:
    node: str
    verdict: str
    hits: list[RuleHit]
    coverage: Coverage
    lookback: pd.Timedelta


def _ago(end: pd.Timestamp, t: pd.Timestamp) -> str:
    return f"{format_duration((end - t).to_pytimedelta())} ago ({t:%Y-%m-%d %H:%M} UTC)"


def _open_faults(ev, node, end, rule) -> list[RuleHit]:
    since = end - _window(rule)
    inc = incidents(ev[(ev["time"] >= since) & (ev["gpu"] != "")], _classes(rule))
    diags = ev[(ev["signal"] == "diag") & (ev["detail"] == "pass")]
    out = []
    for _, i in inc.iterrows():
        if ((diags["gpu"].isin([i["gpu"], ""])) & (diags["time"] > i["last"])).any():
            continue
        out.append(
            RuleHit(
                rule["rule"],
                rule["verdict"],
                i["severity"] or rule["severity"],  # the GPU state's one severity (gpulib.xid.state_severity)
                node,
                i["gpu"],
                {"what": ", ".join(i["what"]), "ago": _ago(end, i["time"])},
                [f"GPU {i['gpu']}: {', '.join(i['what'])} at {i['time']:%Y-%m-%d %H:%M} UTC"],
            )
        )
    return out


def _repeat(ev, node, end, rule) -> list[RuleHit]:
    since = end - _window(rule)
    inc = incidents(ev[(ev["time"] >= since) & (ev["gpu"] != "")], _classes(rule))
    out = []
    for gpu, grp in inc.groupby("gpu"):
        if len(grp) < int(rule["min_count"]):
            continue
        what = sorted({w for ws in grp["what"] for w in ws})
        ev_lines = [f"{r['time']:%Y-%m-%d %H:%M} UTC: {', '.join(r['what'])}" for _, r in grp.iterrows()]
        out.append(
            RuleHit(
                rule["rule"],
                rule["verdict"],
                rule["severity"],
                node,
                gpu,
                {"count": len(grp), "lookback": rule["lookback"], "what": ", ".join(what)},
                [f"GPU {gpu}: {len(grp)} incidents in {rule['lookback']} (rule: at least {rule['min_count']})"]
                + ev_lines,
            )
        )
    return out


def _degrading(ev, node, end, rule, cov: Coverage) -> list[RuleHit]:
    recent, look = _window(rule, "recent"), _window(rule)
    split, start = end - recent, end - look
    inc = incidents(ev[ev["time"] >= start], _classes(rule))
    k1 = int((inc["time"] >= split).sum())
    k0 = int(len(inc) - k1)
    t1 = cov.observed(split, end) / pd.Timedelta(days=1)
    t0 = cov.observed(start, split) / pd.Timedelta(days=1)
    if k1 < int(rule["min_count"]) or t0 <= 0 or t1 <= 0:
        return []
    rr = rate_ratio(k0, t0, k1, t1, confidence=1.0 - float(rule["max_p"]))  # the interval at the test's level
    if rr.p_value >= float(rule["max_p"]):
        return []
    prior = format_duration((look - recent).to_pytimedelta())
    return [
        RuleHit(
            rule["rule"],
            rule["verdict"],
            rule["severity"],
            node,
            "",
            {"recent_count": k1, "recent": rule["recent"], "prior_count": k0, "prior": prior, "test": rr.text(" d")},
            [rr.text(" days with data")]
            + [
                f"{r['time']:%Y-%m-%d %H:%M} UTC: {', '.join(r['what'])}"
                for _, r in inc[inc["time"] >= split].iterrows()
            ],
            rr,
        )
    ]


def _recovering(ev, node, end, rule, hw: set[str]) -> list[RuleHit]:
    since = end - _window(rule)
    resets = ev[(ev["signal"] == "reset") & (ev["time"] >= since)]
    out = []
    for _, r in resets.iterrows():
        diag = ev[(ev["signal"] == "diag") & (ev["detail"] == "pass") & (ev["time"] > r["time"])]
        diag = diag[diag["gpu"].isin([r["gpu"], ""])]
        if diag.empty:
            continue
        d = diag.iloc[0]
        later = ev[(ev["time"] > d["time"]) & ev["incident_class"].isin(hw)]
        if not later.empty:
            continue
        out.append(
            RuleHit(
                rule["rule"],
                rule["verdict"],
                rule["severity"],
                node,
                r["gpu"],
                {
                    "how": "rebooted" if r["code"] == "reboot" else "reset",
                    "ago": _ago(end, r["time"]),
                    "diag": d["code"],
                },
                [
                    f"{r['code']} at {r['time']:%Y-%m-%d %H:%M} UTC, {d['code']} passed at "
                    f"{d['time']:%Y-%m-%d %H:%M} UTC, no hardware incident since"
                ],
            )
        )
    return out[-1:]  # the latest recovery


def lookback() -> pd.Timedelta:
    """The longest lookback any rule reads (the history the runbook must fetch beside its display window)."""
    return max(_window(r) for _, r in rules().iterrows() if r["lookback"])


def node_verdict(events: pd.DataFrame, node: str, end: pd.Timestamp, cov: Coverage) -> NodeVerdict:
    """The rules over ``node``'s events (any window at least :func:`lookback` long before ``end``)."""
    ev = classify(events[events["node"] == node])
    hits: list[RuleHit] = []
    hw = set()
    for _, rule in rules().iterrows():
        hw |= _classes(rule) if rule["rule"] == "open_fault" else set()
        if rule["rule"] == "open_fault":
            hits += _open_faults(ev, node, end, rule)
        elif rule["rule"] == "repeat_offender":
            hits += _repeat(ev, node, end, rule)
        elif rule["rule"] == "degrading":
            hits += _degrading(ev, node, end, rule, cov)
        elif rule["rule"] == "recovering":
            hits += _recovering(ev, node, end, rule, hw)
    order = {r["verdict"]: int(r["precedence"]) for _, r in rules().iterrows()}
    verdict = min((h.verdict for h in hits), key=order.get, default="healthy")
    return NodeVerdict(node, verdict, hits, cov, lookback())
