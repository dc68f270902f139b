"""The signal contract: one DCGM signal under every name dcgm-exporter has given it, and the unit it is read in.

``gpulib/data/sources/signals.csv`` holds one row per signal gpulib reads: the canonical name (the dcgm-exporter
<= 4.8 name the domain code uses), its canonical unit, the name each exporter generation emits (``4.8``, ``4.9``,
``4.10``), the factor that turns that generation's value into the canonical unit, the semantics (``gauge`` |
``window_count`` | ``counter`` | ``state``) and the source of each cell. An empty name cell means no source was
found for that generation's name: readers still match every name that is known, and :func:`name_in` (what the demo
emits) keeps the newest earlier name.

Only ``gpulib/sources/`` (and the demo's exporter) read this module: the source boundary turns whatever names a node
served into canonical names and units, so domain code never sees a generation.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Iterable

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table
from gpulib.core.validate import promql_string

#: exporter generations, oldest first, as the columns of signals.csv name them (``name_<g>``, ``scale_<g>``)
GENERATIONS = ("4.8", "4.9", "4.10")


def _col(kind: str, generation: str) -> str:
    return f"{kind}_{generation.replace('.', '_')}"


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, dict], dict[str, tuple[str, str, float]]]:
    """(canonical -> row, emitted name -> (canonical, generation, scale)) from signals.csv."""
    rows: dict[str, dict] = {}
    by_name: dict[str, tuple[str, str, float]] = {}
    for r in load_table("signals").fillna("").to_dict("records"):
        canon = str(r["canonical"]).strip()
        rows[canon] = r
        for g in GENERATIONS:
            name = str(r[_col("name", g)]).strip()
            if not name:
                continue
            cell = r[_col("scale", g)]
            scale = float(cell) if str(cell).strip() else 1.0
            # the oldest generation that emits a name decides its scale (a name kept across generations keeps
            # its unit: a unit change takes a new name, NVIDIA/go-dcgm: pkg/dcgm/base_unit_fields_test.go)
            by_name.setdefault(name, (canon, g, scale))
    return rows, by_name


def signals() -> list[str]:
    """Every canonical signal name of the contract."""
    return list(_tables()[0])


def canonical(name: str) -> str:
    """The canonical name of an emitted name (any generation); a name outside the contract is returned as is."""
    hit = _tables()[1].get(name)
    return hit[0] if hit else name


def scale(name: str) -> float:
    """The factor that turns a value emitted under ``name`` into the canonical unit (1 outside the contract)."""
    hit = _tables()[1].get(name)
    return hit[2] if hit else 1.0


def unit(canonical_name: str) -> str:
    """The canonical unit of a signal ('' outside the contract)."""
    row = _tables()[0].get(canonical(canonical_name))
    return str(row["canonical_unit"]) if row else ""


def semantics(canonical_name: str) -> str:
    """``gauge`` | ``window_count`` | ``counter`` | ``state`` ('' outside the contract)."""
    row = _tables()[0].get(canonical(canonical_name))
    return str(row["semantics"]) if row else ""


def aliases(canonical_name: str) -> list[str]:
    """Every name the signal has been emitted under, the canonical one first; ``[name]`` outside the contract."""
    canon = canonical(canonical_name)
    row = _tables()[0].get(canon)
    if row is None:
        return [canonical_name]
    out = [canon]
    for g in GENERATIONS:
        name = str(row[_col("name", g)]).strip()
        if name and name not in out:
            out.append(name)
    return out


def name_in(canonical_name: str, generation: str) -> str:
    """The name ``generation`` emits the signal under: its own cell, else the newest earlier generation's."""
    if generation not in GENERATIONS:
        raise InvalidParameter(f"exporter generation {generation!r}: use one of {', '.join(GENERATIONS)}")
    canon = canonical(canonical_name)
    row = _tables()[0].get(canon)
    if row is None:
        return canonical_name
    for g in reversed(GENERATIONS[: GENERATIONS.index(generation) + 1]):
        name = str(row[_col("name", g)]).strip()
        if name:
            return name
    return canon


