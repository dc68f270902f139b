"""The GPU-node install is real: the base install (= ``gpu-runbooks[node]``) is numpy, pandas and nvidia-ml-py,
and ``gpulib.nvidia.nvml``, ``gpulib.nvidia.smi`` and ``gpulib.nccl.probe`` import and run ``--help`` in a clean
virtual environment holding only those (no system site-packages). Everything heavier sits behind extras.

The venv gets its packages from ``$GPUOPS_WHEELHOUSE`` (``pip install --no-index --find-links``) when set, else
from the package index; without either the test is skipped and says why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_DEPS = {"numpy", "pandas", "nvidia-ml-py"}
#: imports a GPU-node module must never pull in (they are behind extras)
HEAVY = [
    "plotly",
    "kubernetes",
    "kubernetes_validate",
    "scipy",
    "papermill",
    "nbconvert",
    "nbformat",
    "IPython",
    "typer",
    "prometheus_api_client",
    "requests",
    "yaml",
    "fastapi",
    "uvicorn",
    "prometheus_client",
]
NODE_MODULES = ["gpulib.nvidia.nvml", "gpulib.nvidia.smi", "gpulib.nccl.probe"]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip().lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_base_install_is_the_gpu_node_set_and_the_rest_is_behind_extras():
    proj = _project()
    assert {_name(r) for r in proj["dependencies"]} == NODE_DEPS
    extras = proj["optional-dependencies"]
    assert {"node", "k8s", "prometheus", "runbooks", "serve", "mcp", "all", "test"} <= set(extras)
    everything = {_name(r) for r in extras["runbooks"] + extras["k8s"] + extras["prometheus"] + extras["serve"]}
    for lib in (
        "kubernetes",
        "kubernetes-validate",
        "plotly",
        "scipy",
        "papermill",
        "nbconvert",
        "ipykernel",
        "jupyterlab",
        "typer",
        "prometheus-api-client",
        "pyyaml",
        "requests",
        "fastapi",
        "uvicorn",
        "prometheus-client",
    ):
        assert lib in everything, lib
    assert "gpu-runbooks[runbooks,k8s,prometheus,serve,mcp]" in extras["all"]
    # gpuops mcp: the official SDK at its 2.x API (MCPServer), with the runbooks it runs
    assert {_name(r) for r in extras["mcp"]} == {"gpu-runbooks", "mcp"} and "mcp>=2.3" in extras["mcp"]
    assert '".[all,test]"' in (ROOT / "Makefile").read_text()


def test_gpu_node_modules_import_without_heavy_dependencies_here():
    """In this (full) environment too, importing the node modules loads none of the heavy libraries."""
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in NODE_MODULES)
        + f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _pip(py: Path, *args: str) -> list[str]:
    """This interpreter's pip run against the venv of ``py`` (``pip --python``, pip >= 22.3:
    https://pip.pypa.io/en/stable/cli/pip/#cmdoption-python): the venv needs no pip of its own, whose bootstrap
    (ensurepip) was about a quarter of the venv's CPU."""
    return [sys.executable, "-m", "pip", "--python", str(py), *args, "--disable-pip-version-check"]


@pytest.fixture(scope="module")
def node_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("node-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg  # a clean venv, not --system-site-packages
    py = venv / "bin" / "python"
    wheelhouse = os.environ.get("GPUOPS_WHEELHOUSE")
    src = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    # --no-compile: no .pyc of every installed module up front (most of the install's CPU); the few modules the
    # tests import are compiled when imported, as without the flag for anything pip did not compile
    pip = subprocess.run(
        _pip(py, "install", "-q", "--no-compile", *src, *sorted(NODE_DEPS)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if pip.returncode != 0:
        last = (pip.stderr.strip().splitlines() or ["no output"])[-1]
        where = f"wheelhouse {wheelhouse}" if wheelhouse else "the package index (offline? set GPUOPS_WHEELHOUSE)"
        pytest.skip(f"could not install {sorted(NODE_DEPS)} from {where}: {last}")
    return py


def _run(py: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(ROOT)  # gpulib from this checkout; site-packages are the venv's only
    return subprocess.run([str(py), *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def test_node_venv_has_only_the_node_packages(node_venv):
    out = subprocess.run(_pip(node_venv, "list", "--format=freeze"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    names = {line.split("==")[0].lower() for line in out.stdout.splitlines() if "==" in line}
    assert NODE_DEPS <= names
    # numpy/pandas/nvidia-ml-py and pandas' own dependencies; nothing from the extras
    assert not names & {
        "plotly",
        "kubernetes",
        "scipy",
        "papermill",
        "typer",
        "pyyaml",
        "requests",
        "prometheus-api-client",
        "kubernetes-validate",
        "ipykernel",
    }


def test_node_modules_import_in_the_clean_venv(node_venv):
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in NODE_MODULES)
        + "import gpulib; assert gpulib.__file__.startswith(%r)\n" % str(ROOT)
        + f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    )
    out = _run(node_venv, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "module, words",
    [("gpulib.nvidia.nvml", "Probe every NVIDIA GPU through NVML"), ("gpulib.nccl.probe", "--collectives")],
)
def test_node_commands_run_help_in_the_clean_venv(node_venv, module, words):
    out = _run(node_venv, "-m", module, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: python3 -m {module}") or out.stdout.startswith("usage:")
    assert words in out.stdout


def test_gpuops_says_which_extra_it_needs_in_the_clean_venv(node_venv):
    out = _run(node_venv, "-c", "import gpulib.cli")
    assert out.returncode != 0 and "pip install 'gpu-runbooks[runbooks]'" in out.stderr
