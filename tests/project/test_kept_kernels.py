"""tests/helpers/shared_runs.py: a kernel kept for the next shared run of a notebook on this worker is handed out
as a fresh one would be: nothing the last run defined, an environment equal to this process' now, and
gpulib.runbook's per-kernel state (plotly.js not yet sent) as a fresh import leaves it."""

from __future__ import annotations

import pytest

from gpulib.execute import run_code
from tests.helpers.shared_runs import KeptKernels


@pytest.fixture
def kept():
    k = KeptKernels()
    yield k
    k.close()


def test_a_kept_kernel_forgets_the_last_run(kept, monkeypatch):
    monkeypatch.setenv("GPUOPS_KEPT_PROBE", "first")
    km = kept.lend("xid_ecc_triage").take()
    run_code(
        km,
        "import os, gpulib.runbook as r\nleak = 1\nos.environ['GPUOPS_SET_BY_A_RUN'] = '1'\nr._PLOTLY_JS_SENT = True",
    )
    monkeypatch.setenv("GPUOPS_KEPT_PROBE", "second")
    again = kept.lend("xid_ecc_triage").take()
    assert again._km is km._km  # the same kernel, lent again
    run_code(again, "assert 'leak' not in globals() and 'r' not in globals()")
    run_code(again, "import os\nassert 'GPUOPS_SET_BY_A_RUN' not in os.environ")
    run_code(again, "import os\nassert os.environ['GPUOPS_KEPT_PROBE'] == 'second'")
    run_code(again, "import gpulib.runbook as r\nassert r._PLOTLY_JS_SENT is False")
    with pytest.raises(RuntimeError):  # the checks above can fail
        run_code(again, "assert 'GPUOPS_KEPT_PROBE' not in __import__('os').environ")


def test_a_kept_kernel_collects_the_last_runs_garbage_and_freezes_the_rest(kept):
    """Before it is lent again, a kept kernel collects what the last run left (a reference cycle included), then
    freezes what stays (the modules) so the next run's collections skip them: frozen before the collection, the
    cycle would never be freed."""
    km = kept.lend("xid_ecc_triage").take()
    run_code(km, "import sys, weakref\nclass C: pass\nc = C(); c.me = c\nsys._gpuops_probe = weakref.ref(c)")
    again = kept.lend("xid_ecc_triage").take()
    run_code(again, "import gc, sys\nassert sys._gpuops_probe() is None\nassert gc.get_freeze_count() > 10000")


def test_another_notebook_gets_its_own_kernel_and_at_most_keep_stay(kept):
    a = kept.lend("xid_ecc_triage").km
    b = kept.lend("nccl_check").km
    assert a is not b
    assert a.has_kernel and b.has_kernel
    c = kept.lend("fleet_overview").km  # a third: the least recently used (xid_ecc_triage) is stopped
    assert not a.has_kernel and b.has_kernel and c.has_kernel
    assert kept.lend("nccl_check").km is b
