"""The live source against a real Prometheus whose fleet is mid-upgrade: some nodes' dcgm-exporter emits the 4.10
names and units (gpulib/data/sources/signals.csv), the others the <= 4.8 ones. One query per need answers both, in
the canonical names and units: the same numbers as the demo source."""

from __future__ import annotations

import numpy as np
import pytest

from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.prometheus import PrometheusSource
from tests.helpers.pinned import DEMO_END, SCRAPE
from tests.helpers.pinned import need_prometheus as _need_prometheus
from tests.helpers.promharness import PrometheusServer, backfill

NEW_NODES = ("dgx-h100-1", "h200-infer-0")
KEYS = ["node", "gpu", "gpu_i_id"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    _need_prometheus()
    work = tmp_path_factory.mktemp("prom-mixed-exporters")
    sim = FleetSimulator(
        end=DEMO_END, scrape_interval=SCRAPE, exporter="4.8", exporter_nodes=dict.fromkeys(NEW_NODES, "4.10")
    )
    server = PrometheusServer(backfill(sim, "1h", work), work)
    yield PrometheusSource(server.url, end=DEMO_END)
    server.stop()


@pytest.mark.prometheus
def test_the_backfill_really_holds_both_generations(mixed):
    names = {
        r["metric"]["__name__"] for r in mixed.query('count by (__name__) ({__name__=~"DCGM_FI_DEV_XID_ERRORS?"})')
    }
    assert names == {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"}


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "field", ["DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
)
@pytest.mark.parametrize("stat", ["last", "max", "avg"])
def test_a_mixed_fleet_reads_the_same_as_the_demo(mixed, demo_pinned, field, stat):
    a = demo_pinned.summary(field, "30m", stat).set_index(KEYS)["value"].sort_index()
    b = mixed.summary(field, "30m", stat).set_index(KEYS)["value"].sort_index()
    assert set(NEW_NODES) <= set(b.index.get_level_values("node"))
    assert list(a.index) == list(b.index)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.prometheus
def test_the_xid_79_gpu_and_its_temperature_on_a_4_10_node(mixed, demo_pinned):
    xid = mixed.summary("DCGM_FI_DEV_XID_ERRORS", "1h", "last", node="dgx-h100-1", gpu="5")
    assert xid["value"].tolist() == [79.0]
    temp = mixed.series("DCGM_FI_DEV_GPU_TEMP", "30m", node="dgx-h100-1", gpu="0", step="60s")
    ref = demo_pinned.series("DCGM_FI_DEV_GPU_TEMP", "30m", node="dgx-h100-1", gpu="0", step="60s")
    assert len(temp) == len(ref) > 20
    np.testing.assert_allclose(temp["value"].to_numpy(), ref["value"].to_numpy(), rtol=1e-6)
    caps = mixed.preflight("1h")
    assert caps.has("DCGM_FI_DEV_XID_ERRORS") and caps.generations["dgx-h100-1"] == ">=4.9"
    assert caps.generations["a100-80-0"] == "<=4.8"
    (gen,) = [f for f in caps.findings if f.title.startswith("dcgm-exporter field names per node")]
    assert "dgx-h100-1: >=4.9" in gen.evidence and "h200-infer-0: >=4.9" in gen.evidence