def scale_in(canonical_name: str, generation: str) -> float:
    """The factor from the unit ``generation`` emits the signal in to the canonical unit (see :func:`name_in`)."""
    return scale(name_in(canonical_name, generation))


def generation_of(names: Iterable[str]) -> str:
    """Which exporter generation a set of emitted names (one node's) comes from: ``"<=4.8"`` when only <= 4.8
    names of renamed signals are present, ``">=4.9"`` when only renamed names are, ``"mixed"`` when both are,
    ``"unknown"`` when no renamed signal is present. 4.9 and 4.10 are told apart only where their names differ."""
    old = new = False
    table = _tables()[1]
    for n in names:
        hit = table.get(n)
        if hit is None:
            continue
        canon, _g, _s = hit
        if len(aliases(canon)) < 2:  # a signal never renamed says nothing about the generation
            continue
        if n == canon:
            old = True
        else:
            new = True
    if old and new:
        return "mixed"
    if old:
        return "<=4.8"
    if new:
        return ">=4.9"
    return "unknown"


def generations_from(label_sets: list[dict[str, str]]) -> dict[str, str]:
    """node -> :func:`generation_of` the label names of that node's series (``hostname`` or ``Hostname``): the
    driver-version label was renamed with the fields, so one series per node tells its generation."""
    keys: dict[str, set[str]] = {}
    for ls in label_sets:
        node = ls.get("hostname") or ls.get("Hostname") or ""
        if node:
            keys.setdefault(str(node), set()).update(ls)
    return {node: generation_of(k) for node, k in sorted(keys.items())}


def per_node(node_names: dict[str, set[str]], needed: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """node -> (its :func:`generation_of`, the ``needed`` canonical fields it serves under no name while another
    node serves them): what a fleet mid-upgrade looks like from the names each node emits."""
    have = {node: {canonical(n) for n in names} for node, names in node_names.items()}
    fleet = set().union(*have.values()) if have else set()
    return {
        node: (generation_of(node_names[node]), [f for f in needed if f in fleet and f not in have[node]])
        for node in sorted(have)
    }


def promql_any(field: str) -> str:
    """An instant-vector PromQL of ``field`` under every name it has had, in the canonical unit and without a metric
    name (so series of two names never collide in a later function or subquery); the plain name when it was never
    renamed. ``or`` keeps one series per label set, the <= 4.8 name first. Plain PromQL for rule files."""
    names = aliases(field)
    if len(names) == 1:
        return field
    terms = [n if scale(n) == 1.0 else f"{n} * {scale(n):.12g}" for n in names]
    return f"(({' or '.join(terms)}) + 0)"


def promql_names(field: str) -> str:
    """A selector of ``field``'s series under every name it has had: ``{__name__=~"OLD|NEW"}`` (names regex-escaped;
    plain PromQL, answered alike by Prometheus, Thanos, Mimir and VictoriaMetrics). The series keep their emitted
    name and unit: for label questions (``count by (modelName) (...)``), not values."""
    return "{__name__=~" + promql_string("|".join(re.escape(n) for n in aliases(field))) + "}"


def promql_each(template: str, field: str) -> str:
    """``template`` (``{m}`` for the metric, e.g. ``increase({m}[1h])``) over every name of ``field``, joined by
    ``or``; a renamed unit is scaled after the function, so use it with functions linear in the value."""
    names = aliases(field)
    if len(names) == 1:
        return template.format(m=field)
    terms = [template.format(m=n) if scale(n) == 1.0 else f"({template.format(m=n)}) * {scale(n):.12g}" for n in names]
    return f"({' or '.join(terms)})"


def to_canonical(name: str, value: float) -> tuple[str, float]:
    """(canonical name, value in the canonical unit) of one emitted sample."""
    s = scale(name)
    return canonical(name), (value * s if s != 1.0 and not math.isnan(value) else value)
