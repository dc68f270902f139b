"""nccl-tests tables whose reduction-op column is blank or absent (gather/broadcast/sendrecv), and -c 0 runs."""

from __future__ import annotations

import pytest

from gpulib.nccl import parse_nccl_tests, verdict

HDR = """# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: {v} graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.045 \n"


def _rows(redop: str, root: str, wrong: str = "0") -> str:
    return "".join(
        f"{size:>12} {size // 8:>13}     float  {redop:>6}  {root:>6}    10.50    {bw}    {bw}  {wrong:>5}"
        f"    10.10    {bw}    {bw}  {wrong:>5}\n"
        for size, bw in ((8, "0.00"), (1024, "0.09"))
    )


@pytest.mark.parametrize(
    "coll,redop,root",
    [
        ("all_gather", "none", "-1"),
        ("all_gather", "", "-1"),
        ("broadcast", "", "0"),
        ("alltoall", "", "-1"),
        ("sendrecv", "", ""),
    ],
)
def test_blank_or_none_redop_rows_are_read(coll, redop, root):
    r = parse_nccl_tests(f"# Collective test starting: {coll}_perf\n" + HDR.format(v=1) + _rows(redop, root) + TAIL)
    assert len(r.table) == 2 and r.complete, (coll, redop, root)
    assert r.table["oop_busbw"].tolist() == [0.0, 0.09] and r.table["ip_time_us"].tolist() == [10.1, 10.1]
    assert r.table["redop"].isna().all() if not redop else (r.table["redop"] == "none").all()
    if root:
        assert r.table["root"].tolist() == [int(root)] * 2


def test_a_reduction_row_still_needs_a_real_op():
    text = "# Collective test starting: all_reduce_perf\n" + HDR.format(v=1) + _rows("sum", "-1") + TAIL
    assert (parse_nccl_tests(text).table["redop"] == "sum").all()
    bad = "# Collective test starting: all_reduce_perf\n" + HDR.format(v=1) + _rows("frob", "-1") + TAIL
    assert parse_nccl_tests(bad).table.empty


def test_c0_run_is_read_and_the_verdict_says_results_were_not_checked():
    text = "# Collective test starting: all_gather_perf\n" + HDR.format(v=0) + _rows("", "-1", "N/A") + TAIL
    r = parse_nccl_tests(text)
    assert len(r.table) == 2 and r.table["oop_wrong"].isna().all() and r.header.get("validation") == 0
    v = verdict(r)
    found = " ".join([v.finding.summary] + v.finding.evidence) if hasattr(v, "finding") else " ".join(v.reasons)
    assert "not validated" in found
