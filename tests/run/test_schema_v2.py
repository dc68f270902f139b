"""findings.json version 2 against its published JSON Schema (docs/schema/findings.v2.schema.json).

Every notebook's findings.json of the shared ``gpuops demo`` run (tests/helpers/shared_runs.py) and every fast
verdict beside it validate; a hand-made verdict that lacks a required field, or calls an incomplete run PASS, does
not. Version-1 readers (:func:`gpulib.run.record.verdict_of` over :func:`gpulib.core.findings.load_findings`) read a
version-2 document as they read version 1, and :func:`gpulib.core.verdict_doc.upgrade` reads an old version-1 run
folder as version 2. The validator is ``jsonschema`` (https://python-jsonschema.readthedocs.io/en/stable/validate/).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pandas as pd

from gpulib.catalogue import catalogue
from gpulib.core.findings import Finding, Severity, load_findings, save_findings
from gpulib.core.verdict_doc import CHAIN, actions_of, upgrade
from gpulib.run.record import verdict_of

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "schema" / "findings.v2.schema.json").read_text())
EXAMPLES = ROOT / "docs" / "schema" / "examples"


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def _errors(doc: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(doc)]


def _xid79(tmp_path: Path, **kw) -> dict:
    f = Finding(
        Severity.CRITICAL,
        "XID 79 on gpu-node-1 GPU 3: hardware (RESET_GPU)",
        node="gpu-node-1",
        gpu="3",
        commands=["kubectl cordon gpu-node-1"],
        evidence=["XID 79 (GPU has fallen off the bus) at 10:02"],
        data={
            "bucket": "RESET_GPU",
            "uuid": "GPU-1f6c1e64-58b5-4f2a-9f41-1c9e2f0b7d11",
            "pci_bus_id": "00000000:19:00.0",
            "pods": [{"namespace": "ml", "pod": "train-0"}],
        },
    )
    path = save_findings([f], tmp_path / "findings.json", runbook="xid_ecc_triage", inputs=["xid_events"], **kw)
    return json.loads(path.read_text())


def test_every_runbook_output_of_the_demo_validates(shared_runs):
    """Each notebook of ``gpuops demo`` (runbooks, reports, lessons that write findings) and each fast verdict."""
    demo = shared_runs.demo()
    docs = sorted(demo.out.glob("*/findings.json")) + sorted(demo.out.glob("*/verdict.json"))
    ran = {p.parent.name.split("-")[0] for p in docs} | {json.loads(p.read_text())["runbook"] for p in docs}
    runbooks = {n for n, info in catalogue().items() if info.kind == "runbook"}
    assert runbooks and runbooks <= ran, f"runbooks without a findings.json: {sorted(runbooks - ran)}"
    bad = {str(p.relative_to(demo.out)): _errors(json.loads(p.read_text())) for p in docs}
    assert not {k: v for k, v in bad.items() if v}, bad


def test_a_verdict_missing_a_required_field_fails(tmp_path):
    doc = _xid79(tmp_path)
    assert _errors(doc) == []
    for path in (("verdict",), ("verdict", "severity"), ("verdict", "evidence", "inputs"), ("findings", 0, "entities")):
        broken = copy.deepcopy(doc)
        parent = broken
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        assert _errors(broken), f"a document without {path} validated"
    wrong = copy.deepcopy(doc)
    wrong["verdict"]["actions"] = ["reboot"]  # not Health Validation's vocabulary
    assert _errors(wrong)


def test_incomplete_run_is_unknown_never_pass(tmp_path):
    doc = _xid79(tmp_path, errors=["DCGM: no data for DCGM_FI_DEV_XID_ERRORS"])
    assert doc["status"] == "incomplete" and doc["verdict"]["severity"] == "UNKNOWN"
    assert doc["verdict"]["nvsentinel_action"] == "UNKNOWN" and doc["verdict"]["actions"] == []
    assert _errors(doc) == []
    lied = copy.deepcopy(doc)
    lied["verdict"]["severity"] = "PASS"
    assert _errors(lied), "an incomplete run called PASS validated"
    empty = json.loads(save_findings([], tmp_path / "ok.json", runbook="fleet_health").read_text())
    assert empty["verdict"]["severity"] == "PASS" and _errors(empty) == []


def test_xid79_verdict_names_entities_chain_and_nvsentinel_action(tmp_path):
    v = _xid79(tmp_path)["verdict"]
    assert v["severity"] == "CRITICAL"
    assert v["actions"] == ["drain", "reset_gpu", "restart_os", "service_required"]
    assert v["nvsentinel_action"] == "COMPONENT_RESET"
    kinds = {e["type"]: e["value"] for e in v["entities"]}
    assert kinds == {
        "node": "gpu-node-1",
        "gpu": "3",
        "gpu_uuid": "GPU-1f6c1e64-58b5-4f2a-9f41-1c9e2f0b7d11",
        "pci_bus_id": "00000000:19:00.0",
        "pod": "ml/train-0",
    }
    assert v["evidence"]["inputs"] == ["xid_events"] and v["evidence"]["facts"]


def test_mig_instance_entity(tmp_path):
    f = Finding(
        Severity.WARNING, "MIG slice idle", node="n", gpu="0", data={"gpu_i_id": "2", "gpu_i_profile": "1g.18gb"}
    )
    doc = json.loads(save_findings([f], tmp_path / "f.json", runbook="mig_sizing").read_text())
    assert {"type": "mig_instance", "value": "1g.18gb/2"} in doc["verdict"]["entities"] and not _errors(doc)


def test_every_critical_sop_bucket_has_an_action_row():
    """A critical XID bucket or rule must not fall to the no-action default (gpulib/data/core/verdict_actions.csv)."""
    sops = pd.read_csv(ROOT / "gpulib" / "data" / "xid" / "xid_sop.csv")
    table = pd.read_csv(ROOT / "gpulib" / "data" / "core" / "verdict_actions.csv").fillna("")
    rows = set(table["key"])
    critical = set(sops.loc[sops["severity"] == "critical", "key"])
    assert critical <= rows, sorted(critical - rows)
    for key in critical:
        chain, _ = actions_of({"data": {"rule": key}})
        assert chain and chain[0] == "drain", (key, chain)
    for chain in table["actions"]:
        steps = [s for s in chain.split(";") if s]
        assert steps == [s for s in CHAIN if s in steps], chain


def test_version_1_readers_keep_working(tmp_path):
    """A reader of version 1 gets the same verdict from a version-2 file; an old version-1 file upgrades."""
    doc2 = _xid79(tmp_path)
    v1 = {k: doc2[k] for k in ("runbook", "parameters", "worst", "errors", "inputs")}
    v1["schema"] = 1
    v1["findings"] = [
        {k: v for k, v in f.items() if k not in ("entities", "actions", "nvsentinel_action")} for f in doc2["findings"]
    ]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(v1))
    assert verdict_of(*load_findings(tmp_path / "findings.json")) == verdict_of(*load_findings(old))
    up = upgrade(v1)
    assert _errors(up) == [] and up["verdict"] == doc2["verdict"]


def test_docs_show_one_verdict_in_each_shape():
    shapes = {}
    for p in sorted(EXAMPLES.glob("*.json")):
        doc = json.loads(p.read_text())
        assert _errors(doc) == [], (p.name, _errors(doc))
        shapes[doc["verdict"]["severity"]] = p.name
    assert set(shapes) == {"PASS", "INFO", "WARNING", "CRITICAL", "UNKNOWN"}, shapes
    page = (ROOT / "docs" / "verdict-schema.md").read_text()
    assert all(name in page for name in shapes.values())
