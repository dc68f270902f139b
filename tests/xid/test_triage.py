"""Triage: XID verdicts per NVIDIA bucket, memory rules, sticky XID gauge, pod impact. Frames built by hand."""

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib.xid.findings as xid_findings
import gpulib.xid.triage as triage
from gpulib.core.findings import Severity
from gpulib.core.schema import POD_COLUMNS, SUMMARY_COLUMNS
from gpulib.nvidia.smi import parse_query
from gpulib.xid import sops
from gpulib.xid.kernel_log import parse_kernel_log
from gpulib.xid.sops import pod_impact

FIX = Path(__file__).parents[1] / "fixtures"
NODE = "gpu-node-7"


def summary(field_rows, stat="last"):
    rows = [
        dict(
            node=NODE,
            gpu=str(g),
            uuid=u,
            model="NVIDIA H100 80GB HBM3",
            pod=p,
            namespace=ns,
            container="",
            gpu_i_profile="",
            gpu_i_id="",
            stat=stat,
            value=v,
        )
        for g, u, p, ns, v in field_rows
    ]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def series(values, gpu="0", uuid="GPU-a", start="2025-09-19 10:00"):
    ts = pd.date_range(start, periods=len(values), freq="1min", tz="UTC")
    return pd.DataFrame(
        {
            "timestamp": ts,
            "node": NODE,
            "gpu": gpu,
            "uuid": uuid,
            "model": "",
            "pod": "",
            "namespace": "",
            "container": "",
            "gpu_i_profile": "",
            "gpu_i_id": "",
            "value": values,
        }
    )


def pods_frame():
    base = {c: None for c in POD_COLUMNS}
    rows = [
        dict(
            base,
            namespace="ml-train",
            pod="llama-ft-0",
            node=NODE,
            phase="Running",
            gpu_request=8,
            gpu_limit=8,
            mig_requests={},
            owner_kind="Job",
            owner_name="llama-ft",
        ),
        dict(
            base,
            namespace="infer",
            pod="vllm-7d9f-abc",
            node=NODE,
            phase="Running",
            gpu_request=1,
            gpu_limit=1,
            mig_requests={},
            owner_kind="Deployment",
            owner_name="vllm",
        ),
        dict(
            base,
            namespace="kube-system",
            pod="node-exporter-x",
            node=NODE,
            phase="Running",
            gpu_request=0,
            gpu_limit=0,
            mig_requests={},
            owner_kind="DaemonSet",
            owner_name="node-exporter",
        ),
        dict(
            base,
            namespace="other",
            pod="elsewhere",
            node="gpu-node-8",
            phase="Running",
            gpu_request=1,
            gpu_limit=1,
            mig_requests={},
            owner_kind="Job",
            owner_name="x",
        ),
    ]
    return pd.DataFrame(rows, columns=POD_COLUMNS)


def test_counter_increase_handles_resets():
    assert triage.counter_increase([0, 2, 5, 1, 3]) == 5 + 3  # 0->5 then reset to 1 (counts 1) then +2
    assert triage.counter_increase([4, 4, 4]) == 0
    assert triage.counter_increase([float("nan"), 1, 2]) == 1


def test_sticky_gauge_changes_not_values():
    ev = triage.xid_events_from_gauge(series([0, 0, 13, 13, 13, 79, 79, 13]))
    assert ev["xid"].tolist() == [13, 79, 13]
    assert not ev["carried_over"].any()
    carried = triage.xid_events_from_gauge(series([79, 79, 79]))
    assert carried["xid"].tolist() == [79] and carried["carried_over"].tolist() == [True]


