"""Commands printed by the XID/ECC triage (and the fleet findings that point to it) must work as printed.

* ``nvidia-smi -q -d SERIAL`` / ``-d HEALTH`` / ``-d XID`` fail on R580 with "Failed to parse --display/-d flags"
  (real H200 captures gpulib/data/captures/README.md; the valid -d values are in ``nvidia-smi -h``).
* ``kubectl logs`` has no ``--field-selector`` (``kubectl logs --help``), and ``--prefix`` names the pod and
  container, never the node, so ``| grep <node>`` matches nothing.
* A deleted Deployment/StatefulSet pod is re-created at once (the controller restores its replica count) and may
  take the GPU again: the owner is scaled instead.
* ``nvidia-smi -r`` needs every client off the GPU (https://docs.nvidia.com/deploy/nvidia-smi/index.html, -r).
"""

from pathlib import Path

import pandas as pd
import pytest

import gpulib
import gpulib.xid.findings as xid_findings
import gpulib.xid.sops as sops
import gpulib.xid.steps as xs
from gpulib.core.schema import POD_COLUMNS
from gpulib.xid.kernel_log import parse_kernel_log
from tests.helpers.pinned import DEMO_END

ROOT = Path(__file__).resolve().parents[2]
BAD = ["-d SERIAL", "-d HEALTH", "-d XID", "--prefix | grep"]


@pytest.fixture(scope="module")
def demo_findings():
    src = gpulib.connect("demo", end=DEMO_END)
    fs = []
    for node in ("dgx-h100-1", "a100-80-0", "h200-infer-0", "a100-40-mig-0", "l4-spot-0"):
        fs += xs.findings(xs.collect(src, node, None, "6h"))
    import gpulib.fleet as fleet

    hf = fleet.health_frames(src, "6h")
    fs += fleet.health_findings(hf)
    fs += fleet.stale_telemetry(src.series("DCGM_FI_DEV_GPU_TEMP", "6h"), pd.Timestamp(src.end))
    return fs


def _commands(fs):
    return [c for f in fs for c in f.commands] + [f.escalation for f in fs] + [f.sop_step for f in fs]


def test_no_command_that_fails_on_current_drivers_or_kubectl(demo_findings):
    cmds = _commands(demo_findings)
    assert cmds
    for bad in BAD:
        assert not [c for c in cmds if bad in c], bad
    assert not [c for c in cmds if "kubectl" in c and " logs " in c and "--field-selector" in c.split("$(")[0]]


def test_operator_sop_data_has_no_prefix_grep_for_a_node():
    text = (ROOT / "gpulib" / "data" / "gpu_operator" / "operator_sop.yaml").read_text()
    assert "--prefix | grep {node}" not in text


def test_every_gpu_reset_first_stops_the_gpu_clients(demo_findings):
    resets = [f for f in demo_findings if any("nvidia-smi -r" in c for c in f.commands)]
    assert resets, "the demo incidents include a GPU reset SOP"
    for f in resets:
        i = next(i for i, c in enumerate(f.commands) if "nvidia-smi -r" in c)
        before = f.commands[:i]
        assert any(
            "nvidia.com/gpu.deploy.device-plugin=paused-for-gpu-reset" in c
            and "nvidia.com/gpu.deploy.dcgm-exporter=paused-for-gpu-reset" in c
            and "nvidia.com/gpu.deploy.dcgm=paused-for-gpu-reset" in c
            for c in before
        ), f.title
        assert any("--query-compute-apps" in c for c in before), f.title
        assert any(c.startswith("kubectl drain") for c in before), f.title
        assert "dcgm-exporter" in f.sop_step and "device plugin" in f.sop_step
    for key, row in sops._sop_table().items():
        if "nvidia-smi -r" in str(row["commands"]) or "{reset_gpu}" in str(row["commands"]):
            assert "nvidia-smi/index.html" in row["source"], key


def _pods():
    base = {c: None for c in POD_COLUMNS}
    return pd.DataFrame(
        [
            dict(
                base,
                namespace="infer",
                pod="vllm-7d9f-abc",
                node="n",
                phase="Running",
                gpu_request=1,
                gpu_limit=1,
                mig_requests={},
                owner_kind="Deployment",
                owner_name="vllm",
            ),
            dict(
                base,
                namespace="infer",
                pod="vllm-7d9f-def",
                node="m",
                phase="Running",
                gpu_request=1,
                gpu_limit=1,
                mig_requests={},
                owner_kind="Deployment",
                owner_name="vllm",
            ),
            dict(
                base,
                namespace="db",
                pod="pg-0",
                node="n",
                phase="Running",
                gpu_request=1,
                gpu_limit=1,
                mig_requests={},
                owner_kind="StatefulSet",
                owner_name="pg",
            ),
        ],
        columns=POD_COLUMNS,
    )


