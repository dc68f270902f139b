"""Values from parameters or from data (labels) reach PromQL, manifests and printed commands only escaped."""

from __future__ import annotations

import shlex

import pandas as pd
import pytest

from gpulib.core.errors import InvalidParameter

EVIL_NODE = "gpu-1;touch /tmp/pwned"


def _injected(cmd: str) -> bool:
    """Whether the shell would see an unquoted ``;`` or the injected word in ``cmd`` (shlex, as sh tokenises)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    tokens = list(lex)
    return ";" in tokens or "/tmp/pwned" in tokens


def test_stale_telemetry_commands_quote_a_node_label_from_data():
    import gpulib.fleet as fleet

    end = pd.Timestamp("2026-11-29T12:00:00Z")
    act = pd.DataFrame({"timestamp": [end - pd.Timedelta(hours=1)], "node": [EVIL_NODE], "gpu": ["0"], "pct": [1.0]})
    (f,) = fleet.stale_telemetry(act, end)
    assert f.commands and not any(_injected(c) for c in f.commands), f.commands


def test_xid_commands_quote_the_node():
    import gpulib.xid.steps as xs

    cmds = [xs.kernel_log_command(EVIL_NODE), *xs.smi_query_commands(EVIL_NODE)]
    assert not any(_injected(c) for c in cmds), cmds
    assert _injected(f"kubectl debug node/{EVIL_NODE}")  # the check itself sees an unquoted injection


@pytest.mark.parametrize("name", ["vllm; #", "vllm llama", "Vllm", "x" * 300, "-vllm"])
def test_manifest_names_are_dns1123(name):
    import gpulib.vllm as vllm

    plan = vllm.plan("Llama-3.1-8B", "H100-80GB", gpus=1, context_len=4096, concurrency=8)
    with pytest.raises(InvalidParameter):
        vllm.manifests(plan, name=name)
    with pytest.raises(InvalidParameter):
        vllm.manifests(plan, namespace=name.replace("-", ";"))


def test_vllm_promql_selector_escapes():
    from gpulib.vllm.live import _selector

    sel = _selector("inference", 'x"} or vector(1) or up{a="')
    assert sel.count('"') % 2 == 0 and '\\"' in sel
