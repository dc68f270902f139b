"""The Fabric block of ``nvidia-smi -q`` and the DCGM fabric fields as a per-GPU fabric verdict.

Inputs: Fabric blocks published from GB200 machines (tests/fixtures/fabric/README.md names each report),
the real H200 captures of gpulib/data/captures (an HGX board, not a multi-node NVLink domain member), and the
NVML/DCGM encodings of NVIDIA/DCGM: sdk/nvidia/nvml/dcgm_nvml.h @72fa3feaa67d716a75323a8f47c34ff3ee73f824
(NVML_GPU_FABRIC_HEALTH_MASK_* shifts and widths) and dcgmlib/dcgm_fields.h at the same commit (fields 170-175).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.core.knowledge import data_path
from gpulib.nvidia import fabric
from gpulib.nvidia.smi import parse_query

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"


def _row(name: str):
    df = parse_query((FIX / name).read_text())
    assert len(df) == 1
    return df.iloc[0]


def test_completed_success_but_health_unhealthy_is_not_fine():
    # kubernetes-sigs/dra-driver-nvidia-gpu#626: State Completed, Status Success, Summary Unhealthy
    row = _row("gb200_completed_unhealthy.txt")
    assert row["fabric_state"] == "Completed"
    assert row["fabric_status"] == "Success"
    assert row["fabric_clique_id"] == "2"
    assert row["fabric_cluster_uuid"] == "dc6e40c4-d722-4357-9ba6-5291dd461278"
    assert row["fabric_health_summary"] == "Unhealthy"
    assert row["fabric_health"] == {"Bandwidth": "Full"}
    v = fabric.verdict(row)
    assert v.verdict == "unhealthy"
    assert v.severity == "critical"
    assert "Health Summary Unhealthy" in "; ".join(v.reasons)


def test_join_failed_insufficient_resources_is_not_joined():
    # Azure/azhpc-images#506: Completed / Insufficient Resources / CliqueId 0 / zero ClusterUUID
    row = _row("gb200_insufficient_resources.txt")
    assert row["fabric_status"] == "Insufficient Resources"
    assert row["fabric_clique_id"] == "0"
    v = fabric.verdict(row)
    assert v.verdict == "not_joined"
    assert v.severity == "critical"
    text = "; ".join(v.reasons)
    assert "Status Insufficient Resources" in text and "CliqueId 0" in text and "ClusterUUID all zeros" in text


def test_joined_with_health_not_supported_is_joined_not_a_fault():
    # leptonai/gpud#1106: an older GB200 driver joins (Completed/Success, clique 4026) and reports no health parts
    v = fabric.verdict(_row("gb200_summary_not_supported.txt"))
    assert v.verdict == "joined"
    assert v.severity == "ok"
    assert any("health not reported" in r for r in v.reasons)


def test_real_h200_all_na_is_not_an_nvlink_domain_member():
    # real capture, one H200: every Fabric field prints N/A
    df = parse_query(Path(data_path("captures/h200_580.159.04_smi_q.txt")).read_text())
    assert len(df) == 1
    row = df.iloc[0]
    assert row["fabric_state"] is None and row["fabric_reported"]
    v = fabric.verdict(row)
    assert (v.verdict, v.severity) == ("not_applicable", "ok")


def test_real_2xh200_completed_clique_0_only_looks_odd():
    # real capture, 2x H200 with NVLink: State Completed, Status Success, CliqueId 0, zero ClusterUUID, health N/A.
    # An HGX board is no multi-node domain member: this reading is no fault (it would be one on GB200).
    df = parse_query(Path(data_path("captures/2xh200_580.159.04_smi_q.txt")).read_text())
    assert len(df) == 2
    for _, row in df.iterrows():
        assert (row["fabric_state"], row["fabric_status"], row["fabric_clique_id"]) == ("Completed", "Success", "0")
        v = fabric.verdict(row)
        assert (v.verdict, v.severity) == ("not_applicable", "ok")
        # the same reading on a GB200 (or a node labelled with a clique) is a failed join
        assert fabric.verdict({**row.to_dict(), "name": "NVIDIA GB200"}).verdict == "not_joined"
        assert fabric.verdict(row, expect_domain=True).verdict == "not_joined"


@pytest.mark.parametrize(
    ("state", "status", "verdict", "severity"),
    [
        ("In Progress", None, "not_joined", "warning"),
        ("Not Started", None, "not_joined", "warning"),
        ("Not Supported", None, "not_applicable", "ok"),
    ],
)
def test_state_only_rows(state, status, verdict, severity):
    v = fabric.verdict({"fabric_state": state, "fabric_status": status})
    assert (v.verdict, v.severity) == (verdict, severity)


def test_health_parts_degrade_or_fail():
    base = {
        "fabric_state": "Completed",
        "fabric_status": "Success",
        "fabric_clique_id": "7",
        "fabric_cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
        "fabric_health_summary": "Healthy",
    }
    assert (
        fabric.verdict({**base, "fabric_health": {"Bandwidth": "Full", "Route Unhealthy": "False"}}).verdict == "joined"
    )
    v = fabric.verdict({**base, "fabric_health": {"Bandwidth": "Degraded"}})
    assert (v.verdict, v.severity) == ("degraded", "warning")
    v = fabric.verdict({**base, "fabric_health": {"Route Recovery in progress": "True"}})
    assert v.verdict == "degraded"
    v = fabric.verdict({**base, "fabric_health": {"Route Unhealthy": "True"}})
    assert (v.verdict, v.severity) == ("unhealthy", "critical")
    v = fabric.verdict({**base, "fabric_health": {"Incorrect Configuration": "Insufficient Nvlinks"}})
    assert v.verdict == "unhealthy"
    v = fabric.verdict({**base, "fabric_health_summary": "Limited Capacity"})
    assert (v.verdict, v.severity) == ("degraded", "warning")


def test_every_verdict_has_sop_and_source():
    for name in ("joined", "degraded", "not_joined", "unhealthy", "not_applicable", "unknown"):
        v = fabric.verdict_row(name)
        assert v["sop"] and v["source"].strip()


def test_dcgm_mask_decodes_like_nvml_macros():
    # NVML_GPU_FABRIC_HEALTH_GET(mask, _X) = (mask >> SHIFT_X) & WIDTH_X; DEGRADED_BW TRUE=1 FALSE=2 at shift 0,
    # ROUTE_RECOVERY at 2, ROUTE_UNHEALTHY at 4, ACCESS_TIMEOUT_RECOVERY at 6, INCORRECT_CONFIGURATION (4 bits) at 8
    healthy = 2 | (2 << 2) | (2 << 4) | (2 << 6) | (1 << 8)
    assert fabric.decode_health_mask(healthy) == {
        "Bandwidth": "Full",
        "Route Recovery in progress": "False",
        "Route Unhealthy": "False",
        "Access Timeout Recovery": "False",
        "Incorrect Configuration": "None",
    }
    bad = 1 | (2 << 2) | (1 << 4) | (2 << 6) | (5 << 8)
    parts = fabric.decode_health_mask(bad)
    assert parts["Bandwidth"] == "Degraded"
    assert parts["Route Unhealthy"] == "True"
    assert parts["Incorrect Configuration"] == "Insufficient Nvlinks"
    assert fabric.decode_health_mask(0) == {}  # every part NOT_SUPPORTED


def test_dcgm_fields_give_the_same_verdict():
    # DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY 2 = unhealthy (dcgm_fields.h field 175)
    row = fabric.from_dcgm(
        {
            "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": 2,
            "DCGM_FI_DEV_FABRIC_HEALTH_MASK": 2,
            "DCGM_FI_DEV_FABRIC_CLIQUE_ID": 2,
            "DCGM_FI_DEV_FABRIC_CLUSTER_UUID": "dc6e40c4-d722-4357-9ba6-5291dd461278",
            "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": 3,
        }
    )
    assert fabric.verdict(row).verdict == "unhealthy"
    row = fabric.from_dcgm({"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": 3})
    assert fabric.verdict(row).verdict == "degraded"
    row = fabric.from_dcgm({"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": 0, "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": 0})
    assert fabric.verdict(row).verdict == "not_applicable"
    row = fabric.from_dcgm({"DCGM_FI_DEV_FABRIC_MANAGER_STATUS": 4})  # DcgmFMStatusFailure
    assert fabric.verdict(row).verdict == "not_joined"
    assert fabric.verdict(fabric.from_dcgm({})).verdict == "unknown"


def test_clique_label_round_trip():
    # GFD: nvidia.com/gpu.clique = <ClusterUUID>.<CliqueId> (NVIDIA/k8s-dra-driver-gpu: docs/install.md @22407113)
    assert fabric.clique_label("dc6e40c4-d722-4357-9ba6-5291dd461278", "2") == "dc6e40c4-d722-4357-9ba6-5291dd461278.2"
    assert fabric.parse_clique_label("a1b2c3d4-e5f6-7890-abcd-ef1234567890.0") == (
        "a1b2c3d4-e5f6-7890-abcd-ef1234567890",
        "0",
    )
    assert fabric.parse_clique_label("") is None
    assert fabric.parse_clique_label("not a clique") is None


def test_label_that_disagrees_with_the_gpu_is_reported():
    row = {
        "fabric_state": "Completed",
        "fabric_status": "Success",
        "fabric_clique_id": "2",
        "fabric_cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
        "fabric_health_summary": "Healthy",
    }
    v = fabric.verdict(row, clique_label="dc6e40c4-d722-4357-9ba6-5291dd461278.3")
    assert v.verdict == "degraded"
    assert any("nvidia.com/gpu.clique" in r for r in v.reasons)


def test_incorrect_configuration_none_is_the_healthy_value():
    # NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE 1 = correct configuration, printed "None"
    row = {
        "fabric_state": "Completed",
        "fabric_status": "Success",
        "fabric_clique_id": "1",
        "fabric_cluster_uuid": "5d4c1d36-0e6f-4b7a-9f3e-2a1b7c9d8e01",
        "fabric_health_summary": "Healthy",
        "fabric_health": {"Incorrect Configuration": "None", "Route Unhealthy": "False", "Bandwidth": "Full"},
    }
    assert fabric.verdict(row).verdict == "joined"


def test_real_h200_fabric_capture_text_and_xml_agree():
    # gpulib/data/captures/README.md h200fab_: one H200, 580.159.04, nvidia-smi -q and -q -x of the same moment
    import xml.etree.ElementTree as ET

    df = parse_query(Path(data_path("captures/h200fab_smi_q.txt")).read_text())
    assert list(df["uuid"]) == ["GPU-010c7a21-c854-c35a-39a6-c7c100c706f2"]
    row = df.iloc[0]
    assert row["fabric_reported"] and row["fabric_state"] is None and row["fabric_health"] is None
    assert fabric.verdict(row).verdict == "not_applicable"
    fab = ET.parse(data_path("captures/h200fab_smi_q_x.xml")).getroot().find("gpu/fabric")
    assert {e.tag: e.text for e in fab.iter() if len(e) == 0} == {
        "state": "N/A",
        "status": "N/A",
        "cliqueId": "N/A",
        "clusterUuid": "N/A",
        "summary": "N/A",
        "bandwidth": "N/A",
        "route_recovery_in_progress": "N/A",
        "route_unhealthy": "N/A",
        "access_timeout_recovery": "N/A",
        "incorrect_configuration": "N/A",
        "partition_assigned": "N/A",
    }
