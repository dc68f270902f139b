"""The NVLink domain (clique) as a unit: nodes grouped by GFD's nvidia.com/gpu.clique label, the worst per-GPU
fabric verdict of the domain, and one finding per domain that is not wholly joined and healthy."""

from __future__ import annotations

from pathlib import Path

from gpulib.fleet import cliques
from gpulib.kube.frames import nodes_frame
from gpulib.nvidia.smi import parse_query

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
CLIQUE = "dc6e40c4-d722-4357-9ba6-5291dd461278.2"


def _node(name, clique=None, gpus=4):
    labels = {"nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.product": "NVIDIA-GB200"}
    if clique:
        labels["nvidia.com/gpu.clique"] = clique
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _healthy_gb200(n: int) -> str:
    # the Fabric block of the published unhealthy GPU with its summary healthy (same layout)
    block = (FIX / "gb200_completed_unhealthy.txt").read_text().replace("Unhealthy", "Healthy")
    head, gpu = block.split("GPU 00000008:01:00.0\n")
    head = head.replace("Attached GPUs                                          : 1", f"Attached GPUs : {n}")
    return head + "".join(f"GPU 00000008:0{i + 1}:00.0\n{gpu}" for i in range(n))


def test_a_rack_with_one_unhealthy_gpu_is_a_critical_domain_finding():
    nodes = nodes_frame(
        {"kind": "NodeList", "items": [_node("gb200-0", CLIQUE), _node("gb200-1", CLIQUE), _node("h200-0", None, 8)]}
    )
    unhealthy_node = parse_query(
        _healthy_gb200(3)
        + (FIX / "gb200_completed_unhealthy.txt")
        .read_text()
        .split("Attached GPUs                                          : 1\n")[1]
    )
    smi = {"gb200-0": parse_query(_healthy_gb200(4)), "gb200-1": unhealthy_node}
    rows = cliques.fabric_verdicts(smi, nodes)
    assert list(rows[rows["node"] == "gb200-1"]["verdict"]) == ["joined", "joined", "joined", "unhealthy"]
    units = cliques.clique_units(nodes, rows)
    assert len(units) == 1  # the H200 node has no clique label: no domain member
    u = units.iloc[0]
    assert (u["node_count"], u["gpus"], u["joined"], u["unhealthy"], u["verdict"]) == (2, 8, 7, 1, "unhealthy")
    (f,) = cliques.clique_findings(units, rows)
    assert f.severity.value == "critical" and f.category == "nvlink_domain"
    assert "1 unhealthy of 8 GPUs on 2 nodes" in f.title
    assert any(e.startswith("gb200-1 GPU 3: unhealthy (Health Summary Unhealthy") for e in f.evidence)


def test_a_wholly_joined_rack_has_no_finding_and_an_unread_one_is_not_ok():
    nodes = nodes_frame({"kind": "NodeList", "items": [_node("gb200-0", CLIQUE)]})
    rows = cliques.fabric_verdicts({"gb200-0": parse_query(_healthy_gb200(4))}, nodes)
    units = cliques.clique_units(nodes, rows)
    assert units.iloc[0]["verdict"] == "joined" and cliques.clique_findings(units, rows) == []
    unread = cliques.clique_units(nodes, None)
    assert unread.iloc[0]["verdict"] == "unknown" and unread.iloc[0]["unread"] == 4
    (f,) = cliques.clique_findings(unread)
    assert f.severity.value == "info"


def test_gpu_in_another_clique_than_its_node_label_is_degraded():
    nodes = nodes_frame({"kind": "NodeList", "items": [_node("gb200-0", "dc6e40c4-d722-4357-9ba6-5291dd461278.9")]})
    rows = cliques.fabric_verdicts({"gb200-0": parse_query(_healthy_gb200(1))}, nodes)
    assert rows.iloc[0]["verdict"] == "degraded"


def test_fleet_overview_reads_the_labelled_nodes_fabric_and_reports_the_domain():
    import pandas as pd

    from gpulib.fleet import steps

    nodes = nodes_frame({"kind": "NodeList", "items": [_node("gb200-0", CLIQUE), _node("h200-0", None, 8)]})
    asked = []

    class Src:
        def smi_query(self, node):
            asked.append(node)
            return (FIX / "gb200_completed_unhealthy.txt").read_text()

    fab = steps.fabric_inputs(Src(), nodes)
    assert asked == ["gb200-0"]  # only the clique members are read
    inp = steps.FleetInputs("6h", scheduling=steps.SchedulingInputs(nodes, pd.DataFrame(columns=["node"])), fabric=fab)
    fs = [f for f in steps.findings(inp) if f.category == "nvlink_domain"]
    assert len(fs) == 1 and fs[0].severity.value == "critical"
    assert steps.fabric_inputs(Src(), nodes_frame({"kind": "NodeList", "items": [_node("h200-0")]})) is None
