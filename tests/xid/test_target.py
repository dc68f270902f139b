"""Which GPU the XID triage looks at: an index, a GPU UUID and a MIG UUID of the same GPU give the same
verdict; a reference that matches no GPU of the node is a usage error naming the node's GPUs, never OK.

Expected values come from the demo scenario (``gpulib/data/demo/demo_fleet.yaml``: XID 79 on dgx-h100-1 GPU 5,
DBE + row-remap failure on a100-80-0 GPU 1, MIG on a100-40-mig-0), not from the code under test.
"""

import pytest

import gpulib
import gpulib.xid.steps as xs
from gpulib.core.errors import InvalidParameter, UnknownGPU
from gpulib.core.findings import Severity
from tests.helpers.pinned import DEMO_END


@pytest.fixture(scope="module")
def src():
    return gpulib.connect("demo", end=DEMO_END)


def _dev(src, node, index, mig_gi=None):
    for d in src.sim.devices:
        if d.node == node and d.index == index and (d.gi_id == (mig_gi or "")):
            return d
    raise AssertionError(f"no demo device {node} {index} {mig_gi}")


def _verdict(src, node, gpu):
    fs = xs.findings(xs.collect(src, node, gpu, "6h"))
    return [(f.severity, f.title, f.node, f.gpu) for f in fs]


@pytest.mark.parametrize(
    "node,index,severity,needle",
    [
        ("dgx-h100-1", 5, Severity.CRITICAL, "XID 79"),
        ("a100-80-0", 1, Severity.CRITICAL, "Row-remap failure"),
    ],
)
def test_incident_gpu_by_uuid_gives_the_same_verdict_as_by_index(src, node, index, severity, needle):
    by_index = _verdict(src, node, str(index))
    by_uuid = _verdict(src, node, _dev(src, node, index).uuid)
    by_upper_uuid = _verdict(src, node, "GPU-" + _dev(src, node, index).uuid[4:].upper())
    assert by_index == by_uuid == by_upper_uuid
    top = by_uuid[0]
    assert top[0] is severity and needle in top[1] and top[2] == node and top[3] == str(index)


def test_made_up_uuid_is_a_usage_error_naming_the_nodes_gpus(src):
    with pytest.raises(InvalidParameter) as exc:
        xs.collect(src, "dgx-h100-1", "GPU-0000", "6h")
    assert isinstance(exc.value, UnknownGPU)
    with pytest.raises(UnknownGPU) as exc:  # well formed, but a GPU of another node
        xs.collect(src, "dgx-h100-1", _dev(src, "a100-80-0", 1).uuid, "6h")
    msg = str(exc.value)
    for i in range(8):
        assert _dev(src, "dgx-h100-1", i).uuid in msg
    assert "dgx-h100-1" in msg


def test_index_beyond_the_node_is_a_usage_error(src):
    with pytest.raises(UnknownGPU):
        xs.collect(src, "l4-spot-0", "4", "6h")


def test_mig_uuid_resolves_to_its_parent_gpu(src):
    node = "a100-40-mig-0"
    inst = _dev(src, node, 0, mig_gi="2")
    assert inst.mig_uuid.startswith("MIG-")
    inp = xs.collect(src, node, inst.mig_uuid, "6h")
    assert inp.gpu == "0" and inp.target.mig_uuid == inst.mig_uuid and inp.target.gpu_i_id == "2"
    assert _verdict(src, node, inst.mig_uuid) == _verdict(src, node, "0")


def test_source_lists_the_nodes_gpus_with_mig_instances(src):
    inv = src.gpus("a100-40-mig-0")
    phys = inv[inv["gpu_i_id"] == ""]
    assert sorted(phys["gpu"]) == ["0", "1", "2", "3"]
    assert (inv.loc[inv["gpu_i_id"] != "", "mig_uuid"].str.startswith("MIG-")).all()
    assert len(inv[inv["gpu_i_id"] != ""]) == 16


@pytest.mark.parametrize(
    "gpu,code,needle",
    [
        ("GPU-40122e95-2d41-8900-750f-689585bec9dd", 1, "XID 79 on dgx-h100-1 GPU 5"),  # the XID-79 GPU's UUID
        ("GPU-0000", 2, "is not a GPU index, GPU UUID"),
        ("GPU-d8f8520d-97bd-396f-2ea4-efc99042567c", 2, "matches no GPU of node 'dgx-h100-1'"),  # a100-80-0's GPU 1
    ],
)
def test_cli_gpu_by_uuid_is_the_incident_and_an_unknown_one_exits_2(gpu, code, needle, tmp_path, monkeypatch, capsys):
    import os

    from tests.helpers.gpuops_cli import gpuops

    env = {"GPUOPS_END": DEMO_END.isoformat(), "PYTHONPATH": os.getcwd()}
    got, out, err = gpuops(
        monkeypatch,
        capsys,
        [
            "run",
            "xid_ecc_triage",
            "-p",
            "node",
            "dgx-h100-1",
            "-p",
            "gpu",
            gpu,
            "-q",
            "-o",
            str(tmp_path),
        ],
        env=env,
    )
    assert got == code, out + err
    assert needle in out + err
    assert "[OK]" not in out


def test_gpu_silent_for_longer_than_the_window_is_still_a_gpu_of_the_node():
    """A GPU that fell off the bus stops reporting DCGM series; hours later the alert still names it. Through a
    DCGM-only source (the base inventory from DCGM labels) it must resolve, never be a usage error."""
    import pandas as pd

    from gpulib.core.schema import GPU_COLUMNS
    from gpulib.demo.source import DemoSource

    class DcgmOnly(DemoSource):  # the demo fleet seen through the default, DCGM-label inventory
        def _gpus(self, node, window):
            from gpulib.sources.base import Source

            return Source._gpus(self, node, window)

    src = DcgmOnly(end=DEMO_END)
    dead = _dev(src, "dgx-h100-1", 5)  # XID 79 two hours before the end: silent for the last ~2 h
    inv = src.gpus("dgx-h100-1", "1h")
    assert set(inv.columns) == set(GPU_COLUMNS)
    row = inv[inv["gpu"] == "5"]
    assert len(row) == 1  # listed: by a longer lookback, or at least from the node's GPU count
    t = xs.collect(src, "dgx-h100-1", "5", "1h").target
    assert t.gpu == "5"
    t = xs.collect(src, "dgx-h100-1", dead.uuid, "1h").target  # the UUID DCGM reported before it went silent
    assert t.gpu == "5"
    assert pd.notna(t.uuid)
