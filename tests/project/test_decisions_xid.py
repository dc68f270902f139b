"""The xid_ecc_triage decision table (tests/decisions/xid_triage.csv): every demo incident and healthy control,
the GPU given by index, by UUID and by MIG UUID, through the domain code on the demo source, through papermill
(``gpuops``'s notebook) and through a real Prometheus. Expected values come from the scenario (demo_fleet.yaml)
and NVIDIA's buckets, written in the table by hand."""

from pathlib import Path

import pandas as pd
import pytest

import gpulib
import gpulib.xid.steps as xs
from gpulib.core.errors import GpulibError
from gpulib.core.findings import Severity
from tests.helpers.pinned import DEMO_END, ROOT

TABLE = pd.read_csv(Path(__file__).parents[1] / "decisions" / "xid_triage.csv", dtype=str).fillna("")
ROWS = TABLE.to_dict("records")


def _split(cell: str) -> list[str]:
    return [c.strip() for c in cell.split(";;") if c.strip()]


def _check(row: dict, fs: list, expected: str, root: str) -> None:
    """The top finding is the row's decision, about the row's node and GPU; no finding names another GPU."""
    assert fs, row["id"]
    top = fs[0]
    assert top.severity is Severity(expected), (row["id"], top.severity, top.title)
    key = top.data.get("bucket") or top.data.get("rule") or ("ok" if top.severity is Severity.OK else top.category)
    assert key == root, (row["id"], key, top.title)
    for f in fs:  # a finding about another GPU or node cannot satisfy (or pollute) the row
        assert f.node == row["node"] and str(f.gpu) == row["gpu_index"], (row["id"], f.node, f.gpu, f.title)
    if row["sop_bucket"]:
        assert key == row["sop_bucket"]
    for c in _split(row["must_commands"]):
        assert any(c in x for x in top.commands), (row["id"], c, top.commands)
    for c in _split(row["must_not_commands"]):
        assert not any(c in x for x in top.commands), (row["id"], c, top.commands)


def _run_domain(src, row, expected, root):
    if expected == "usage":
        with pytest.raises(GpulibError) as exc:
            xs.collect(src, row["node"], row["gpu"], "6h")
        assert type(exc.value).__name__ == root
        assert row["node"] in str(exc.value) or "is not a GPU" in str(exc.value)
        return
    _check(row, xs.findings(xs.collect(src, row["node"], row["gpu"], "6h")), expected, root)


@pytest.fixture(scope="module")
def demo_src():
    return gpulib.connect("demo", end=DEMO_END)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_decision_on_demo_source(row, demo_src):
    _run_domain(demo_src, row, row["expected"], row["root_cause"])


def test_table_covers_every_demo_incident_and_gpu_reference_kind():
    import yaml

    scen = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
    incidents = {(n["name"], str(i["gpu"])) for n in scen["nodes"] for i in n.get("incidents", [])}
    covered = {(r["node"], r["gpu_index"]) for r in ROWS if r["expected"] != "usage"}
    assert incidents <= covered, incidents - covered
    for node, gpu in incidents:  # each incident GPU by index and by UUID
        kinds = {
            ("uuid" if r["gpu"].startswith("GPU-") else "index")
            for r in ROWS
            if (r["node"], r["gpu_index"]) == (node, gpu)
        }
        assert kinds == {"index", "uuid"}, (node, gpu)
    assert any(r["gpu"].startswith("MIG-") for r in ROWS)
    assert {r["expected"] for r in ROWS} >= {"ok", "critical", "info", "usage"}


PAPERMILL = [r for r in ROWS if r["papermill"] == "yes"]


@pytest.mark.parametrize("row", PAPERMILL, ids=[r["id"] for r in PAPERMILL])
def test_decision_through_the_notebook(row, shared_runs):
    doc, _ = shared_runs.notebook("xid_ecc_triage", source="demo", node=row["node"], gpu=row["gpu"])
    from gpulib.core.findings import Finding

    fs = [Finding.from_dict(d) for d in doc["findings"]]
    if row["expected"] == "usage":
        assert doc.get("usage_errors"), doc
        assert fs[0].category == "usage" and fs[0].severity is Severity.CRITICAL
        assert not [f for f in fs if f.severity is Severity.OK]
        return
    assert not doc.get("errors"), doc["errors"]
    _check(row, fs, row["expected"], row["root_cause"])


PROM = [r for r in ROWS if r["prometheus"] == "yes"]


@pytest.mark.prometheus
@pytest.mark.parametrize("row", PROM, ids=[r["id"] for r in PROM])
def test_decision_through_real_prometheus(row, live_env):
    expected = row["prom_expected"] or row["expected"]
    root = row["prom_root_cause"] or row["root_cause"]
    _run_domain(gpulib.connect("live"), row, expected, root)
