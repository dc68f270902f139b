"""CHECK_UVM (XID 159): NVIDIA's bucket says RESET_GPU if UVM or vGPU is in use, else ignore. The SOP must not use a
test that cannot tell the cases apart.

gpulib/data/captures/h200x_uvm_tlimit.txt (H200, driver 580.159.04): a process that only made an ordinary device
allocation (no CUDA managed memory) has /dev/nvidia-uvm open, and /proc/modules shows no use count at all for
nvidia_uvm ('-'). So 'lsmod | grep nvidia_uvm, a use count above 0 means UVM is in use' says "in use" for every
busy GPU (or nothing), and XID 159 would reset any GPU that runs CUDA.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.xid import sops

CAPTURE = Path(__file__).resolve().parents[2] / "gpulib" / "data" / "captures" / "h200x_uvm_tlimit.txt"


def test_the_capture_shows_a_non_managed_process_holding_nvidia_uvm():
    text = CAPTURE.read_text()
    assert "cudaMalloc only: /dev/nvidia-uvm open: True" in text
    assert "nvidia_uvm 1875968 - -" in text


def test_check_uvm_does_not_read_uvm_use_from_lsmod():
    row = sops.sop("CHECK_UVM")
    cmds = " ".join(row["commands"])
    assert "lsmod" not in cmds.split("#")[0] and "use count above 0 means UVM is in use" not in cmds
    assert not any(c.startswith("lsmod") for c in row["commands"])
    assert any("virtualization mode" in c.lower() for c in row["commands"])  # vGPU can be read from the node
    step = row["sop_step"]
    assert "RESET_GPU if UVM/vGPU is in use, else ignore" in step
    assert "cannot be told from the node" in step and "managed memory" in step
    assert "not known" in step and "RESET_GPU" in row["escalation"]
    assert "gpulib/data/captures/h200x_uvm_tlimit.txt" in row["source"]
