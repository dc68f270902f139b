"""Validation and escaping helpers (gpulib.core.validate): hostile values are refused or neutralised."""

import shlex
import subprocess

import pytest

from gpulib.core import validate as v
from gpulib.core.errors import InvalidParameter, UnknownGPU


@pytest.mark.parametrize("name", ["dgx-h100-1", "a100-40-mig-0", "ip-10-0-1-2.ec2.internal"])
def test_node_names_accepted(name):
    assert v.node_name(name) == name


@pytest.mark.parametrize("name", ["", "gpu-1;touch /tmp/pwned", "Node_1", 'x"} or vector(42)', "-rf", "a" * 254])
def test_node_names_refused(name):
    with pytest.raises(InvalidParameter):
        v.node_name(name)


def test_gpu_refs():
    assert v.gpu_ref("3") == v.GpuRef("index", "3")
    assert v.gpu_ref(" 03 ").value == "3"
    u = "GPU-40122E95-2d41-8900-750f-689585bec9dd"
    assert v.gpu_ref(u) == v.GpuRef("uuid", u.lower().replace("gpu-", "GPU-"))
    assert v.gpu_ref("MIG-11111111-2222-3333-4444-555555555555").kind == "mig"
    for bad in ["abc", "GPU-0000", 'x"} or vector(42) or DCGM_FI_DEV_GPU_TEMP{UUID="x', "-1", "1.5", ""]:
        with pytest.raises(UnknownGPU):
            v.gpu_ref(bad)


def test_promql_string_cannot_close_the_matcher():
    evil = 'x"} or vector(42) or up{a="x'
    lit = v.promql_string(evil)
    # the literal is one token: the only unescaped quotes are the two delimiters
    body = lit[1:-1]
    assert lit.startswith('"') and lit.endswith('"')
    assert '"' not in body.replace('\\"', "")
    assert v.promql_string("a\\b") == '"a\\\\b"'


def test_command_words_are_quoted_for_a_real_shell(tmp_path):
    marker = tmp_path / "pwned"
    line = v.command("echo", f"gpu-1;touch {marker}")
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=True)
    assert not marker.exists()
    assert out.stdout.strip() == f"gpu-1;touch {marker}"
    assert shlex.split(line) == ["echo", f"gpu-1;touch {marker}"]
