"""gpulib.nvidia.nvml decoding against a fake pynvml module (error / NOT_SUPPORTED paths), plus a live probe on a real GPU."""

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import gpulib.nvidia.nvml as nvml

CAP = Path(__file__).parents[2] / "gpulib" / "data" / "captures"


class FakeNVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def make_fake(*, not_supported=(), lost=(), init_error=None, n=1):
    """A pynvml stand-in: an H200-like GPU 0; functions named in ``not_supported`` raise NOT_SUPPORTED (3)."""
    m = SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_ERROR_NOT_SUPPORTED=3,
        NVML_ERROR_GPU_IS_LOST=15,
        NVML_ERROR_LIBRARY_NOT_FOUND=12,
        NVML_TEMPERATURE_GPU=0,
        NVML_TEMPERATURE_THRESHOLD_SHUTDOWN=0,
        NVML_TEMPERATURE_THRESHOLD_SLOWDOWN=1,
        NVML_TEMPERATURE_THRESHOLD_GPU_MAX=3,
        NVML_TEMPERATURE_THRESHOLD_MEM_MAX=2,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS=0,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR=1,
        NVML_FEATURE_ENABLED=1,
        NVML_NVLINK_MAX_LINKS=18,
    )
    ecc = {(0, 0): 13, (1, 0): 2, (0, 1): 178, (1, 1): 4}
    thr = {0: 92, 1: 89, 3: 87, 2: 95}
    impl = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: n,
        "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
        "nvmlDeviceGetUUID": lambda h: "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732",
        "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
        "nvmlDeviceGetSerial": lambda h: "1753724031847",
        "nvmlDeviceGetMinorNumber": lambda h: 0,
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=b"00000000:03:00.0"),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(
            total=143771 * 1048576, used=1048576, free=143770 * 1048576
        ),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=97, memory=41),
        "nvmlDeviceGetTemperature": lambda h, s: 88,
        "nvmlDeviceGetTemperatureThreshold": lambda h, t: thr[t],
        "nvmlDeviceGetPowerUsage": lambda h: 689400,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
        "nvmlDeviceGetClockInfo": lambda h, c: {1: 1275, 2: 3199}[c],
        "nvmlDeviceGetMaxClockInfo": lambda h, c: 1980,
        "nvmlDeviceGetPerformanceState": lambda h: 0,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x68,
        "nvmlDeviceGetEccMode": lambda h: (1, 1),
        "nvmlDeviceGetTotalEccErrors": lambda h, e, s: ecc[(e, s)],
        "nvmlDeviceGetRemappedRows": lambda h: (0, 1, 1, 0),
        "nvmlDeviceGetRetiredPages": lambda h, c: [],
        "nvmlDeviceGetRetiredPagesPendingStatus": lambda h: 0,
        "nvmlDeviceGetMigMode": lambda h: (1, 0),
        "nvmlDeviceGetNvLinkState": lambda h, link: 1 if link < 18 else (_ for _ in ()).throw(FakeNVMLError(2)),
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 5,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetPcieReplayCounter": lambda h: 7,
        "nvmlSystemGetDriverVersion": lambda: "550.90.12",
        "nvmlSystemGetNVMLVersion": lambda: "12.550.90.12",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 12040,
    }

    def failing(code):
        def f(*a):
            raise FakeNVMLError(code)

        return f

    for name in not_supported:
        impl[name] = failing(3)
    for name in lost:
        impl[name] = failing(15)
    if init_error is not None:
        impl["nvmlInit"] = failing(init_error)
    for k, v in impl.items():
        setattr(m, k, v)
    return m


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        mod = make_fake(**kw)
        monkeypatch.setattr(nvml, "pynvml", mod)
        return mod

    return install


def test_probe_decodes_every_field(fake):
    fake()
    df = nvml.probe()
    r = df.iloc[0]
    assert (r["uuid"], r["name"], r["pci_bus_id"]) == (
        "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732",
        "NVIDIA H200",
        "0000:03:00.0",
    )
    assert r["memory_total_mib"] == 143771 and r["memory_used_mib"] == 1
    assert (r["power_draw_w"], r["power_limit_w"]) == (689.4, 700.0)  # mW -> W
    assert (r["temperature_gpu_c"], r["temperature_slowdown_c"], r["temperature_memory_max_c"]) == (88, 89, 95)
    assert r["clock_event_reasons"] == ["HW_SLOWDOWN", "SW_THERMAL", "HW_THERMAL"]  # 0x68 = 0x40|0x20|0x08
    assert (r["ecc_sbe_volatile"], r["ecc_dbe_volatile"], r["ecc_sbe_aggregate"], r["ecc_dbe_aggregate"]) == (
        13,
        2,
        178,
        4,
    )
    assert (r["remapped_rows_uncorrectable"], r["remapped_rows_pending"], r["remapped_rows_failure"]) == (1, 1.0, 0.0)
    assert (r["retired_pages_sbe"], r["retired_pages_pending"]) == (0, 0.0)
    assert (r["mig_mode_current"], r["mig_mode_pending"]) == ("Enabled", "Disabled")
    assert r["nvlink_active"] == 18 and r["performance_state"] == "P0"
    assert r["nvml_errors"] == {}
    assert df.attrs == {"driver_version": "550.90.12", "nvml_version": "12.550.90.12", "cuda_version": "12.4"}


