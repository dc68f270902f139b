"""A ``dcgmi diag`` result is one piece of evidence, not the verdict.

* DCGM reports pending row remaps from its deployment checks (DCGM 3.x ``Page Retirement/Row Remap`` under
  ``Deployment``; DCGM 4.x the ``software`` test): message ``DCGM_FR_PENDING_ROW_REMAP`` (error id 85) "GPU %u has
  uncorrectable memory errors and row remappings are pending" (NVIDIA/DCGM: dcgmlib/dcgm_errors.h @18b87c71, ids
  80 row remap failure, 83 DBE pending page retirements, 84 uncorrectable row remap, 85 pending row remap). That
  row says the memory owes a reset, not that the deployment is broken.
* ``dcgmi diag -r 2`` passes on a machine whose every NVLink is down (https://github.com/NVIDIA/DCGM/issues/198):
  a pass does not return the node to service while ``nvidia-smi nvlink -s`` shows every link inactive.
"""

from __future__ import annotations

import json

from gpulib.core.knowledge import data_path
from gpulib.nvidia import parse_dcgmi_diag, parse_nvlink_status
from gpulib.xid import diag_findings

NODE = "dgx-h100-1"
PENDING = "GPU 3 has uncorrectable memory errors and row remappings are pending"


def _json(results: dict[str, list[dict]]) -> str:
    cats = {"software": "Deployment", "memory": "Hardware", "pcie": "Integration", "diagnostic": "Hardware"}
    return json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {"category": cats[t], "tests": [{"name": t, "results": res}]} for t, res in results.items()
                ]
            }
        }
    )


def _gpu(i: int, status: str, warning: str = "", error_id: int | None = None) -> dict:
    r = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": status}
    if warning:
        r["warnings"] = [{"warning": warning, "error_id": error_id, "error_category": 10, "error_severity": 6}]
    return r


def test_dcgm4_deployment_row_with_pending_row_remaps_is_reset_and_rerun_not_deployment():
    diag = parse_dcgmi_diag(_json({"software": [_gpu(2, "Pass"), _gpu(3, "Fail", PENDING, 85)]}))
    fs = diag_findings(diag, NODE, "3")
    rules = [f.data["rule"] for f in fs]
    assert rules == ["DIAG_RESET_RERUN"], rules
    assert fs[0].gpu == "3" and any(PENDING in e for e in fs[0].evidence)


def test_dcgm3_text_deployment_row_with_pending_row_remaps_is_reset_and_rerun():
    """DCGM 3.x layout of tests/fixtures/dcgmi/r2_dcgm331_gpu1_pass_head.txt (go-dcgm#52) with the row failing."""
    text = (
        "+---------------------------+------------------------------------------------+\n"
        "| Diagnostic                | Result                                         |\n"
        "+===========================+================================================+\n"
        "|-----  Deployment  --------+------------------------------------------------|\n"
        "| Denylist                  | Pass                                           |\n"
        "| Page Retirement/Row Remap | Fail                                           |\n"
        "| Warning                   | GPU 3 has uncorrectable memory errors and row  |\n"
        "|                           |  remappings are pending                        |\n"
        "+---------------------------+------------------------------------------------+\n"
    )
    fs = diag_findings(parse_dcgmi_diag(text), NODE, "3")
    assert [f.data["rule"] for f in fs] == ["DIAG_RESET_RERUN"]


def test_dcgm4_text_software_row_with_pending_row_remaps_is_reset_and_rerun():
    """DCGM 4.x text layout of tests/fixtures/dcgmi/r3_dcgm423_per_gpu_head.txt (DCGM#253), the software row failing
    on GPU 3 with DCGM_FR_PENDING_ROW_REMAP's message."""
    text = (
        "|-----  Deployment  --------+------------------------------------------------|\n"
        "| software                  | Fail                                           |\n"
        "|                           | GPU2: Pass                                     |\n"
        "|                           | GPU3: Fail                                     |\n"
        "| Warning                   | GPU3: GPU 3 has uncorrectable memory errors an |\n"
        "|                           | d row remappings are pending                   |\n"
        "+-----  Hardware  ----------+------------------------------------------------+\n"
        "| memory                    | Skip                                           |\n"
    )
    fs = diag_findings(parse_dcgmi_diag(text), NODE, "3")
    assert fs[0].data["rule"] == "DIAG_RESET_RERUN", [f.data["rule"] for f in fs]


