"""Kubelet's not-Healthy devices (KEP-4680 allocatedResourcesStatus) in the XID/ECC triage and node_health: evidence on
the finding about the same GPU (one fault, one finding), a finding of its own when nothing else fired (never OK),
and the pod named in Impact. Inputs are the demo fleet's h100-dra-0 (demo_fleet.yaml device_health) and
hand-written pods on a device-plugin node."""

from __future__ import annotations

import pandas as pd
import pytest

import gpulib
from gpulib.core.findings import Finding, Severity
from gpulib.kube.frames import pods_frame
from gpulib.xid.pod_health import with_device_health
from gpulib.xid.sops import pod_impact

UUID = "GPU-11111111-2222-3333-4444-555555555555"
IDS = pd.DataFrame({"gpu": ["0", "1"], "uuid": [UUID, "GPU-other"], "pci_bus_id": ["00000000:18:00.0", "X"]})


def _pods(health="Unhealthy", message="NVML: XID 48"):
    entry = {"resourceID": UUID, "health": health, **({"message": message} if message else {})}
    return pods_frame(
        {
            "items": [
                {
                    "metadata": {"name": "train-0", "namespace": "ml"},
                    "spec": {
                        "nodeName": "n1",
                        "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                    },
                    "status": {
                        "phase": "Running",
                        "containerStatuses": [
                            {
                                "name": "main",
                                "allocatedResourcesStatus": [{"name": "nvidia.com/gpu", "resources": [entry]}],
                            }
                        ],
                    },
                }
            ]
        }
    )


def test_an_unhealthy_device_alone_is_a_critical_finding_naming_the_pod():
    fs = with_device_health([], "n1", None, _pods(), IDS)
    assert len(fs) == 1
    f = fs[0]
    assert f.severity is Severity.CRITICAL and f.gpu == "0" and f.data["rule"] == "POD_DEVICE_UNHEALTHY"
    assert f.evidence[0].endswith("device " + UUID + " Unhealthy: NVML: XID 48")
    assert any("kubectl -n ml describe pod train-0" in c for c in f.commands)
    assert f.data["pods"][0]["pod"] == "train-0"


def test_unknown_is_a_warning_and_healthy_is_nothing():
    assert with_device_health([], "n1", None, _pods("Unknown", ""), IDS)[0].severity is Severity.WARNING
    assert with_device_health([], "n1", None, _pods("Healthy"), IDS) == []
    assert with_device_health([], "n1", "1", _pods(), IDS) == []  # another GPU asked for


def test_the_same_gpus_fault_is_one_finding_with_kubelets_word_as_evidence():
    xid = Finding(Severity.CRITICAL, "XID 48 on n1 GPU 0", node="n1", gpu="0", data={"bucket": "RESET_GPU"})
    fs = with_device_health([xid], "n1", "0", _pods(), IDS)
    assert len(fs) == 1 and fs[0].data["bucket"] == "RESET_GPU"
    assert any(e.startswith("kubelet: pod ml/train-0") for e in fs[0].evidence)


def test_impact_shows_the_device_health_of_a_device_plugin_pod():
    hit = pod_impact("n1", "0", pods=_pods(), uuid=UUID)
    assert list(hit["pod"]) == ["train-0"]
    assert hit["device_health"].iloc[0] == "Unhealthy: NVML: XID 48 (kubelet, nvidia.com/gpu)"


@pytest.fixture(scope="module")
def demo():
    from tests.helpers.pinned import DEMO_END

    return gpulib.connect("demo", end=DEMO_END)


def test_demo_gpu_unhealthy_in_pod_status_only_is_never_ok(demo):
    """demo_fleet.yaml h100-dra-0 GPU 2: Unhealthy in its pod's status, no XID, ECC or thermal signal."""
    import gpulib.xid.steps as xs

    fs = xs.findings(xs.collect(demo, "h100-dra-0", "2", "6h"))
    assert fs[0].severity is Severity.CRITICAL and fs[0].data["rule"] == "POD_DEVICE_UNHEALTHY"
    assert fs[0].data["pods"][0]["pod"] == "dra-embed-7b9c4d6f8-k2m4p"
    assert not any(f.severity is Severity.OK for f in fs)


def test_node_health_timeline_and_finding(demo):
    import gpulib.reliability.steps as rs

    inp = rs.read_history(demo, "h100-dra-0", "24h")
    tl = rs.timeline(inp)
    rows = tl[tl["signal"] == "pod_device_health"]
    assert list(rows["gpu"]) == ["1", "2"] and set(rows["lane"]) == {"Pod device health"}
    assert "search/dra-embed-7b9c4d6f8-k2m4p" in rows["detail"].iloc[1]
    rs.verdicts(inp)
    mine = [f for f in rs.findings(inp) if f.gpu == "2"]
    assert [f.data["verdict"] for f in mine] == ["pod_device_health"] and mine[0].severity is Severity.CRITICAL
    assert mine[0].commands == ["gpuops run xid_ecc_triage -p node h100-dra-0 -p gpu 2"]
