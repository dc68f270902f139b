"""gpulib/data/nccl/nccl_sop.csv against the NCCL domain's code: every row is asked for, every key asked for is a
row, and every placeholder a row fills is a value the call gives (tests/helpers/sop_usage.py reads the calls;
tests/project/test_sop_usage.py plants the mistakes it must catch)."""

from __future__ import annotations

import pytest

from gpulib.core import sop as core_sop
from gpulib.core.knowledge import load_table
from tests.helpers.sop_usage import call_problems, sop_calls

CALLS = sop_calls("nccl", "nccl_sop")
ROWS = {r["key"]: r for r in load_table("nccl_sop").to_dict("records")}


def test_the_nccl_code_asks_for_rows_by_literal_key():
    assert len(CALLS) >= 20, CALLS  # verdicts, environment and pod checks, log findings, history drop
    assert not [w for w, key, _ in CALLS if key is None], "an SOP key built at run time"
    assert not [w for w, _, given in CALLS if given is None], "SOP values passed as **name"


def test_every_row_is_used_and_every_key_exists():
    used = {key for _, key, _ in CALLS}
    rows = set(core_sop.keys("nccl_sop"))
    assert not used - rows, f"asked for but not in nccl_sop.csv: {sorted(used - rows)}"
    assert not rows - used, f"rows of nccl_sop.csv no code asks for: {sorted(rows - used)}"


@pytest.mark.parametrize("where,key,given", CALLS, ids=[f"{k}@{w}" for w, k, _ in CALLS])
def test_each_call_gives_every_value_its_row_fills(where, key, given):
    # a key that is no row, values the reader cannot see, a placeholder the call does not give
    assert not call_problems(where, key, given, ROWS)


def test_the_pod_shm_step_keeps_its_literal_braces():
    # the YAML of the volume is written with doubled braces in the table; the step shows single ones
    assert (
        core_sop.sop("nccl_sop", "pod_no_shm_volume").sop_step
        == "add volume {name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}} mounted at /dev/shm"
    )
