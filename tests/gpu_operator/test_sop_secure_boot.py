"""The driver CrashLoopBackOff SOP (gpulib/data/gpu_operator/operator_sop.yaml) follows NVIDIA's current guide on
Secure Boot, not the Ubuntu 20.04/22.04 page of the 470/510/515 branches."""

from __future__ import annotations

import yaml

from gpulib.core.knowledge import data_path


def test_secure_boot_advice_comes_from_the_current_troubleshooting_guide():
    # NVIDIA/cloud-native-docs: gpu-operator/troubleshooting.rst @2489fb4c, "EFI + Secure Boot": root cause "EFI
    # Secure Boot is currently not supported with the GPU Operator", action "Disable EFI Secure Boot on the server".
    # The old page (install-precompiled-signed-drivers.html) covers Canonical's signed 470/510/515 on Ubuntu
    # 20.04/22.04.
    sop = yaml.safe_load(data_path("gpu_operator/operator_sop.yaml").read_text())["driver_crashloop"]
    assert "-signed" not in sop["sop_step"] and "install-precompiled-signed-drivers" not in sop["source"]
    assert "Secure Boot" in sop["sop_step"] and "disable" in sop["sop_step"].lower()
    assert "gpu-operator/latest/troubleshooting.html" in sop["source"]
    assert "NVIDIA/cloud-native-docs: gpu-operator/troubleshooting.rst @2489fb4c" in sop["source"]