def test_nvlink_status_is_parsed_from_the_h200_capture():
    links = parse_nvlink_status(data_path("captures/2xh200_smi_nvlink_s.txt").read_text())
    assert len(links) == 36 and set(links["gpu"]) == {"0", "1"}
    assert links["up"].all() and (links["gb_s"] == 26.562).all()


def _all_down(gpus=(0, 1), n=18) -> str:
    # the form nvidia-smi nvlink -s prints for a link that is down: "Link 3: <inactive>"
    # (https://github.com/Azure/azhpc-diagnostics/issues/73)
    out = []
    for g in gpus:
        out.append(f"GPU {g}: NVIDIA H100 NVL (UUID: GPU-0000000{g}-0000-0000-0000-000000000000)")
        out += [f"\t Link {k}: <inactive>" for k in range(n)]
    return "\n".join(out) + "\n"


def _level2_pass() -> str:
    return _json({t: [_gpu(0, "Pass"), _gpu(1, "Pass")] for t in ("software", "memory", "pcie", "diagnostic")})


def test_a_pass_with_every_nvlink_down_is_not_a_return_to_service():
    nvlink = parse_nvlink_status(_all_down())
    assert len(nvlink) == 36 and not nvlink["up"].any()
    fs = diag_findings(parse_dcgmi_diag(_level2_pass()), NODE, "0", after_reset=True, nvlink=nvlink)
    rules = [f.data["rule"] for f in fs]
    assert "DIAG_RETURN_TO_SERVICE" not in rules and "DIAG_PASS" not in rules, rules
    assert rules == ["DIAG_PASS_NVLINK_DOWN"]
    f = fs[0]
    assert not any("uncordon" in c for c in f.commands)
    assert any("18 of 18 NVLinks" in e and "GPU 0" in e for e in f.evidence), f.evidence


def test_a_pass_with_its_links_up_still_returns_to_service():
    nvlink = parse_nvlink_status(data_path("captures/2xh200_smi_nvlink_s.txt").read_text())
    fs = diag_findings(parse_dcgmi_diag(_level2_pass()), NODE, "0", after_reset=True, nvlink=nvlink)
    assert [f.data["rule"] for f in fs] == ["DIAG_RETURN_TO_SERVICE"]


def test_a_pass_read_without_link_status_says_nvlink_was_not_checked():
    fs = diag_findings(parse_dcgmi_diag(_level2_pass()), NODE, "0")
    (f,) = fs
    assert f.data["rule"] == "DIAG_PASS"
    assert any("NVLink" in e and "DCGM/issues/198" in e for e in f.evidence), f.evidence


def test_the_triage_reads_the_nodes_nvlink_status_and_a_pass_with_every_link_down_is_not_healthy(tmp_path):
    """The NVLink-down check was not wired into the triage steps; a snapshot's
    ``nvidia-smi-nvlink-<node>.txt`` (``nvidia-smi nvlink -s``) now reaches it through xid_ecc_triage's steps."""
    import gpulib
    import gpulib.xid.steps as xs
    from tests.helpers.pinned import ROOT

    (tmp_path / f"dcgmi-diag-{NODE}.json").write_text(_level2_pass())
    smi = (ROOT / "tests" / "fixtures" / "smi" / "h100x2_incident_q.txt").read_text()
    (tmp_path / f"nvidia-smi-q-{NODE}.txt").write_text(smi)
    (tmp_path / f"nvidia-smi-nvlink-{NODE}.txt").write_text(_all_down())
    node = {"metadata": {"name": NODE, "labels": {}}, "status": {"capacity": {"nvidia.com/gpu": "2"}}}
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    src = gpulib.connect("snapshot", path=tmp_path, end="2026-12-01T06:00:00Z")
    fs = xs.findings(xs.collect(src, NODE, "0", "6h", after_reset=True))
    rules = [f.data.get("rule") for f in fs]
    assert "DIAG_PASS_NVLINK_DOWN" in rules and "DIAG_RETURN_TO_SERVICE" not in rules, [f.title for f in fs]
