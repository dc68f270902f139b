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


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "No such file"),
        ("{not json", "is not JSON"),
        ('["node", "dgx-h100-1"]', "holds list, not an object"),
    ],
)
def test_a_params_file_that_is_not_an_object_of_parameters_exits_2(content, needle, capsys, tmp_path):
    p = tmp_path / "params.json"
    if content is not None:
        p.write_text(content)
    code, out, err = run(["run", "fleet_overview", "--params-file", str(p), "--run-dir", str(tmp_path / "r")], capsys)
    assert code == cli.EXIT_USAGE and needle in err and "Traceback" not in err + out
    assert not (tmp_path / "r").exists()  # nothing ran


def test_serve_with_renders_kubernetes_outside_a_pod_and_no_job_settings_exits_2(
    capsys, monkeypatch, k8s_double, tmp_path
):
    """The server checks where its render Jobs would run before it listens: no pod to read and no --render-image,
    --render-claim, --render-namespace is a usage error naming what to give."""
    monkeypatch.setenv("GPUOPS_SERVE_TOKEN", "t" * 32)
    monkeypatch.setenv("KUBECONFIG", str(k8s_double.kubeconfig))
    monkeypatch.delenv("POD_NAME", raising=False)
    code, out, err = run(["serve", "--renders", "kubernetes", "--out", str(tmp_path / "runs")], capsys)
    assert code == cli.EXIT_USAGE and "POD_NAME and POD_NAMESPACE" in err and "--render-image" in err
    assert "Traceback" not in err + out


def test_a_node_that_matches_nothing_exits_2_before_any_kernel_with_one_message(capsys, monkeypatch, tmp_path):
    """A typo in the alert's node is answered from the runbook's own first step, headless: exit 2, the message once,
    the known nodes and a close match named, and no run folder (so no 'critical' row in the run index)."""
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    monkeypatch.setattr(cli.engine, "execute", lambda *a, **k: pytest.fail("a kernel was started for a bad parameter"))
    code, out, err = run(["run", "xid_ecc_triage", "-p", "node", "dgx-h100-9", "-o", str(tmp_path)], capsys)
    assert code == cli.EXIT_USAGE
    assert (out + err).count("dgx-h100-9") == 1, out + err
    assert "dgx-h100-1" in err and "Traceback" not in out + err
    assert not any(tmp_path.iterdir())


def test_a_misspelt_parameter_name_suggests_the_close_one_in_the_clis_words(capsys):
    code, out, err = run(["run", "xid_ecc_triage", "-p", "nod", "dgx-h100-1"], capsys)
    assert code == cli.EXIT_USAGE and "did you mean node?" in err
    assert "parameters cell" not in err  # a CLI user is told a command, not a notebook cell
    assert "gpuops list xid_ecc_triage" in err
