"""node_health shows thermal like xid_ecc_triage and fleet_overview the node's GPU temperature and power
over the window, drawn by the triage's chart, with the GPUs at or above the warn temperature named. The demo's
h200-infer-0 GPU 2 runs at 91 °C (gpulib/data/demo/demo_fleet.yaml), above thresholds.csv gpu_temp_crit_c 89."""

from __future__ import annotations

import pytest

import gpulib
import gpulib.reliability.steps as S
from gpulib.core.runbook import Context
from gpulib.reliability.view import thermal_note


@pytest.fixture(scope="module")
def src(demo_end):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", demo_end.isoformat())
        yield gpulib.connect("demo")


def test_node_health_has_a_thermal_step_after_the_timeline():
    titles = [s.title for s in S.RUNBOOK.steps]
    assert titles.index("Temperature and power") == titles.index("Timeline") + 1


def test_the_hot_gpu_of_the_default_node_is_named_with_its_temperature(src):
    c = Context({"src": src, "node": "h200-infer-0", "window": "7d"})
    S.gather_thermal(c)
    assert set(c.thermal) == {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}
    level, text = thermal_note(c.thermal)
    assert level == "error" and "GPU 2" in text and "91 °C" in text and "89 °C" in text


def test_a_cool_node_says_so(src):
    c = Context({"src": src, "node": "a100-80-1", "window": "7d"})
    S.gather_thermal(c)
    level, text = thermal_note(c.thermal)
    assert level == "ok" and "below the warn temperature (85 °C)" in text


def test_a_node_without_temperature_series_is_not_an_error():
    assert thermal_note({})[0] == "info"