def test_xid79_kernel_log_leads_to_node_reboot_and_pod_impact():
    ev = parse_kernel_log(
        "Sep 19 10:30:06 gpu-node-7 kernel: NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.\n",
        year=2025,
    )
    # capture taken with `-i`: no index column, so PCI -> UUID (nvidia-smi) -> gpu (DCGM label) must be joined
    smi = parse_query((FIX / "smi" / "h100x2_incident_q.txt").read_text()).assign(index=float("nan"))
    dcgm = {
        "DCGM_FI_DEV_GPU_TEMP": summary(
            [(1, "GPU-7c3cadbd-17e5-0913-f69b-c618122ea0cd", "vllm-7d9f-abc", "infer", 60.0)], "max"
        )
    }
    fs = xid_findings.triage_node(NODE, xid_events=ev, smi=smi, dcgm=dcgm, pods=pods_frame(), window="1h")
    top = fs[0]
    assert top.severity == Severity.CRITICAL and top.data["bucket"] == "RESTART_BM" and top.category == "hardware"
    assert top.gpu == "1"  # PCI 0000:2a:00 mapped to GPU 1 through the DCGM uuid label
    assert "kubectl cordon gpu-node-7" in top.commands
    assert any(c.startswith("kubectl debug node/") and "chroot /host reboot" in c for c in top.commands)
    assert top.data["pods"][0]["pod"] == "vllm-7d9f-abc"  # pinned by the DCGM pod label, not the whole node
    assert any("infer/vllm-7d9f-abc (Deployment vllm)" in e for e in top.evidence)


def test_xid13_on_healthy_gpu_notifies_owner_not_drain():
    ev = parse_kernel_log((FIX / "xid" / "syslog_iso.txt").read_text()).iloc[[0, 1, 2]]  # 13, 13, 43 from pid 48213
    ev = ev.assign(pci_bus_id="0000:18:00.0")
    smi = parse_query((FIX / "smi" / "h100x2_incident_q.txt").read_text()).iloc[[0]]
    fs = xid_findings.triage_node(NODE, xid_events=ev, smi=smi, pods=pods_frame())
    xf = [f for f in fs if "xids" in f.data][0]
    assert xf.data["xids"] == [13, 43] and xf.data["bucket"] == "WORKFLOW_XID_13" and xf.category == "application"
    assert xf.severity == Severity.WARNING
    assert not any("drain" in c or "cordon" in c for c in xf.commands)
    assert "notify its owner" in xf.sop_step
    assert any(c.startswith("kubectl -n ml-train delete pod llama-ft-0") for c in xf.commands)


def test_xid13_from_two_processes_on_one_gpu_follows_nvidias_workflow_not_a_reset():
    """A restarted job has a new pid: XID 13 from two processes is decided by WORKFLOW_XID_13 (here one burst: solo),
    never by the pid count (NVIDIA/NVSentinel: distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml
    @09dfc8f9, RepeatedXID13OnDifferentGPCAndTPC and XIDErrorSoloNoBurst: recommended_action NONE)."""
    text = (
        "[ 1.0] NVRM: Xid (PCI:0000:18:00): 13, pid=100, name=a, Graphics SM Warp Exception\n"
        "[ 2.0] NVRM: Xid (PCI:0000:18:00): 13, pid=200, name=b, Graphics SM Warp Exception\n"
    )
    fs = xid_findings.triage_node(NODE, xid_events=parse_kernel_log(text), pods=pods_frame())
    xf = fs[0]
    assert xf.category == "application" and xf.data["bucket"] == "WORKFLOW_XID_13" and xf.data["xid13"] == "solo"
    assert not any("dcgmi diag -r 3" in c or "nvidia-smi -r" in c or "drain" in c for c in xf.commands)
    assert xf.escalation == sops.sop("WORKFLOW_XID_13_SOLO")["escalation"]


def test_another_application_xid_from_two_processes_is_hardware_suspect():
    """The pid guard (app_xid_distinct_workloads, alert_settings.csv) stays for application XIDs that have no NVIDIA
    workflow, e.g. XID 69 (RESTART_APP / CHECK_APP/CUDA)."""
    text = (
        "[ 1.0] NVRM: Xid (PCI:0000:18:00): 69, pid=100, name=a, Class Error\n"
        "[ 2.0] NVRM: Xid (PCI:0000:18:00): 69, pid=200, name=b, Class Error\n"
    )
    fs = xid_findings.triage_node(NODE, xid_events=parse_kernel_log(text), pods=pods_frame())
    xf = fs[0]
    assert xf.category == "hardware" and xf.data["bucket"] == "RESET_GPU"
    assert xf.severity == Severity.WARNING
    assert xf.sop_step.startswith("Application-class XIDs from several different processes on the same GPU")
    # the reset runs on the node through kubectl (gpulib/core/nodecmd.py), no longer "sudo ... # on NODE" by SSH
    assert any(c.startswith("kubectl debug node/") and "nvidia-smi -r -i" in c for c in xf.commands)
    assert "application XIDs came from 2 different processes on this GPU (>= 2)" in xf.evidence


