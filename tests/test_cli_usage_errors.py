"""Bad usage reaching the CLI exits 2 with a message (never a traceback, never a notebook run)."""

from __future__ import annotations

import pytest

from gpulib import cli
from gpulib.core.errors import InvalidWindow, UnknownGPU
from gpulib.core.timeutil import parse_window


def run(args, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "fleet_overview", "-p", "window", "3000000y"], "window='3000000y'"),
        (["run", "fleet_overview", "-p", "window", "99999999999999999999d"], "window="),
        (["run", "xid_ecc_triage", "-p", "node", 'x"} or vector(42)'], "not a Kubernetes node name"),
        (
            ["run", "xid_ecc_triage", "-p", "gpu", 'x"} or vector(42) or DCGM_FI_DEV_GPU_TEMP{UUID="x'],
            "not a GPU index",
        ),
        (["run", "mig_sizing", "-p", "namespace", "a;b"], "not a namespace name"),
        (["run", "vllm_deploy", "-p", "deployment", "vllm; #"], "not a valid Kubernetes"),
    ],
)
def test_bad_parameter_values_exit_2(args, needle, capsys):
    code, out, err = run(args, capsys)
    assert code == cli.EXIT_USAGE and needle in err and "Traceback" not in err + out


@pytest.mark.parametrize("key", ["GPUOPS_PROMETHEUS_RETRIES", "GPUOPS_PROMETHEUS_TIMEOUT"])
def test_bad_prometheus_settings_exit_2_before_running(key, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", "http://127.0.0.1:1")
    monkeypatch.setenv(key, "abc")
    code, out, err = run(["run", "fleet_overview", "--source", "live", "-o", str(tmp_path)], capsys)
    assert code == cli.EXIT_USAGE and key in err
    assert not any(tmp_path.iterdir())


def test_huge_window_is_an_invalid_window_not_an_overflow():
    with pytest.raises(InvalidWindow):
        parse_window("3000000y")
    assert parse_window("10y").days == 3650


def test_empty_gpu_and_node_stay_allowed(capsys):
    from gpulib.catalogue import find_notebook
    from gpulib.inspection import resolve_params

    assert resolve_params(find_notebook("xid_ecc_triage"), [("gpu", ""), ("node", "dgx-h100-1")]) == {
        "gpu": "",
        "node": "dgx-h100-1",
    }
    with pytest.raises(UnknownGPU):
        resolve_params(find_notebook("xid_ecc_triage"), [("gpu", "5; rm -rf /")])