@pytest.mark.parametrize("code,bucket", [(13, "WORKFLOW_XID_13"), (31, "WORKFLOW_XID_31")])
def test_deployment_and_statefulset_pods_are_scaled_or_restarted_not_deleted(code, bucket):
    ev = parse_kernel_log(f"[ 1.0] NVRM: Xid (PCI:0000:18:00): {code}, pid=1, name=python3, fault\n")
    f = xid_findings.triage_node("n", xid_events=ev, pods=_pods())[0]
    assert f.data["bucket"] == bucket
    assert not [c for c in f.commands if "delete pod" in c], f.commands
    # one XID 13 or 31 is the application (the solo branch of WORKFLOW_XID_13 / WORKFLOW_XID_31): restarted
    assert "kubectl -n infer rollout restart deployment/vllm" in f.commands


def test_interpolated_values_are_shell_quoted():
    pods = _pods().assign(namespace="ns$(id)", pod="p;reboot", owner_kind="Job", owner_name="j")
    ev = parse_kernel_log("[ 1.0] NVRM: Xid (PCI:0000:18:00): 31, pid=1, name=python3, fault\n")
    f = xid_findings.triage_node("n", xid_events=ev, pods=pods)[0]
    joined = "\n".join(f.commands)
    assert "-n 'ns$(id)'" in joined and "'p;reboot'" in joined
    assert " ns$(id) " not in joined


def test_triage_fetch_commands_are_quoted_and_find_dead_gpus():
    cmd = xs.kernel_log_command("gpu-node-1")
    assert "fallen off the bus" in cmd and "NVRM: Xid" in cmd
    assert " -it " not in cmd  # a TTY does not survive the pipe into grep
    assert all("--field-selector" not in c or " logs " not in c for c in xs.smi_query_commands("gpu-node-1"))


def test_cheatsheet_says_what_works_on_r580():
    cs = pd.read_csv(ROOT / "gpulib" / "data" / "learn" / "cheatsheet.csv")
    assert not cs["command"].str.contains("-d HEALTH|-d XID|-d SERIAL", regex=True).any()  # never offered to copy
    text = cs.astype(str).agg(" ".join, axis=1)
    rows = cs[text.str.contains("-d HEALTH") & text.str.contains("-d XID")]
    assert len(rows) == 1
    r = rows.iloc[0]
    assert r["command"] == "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER"
    assert "Failed to parse --display/-d flags" in r["look_for"] and "captures" in r["source"]
    # the capture the row cites shows exactly that failure
    cap = ROOT / "gpulib" / "data" / "captures"
    for name in ("h200_smi_q_d_health.txt", "h200_smi_q_d_xid.txt", "h200_smi_q_d_serial.txt"):
        assert "Failed to parse --display/-d flags" in (cap / name).read_text()


def test_the_pods_dcgm_names_on_a_gpu_are_read_once_each_from_the_nodes_rows():
    """A SERIES frame repeats a GPU's pod labels once per sample: the index lists each (namespace, pod, GPU, UUID)
    of the node once, in the order met, missing values alike, and nothing from rows without a pod or of another
    node."""
    nan = float("nan")
    rows = [
        ("n1", "train-0", "ml", "0", "GPU-a"),
        ("n1", "train-0", "ml", "0", "GPU-a"),  # the next sample
        ("n2", "other", "ml", "0", "GPU-z"),  # another node
        ("n1", "", "ml", "1", "GPU-b"),  # no pod
        ("n1", None, "ml", "1", "GPU-b"),
        ("n1", "infer-0", None, "1", "GPU-b"),
        ("n1", "infer-0", nan, "1", "GPU-b"),  # the same, missing namespace spelled another way
        ("n1", "infer-0", "serve", "1", None),
    ]
    cols = ["node", "pod", "namespace", "gpu", "uuid"]
    df = pd.DataFrame({c: pd.Series([r[i] for r in rows * 3], dtype=object) for i, c in enumerate(cols)})
    got = sops.pod_index("n1", None, {"DCGM_FI_DEV_GPU_UTIL": df, "DCGM_FI_DEV_FB_USED": df}).labelled
    once = [
        {"namespace": "ml", "pod": "train-0", "gpu": "0", "uuid": "GPU-a"},
        {"namespace": "None", "pod": "infer-0", "gpu": "1", "uuid": "GPU-b"},
        {"namespace": "serve", "pod": "infer-0", "gpu": "1", "uuid": None},
    ]
    assert got == once * 2  # once per frame