def test_dbe_and_remap_failure_lead_to_cordon_drain_rma():
    smi = parse_query((FIX / "smi" / "a100x2_d_ecc_remap.txt").read_text())
    fs = xid_findings.triage_node(NODE, smi=smi, gpu="1")
    keys = [f.data.get("rule") for f in fs]
    assert keys[0] == "ROW_REMAP_FAILURE" and fs[0].severity == Severity.CRITICAL
    assert fs[0].commands[:2] == [
        "kubectl cordon gpu-node-7",
        "kubectl drain gpu-node-7 --ignore-daemonsets --delete-emptydir-data --timeout=15m",
    ]
    assert "RMA" in fs[0].escalation
    assert any("Uncorrectable ECC" not in f.title for f in fs)
    assert "DBE_ERRORS" not in keys  # folded into the remap-failure finding's evidence
    assert any("4 uncorrectable ECC errors" in e for e in fs[0].evidence)


def test_pending_remap_leads_to_reset_at_convenient_time():
    smi = parse_query((FIX / "smi" / "a100x2_d_ecc_remap.txt").read_text())
    fs = xid_findings.triage_node(NODE, smi=smi, gpu="0")
    assert [f.data.get("rule") for f in fs] == ["ROW_REMAP_PENDING"]
    assert fs[0].severity == Severity.WARNING and "convenient time" in fs[0].sop_step
    reset = next(
        i for i, c in enumerate(fs[0].commands) if c.startswith("kubectl debug node/") and "nvidia-smi -r -i 0" in c
    )
    # the GPU Operator's GPU clients are stopped before the reset (nvidia-smi -r needs the GPU free)
    assert any("nvidia.com/gpu.deploy.dcgm=paused-for-gpu-reset" in c for c in fs[0].commands[:reset])


def test_dcgm_dbe_increase_and_sticky_xid48_not_double_counted():
    u = "GPU-a"
    kernel = parse_kernel_log(
        "[Mon Sep 14 05:02:11 2026] NVRM: Xid (PCI:0000:8a:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected\n"
    )
    kernel = kernel.assign(gpu="3", uuid=u)
    dcgm = {
        "DCGM_FI_DEV_XID_ERRORS": summary([(3, u, "", "", 48.0)], "last"),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": summary([(3, u, "", "", 2.0)], "increase"),
    }
    fs = xid_findings.triage_node(NODE, xid_events=kernel, dcgm=dcgm, window="6h")
    xf = fs[0]
    assert xf.data["bucket"] == "WORKFLOW_XID_48" and xf.gpu == "3"
    assert any(e.startswith("XID 48 ROBUST_CHANNEL_GPU_ECC_DBE x1") for e in xf.evidence)  # not x2
    assert any("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL increase 2" in e for e in xf.evidence)
    assert not any(f.data.get("rule") == "DBE_ERRORS" for f in fs)  # same SOP, one finding


def test_gauge_only_xid_says_sticky_in_evidence():
    dcgm = {"DCGM_FI_DEV_XID_ERRORS": summary([(2, "GPU-b", "train-0", "ml", 79.0), (0, "GPU-c", "", "", 0.0)], "last")}
    fs = xid_findings.triage_node(NODE, dcgm=dcgm, pods=pods_frame())
    assert fs[0].data["xids"] == [79] and fs[0].gpu == "2"
    assert any("sticky gauge" in e for e in fs[0].evidence)
    assert fs[0].confidence < 1.0
    assert fs[0].data["pods"][0]["pod"] == "train-0"


def test_xid154_follows_announced_recovery_action():
    ev = parse_kernel_log(
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n"
    )
    fs = xid_findings.triage_node(NODE, xid_events=ev)
    assert fs[0].data["bucket"] == "RESET_GPU"


