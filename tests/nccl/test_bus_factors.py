"""gpulib/data/nccl/nccl_bus_factors.csv against nccl-tests' own GetBw functions."""

from __future__ import annotations

from gpulib.core.knowledge import load_table


def test_alltoallv_bytes_are_the_larger_per_rank_send_or_receive_volume():
    # NVIDIA/nccl-tests: src/alltoallv.cu @a0b82b22, AlltoAllvGetBw (line 499):
    #   size_t max_bytes = MAX(max_sendcount, max_recvcount) * typesize;  algBw = max_bytes / 1e9 / sec
    # i.e. not count x typesize x n as alltoall (src/alltoall.cu): the busiest rank's volume.
    row = load_table("nccl_bus_factors").set_index("collective").loc["alltoallv"]
    basis = row["bytes_basis"]
    assert "max" in basis.lower() and "send" in basis and "rec" in basis and "typesize" in basis, basis
    assert basis != load_table("nccl_bus_factors").set_index("collective").loc["alltoall", "bytes_basis"]
    assert row["factor"] == "(n-1)/n"
    assert "AlltoAllvGetBw" in row["source"] and "@a0b82b22" in row["source"]
