"""The GPU reset procedure (GPU_RESET_STEPS of gpulib/data/xid/xid_sop.csv, expanded into every reset SOP) stops the
GPU Operator's GPU clients the way mig-parted does before it touches a GPU, waits for their pods to go, and puts
each label back afterwards.

NVIDIA/mig-parted: pkg/mig/reconfigure/reconfigure.go @bd7160f4:
  labels (lines 42-47): nvidia.com/gpu.deploy.{device-plugin, gpu-feature-discovery, dcgm-exporter, dcgm, nvsm, client}
  shutdownKubernetesGPUClients: each label set to a paused value (maybeSetPaused: "false" stays "false"); the
      client label only when the node has it
  waitForPodsToBeDeleted: app=nvidia-device-plugin-daemonset, app=gpu-feature-discovery, app=nvidia-dcgm-exporter,
      app=nvidia-dcgm, then the DaemonSet pods selecting nvidia.com/gpu.deploy.client, 5 minutes each
  restartKubernetesGPUClients: each label back to "true" unless it was "false" (maybeSetTrue)
"""

from __future__ import annotations

from gpulib.xid import sops

LABELS = [
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
]
CLIENT = "nvidia.com/gpu.deploy.client"
APPS = ["nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm"]


def _split(cmds):
    i = next(i for i, c in enumerate(cmds) if "nvidia-smi -r" in c)
    return cmds[:i], cmds[i + 1 :]


def test_reset_steps_pause_wait_and_restore_like_mig_parted():
    before, after = _split(sops.sop("GPU_RESET_STEPS")["commands"])
    record = [c for c in before if c.startswith("kubectl get node") and " -L " in c]
    assert record and all(lab in record[0] for lab in LABELS + [CLIENT]), before
    pause = [c for c in before if c.startswith("kubectl label node") and "paused-for-gpu-reset" in c]
    assert pause and all(f"{lab}=paused-for-gpu-reset" in pause[0] for lab in LABELS), before
    assert not [c for c in before if "=false" in c.split("#")[0]], "a pause is not a false: false means never deploy"
    assert any(f"{CLIENT}=paused-for-gpu-reset" in c for c in pause), "third-party GPU clients are paused too"
    wait = [c for c in before if c.startswith("kubectl get pods") and "spec.nodeName={node}" in c]
    assert wait and all(a in wait[0] for a in APPS), before
    assert before.index(wait[0]) > before.index(pause[0])
    assert any("--query-compute-apps" in c for c in before)
    restore = [c for c in after if c.startswith("kubectl label node")]
    assert restore and all(f"{lab}=true" in restore[0] for lab in LABELS)
    assert "false stays false" in restore[0]
    assert before.index(record[0]) < before.index(pause[0])


def test_every_reset_sop_says_which_clients_stop_and_cites_mig_parted():
    table = sops._sop_table()
    resets = [
        k for k, r in table.items() if "{reset_gpu}" in str(r["commands"]) or "nvidia-smi -r" in str(r["commands"])
    ]
    assert len(resets) >= 9, resets
    for key in resets:
        row = table[key]
        if key != "GPU_RESET_STEPS":
            for word in ("gpu-feature-discovery", "NVSM", "nvidia.com/gpu.deploy.client", "waits", "earlier values"):
                assert word in row["sop_step"], (key, word)
        assert "NVIDIA/mig-parted: pkg/mig/reconfigure/reconfigure.go @bd7160f4" in row["source"], key
