"""The demo emits a chosen dcgm-exporter generation's names and units (gpulib/data/sources/signals.csv)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.dcgm import parse_scrape

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def _scrape(exporter: str):
    return parse_scrape(FleetSimulator(end=END, exporter=exporter).scrape_text(node="dgx-h100-1"))


def test_the_4_10_exporter_names_and_units_are_emitted():
    old, new = _scrape("4.8"), _scrape("4.10")
    assert {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} <= set(old["metric"])
    names = set(new["metric"])
    assert {"DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_XID_ERROR", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"} <= names
    assert not names & {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_SM_CLOCK"}
    assert "DCGM_FI_DEV_FB_USED" in names  # never renamed
    # clocks in Hz instead of MHz (NVIDIA/go-dcgm: pkg/dcgm/base_unit_fields_test.go)
    mhz = old[old["metric"] == "DCGM_FI_DEV_SM_CLOCK"].set_index("gpu")["value"]
    hz = new[new["metric"] == "DCGM_FI_DEV_SM_CLOCK_HERTZ"].set_index("gpu")["value"]
    assert (hz / 1e6).round(6).equals(mhz.round(6).astype(float))
    assert all("DCGM_FI_SYSTEM_DRIVER_VERSION" in lab for lab in new["labels"])
    assert not any("DCGM_FI_DRIVER_VERSION" in lab for lab in new["labels"])


def test_the_openmetrics_backfill_uses_the_generation_too(tmp_path):
    p = FleetSimulator(end=END, exporter="4.10").write_openmetrics(tmp_path / "demo.om", "2m")
    text = p.read_text()
    assert "DCGM_FI_DEV_XID_ERROR{" in text and "DCGM_FI_DEV_XID_ERRORS{" not in text


def test_an_unknown_generation_is_a_usage_error():
    with pytest.raises(InvalidParameter, match="4.10"):
        FleetSimulator(end=END, exporter="5.0")
