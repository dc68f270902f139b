"""R570+ ``nvidia-smi -q`` prints temperature thresholds as margins to T.Limit (``GPU Shutdown T.Limit Temp : -8 C``);
older drivers print absolute temperatures (``GPU Shutdown Temp : 90 C``). Both are read, each with its meaning.

Ground truth: the same lent 2x H200 (driver 580.159.04) was read with nvidia-smi -q
(gpulib/data/captures/2xh200_580.159.04_smi_q.txt) and with NVML's nvmlDeviceGetTemperatureThreshold
(gpulib/data/captures/2xh200_nvml_probe.json: shutdown 95, slowdown 89, max operating 87 C); the 1x H200 capture
gpulib/data/captures/h200_580.159.04_smi_q.txt is the same driver. The margin is the distance to the T.Limit
(NVML nvmlDeviceGetMarginTemperature, "distance to nearest slowdown threshold"; NVSentinel's thermal-margin
runbook https://docs.nvidia.com/nvsentinel/runbooks/gpu-thermal-margin.md compares it with the slowdown T.Limit).
"""

import json
from pathlib import Path

import numpy as np

from gpulib.nvidia import smi

ROOT = Path(__file__).resolve().parents[2]


def test_r580_margins_are_read_as_margins():
    r = smi.parse_query((ROOT / "gpulib" / "data" / "captures" / "h200_580.159.04_smi_q.txt").read_text()).iloc[0]
    assert r["temperature_gpu_c"] == 35 and r["temperature_tlimit_margin_c"] == 52
    assert (
        r["temperature_shutdown_tlimit_c"],
        r["temperature_slowdown_tlimit_c"],
        r["temperature_max_operating_tlimit_c"],
    ) == (-8, -2, 0)
    assert r["temperature_memory_max_operating_tlimit_c"] == 0
    assert r["temperature_thresholds_from"] == "T.Limit margins"
    # absolute thresholds: T.Limit = current + margin = 87 C; slowdown 2 C past it, shutdown 8 C past it
    assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"], r["temperature_max_operating_c"]) == (89, 95, 87)


def test_margins_agree_with_nvml_thresholds_of_the_same_gpus():
    df = smi.parse_query((ROOT / "gpulib" / "data" / "captures" / "2xh200_580.159.04_smi_q.txt").read_text())
    probe = json.loads((ROOT / "gpulib" / "data" / "captures" / "2xh200_nvml_probe.json").read_text())
    nvml = {g["uuid"]: g for g in probe["gpus"]}
    assert len(df) == 2
    for r in df.to_dict("records"):
        g = nvml[r["uuid"]]
        assert r["temperature_slowdown_c"] == g["temperature_slowdown_c"]
        assert r["temperature_shutdown_c"] == g["temperature_shutdown_c"]
        assert r["temperature_max_operating_c"] == g["temperature_max_operating_c"]


def test_old_absolute_labels_still_read():
    r = smi.parse_query((ROOT / "tests" / "fixtures" / "smi" / "v100_q_i1.txt").read_text()).iloc[0]
    assert (r["temperature_slowdown_c"], r["temperature_shutdown_c"], r["temperature_max_operating_c"]) == (87, 90, 83)
    assert r["temperature_thresholds_from"] == "absolute"
    assert np.isnan(r["temperature_slowdown_tlimit_c"])
