"""nvidia-smi dmon parser on the real H200 captures (driver 580.159.04) and on damaged text."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulib.core.knowledge import data_path
from gpulib.core.schema import SERIES_COLUMNS
from gpulib.nvidia import DMON_COLUMNS, dmon_series, parse_dmon

PUCVMET = data_path("captures/h200_smi_dmon_pucvmet.txt").read_text()
DEFAULT = data_path("captures/h200_smi_dmon_default.txt").read_text()


def test_h200_pucvmet_every_column_and_sample():
    df = parse_dmon(PUCVMET, node="h200-1", start="2026-12-01T08:00:00Z")
    assert list(df.columns) == DMON_COLUMNS
    # 5 samples x 21 metric columns (22 header names minus the gpu index)
    assert len(df) == 5 * 21 and set(df["gpu"]) == {"0"} and sorted(df["sample"].unique()) == [0, 1, 2, 3, 4]
    pwr = df[df["column"] == "pwr"]
    assert pwr["value"].tolist() == [81.0, 78.0, 78.0, 78.0, 78.0]
    assert set(pwr["field"]) == {"DCGM_FI_DEV_POWER_USAGE"} and set(pwr["unit"]) == {"W"}
    assert df[df["column"] == "mclk"]["value"].iloc[0] == 3201.0
    assert df[df["column"] == "txpci"]["value"].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert df[df["column"] == "tviol"]["unit"].iloc[0] == "bool" and df[df["column"] == "tviol"]["field"].iloc[0] == ""
    ts = pwr["timestamp"].tolist()
    assert ts[0] == pd.Timestamp("2026-12-01T08:00:00Z") and ts[4] - ts[0] == pd.Timedelta(seconds=4)
    assert set(df["node"]) == {"h200-1"}


def test_h200_default_selection_is_puc():
    df = parse_dmon(DEFAULT)
    assert sorted(df["column"].unique()) == sorted(
        ["pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk"]
    )
    assert len(df) == 3 * 11
    assert df["timestamp"].isna().all() and any("NaT" in w for w in df.attrs["warnings"])
    temp = dmon_series(df, "DCGM_FI_DEV_GPU_TEMP")
    assert list(temp.columns) == SERIES_COLUMNS and temp["value"].tolist() == [34.0, 34.0, 34.0]


DT_TWO_GPUS = """\
#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %
 20261201   08:00:00      0    410     71      -     98     40
 20261201   08:00:00      1    N/A     65     60      0      0
 20261201   08:00:01      0    415     72      -     99     41
 20261201   08:00:01      1     90     65     60      0      0
"""


def test_date_time_columns_dashes_and_na_two_gpus():
    df = parse_dmon(DT_TWO_GPUS, uuids={"1": "GPU-abc"})
    p1 = df[(df["gpu"] == "1") & (df["column"] == "pwr")]
    assert np.isnan(p1["value"].iloc[0]) and p1["value"].iloc[1] == 90.0
    assert df[(df["gpu"] == "0") & (df["column"] == "mtemp")]["value"].isna().all()
    assert df[(df["gpu"] == "0") & (df["column"] == "sm")]["timestamp"].tolist() == [
        pd.Timestamp("2026-12-01T08:00:00Z"),
        pd.Timestamp("2026-12-01T08:00:01Z"),
    ]
    assert set(df[df["gpu"] == "1"]["uuid"]) == {"GPU-abc"} and set(df[df["gpu"] == "0"]["uuid"]) == {""}


def test_csv_nounit_and_cut_lines():
    text = "#gpu, pwr, gtemp, fb\n0, 80, 34, 1024\n1, 81, 35\n0, 79, 33, 1100\n"
    df = parse_dmon(text)
    assert df[df["column"] == "fb"]["value"].tolist() == [1024.0, 1100.0]
    assert set(df[df["column"] == "fb"]["unit"]) == {"MB"}  # nounit: unit from the data file
    assert any("not dmon samples" in w for w in df.attrs["warnings"])


def test_noheader_output_warns_and_is_empty():
    df = parse_dmon("    0     78     34\n    0     79     34\n")
    assert df.empty and list(df.columns) == DMON_COLUMNS
    assert any("no dmon header" in w for w in df.attrs["warnings"])


def test_bytes_and_none():
    assert len(parse_dmon(PUCVMET.encode())) == 105
    assert parse_dmon(None).empty and parse_dmon(b"\xff\xfe").empty


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_never_raises(text):
    df = parse_dmon(text)
    assert list(df.columns) == DMON_COLUMNS


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=len(PUCVMET)))
def test_any_cut_of_the_real_capture(cut):
    df = parse_dmon(PUCVMET[:cut])
    assert len(df) <= 105 and (df["gpu"] == "0").all()


def test_linear_on_a_long_single_line():
    t = time.process_time()
    parse_dmon("# gpu pwr\n" + "0 1 " * 200_000)
    small = time.process_time() - t
    t = time.process_time()
    parse_dmon("# gpu pwr\n" + "0 1 " * 800_000)
    big = time.process_time() - t
    assert big < 12 * max(small, 0.01)


def test_every_mapped_dmon_column_names_a_known_dcgm_field_with_the_same_unit():
    from gpulib.core.knowledge import load_table

    cols = load_table("dmon_columns").fillna({"field": ""})
    fields = load_table("dcgm_fields").set_index("field")
    same = {
        "W": "W",
        "C": "degC",
        "%": "%",
        "MHz": "MHz",
        "MB": "MiB",
        "errs": "count",
    }  # dmon unit -> dcgm_fields unit
    mapped = cols[cols["field"] != ""]
    assert len(mapped) >= 12
    for r in mapped.itertuples():
        assert r.field in fields.index, r.field
        assert str(fields.loc[r.field, "unit"]) == same[r.unit], (r.column, r.unit, fields.loc[r.field, "unit"])
