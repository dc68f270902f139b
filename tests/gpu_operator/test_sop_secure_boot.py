"""The Secure Boot advice of the operator SOPs (gpulib/data/gpu_operator/operator_sop.yaml: the driver
CrashLoopBackOff and the cause named from a pasted driver log) follows what NVIDIA's GPU Operator docs say now: a
precompiled driver container (on Ubuntu x86_64 it installs Canonical-signed kernel modules) or a driver signed for
the host with driver.enabled=false. Not the Ubuntu 20.04/22.04 page of the 470/510/515 ``-signed`` branches, and not
the "EFI + Secure Boot" troubleshooting entry ("not supported with the GPU Operator", "disable EFI Secure Boot"),
which NVIDIA removed as stale (NVIDIA/cloud-native-docs: gpu-operator/troubleshooting.rst @b0818e32)."""

from __future__ import annotations

import pytest
import yaml

from gpulib.core.knowledge import data_path

SOPS = yaml.safe_load(data_path("gpu_operator/operator_sop.yaml").read_text())


@pytest.mark.parametrize("key", ["driver_crashloop", "cause_secure_boot"])
def test_secure_boot_advice_follows_the_current_docs(key):
    sop = SOPS[key]
    step, source = " ".join(sop["sop_step"].split()), " ".join(sop["source"].split())
    assert "-signed" not in step and "install-precompiled-signed-drivers" not in source
    # the removed entry: neither its claim nor its citation
    assert "not supported with the GPU Operator" not in step and "2489fb4c" not in source
    assert "troubleshooting.html" not in source
    assert "NVIDIA/cloud-native-docs: gpu-operator/troubleshooting.rst @b0818e32" in source
    # what NVIDIA offers now: a precompiled driver container (Canonical-signed modules on Ubuntu x86_64), or a driver
    # signed for the host with the operator's driver turned off
    assert "Secure Boot" in step and "precompiled" in step and "driver.enabled=false" in step
    assert "NVIDIA/gpu-driver-container: ubuntu24.04/precompiled/nvidia-driver @06a208ca" in source
    assert "gpu-operator/latest/precompiled-drivers.html" in source


def test_the_secure_boot_cause_offers_the_precompiled_driver_command():
    cmds = SOPS["cause_secure_boot"]["commands"]
    assert any("driver.usePrecompiled=true" in c for c in cmds) and any("mokutil --sb-state" in c for c in cmds)
