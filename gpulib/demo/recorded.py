"""The utilization report's recording-rule series of the demo fleet, computed from the simulator's own samples.

What Prometheus records when it evaluates the rule group ``gpu-runbooks.report`` (:func:`gpulib.cost.recording_group`,
shipped in ``deploy/prometheus/gpu-alerts.yaml``) over a backfill of the same fleet at the scrape interval, written
as OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``. A TSDB of these series alone is what the report's
rules path reads (``gpulib/cost/totals.py``), without the raw history a rule evaluator would need first: at fleet
scale (``benchmarks/bench_fleet_prometheus.py --rules-only``) the raw history takes hours to backfill, this minutes.

The arithmetic is the rules' own, read from the group's expressions so it follows them:

* every rule evaluates once per group interval, at a fixed ``phase`` in it (Prometheus takes the phase from a hash
  of the group's name and file: https://github.com/prometheus/prometheus/blob/v2.42.0/rules/manager.go
  ``EvalTimestamp``), so the step's range almost never starts on a scrape; ``phase`` (whole milliseconds) defaults to
  half an interval and a second (151 s of 5 min), off every usual scrape grid too (60, 30, 15, 10 s);
* ``<agg>_over_time(FIELD[<interval>])`` at ``T`` aggregates the scraped samples in ``[T - interval, T]`` (both ends
  included, as in Prometheus 2; Prometheus 3 leaves the start out:
  https://prometheus.io/docs/prometheus/latest/migration/) and gives no point when that range holds none;
* activity is ``GR_ENGINE_ACTIVE``, else (``or``: no such series at ``T``) ``GPU_UTIL / 100``, clamped to 0..1; the
  idle flag is ``activity < bool <idle max>``; held-idle is ``(activity < bool <zombie max>) * (FB >= bool <min
  MiB>)``, a point only where both sides have one;
* labels: the pod/namespace join of :func:`gpulib.cost.recording.joined` (an ``exported_*`` label wins, the
  exporter's own pod means no pod), then only the labels of the rule's ``max by (...)``.

Values are written with Python's ``repr`` (a float64 round trip), so Prometheus' sums over them are the ones it makes
over the series it recorded itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np

from gpulib.core.errors import GpulibError
from gpulib.core.timeutil import parse_window
from gpulib.cost import recording_group

GR_ENGINE_ACTIVE, GPU_UTIL, FB_USED = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"
_REDUCE = {"max": np.nanmax, "min": np.nanmin, "avg": np.nanmean}


class RuleGroup:
    """The numbers of the report's rule group, read from its expressions (:func:`gpulib.cost.recording_group`)."""

    def __init__(self, group: dict | None = None):
        if group is None:
            group = recording_group()
        self.group = group
        self.interval = parse_window(group["interval"], name="interval").total_seconds()
        rules = group["rules"]
        if len(rules) != 4:
            raise GpulibError(f"rule group {group['name']}: expected 4 rules (activity, FB, idle, held idle)")
        act, fb, idle, held = rules
        self.names = {"act": act["record"], "fb": fb["record"], "idle": idle["record"], "held": held["record"]}
        agg = re.search(r"(\w+)_over_time\(" + GR_ENGINE_ACTIVE, act["expr"])
        keep = re.search(r"max by \(([^)]*)\)", act["expr"])
        exporter = re.search(r'"pod", "([^"]+)"\)', act["expr"])
        idle_max = re.search(r"\) < bool ([0-9.eE+-]+)$", idle["expr"])
        zombie = re.search(r"\) < bool ([0-9.eE+-]+)\) \* \(.*\) >= bool ([0-9.eE+-]+)\)$", held["expr"])
        if not (agg and keep and exporter and idle_max and zombie) or agg.group(1) not in _REDUCE:
            raise GpulibError(
                f"rule group {group['name']}: expressions not of the shape gpulib/cost/recording.py makes"
            )
        if f"{GPU_UTIL}[" not in act["expr"] or f"{FB_USED}[" not in fb["expr"]:
            raise GpulibError(f"rule group {group['name']}: activity/FB rules read other fields")
        self.reduce = _REDUCE[agg.group(1)]
        self.keep = [x.strip() for x in keep.group(1).split(",")]
        self.exporter_pod = re.compile(exporter.group(1).replace("(?i)", ""), re.IGNORECASE)
        self.idle_max = float(idle_max.group(1))
        self.zombie_act_max, self.zombie_fb_min = float(zombie.group(1)), float(zombie.group(2))

    def labels(self, raw: dict[str, str]) -> dict[str, str]:
        """A recorded series' labels from the raw series' labels (the join of gpulib/cost/recording.py ``joined``)."""
        lab = dict(raw)
        for dst in ("pod", "namespace", "container"):
            if lab.get(f"exported_{dst}"):
                lab[dst] = lab[f"exported_{dst}"]
        if self.exporter_pod.fullmatch(lab.get("pod", "")):
            for dst in ("namespace", "container", "pod"):
                lab.pop(dst, None)
        return {k: lab[k] for k in self.keep if lab.get(k)}

    def default_phase(self) -> float:
        """Half an interval and a second: the ranges ``[T - interval, T]`` hold interval / scrape samples, as at
        nearly every phase Prometheus draws (a phase on the scrape grid would give one more)."""
        return self.interval / 2 + 1

    def eval_times(self, start: float, end: float, phase: float | None = None) -> np.ndarray:
        """Evaluation timestamps in ``[start, end]``: ``phase`` plus multiples of the interval (whole milliseconds)."""
        phase = round((self.default_phase() if phase is None else phase) * 1000) / 1000 % self.interval
        first = np.ceil((start - phase) / self.interval) * self.interval + phase
        return np.arange(first, end + 1e-6, self.interval)