def test_thermal_from_smi_clock_events():
    smi = parse_query((FIX / "smi" / "h100x2_incident_q.txt").read_text())
    fs = xid_findings.triage_node(NODE, smi=smi, gpu="1")
    thermal = [f for f in fs if f.data.get("rule") == "THERMAL"][0]
    assert thermal.severity == Severity.WARNING  # 88 C: >= warn 85, < critical 89
    assert any("HW_SLOWDOWN, SW_THERMAL, HW_THERMAL" in e for e in thermal.evidence)
    rules = {f.data.get("rule") for f in fs}
    assert {"ROW_REMAP_PENDING", "DBE_ERRORS", "THERMAL"} <= rules


def test_healthy_node_gives_ok():
    smi = parse_query((FIX / "smi" / "h200_q.txt").read_text())
    fs = xid_findings.triage_node(NODE, smi=smi)
    assert len(fs) == 1 and fs[0].severity == Severity.OK


def test_pod_impact_falls_back_to_node_gpu_pods():
    imp = pod_impact(NODE, "0", pods=pods_frame())
    assert sorted(imp["pod"]) == ["llama-ft-0", "vllm-7d9f-abc"]  # GPU pods on the node only
    assert set(imp["matched_by"]) == {"GPU pod on the node (pod list; GPU not pinned)"}


def test_every_catalog_bucket_has_an_sop():
    from gpulib.core.knowledge import load_table

    sops = set(load_table("xid_sop")["key"])
    assert set(load_table("xid_catalog")["immediate_action"]) <= sops
    assert set(load_table("xid_recovery_actions")["bucket"]) <= sops


