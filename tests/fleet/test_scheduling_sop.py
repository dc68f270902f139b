"""operator_install: no 'taint the GPU nodes' for nodes already tainted, and the GPU scheduling section is
never empty (it shows its findings or says what it checked)."""

from __future__ import annotations

from gpulib.demo.simulator import FleetSimulator
from gpulib.fleet.scheduling import non_gpu_pods_on_gpu_nodes
from gpulib.kube.frames import nodes_frame, pods_frame
from tests.helpers.pinned import DEMO_END


def _demo():
    sim = FleetSimulator(end=DEMO_END)
    return nodes_frame(sim.nodes_json()["items"]), pods_frame(sim.pods_json()["items"])


def test_tainted_gpu_nodes_are_not_told_to_taint():
    nodes, pods = _demo()
    assert all(nodes["taints"].map(bool))  # the demo's GPU nodes all carry nvidia.com/gpu=present:NoSchedule
    [f] = non_gpu_pods_on_gpu_nodes(nodes, pods)
    assert "Taint the GPU nodes" not in f.sop_step and "already carry nvidia.com/gpu=present:NoSchedule" in f.sop_step
    assert f.commands and all("tolerations" in c for c in f.commands)
    assert not any(c.startswith("kubectl taint") for c in f.commands)


def test_untainted_gpu_nodes_are_told_to_taint():
    nodes, pods = _demo()
    nodes = nodes.assign(taints=[[] for _ in range(len(nodes))])
    [f] = non_gpu_pods_on_gpu_nodes(nodes, pods)
    assert f.sop_step.startswith("Taint the GPU nodes") and "node untainted" in f.evidence[0]


def test_a_section_with_no_findings_says_why(monkeypatch):
    import gpulib.runbook as nb
    from gpulib.core.findings import Finding, Severity

    shown = []
    monkeypatch.setattr(nb, "_display", lambda obj=None, **kw: shown.append(kw.get("html_text") or obj))
    rb = nb.Runbook("operator_install", source="demo")
    shown.clear()
    rb.report([], empty="No scheduling problem: every GPU node is tainted.")
    assert len(shown) == 1 and "No scheduling problem" in str(shown[0])
    rb.report([Finding(Severity.WARNING, "pod x tolerates no GPU taint")], empty="unused")
    assert "pod x tolerates no GPU taint" in shown[1]._repr_html_() and len(rb.findings) == 1
