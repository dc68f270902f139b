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


_UNOPENABLE = ("found by code search", "not recorded", "file not recorded")


def test_every_source_can_be_opened_no_code_search_without_a_repository():
    # A source a reader cannot open ("found by code search (repositories not recorded)") is no
    # source; each row must cite a repository + commit (or a URL), or be dropped.
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "gpulib" / "data").rglob("*.csv")) + sorted((root / "gpulib" / "data").rglob("*.md"))
    files += sorted((root / "tests" / "fixtures").rglob("README.md"))
    bad = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            low = line.lower()
            if any(p in low for p in _UNOPENABLE):
                bad.append(f"{path.relative_to(root)}:{n}: {line[:100]}")
    assert not bad, "\n".join(bad)


def test_demo_smi_limits_follow_their_openable_sources():
    # A100: thamada/nvidia-smi gls/A100SXMx4_smi.py @b09ef139 (A100-SXM4-80GB, driver 555.42.02) and
    # https://github.com/NVIDIA/nvidia-docker/issues/1648 (A100 SXM4 40 GB) print 92 / 89 / 85 / 95 C.
    # H100: no absolute figures found; its T.Limit margins (leptonai/gpud testdata @a7cdf53d: -8 / -2 / 0 / 0) are the
    # H200's, so the row takes the H200's NVML absolutes and says it is inferred.
    lim = _rows("demo_smi_limits").set_index("model")
    cols = ["shutdown_temp_c", "slowdown_temp_c", "max_operating_temp_c", "memory_max_operating_temp_c"]
    for model in ("A100-80GB", "A100-40GB"):
        assert [int(v) for v in lim.loc[model, cols]] == [92, 89, 85, 95], model
        assert lim.loc[model, "inferred"] == "no"
    assert list(lim.loc["H100-80GB", cols]) == list(lim.loc["H200", cols])
    assert lim.loc["H100-80GB", "inferred"] == "yes" and "inferred" in lim.loc["H100-80GB", "source"]
