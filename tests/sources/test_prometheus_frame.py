"""PrometheusSource._range_frame: a /api/v1/query_range result turned into a SERIES frame column-wise."""

from __future__ import annotations

import math

import pandas as pd

from gpulib.core.schema import SERIES_COLUMNS
from gpulib.sources.prometheus import PrometheusSource


def _metric(host: str, gpu: str, pod: str = "", driver: str = "550.127.05", **extra) -> dict:
    m = {
        "__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gpu": gpu,
        "UUID": f"GPU-{host}-{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "hostname": host,
        "DCGM_FI_DRIVER_VERSION": driver,
        "pci_bus_id": "00000000:18:00.0",
        **extra,
    }
    if pod:
        m.update(pod=pod, namespace="ml", container="main")
    return m


# shaped like Prometheus' JSON "result" (values are [unix seconds, "string"]); series deliberately out of order
RESULT = [
    {"metric": _metric("node-b", "0"), "values": [[1000, "0.5"], [1060, "NaN"]]},
    # node-a gpu 1: pod p1 until 1060, then pod p2 from 1120 (two series on one device)
    {"metric": _metric("node-a", "1", pod="p2"), "values": [[1120, "0.25"], [1180, "0"]]},
    {"metric": _metric("node-a", "1", pod="p1"), "values": [[1000, "1"], [1060, "0.75"]]},
    {"metric": _metric("node-a", "0"), "values": [[1000, "0.125"]]},
    # the same GPU after a driver upgrade: DCGM_FI_DRIVER_VERSION is dropped by normalise_labels, so
    # the sample at 1000 repeats node-a/0's and must go when de-duplicating; 1060 is new
    {"metric": _metric("node-a", "0", driver="560.35.03"), "values": [[1000, "0.9"], [1060, "0.5"]]},
    {"metric": _metric("node-c", "0"), "values": []},
]


def test_rows_ordered_by_device_then_time_with_labels_normalised():
    df = PrometheusSource._range_frame(RESULT, dedupe=True)
    assert list(df.columns) == SERIES_COLUMNS
    got = list(zip(df["node"], df["gpu"], df["pod"], df["timestamp"].map(pd.Timestamp.timestamp).astype(int)))
    assert got == [
        ("node-a", "0", "", 1000),
        ("node-a", "0", "", 1060),
        ("node-a", "1", "p1", 1000),
        ("node-a", "1", "p1", 1060),
        ("node-a", "1", "p2", 1120),
        ("node-a", "1", "p2", 1180),
        ("node-b", "0", "", 1000),
        ("node-b", "0", "", 1060),
    ]
    # the first of the duplicated 1000 s samples (0.125) is kept, the upgraded driver's 0.9 dropped
    assert df["value"].iloc[:6].tolist() == [0.125, 0.5, 1.0, 0.75, 0.25, 0.0]
    assert df["value"].iloc[6] == 0.5 and math.isnan(df["value"].iloc[7])
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert set(df["namespace"]) == {"ml", ""} and set(df["uuid"]) == {"GPU-node-a-0", "GPU-node-a-1", "GPU-node-b-0"}
    assert "node-c" not in set(df["node"])  # a series without samples adds no row


def test_without_dedupe_both_duplicate_samples_stay():
    df = PrometheusSource._range_frame(RESULT, dedupe=False)
    a0 = df[(df["node"] == "node-a") & (df["gpu"] == "0")]
    assert len(df) == 9  # 2 + 2 + 2 + 1 + 2 samples
    # both series' samples, time-ordered; equal timestamps keep the result's series order
    assert list(zip(a0["timestamp"].map(pd.Timestamp.timestamp).astype(int), a0["value"])) == [
        (1000, 0.125),
        (1000, 0.9),
        (1060, 0.5),
    ]


def test_empty_result_gives_an_empty_series_frame():
    df = PrometheusSource._range_frame([{"metric": _metric("n", "0"), "values": []}], dedupe=True)
    assert df.empty and list(df.columns) == SERIES_COLUMNS


# --- parse_matrix: Prometheus' own layout of a query_range answer (docs: HTTP API, range vectors) ---------
from gpulib.sources.prometheus import parse_matrix  # noqa: E402

BODY = (
    b'{"status":"success","data":{"resultType":"matrix","result":['
    b'{"metric":{"UUID":"GPU-1","hostname":"n]]1","pod":"a\\"b"},"values":[[1795346400,"0.5"],[1795346700,"NaN"],'
    b'[1795347000,"+Inf"],[1795347300,"1e-05"]]},'
    b'{"metric":{},"values":[]},'
    b'{"metric":{"hostname":"n2"},"values":[[1795346400.5,"-3"]]}]}}'
)


def test_parse_matrix_reads_pairs_as_arrays_and_labels_with_brackets_and_quotes():
    out = parse_matrix(BODY)
    assert [r["metric"] for r in out] == [{"UUID": "GPU-1", "hostname": "n]]1", "pod": 'a"b'}, {}, {"hostname": "n2"}]
    a = out[0]
    assert a["ts"].tolist() == [1795346400, 1795346700, 1795347000, 1795347300]
    assert a["v"][0] == 0.5 and math.isnan(a["v"][1]) and a["v"][2] == math.inf and a["v"][3] == 1e-05
    assert len(out[1]["ts"]) == 0
    assert out[2]["ts"].tolist() == [1795346400.5] and out[2]["v"].tolist() == [-3.0]


def test_parse_matrix_declines_what_it_does_not_know():
    vector = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}'
    histogram = (
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
        b'"histograms":[[1,{"count":"1","sum":"1"}]]}]}}'
    )
    truncated = BODY[:120]
    assert parse_matrix(vector) is None and parse_matrix(histogram) is None and parse_matrix(truncated) is None
    # and what it accepts equals json's reading, pair by pair
    import json

    ref = json.loads(BODY)["data"]["result"]
    for mine, theirs in zip(parse_matrix(BODY), ref):
        assert [[t, v] for t, v in zip(mine["ts"], mine["v"])][:1] == [
            [float(p[0]), float(p[1])] for p in theirs["values"]
        ][:1]
