"""On the demo incident every runbook gives the same verdict whatever dcgm-exporter generation served its fields:
under the <= 4.8 names, under 4.10's names and units, and on a fleet mid-upgrade (every other node on 4.10), through
the fast verdict (the runbook's steps headless). The demo writes each field as that generation's exporter does
(gpulib/demo/metrics.py ``emitted``: name and unit from gpulib/data/sources/signals.csv) and the source reads it back
as a scrape is read (gpulib/sources/dcgm.py ``canonical_scrape``).

node_health and gpu_reliability_report read the demo's node history, which carries no dcgm-exporter names: their
rows check that the generation changes nothing there either.
"""

from __future__ import annotations

import pytest

from gpulib.run.catalogue import RUNBOOKS
from gpulib.run.verdict import fast_verdict
from tests.helpers.pinned import DEMO_END

GENERATIONS = ("4.8", "4.10", "mixed")
PARAMS = {"fleet_overview": {"window": "1h"}, "gpu_utilization_report": {"window": "6h"}}


def verdict(runbook: str, exporter: str, monkeypatch):
    monkeypatch.setenv("GPUOPS_DEMO_EXPORTER", exporter)
    v = fast_verdict(runbook, {"source": "demo", **PARAMS.get(runbook, {})})
    # the preflight says which generation each node runs: that finding differs by design
    findings = [
        (f.severity.value, f.title, f.node, f.gpu, f.category, f.data.get("bucket"), f.data.get("rule"))
        for f in v.findings
        if f.category != "preflight"
    ]
    return {"worst": v.worst, "errors": v.errors, "usage": v.usage_errors, "findings": findings}


@pytest.fixture(autouse=True)
def _pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    for k in ("GPUOPS_FINDINGS_PATH", "KUBECONFIG"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("runbook", list(RUNBOOKS))
def test_the_verdict_is_the_same_under_4_8_names_4_10_names_and_a_mixed_fleet(runbook, monkeypatch):
    got = {g: verdict(runbook, g, monkeypatch) for g in GENERATIONS}
    assert not got["4.8"]["errors"] and got["4.8"]["findings"], got["4.8"]
    assert got["4.10"] == got["4.8"], runbook
    assert got["mixed"] == got["4.8"], runbook


def test_the_mixed_fleet_serves_both_generations_names():
    """The mixed demo is mid-upgrade: its preflight finds both generations, node by node."""
    from gpulib.demo.source import DemoSource

    src = DemoSource(end=DEMO_END, exporter="mixed")
    gens = set(src.preflight("1h").generations.values())
    assert gens == {"<=4.8", ">=4.9"}, gens
    assert set(DemoSource(end=DEMO_END, exporter="4.10").preflight("1h").generations.values()) == {">=4.9"}
    assert set(DemoSource(end=DEMO_END, exporter="4.8").preflight("1h").generations.values()) == {"<=4.8"}


def test_a_field_read_back_under_4_10_is_in_the_canonical_unit():
    """4.10 serves the SM clock in Hz and the framebuffer in bytes: read back, they are MHz and MiB as under 4.8."""
    from gpulib.demo.source import DemoSource

    old, new = DemoSource(end=DEMO_END, exporter="4.8"), DemoSource(end=DEMO_END, exporter="4.10")
    for field in ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL"):
        a = old.summary(field, "1h", "max", node="dgx-h100-1").set_index("gpu")["value"]
        b = new.summary(field, "1h", "max", node="dgx-h100-1").set_index("gpu")["value"]
        assert (a - b).abs().max() < 1e-6 * max(1.0, a.abs().max()), field
