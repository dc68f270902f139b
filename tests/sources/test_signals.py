"""The signal contract (gpulib/data/sources/signals.csv through gpulib/sources/signals.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpulib.core.knowledge import load_table
from gpulib.sources import signals

ROOT = Path(__file__).resolve().parents[2]
#: the renames NVIDIA's own tests pin (NVIDIA/go-dcgm: pkg/dcgm/alias_resolution_test.go @4e88f84f)
GO_DCGM_ALIASES = {
    "DCGM_FI_DEV_GPU_TEMP": "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
}


def _fields_gpulib_reads() -> set[str]:
    names: set[str] = set()
    for f in (ROOT / "gpulib").rglob("*.py"):
        if f.name == "signals.py":
            continue
        names |= set(re.findall(r"\bDCGM_(?:FI|EXP)_[A-Z0-9_]*[A-Z0-9]\b", f.read_text()))
    return {n for n in names if n.count("_") > 3}


def test_every_dcgm_field_gpulib_reads_is_in_the_contract():
    known = {name for canon in signals.signals() for name in signals.aliases(canon)}
    missing = sorted(_fields_gpulib_reads() - known)
    assert not missing, f"add a signals.csv row for: {missing}"
    assert "DCGM_EXP_XID_ERRORS_COUNT" in signals.signals()


@pytest.mark.parametrize("old,new", sorted(GO_DCGM_ALIASES.items()))
def test_the_renames_nvidia_pins_resolve_both_ways(old, new):
    assert signals.canonical(new) == old and signals.canonical(old) == old
    assert signals.aliases(old) == [old, new]
    assert signals.scale(new) == 1.0 and signals.name_in(old, "4.10") == new and signals.name_in(old, "4.8") == old


def test_units_that_changed_are_scaled_to_the_canonical_unit():
    assert signals.canonical("DCGM_FI_DEV_SM_CLOCK_HERTZ") == "DCGM_FI_DEV_SM_CLOCK"
    assert signals.to_canonical("DCGM_FI_DEV_SM_CLOCK_HERTZ", 1_980_000_000.0) == ("DCGM_FI_DEV_SM_CLOCK", 1980.0)
    assert signals.to_canonical("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 2.5) == (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        2500.0,
    )
    assert signals.unit("DCGM_FI_DEV_SM_CLOCK_HERTZ") == "MHz"
    assert signals.to_canonical("NOT_A_DCGM_NAME", 3.0) == ("NOT_A_DCGM_NAME", 3.0)


def test_a_generation_is_told_from_the_names_a_node_serves():
    assert signals.generation_of(["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"]) == "<=4.8"
    assert signals.generation_of(["DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_FB_USED"]) == ">=4.9"
    assert signals.generation_of(["DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_XID_ERRORS"]) == "mixed"
    assert signals.generation_of(["DCGM_FI_DEV_FB_USED"]) == "unknown"  # never renamed: says nothing


def test_every_row_cites_a_source_a_reader_can_open():
    t = load_table("signals")
    assert set(t["semantics"]) <= {"gauge", "window_count", "counter", "state"}
    for _, r in t.iterrows():
        cites = re.findall(r"[\w.-]+/[\w.-]+: [\w./-]+ @([0-9a-f]{8,40})", r["source"])
        assert cites, r["canonical"]
    assert not t["canonical"].duplicated().any()
