"""The real 2xH200 captures the demo opens by default (described in ``gpulib/data/captures/README.md``): the names
:mod:`gpulib.demo.artifacts` and :mod:`gpulib.demo.nccl_history` both read, kept apart so that neither imports the
other's module for them."""

from __future__ import annotations

from pathlib import Path

from gpulib.core.knowledge import data_path

#: the real 2xH200 captures the demo opens (described in gpulib/data/captures/README.md)
DEMO_NCCL_TESTS = "captures/2xh200_nccl_probe.txt"
DEMO_TOPOLOGY = "captures/2xh200_smi_topo_m.txt"
DEMO_NVLINK_STATUS = "captures/2xh200_smi_nvlink_s.txt"


def demo_file(name: str) -> Path:
    """Path of a packaged demo artefact (``DEMO_NCCL_TESTS``, ``DEMO_TOPOLOGY``, ``DEMO_NVLINK_STATUS``)."""
    return data_path(name)