def test_not_supported_fields_become_nan_and_are_recorded(fake):
    fake(
        not_supported=[
            "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetTotalEccErrors",
            "nvmlDeviceGetNvLinkState",
            "nvmlDeviceGetMigMode",
            "nvmlDeviceGetCurrentClocksEventReasons",
        ]
    )
    r = nvml.probe().iloc[0]
    assert math.isnan(r["remapped_rows_pending"]) and math.isnan(r["ecc_dbe_volatile"])
    assert r["nvlink_states"] is None and math.isnan(r["nvlink_active"])
    assert r["mig_mode_current"] is None and r["clock_event_reasons"] is None
    assert r["nvml_errors"]["remapped_rows"] == "NOT_SUPPORTED"
    assert r["nvml_errors"]["nvlink"] == "NOT_SUPPORTED"
    assert r["temperature_gpu_c"] == 88  # other fields unaffected


def test_gpu_lost_and_missing_functions(fake):
    mod = fake(lost=["nvmlDeviceGetTemperature"])
    del mod.nvmlDeviceGetCurrentClocksEventReasons
    mod.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x1  # older driver / binding name
    del mod.nvmlDeviceGetPcieReplayCounter
    r = nvml.probe().iloc[0]
    assert math.isnan(r["temperature_gpu_c"]) and r["nvml_errors"]["temperature"] == "GPU_IS_LOST"
    assert r["clock_event_reasons"] == ["GPU_IDLE"]
    assert math.isnan(r["pcie_replays"]) and r["nvml_errors"]["pcie_replays"] == "FUNCTION_NOT_FOUND"


def test_no_driver_raises_specific_error(fake):
    fake(init_error=12)
    with pytest.raises(nvml.NVMLUnavailable, match="LIBRARY_NOT_FOUND"):
        nvml.probe()


def test_cli_writes_json(fake, tmp_path):
    fake(n=2)
    out = tmp_path / "probe.json"
    assert nvml.main(["--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["gpus"]) == 2 and doc["versions"]["cuda_version"] == "12.4"
    assert doc["gpus"][0]["retired_pages_dbe"] == 0 and doc["clock_event_bits"]["HW_THERMAL"] == 0x40


def test_cli_without_driver_exits_2(fake, capsys):
    fake(init_error=12)
    assert nvml.main(["--json", "-"]) == 2
    assert "nvmlInit failed" in capsys.readouterr().err


def test_imports_with_only_numpy_pandas_pynvml():
    code = (
        "import sys; import gpulib.nvidia.nvml; bad = [m for m in ('kubernetes','plotly','prometheus_api_client','yaml','scipy')"
        " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2]).returncode == 0


def _driver_present() -> bool:
    if nvml.pynvml is None:
        return False
    try:
        nvml.pynvml.nvmlInit()
        nvml.pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(
    not _driver_present(),
    reason="no NVIDIA driver/NVML on this machine (nvmlInit failed); "
    "run on a GPU node: python3 -m gpulib.nvidia.nvml --json probe.json",
)
def test_live_probe_on_real_gpu():
    df = nvml.probe()
    assert len(df) >= 1
    assert df["uuid"].str.startswith("GPU-").all()
    assert (df["memory_total_mib"] > 1000).all()
    assert df.attrs["driver_version"]


def test_committed_h200_probe_agrees_with_its_nvidia_smi():
    from gpulib.nvidia.smi import parse_query

    doc = json.loads((CAP / "2xh200_nvml_probe.json").read_text())
    smi_df = parse_query((CAP / "2xh200_580.159.04_smi_q.txt").read_text()).set_index("uuid")
    for g in doc["gpus"]:
        s = smi_df.loc[g["uuid"]]
        assert s["pci_bus_id"] == g["pci_bus_id"] and s["name"] == g["name"]
        assert s["fb_total_mib"] == pytest.approx(g["memory_total_mib"], abs=1)
        assert s["power_limit_w"] == pytest.approx(g["power_limit_w"], abs=1)
        for col in ("ecc_dbe_aggregate", "remapped_rows_uncorrectable"):
            if g[col] is not None and not math.isnan(s[col]):
                assert s[col] == g[col]
        assert s["mig_mode_current"] == g["mig_mode_current"]