# ------------------------------------------------- kernel-log XIDs joined to DCGM frames by pci_bus_id
def _fleet_summary(stat, values):
    """A fleet-wide SUMMARY frame as Prometheus returns it: two DGX nodes with the SAME PCI layout
    (bus 0x18 and 0x2a), dcgm-exporter's 8-digit-domain pci_bus_id; the other node comes first."""
    rows = []
    for node in ("gpu-node-8", NODE):
        for gpu, bus in (("0", "00000000:18:00.0"), ("1", "00000000:2A:00.0")):
            rows.append(
                dict(
                    node=node,
                    gpu=gpu,
                    uuid=f"GPU-{node}-{gpu}",
                    pci_bus_id=bus,
                    model="NVIDIA H100 80GB HBM3",
                    pod="vllm-7d9f-abc" if (node, gpu) == (NODE, "1") else "",
                    namespace="infer" if (node, gpu) == (NODE, "1") else "",
                    container="",
                    gpu_i_profile="",
                    gpu_i_id="",
                    stat=stat,
                    value=values.get((node, gpu), 0.0),
                )
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def test_kernel_log_xid_mapped_by_dcgm_pci_bus_id_to_this_nodes_gpu_and_uuid():
    # no nvidia-smi: the only join from the kernel's "PCI:0000:2a:00" to an index/UUID is DCGM's pci_bus_id label
    ev = parse_kernel_log(
        "[Mon Nov 30 03:18:00 2026] NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.\n"
    )
    dcgm = {
        "DCGM_FI_DEV_GPU_TEMP": _fleet_summary("p95", {}),
        triage.XID_GAUGE: _fleet_summary("last", {(NODE, "1"): 79.0}),
    }
    fs = xid_findings.triage_node(NODE, xid_events=ev, dcgm=dcgm, pods=pods_frame())
    top = fs[0]
    assert top.data["bucket"] == "RESTART_BM" and top.gpu == "1"
    # gpu-node-8 GPU 1 sits on the same bus number: the UUID must be this node's
    assert top.data["uuid"] == f"GPU-{NODE}-1" and top.data["pci_bus_id"] == "0000:2a:00.0"
    # the sticky gauge's 79 on the same GPU is the same event: counted once, from the kernel log
    assert any(
        e.startswith("XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS x1") and "[kernel log]" in e
        for e in top.evidence
    )
    assert [f for f in fs if f.data.get("xids")] == [top]
    assert [p["pod"] for p in top.data["pods"]] == ["vllm-7d9f-abc"]


def test_demo_xid_timeline_puts_the_kernel_log_line_on_gpu_5_with_its_uuid():
    import gpulib
    import gpulib.xid.steps as xs

    src = gpulib.connect("demo")
    inp = xs.collect(src, "dgx-h100-1", None, "6h")
    inp.smi = None  # without nvidia-smi: only DCGM's pci_bus_id can place the line
    dev = next(d for d in src.sim.devices if d.node == "dgx-h100-1" and d.index == 5 and not d.is_instance)
    ev = xs.xid_timeline(inp)
    kernel = ev[ev["source"] == "kernel log"]
    assert kernel[["gpu", "uuid", "pci_bus_id", "xid"]].values.tolist() == [["5", dev.uuid, "0000:68:00.0", 79]]
    gauge = ev[ev["source"].str.startswith(triage.XID_GAUGE)]
    assert gauge[["gpu", "uuid", "pci_bus_id", "xid"]].values.tolist() == [["5", dev.uuid, "0000:68:00.0", 79]]
    top = xs.findings(inp)[0]
    assert top.gpu == "5" and top.data["uuid"] == dev.uuid and top.data["xids"] == [79]
    assert any("x1" in e and "[kernel log]" in e for e in top.evidence)


@pytest.mark.prometheus
def test_live_kernel_log_file_lands_on_gpu_5_through_prometheus_pci_bus_id(live_env, tmp_path):
    import gpulib
    import gpulib.xid.steps as xs
    from gpulib.demo.simulator import FleetSimulator
    from tests.helpers.pinned import DEMO_END, SCRAPE

    sim = FleetSimulator(end=DEMO_END, scrape_interval=SCRAPE)
    log = tmp_path / "dmesg-T.txt"
    log.write_text(sim.kernel_log("dgx-h100-1"))
    dev = next(d for d in sim.devices if d.node == "dgx-h100-1" and d.index == 5 and not d.is_instance)
    inp = xs.collect(gpulib.connect("live"), "dgx-h100-1", None, "6h", kernel_log_file=str(log))
    assert inp.smi is None  # the live source has no nvidia-smi -q
    ev = xs.xid_timeline(inp)
    assert ev.loc[ev["source"] == "kernel log", ["gpu", "uuid"]].values.tolist() == [["5", dev.uuid]]
    top = xs.findings(inp)[0]
    assert top.gpu == "5" and top.data["bucket"] == "RESTART_BM" and top.data["uuid"] == dev.uuid


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),  # minute
            st.sampled_from(["0", "1"]),
            st.sampled_from([0.0, 79.0, 79.0, 13.0, 48.0, float("nan"), None]),
        ),
        max_size=40,
    )
)
def test_gauge_events_are_the_changes_to_a_nonzero_code_per_gpu(samples):
    """Read one GPU's samples in time order: a sample without a value is skipped, a code is an event when it is not
    0 and not the code before it, and the first sample's code is carried over (it says only what came before)."""
    df = pd.DataFrame(
        {
            "timestamp": pd.to_datetime([60 * m + i for i, (m, _, _) in enumerate(samples)], unit="s", utc=True),
            "node": "n1",
            "gpu": [g for _, g, _ in samples],
            "uuid": [f"GPU-{g}" for _, g, _ in samples],
            "value": pd.Series([v for _, _, v in samples], dtype=object),
        }
    )
    got = triage.xid_events_from_gauge(df)
    for gpu in ("0", "1"):
        seen = sorted((60 * m + i, v) for i, (m, g, v) in enumerate(samples) if g == gpu)
        want, prev = [], None
        for t, v in seen:
            if v is None or v != v:
                continue
            if int(v) != 0 and int(v) != prev:
                want.append((t, int(v), prev is None))
            prev = int(v)
        rows = got[got["gpu"] == str(gpu)]
        have = [(int(ts.timestamp()), x, c) for ts, x, c in zip(rows["timestamp"], rows["xid"], rows["carried_over"])]
        assert have == want
    assert list(got.columns) == ["timestamp", "node", "gpu", "uuid", "xid", "source", "carried_over"]
