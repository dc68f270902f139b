"""Temperature thresholds from nvidia-smi -q: margins stay margins; absolute thresholds derived from them are
flagged +-1 C; NVML's own thresholds replace them where the NVML probe ran on the same GPUs.

Ground truth: the 2x H200 of gpulib/data/captures/ (driver 580.159.04) read with nvidia-smi -q
(2xh200_580.159.04_smi_q.txt: 33 C, T.Limit margin 54, shutdown/slowdown/max-operating margins -8/-2/0) and with NVML
nvmlDeviceGetTemperatureThreshold (2xh200_nvml_probe.json: shutdown 95, slowdown 89, max operating 87, memory 95).
The current temperature and the margin are two readings taken at different instants: a GPU one degree warmer when
the temperature was read than when the margin was gives a T.Limit one degree too high.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table
from gpulib.nvidia import smi

ROOT = Path(__file__).resolve().parents[2]
CAP = ROOT / "gpulib" / "data" / "captures"


def _one_degree_warmer() -> str:
    """The 2x H200 capture with 'GPU Current Temp' read one degree higher (34 C) than when the margin was read."""
    text = (CAP / "2xh200_580.159.04_smi_q.txt").read_text()
    warm = text.replace(
        "GPU Current Temp                               : 33 C", "GPU Current Temp                               : 34 C"
    )
    assert warm != text
    return warm


def _nvml() -> pd.DataFrame:
    return pd.DataFrame(json.loads((CAP / "2xh200_nvml_probe.json").read_text())["gpus"])


def test_derived_thresholds_are_flagged_plus_minus_one_degree():
    r = smi.parse_query(_one_degree_warmer()).iloc[0]
    # margins are kept as printed
    assert (r["temperature_tlimit_margin_c"], r["temperature_slowdown_tlimit_c"]) == (54, -2)
    # 34 + 54 = 88 = T.Limit: slowdown 90, shutdown 96, max operating 88, where NVML says 89/95/87
    assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"], r["temperature_max_operating_c"]) == (90, 96, 88)
    assert r["temperature_thresholds_from"] == "T.Limit margins"
    assert r["temperature_thresholds_tolerance_c"] == 1.0


def test_printed_absolute_thresholds_have_no_tolerance():
    r = smi.parse_query((ROOT / "tests" / "fixtures" / "smi" / "v100_q_i1.txt").read_text()).iloc[0]
    assert r["temperature_thresholds_from"] == "absolute" and r["temperature_thresholds_tolerance_c"] == 0.0


def test_nvml_thresholds_replace_derived_ones_on_the_same_gpus():
    q = smi.parse_query(_one_degree_warmer())
    out = smi.with_nvml_thresholds(q, _nvml())
    for _, r in out.iterrows():
        assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"], r["temperature_max_operating_c"]) == (
            89,
            95,
            87,
        )
        assert r["temperature_thresholds_from"] == "NVML" and r["temperature_thresholds_tolerance_c"] == 0.0
        assert r["temperature_slowdown_tlimit_c"] == -2  # the printed margins are untouched
    # the derived values were within the stated tolerance of NVML's
    for (_, a), (_, b) in zip(q.iterrows(), out.iterrows()):
        for col in ("temperature_slowdown_c", "temperature_shutdown_c", "temperature_max_operating_c"):
            assert abs(a[col] - b[col]) <= a["temperature_thresholds_tolerance_c"]


def test_a_gpu_the_probe_did_not_see_keeps_its_derived_thresholds():
    q = smi.parse_query(_one_degree_warmer())
    out = smi.with_nvml_thresholds(q, _nvml().iloc[:1])
    assert list(out["temperature_thresholds_from"]) == ["NVML", "T.Limit margins"]
    with pytest.raises(InvalidParameter, match="uuid"):
        smi.with_nvml_thresholds(q, _nvml().drop(columns=["uuid"]))


def test_demo_h200_limits_are_the_nvml_probes():
    """demo_smi_limits.csv's H200 row takes NVML's figures of the project's own H200 probe."""
    row = load_table("demo_smi_limits").set_index("model").loc["H200"]
    g = _nvml().iloc[0]
    assert (
        row["shutdown_temp_c"],
        row["slowdown_temp_c"],
        row["max_operating_temp_c"],
        row["memory_max_operating_temp_c"],
    ) == (
        g["temperature_shutdown_c"],
        g["temperature_slowdown_c"],
        g["temperature_max_operating_c"],
        g["temperature_memory_max_c"],
    )
    assert "2xh200_nvml_probe.json" in row["source"]


def test_measured_drift_of_derived_thresholds_is_at_most_one_degree():
    """gpulib/data/captures/h200x_uvm_tlimit.txt: 40 samples of nvidia-smi -q -d TEMPERATURE on a heating H200, each
    with the slowdown threshold derived from current temperature + margins next to NVML's: never more than 1 C off,
    and 1 C off in some samples (so the derived value needs the tolerance, and NVML's value is the one to show)."""
    import re

    text = (CAP / "h200x_uvm_tlimit.txt").read_text()
    pairs = [(int(d), int(n)) for d, n in re.findall(r"derived slowdown (\d+) NVML (\d+)", text)]
    assert len(pairs) == 40
    diffs = {d - n for d, n in pairs}
    assert diffs <= {0, 1} and 1 in diffs, diffs