def _over_time(reduce, t: np.ndarray, v: np.ndarray, evals: np.ndarray, rng: float) -> np.ndarray:
    """``<agg>_over_time(v[rng])`` at each of ``evals``: samples in ``[T - rng, T]``; NaN where there are none."""
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    out = np.full(len(evals), np.nan)
    if not len(t):
        return out
    lo = np.searchsorted(t, evals - rng, side="left")
    hi = np.searchsorted(t, evals, side="right")
    width = int((hi - lo).max(initial=0))
    if width == 0:
        return out
    idx = lo[:, None] + np.arange(width)[None, :]
    inside = idx < hi[:, None]
    vals = np.where(inside, v[np.minimum(idx, len(v) - 1)], np.nan)
    has = inside.any(axis=1)
    out[has] = reduce(vals[has], axis=1)
    return out


def recorded_series(
    sim,
    start: float,
    end: float,
    *,
    data_start: float | None = None,
    group: RuleGroup | None = None,
    phase: float | None = None,
) -> Iterator[tuple[dict[str, str], np.ndarray, dict[str, np.ndarray]]]:
    """Per device of ``sim`` that has a recorded series: (labels without ``__name__``, evaluation timestamps in
    ``[start, end]``, ``{"act"|"fb"|"idle"|"held": values}``, NaN where the rule gives no point). ``data_start``:
    the first scraped sample (default: one interval before ``start``); ``phase``: see :meth:`RuleGroup.eval_times`."""
    g = group or RuleGroup()
    evals = g.eval_times(start, end, phase)
    if not len(evals):
        return
    first = evals[0] - g.interval if data_start is None else max(data_start, evals[0] - g.interval)
    t = sim.grid(first, evals[-1])
    for d in sim.devices:
        gr = _over_time(g.reduce, t, sim.sample(GR_ENGINE_ACTIVE, d, t), evals, g.interval)
        util = _over_time(g.reduce, t, sim.sample(GPU_UTIL, d, t), evals, g.interval)
        fb = _over_time(g.reduce, t, sim.sample(FB_USED, d, t), evals, g.interval)
        act = np.clip(np.where(np.isnan(gr), util / 100, gr), 0, 1)  # `or`: the right side where the left has none
        if np.isnan(act).all() and np.isnan(fb).all():
            continue
        with np.errstate(invalid="ignore"):
            idle = np.where(np.isnan(act), np.nan, (act < g.idle_max).astype(float))
            both = ~np.isnan(act) & ~np.isnan(fb)
            held = np.where(both, ((act < g.zombie_act_max) & (fb >= g.zombie_fb_min)).astype(float), np.nan)
        yield g.labels(sim.labels(d)), evals, {"act": act, "fb": fb, "idle": idle, "held": held}


def _labels(lab: dict[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in lab.items()) + "}"


def _timestamp(t: float) -> str:
    """OpenMetrics seconds; a fraction gets half a millisecond more, as promtool truncates ``seconds * 1000``."""
    ms = round(t * 1000)
    return str(ms // 1000) if ms % 1000 == 0 else f"{ms // 1000}.{ms % 1000:03d}5"


def _value(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def write_recorded_openmetrics(
    sim,
    path: str | Path,
    start: float,
    end: float,
    *,
    data_start: float | None = None,
    group: RuleGroup | None = None,
    phase: float | None = None,
) -> tuple[int, int]:
    """Write the recorded series of ``[start, end]`` (both ends included) to ``path`` as OpenMetrics; returns
    (series, samples) written. Call it once per TSDB block (2 h) to keep the file and memory small."""
    g = group or RuleGroup()
    per_rule: dict[str, list[str]] = {k: [] for k in g.names}
    series = count = 0
    for lab, evals, values in recorded_series(sim, start, end, data_start=data_start, group=g, phase=phase):
        ts = [_timestamp(float(x)) for x in evals]
        body = _labels(lab)
        for key, v in values.items():
            ok = np.flatnonzero(~np.isnan(v))
            per_rule[key].append("".join(f"{g.names[key]}{body} {_value(float(v[i]))} {ts[i]}\n" for i in ok.tolist()))
            count += len(ok)
            series += bool(len(ok))
    with Path(path).open("w") as fh:
        for key, chunks in per_rule.items():
            fh.write(f"# TYPE {g.names[key]} gauge\n")
            fh.writelines(chunks)
        fh.write("# EOF\n")
    return series, count
