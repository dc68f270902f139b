"""dcgmi diag parser on public DCGM 3.x/4.x outputs (tests/fixtures/dcgmi/README.md) and damaged text."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpulib.nvidia import DIAG_COLUMNS, diag_summary, parse_dcgmi_diag

FIX = Path(__file__).parents[1] / "fixtures" / "dcgmi"


def _read(name):
    return (FIX / name).read_text()


def test_dcgm331_memory_fail_on_gpu0_with_wrapped_warning():
    df = parse_dcgmi_diag(_read("r2_dcgm331_gpu0_memory_fail_tail.txt"))
    mem = df[df["test"] == "GPU Memory"].set_index("gpu")
    assert mem.loc["0", "status"] == "Fail" and mem.loc["1", "status"] == "Pass"
    assert mem.loc["0", "category"] == "Hardware"
    # the wrapped message re-joined: mid-word cuts closed, word-boundary wraps spaced
    assert mem.loc["0", "message"].startswith(
        "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. "
        "Reset GPU. Restart DCGM. Rerun diagnostics. Unable to create CUDA context:"
    )
    assert mem.loc["1", "message"] == ""
    # the Info rows before the Hardware heading belong to a test cut off above: not pinned on GPU Memory
    assert any("cut table" in w for w in df.attrs["warnings"])


def test_dcgm331_metadata_and_deployment_rows():
    df = parse_dcgmi_diag(_read("r2_dcgm331_gpu1_pass_head.txt"))
    assert df.attrs["metadata"]["DCGM Version"] == "3.3.1"
    assert df.attrs["metadata"]["Driver Version Detected"] == "535.129.03"
    assert len(df) == 7 and set(df["status"]) == {"Pass"} and set(df["category"]) == {"Deployment"}
    assert "Page Retirement/Row Remap" in set(df["test"])


def test_dcgm423_per_gpu_rows():
    df = parse_dcgmi_diag(_read("r3_dcgm423_per_gpu_head.txt"))
    sw = df[df["test"] == "software"]
    assert sw["gpu"].tolist() == ["", "0", "1", "2", "3"] and set(sw["status"]) == {"Pass"}
    assert df[df["test"] == "memory"]["category"].tolist() == ["Hardware"]
    assert df.attrs["metadata"]["DCGM Version"] == "4.2.3"


def test_dcgm3_json_skips():
    df = parse_dcgmi_diag(_read("r3_dcgm3_json_skip.json"))
    assert df.attrs["format"] == "json" and list(df.columns) == DIAG_COLUMNS
    assert df["test"].tolist() == ["PCIe", "GPU Memory", "Diagnostic", "EUD Test"]
    assert set(df["status"]) == {"Skip"} and set(df["gpu"]) == {"0"}


def test_dcgm4_json_memory_fail_with_error_id():
    df = parse_dcgmi_diag(_read("dcgm4_schema_memory_fail.json"))
    row = df[(df["test"] == "memory") & (df["gpu"] == "1")].iloc[0]
    assert row["status"] == "Fail" and row["error_id"] == 37 and "miscompare" in row["message"]
    assert df[(df["test"] == "memory") & (df["gpu"] == "")]["status"].tolist() == ["Fail"]  # test_summary
    assert df.attrs["metadata"]["version"] == "4.2.3"
    s = diag_summary(df).set_index("test")
    assert s.loc["memory", "status"] == "Fail" and s.loc["memory", "failed_gpus"] == "1"
    assert s.loc["software", "status"] == "Pass"


def test_json_after_kubectl_chatter_and_cut_json():
    text = 'Defaulted container "nvidia-dcgm-ctr" out of: nvidia-dcgm-ctr\n' + _read("dcgm4_schema_memory_fail.json")
    assert len(parse_dcgmi_diag(text)) == 6
    cut = parse_dcgmi_diag(_read("dcgm4_schema_memory_fail.json")[:700])
    assert cut.empty and any("cut" in w for w in cut.attrs["warnings"])


def test_runtime_error_and_odd_shapes():
    doc = {"DCGM Diagnostic": {"runtime_error": "Couldn't connect to the host engine", "test_categories": "x"}}
    df = parse_dcgmi_diag(json.dumps(doc))
    assert df.empty and any("host engine" in w for w in df.attrs["warnings"])
    odd = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Stress",
                    "tests": [
                        {
                            "name": "SM Stress",
                            "results": [{"gpu_ids": "0,1", "status": "Warn", "warnings": ["too hot"]}],
                        },
                        7,
                        None,
                    ],
                }
            ]
        }
    }
    df = parse_dcgmi_diag(json.dumps(odd))
    assert df["gpu"].tolist() == ["0", "1"] and set(df["status"]) == {"Warn"} and set(df["message"]) == {"too hot"}


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.text(alphabet='|+-= PassFailGPU:0123\n{}[]",')))
def test_never_raises(text):
    assert list(parse_dcgmi_diag(text).columns) == DIAG_COLUMNS


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=3000))
def test_any_cut_of_a_real_table(cut):
    df = parse_dcgmi_diag(_read("r2_dcgm331_gpu0_memory_fail_tail.txt")[:cut])
    assert set(df["status"]) <= {"Pass", "Fail"}


def test_linear_on_a_long_single_line():
    t = time.perf_counter()
    parse_dcgmi_diag("| x | " + "Pass - GPU: 1" * 20_000)
    small = time.perf_counter() - t
    t = time.perf_counter()
    parse_dcgmi_diag("| x | " + "Pass - GPU: 1" * 80_000)
    big = time.perf_counter() - t
    assert big < 12 * max(small, 0.01)


def test_every_cut_of_a_real_table_reads_only_whole_results():
    # a table cut inside a row ("| GPU Memory |" or "| GPU Memory | P") must not yield a result "" or "P"
    text = _read("r2_dcgm331_gpu0_memory_fail_tail.txt")
    bad = [c for c in range(len(text) + 1) if not set(parse_dcgmi_diag(text[:c])["status"]) <= {"Pass", "Fail"}]
    assert bad == []
