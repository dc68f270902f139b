"""The NVLink-domain decision table (tests/decisions/nvlink_domains.csv): every planted case of the GB200/GB300
scenario (gpulib/data/demo/demo_gb200_rack.yaml) through gpulib.demo.gb200_rack.findings, the window end pinned to
tests/helpers/pinned.py DEMO_END. Expected values come from the reports cited in each row's ``scenario`` cell.

A row is checked against the findings about its target only (node, GPU, category): ``expected`` is the worst
severity among them (``none``: no finding worse than OK), ``root_cause`` that finding's ``category:data.verdict``
(domain findings) or ``category:data.fp_id`` (an agent's known false positive)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpulib.core.findings import Severity
from gpulib.demo import gb200_rack
from tests.helpers.pinned import DEMO_END

TABLE = pd.read_csv(Path(__file__).parents[1] / "decisions" / "nvlink_domains.csv", dtype=str).fillna("")
DISRUPTIVE = ("drain", "cordon", "nvidia-smi -r", "reset", "reboot", "rma", "replace")


def _split(cell: str) -> list[str]:
    return [c.strip() for c in cell.split(";;") if c.strip()]


@pytest.fixture(scope="module")
def findings():
    return gb200_rack.findings(DEMO_END)


def _about(f, row) -> bool:
    if row["category"] and f.category != row["category"]:
        return False
    if f.node == row["node"] and (f.gpu is None or not row["gpu"] or str(f.gpu) == row["gpu"]):
        return True
    return (row["node"], row["gpu"]) in {tuple(g) for g in f.data.get("gpus", [])}


def _key(f) -> str:
    return f"{f.category}:{f.data.get('fp_id') or f.data.get('verdict') or ''}"


@pytest.mark.parametrize("row", TABLE.to_dict("records"), ids=list(TABLE["id"]))
def test_decision(row, findings):
    mine = [f for f in findings if _about(f, row)]
    if row["expected"] == "none":
        assert all(f.severity == Severity.OK for f in mine), [f.title for f in mine]
        return
    assert mine, f"no finding about {row['node']} GPU {row['gpu']}"
    top = min(mine, key=lambda f: f.severity.rank)
    assert top.severity.value == row["expected"], top.title
    assert _key(top) == row["root_cause"]
    text = " ".join([top.title, top.summary, *top.evidence])
    for s in _split(row["must_text"]):
        assert s in text, (s, text)
    steps = " ".join(top.commands).lower()
    for s in _split(row["must_not_commands"]):
        assert s.lower() not in steps, (s, top.commands)


def test_false_positives_never_lead_to_drain_reset_or_rma(findings):
    fps = [f for f in findings if f.data.get("fp_id")]
    assert {f.data["fp_id"] for f in fps} == {
        "imex_idle_no_compute_domain",
        "imex_single_node_nvswitch",
        "nvlink_down_after_planned_reboot",
    }
    for f in fps:
        steps = " ".join([*f.commands, f.escalation, f.sop_step]).lower()
        assert not any(w in steps for w in DISRUPTIVE), (f.title, steps)
        assert f.severity == Severity.OK


def test_every_planted_case_has_its_row():
    sc = gb200_rack.scenario()
    planted = {n["name"] for n in sc["nodes"] if n.get("fabric") or n.get("conditions")}
    assert planted <= set(TABLE["node"])
