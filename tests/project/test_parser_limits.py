"""Parser limits: every parser takes str or bytes, never raises on text, is linear on single lines of 10 MB,
and the DCGM scrape parser's memory per input byte stays under a stated bound."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from gpulib.mig import MigParseError, parse_lgi, parse_lgip, parse_lgipp
from gpulib.nccl import diagnose_log, parse_nccl_tests
from gpulib.nvidia.smi import parse_query, parse_table
from gpulib.nvidia.topology import parse_topology
from gpulib.sources.dcgm import parse_scrape
from gpulib.xid import parse_kernel_log

MB10 = 10 * 1024 * 1024
#: generous: each parser at 10 MB finishes in well under a second on one core; a quadratic one takes hours
LIMIT_S = 5.0
#: peak traced bytes per input byte for parse_scrape on one huge label value (input str + label copy + frame)
DCGM_BYTES_PER_INPUT_BYTE = 8


def _rep(piece: str, n: int = MB10) -> str:
    return piece * (n // len(piece))


CRAFTED = {
    "smi_table_line": (parse_table, "|  0" + " " * MB10 + "x"),
    "smi_table_words": (parse_table, "| 0 " + _rep("a On ") + "|"),
    "smi_query_line": (parse_query, "GPU 00000000:01:00.0\n    " + _rep("a :") + "\n"),
    "xid_open_paren": (parse_kernel_log, _rep("NVRM: Xid (")),
    "xid_words": (parse_kernel_log, "NVRM: Xid (PCI:0000:01:00): 79, (" + _rep("0x1, ")),
    "nccl_rank_lines": (parse_nccl_tests, "#  Rank  0 Group  0 Pid  1 on " + _rep("host ") + "device"),
    "nccl_rank_spaces": (parse_nccl_tests, "# Rank" + " " * MB10 + "0"),
    "nccl_using_network": (diagnose_log, "NCCL INFO " + _rep("Using network ")),
    "nccl_sig_fallocate": (diagnose_log, _rep("posix_fallocate failed")),
    "nccl_sig_shmutils": (diagnose_log, _rep("shmutils Cuda failure ")),
    "nccl_sig_graph": (diagnose_log, _rep("graph/search.cc ")),
    "topology": (parse_topology, "\t" + _rep("GPU0\t")),
    "lgipp": (parse_lgipp, "GPU 0 Profile ID 1 Placements: {" + _rep("0,") + "}:1"),
    "lgip": (parse_lgip, "| 0 MIG " + " " * MB10 + "x"),
    "lgi": (parse_lgi, "| 0 MIG " + _rep("1g ")),
    "dcgm_label": (parse_scrape, 'DCGM_FI_DEV_GPU_TEMP{a="' + "x" * MB10 + '"} 1'),
    "dcgm_escapes": (parse_scrape, 'DCGM_FI_DEV_GPU_TEMP{a="' + _rep('\\\\x\\"') + '"} 1'),
    "dcgm_unclosed": (parse_scrape, "DCGM_FI_DEV_GPU_TEMP{" + _rep('a="b",')),
}
ALLOWED = (MigParseError,)  # documented: the MIG parsers say when no line of their kind is there


def _call(fn, text):
    try:
        fn(text)
    except ALLOWED:
        pass


@pytest.mark.parametrize("name", list(CRAFTED))
def test_linear_on_a_10mb_line(name):
    fn, text = CRAFTED[name]
    t0 = time.process_time()
    _call(fn, text)
    took = time.process_time() - t0
    assert took < LIMIT_S, f"{name}: {took:.1f}s on a 10 MB line"


@pytest.mark.parametrize("name", ["smi_table_line", "xid_open_paren", "nccl_using_network", "lgipp", "dcgm_label"])
def test_bytes_are_accepted(name):
    fn, text = CRAFTED[name]
    _call(fn, text[:100000].encode())


GARBAGE = [
    "",
    "\x00\xff",
    "GPU 0 Profile ID 19 Placements: {0,\t,1}:\t1",
    "GPU 0 Profile ID 19 Placements: {0,1}:99999999999999999999",
    "|  0  NVIDIA H100  On  | 00000000:01:00.0 Off |",
    "NVRM: Xid (PCI:0000:01:00): 99999999999999999999999, pid=x",
    'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 1 99999999999999999999',
    "\ud800",
    "[" * 10000,
]


@pytest.mark.parametrize(
    "fn",
    [
        parse_table,
        parse_query,
        parse_kernel_log,
        parse_nccl_tests,
        parse_topology,
        diagnose_log,
        parse_lgipp,
        parse_lgip,
        parse_lgi,
        parse_scrape,
    ],
)
@pytest.mark.parametrize("text", GARBAGE)
def test_never_raises_on_text(fn, text):
    _call(fn, text)
    _call(fn, text.encode("utf-8", errors="surrogatepass"))


def test_lgipp_tab_in_placements():
    df = parse_lgipp("GPU  0 Profile ID 19 Placements: {0,\t1,2,\t3}:1\n")
    assert df["starts"].iloc[0] == [0, 1, 2, 3]


def test_dcgm_memory_per_input_byte_is_bounded():
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="' + "x" * MB10 + '"} 1\n'
    tracemalloc.start()
    try:
        df = parse_scrape(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(df) == 1 and len(df["uuid"].iloc[0]) == MB10
    assert peak / len(text) < DCGM_BYTES_PER_INPUT_BYTE, f"{peak / len(text):.1f} bytes per input byte"
