"""dcgm-exporter scrape parsing and label normalisation on real-shaped expositions."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpulib.sources.dcgm import normalise_labels, parse_scrape

FIX = Path(__file__).parents[1] / "fixtures" / "dcgm"


def test_old_hostname_label_and_pod_mapping():
    df = parse_scrape((FIX / "scrape_old_hostname_t4.txt").read_text())
    assert len(df) == 4 and df.attrs["skipped_lines"] == 0
    assert set(df["node"]) == {"ip-10-0-1-5"}
    util = df[df["metric"] == "DCGM_FI_DEV_GPU_UTIL"].iloc[0]
    assert util["value"] == 97 and util["pod"] == "cuda-vectoradd" and util["namespace"] == "default"
    assert util["type"] == "gauge" and util["model"] == "Tesla T4"
    xid = df[df["metric"] == "DCGM_FI_DEV_XID_ERRORS"].iloc[0]
    assert xid["labels"]["err_msg"] == "No Error" and xid["value"] == 0


def test_new_hostname_and_mig_instances():
    df = parse_scrape((FIX / "scrape_new_hostname_mig.txt").read_text())
    gr = df[df["metric"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"].set_index("gpu_i_id")
    assert set(df["node"]) == {"gpu-node-3"}
    assert gr.loc["2", "gpu_i_profile"] == "3g.20gb" and gr.loc["2", "pod"] == "triton-bert-0"
    assert gr.loc["13", "pod"] == "" and gr.loc["13", "value"] == 0.0
    assert math.isclose(df[df["metric"] == "DCGM_FI_DEV_POWER_USAGE"]["value"].iloc[0], 88.123)
    temp = df[df["metric"] == "DCGM_FI_DEV_GPU_TEMP"].iloc[0]
    assert temp["gpu_i_profile"] == "" and temp["pci_bus_id"] == "00000000:07:00.0"


def test_exported_pod_relabeling_and_truncated_line():
    df = parse_scrape((FIX / "scrape_prometheus_exported_pod.txt").read_text())
    assert df.attrs["skipped_lines"] == 1  # the line cut mid-label
    by_gpu = df.set_index("gpu")
    assert by_gpu.loc["3", "pod"] == "bert-train-7d9f-0" and by_gpu.loc["3", "namespace"] == "ml-team"
    assert by_gpu.loc["3", "container"] == "trainer"
    # GPU 4 has only the exporter's own pod label: not a workload
    assert by_gpu.loc["4", "pod"] == "" and by_gpu.loc["4", "namespace"] == ""
    assert str(by_gpu.loc["3", "timestamp"]) == "2024-11-30 10:00:00+00:00"


@pytest.mark.parametrize(
    "labels,node",
    [
        ({"Hostname": "a"}, "a"),
        ({"hostname": "b"}, "b"),
        ({"instance": "10.0.0.1:9400"}, "10.0.0.1"),
        ({"hostname": "c", "Hostname": "d"}, "c"),
    ],
)
def test_host_label_variants(labels, node):
    assert normalise_labels(labels)["node"] == node


def test_old_namespace_mode_labels():
    lab = normalise_labels({"pod_name": "p", "pod_namespace": "ns", "container_name": "c", "uuid": "GPU-1"})
    assert (lab["pod"], lab["namespace"], lab["container"], lab["uuid"]) == ("p", "ns", "c", "GPU-1")


def test_escaped_label_values_and_special_floats():
    text = 'm{a="x\\"y",b="line\\nbreak"} NaN\nm{a="z"} +Inf\n'
    df = parse_scrape(text)
    assert df["labels"].iloc[0]["a"] == 'x"y' and df["labels"].iloc[0]["b"] == "line\nbreak"
    assert math.isnan(df["value"].iloc[0]) and df["value"].iloc[1] == math.inf


def test_empty_scrape_keeps_columns():
    df = parse_scrape("\n# HELP x y\n")
    assert df.empty and "metric" in df.columns and "value" in df.columns
