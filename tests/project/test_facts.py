"""Facts of the data tables checked against the primary sources they cite.

Each test names the source of its expected value (a file of an upstream repository at a commit, or a
capture of this repository), so a reader can open it and see the same figure.
"""
from __future__ import annotations

import pandas as pd

from gpulib.core.knowledge import load_table


def _rows(table: str) -> pd.DataFrame:
    return load_table(table)


def test_violation_counters_are_nanoseconds_everywhere():
    # NVIDIA/DCGM: dcgmlib/dcgm_fields.h @72fa3fea: "Power Violation time in ns" (field 240), "Thermal Violation
    # time in ns" (241); NVIDIA/dcgm-exporter: etc/default-counters.csv @d5e5f510 "(in ns)", fixed from "(in us)"
    # by PR #589 (commit e61056b9)
    fields = _rows("dcgm_fields").set_index("field")
    for f in ("DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION"):
        row = fields.loc[f]
        assert row["unit"] == "ns", (f, row["unit"])
        assert "nanosecond" in row["meaning"] and "microsecond" not in row["meaning"], row["meaning"]
        assert "(in us)" not in row["source"]
    dmon = _rows("dmon_columns")
    for text in dmon["meaning"]:
        assert "microsecond" not in text, text
    follow = _rows("interview_followups")
    for text in follow["answer"] if "answer" in follow.columns else follow.iloc[:, 2]:
        assert "microseconds throttled" not in str(text), text


def test_xid_errors_count_is_declared_a_counter_in_a_sliding_window():
    # NVIDIA/dcgm-exporter: etc/default-counters.csv @d5e5f510 line 40:
    # "# DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window"
    row = _rows("dcgm_fields").set_index("field").loc["DCGM_EXP_XID_ERRORS_COUNT"]
    assert row["prom_type"] == "counter"
    assert "window" in row["meaning"]
    assert "@d5e5f510" in row["source"] or "@ d5e5f510" in row["source"]
