"""gpuops collect: the collection pod against the Kubernetes API double (the real client talks to it).

Every failure mode is named, and no test leaves a pod behind (asserted on the double's state)."""

from __future__ import annotations

import json
import os

import pytest

import gpulib
from gpulib.core.errors import CollectError, InvalidParameter, UnknownNode
from gpulib.kube import collect as kc
from tests.helpers.collect_logs import TOKEN, demo_sections, framed
from tests.helpers.k8s_double import start_k8s_double

NODE = "dgx-h100-1"
NS = "gpuops-collect"


@pytest.fixture
def demo_src(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    return gpulib.connect("demo")


@pytest.fixture
def cluster(tmp_path, monkeypatch, demo_src):
    from gpulib.kube.client import KubeCluster

    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(filter(None, [os.environ.get(var, ""), "127.0.0.1"])))
    double = start_k8s_double(tmp_path, nodes=demo_src.nodes_json()["items"], pods=demo_src.pods_json()["items"])
    double.pod_script.log = framed(demo_sections(demo_src, NODE))
    kube = KubeCluster(kubeconfig=double.kubeconfig, retries=1, sleep=lambda s: None)
    kube.double = double
    yield kube
    double.stop()


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def _no_pod_left(cluster):
    assert cluster.double.pods_in(NS) == [], "a collection pod was left behind"


def test_dry_run_builds_a_valid_pinned_spec_and_creates_nothing(cluster):
    res = kc.collect_node(cluster, NODE, token=TOKEN)
    spec = res.spec["spec"]
    assert not res.applied and cluster.double.created == []
    assert spec["nodeName"] == NODE and spec["tolerations"] == [{"operator": "Exists"}] and spec["hostPID"] is True
    assert (
        spec["volumes"][0]["hostPath"]["path"] == "/" and spec["containers"][0]["volumeMounts"][0]["readOnly"] is True
    )
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 300
    assert res.spec["metadata"]["namespace"] == NS and res.pod.startswith("gpuops-collect-dgx-h100-1-")
    script = spec["containers"][0]["command"][-1]
    assert "dmesg --time-format iso" in script and "journalctl -k" in script and "dcgmi" not in script
    assert "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER" in script and "nvidia-smi topo -m" in script


def test_spec_validation_can_fail():
    spec = kc.pod_spec(NODE, token=TOKEN)
    spec["spec"]["nodeNme"] = spec["spec"].pop("nodeName")
    with pytest.raises(InvalidParameter, match="invalid"):
        kc.validate_spec(spec)
    with pytest.raises(InvalidParameter):
        kc.pod_spec("bad node; rm -rf /")
    with pytest.raises(InvalidParameter, match="1, 2, 3 or 4"):
        kc.pod_spec(NODE, diag_level=7)


def test_create_logs_delete_writes_the_snapshot(cluster, demo_src, tmp_path):
    out = tmp_path / "snap"
    res = kc.collect_node(cluster, NODE, apply=True, token=TOKEN, out_dir=out)
    d = cluster.double
    assert d.created == [res.pod] and d.deleted == [res.pod]
    _no_pod_left(cluster)
    posts = d.requests_to("POST", f"/api/v1/namespaces/{NS}/pods")
    assert posts[0].body["spec"]["nodeName"] == NODE
    logs = d.requests_to("GET", f"/api/v1/namespaces/{NS}/pods/{res.pod}/log")
    assert logs[0].param("follow") == "true" and logs[0].param("container") == "collect"
    assert (out / f"dmesg-{NODE}.txt").read_text() == demo_src.kernel_log(NODE)
    assert (out / f"nvidia-smi-q-{NODE}.txt").read_text() == demo_src.smi_query(NODE)
    for f in ("nvidia-smi-q-ecc", "nvidia-smi-topo-m", "nvidia-smi-nvlink-s"):
        assert (out / f"{f}-{NODE}.txt").exists()
    assert (out / "nodes.json").exists() and (out / "pods.json").exists()
    manifest = json.loads((out / f"collect-{NODE}.json").read_text())
    assert manifest["sections"]["kernel_log"] == {"rc": 0, "complete": True, "bytes": len(demo_src.kernel_log(NODE))}
    snap = gpulib.connect("snapshot", path=str(out))
    assert snap.kernel_log(NODE) == demo_src.kernel_log(NODE)


def test_pod_stuck_pending_is_named_and_deleted(cluster):
    cluster.double.pod_script.phases = ["Pending"]
    cluster.double.pod_script.unschedulable = "0/12 nodes are available: 1 node(s) had untolerated taint."
    clock = FakeClock()
    with pytest.raises(CollectError, match="PodStuckPending") as exc:
        kc.collect_node(cluster, NODE, apply=True, token=TOKEN, clock=clock, sleep=clock.sleep)
    assert exc.value.reason == "PodStuckPending" and "untolerated taint" in str(exc.value)
    assert clock.t >= 120  # waited the pending timeout of collect_settings.csv
    _no_pod_left(cluster)
    assert cluster.double.deleted == cluster.double.created != []


def test_image_pull_failure_is_named_and_deleted(cluster):
    cluster.double.pod_script.phases = ["Pending"]
    cluster.double.pod_script.waiting_reason = "ImagePullBackOff"
    cluster.double.pod_script.waiting_message = 'Back-off pulling image "ubuntu:22.04"'
    with pytest.raises(CollectError) as exc:
        kc.collect_node(cluster, NODE, apply=True, token=TOKEN, sleep=lambda s: None)
    assert exc.value.reason == "ImagePullFailed" and "ubuntu:22.04" in str(exc.value) and "image" in exc.value.hint
    _no_pod_left(cluster)


def test_log_cut_mid_stream_is_named_keeps_only_finished_sections(cluster, tmp_path):
    cluster.double.pod_script.log_mode = "drop"
    out = tmp_path / "snap"
    with pytest.raises(CollectError) as exc:
        kc.collect_node(cluster, NODE, apply=True, token=TOKEN, out_dir=out)
    assert exc.value.reason == "LogStreamCut"
    res = exc.value.result
    assert res is not None and any("cut" in p for p in res.problems)
    assert (
        len(cluster.double.requests_to("GET", f"/api/v1/namespaces/{NS}/pods/*/log")) == 2
    )  # streamed, then read again
    _no_pod_left(cluster)
    cut = [k for k, s in res.sections.items() if not s.complete]
    assert cut, "the half log must end inside a section"
    for k in cut:  # a cut section is never written under its evidence name
        assert not (out / kc.file_name(k, NODE)).exists() and (out / (kc.file_name(k, NODE) + ".partial")).exists()


def test_log_dropped_once_is_read_again_and_completes(cluster, demo_src, tmp_path):
    cluster.double.pod_script.log_mode = "drop_once"
    res = kc.collect_node(cluster, NODE, apply=True, token=TOKEN, out_dir=tmp_path / "s")
    assert res.text("kernel_log") == demo_src.kernel_log(NODE) and any("read again" in p for p in res.problems)
    _no_pod_left(cluster)


def test_failed_command_output_is_not_evidence(cluster, tmp_path):
    sec = {
        "kernel_log": "dmesg: read kernel buffer failed: Operation not permitted\n",
        "smi_q": "x",
        "smi_ecc": "x",
        "topo": "x",
        "nvlink": "",
    }
    cluster.double.pod_script.log = framed(sec, rc={"kernel_log": 1})
    res = kc.collect_node(cluster, NODE, apply=True, token=TOKEN, out_dir=tmp_path / "s")
    assert res.text("kernel_log") is None and not (tmp_path / "s" / f"dmesg-{NODE}.txt").exists()
    assert (tmp_path / "s" / f"dmesg-{NODE}.txt.err").exists() and any("exited 1" in p for p in res.problems)
    _no_pod_left(cluster)


def test_delete_failing_then_succeeding_leaves_no_pod(cluster):
    cluster.double.fail(f"/api/v1/namespaces/{NS}/pods/*", 500, times=2, method="DELETE")
    res = kc.collect_node(cluster, NODE, apply=True, token=TOKEN)
    assert len(cluster.double.requests_to("DELETE", f"/api/v1/namespaces/{NS}/pods/*")) == 3
    assert res.text("smi_q")
    _no_pod_left(cluster)


def test_delete_failing_for_good_is_named_with_the_command(cluster):
    cluster.double.fail(f"/api/v1/namespaces/{NS}/pods/*", 403, method="DELETE")
    with pytest.raises(CollectError) as exc:
        kc.collect_node(cluster, NODE, apply=True, token=TOKEN)
    pod = exc.value.result.pod
    assert exc.value.reason == "CleanupFailed" and f"kubectl -n {NS} delete pod {pod}" in exc.value.hint
    assert "activeDeadlineSeconds=300" in exc.value.hint
    cluster.double.clear_failures()
    kc._delete(cluster, NS, pod, kc.settings(), exc.value.result, None)  # what the hint tells the engineer to do
    _no_pod_left(cluster)


def test_first_failure_wins_when_delete_also_fails(cluster):
    cluster.double.pod_script.waiting_reason = "ErrImagePull"
    cluster.double.fail(f"/api/v1/namespaces/{NS}/pods/*", 403, method="DELETE")
    with pytest.raises(CollectError) as exc:
        kc.collect_node(cluster, NODE, apply=True, token=TOKEN, sleep=lambda s: None)
    assert exc.value.reason == "ImagePullFailed"
    # the leftover pod is named on the failure's result
    assert any("CleanupFailed" in p and exc.value.result.pod in p for p in exc.value.result.problems)
    cluster.double.clear_failures()
    for name in cluster.double.pods_in(NS):
        cluster.double._delete_pod(NS, name)
    _no_pod_left(cluster)


def test_diag_refused_on_a_node_running_gpu_pods_unless_forced(cluster, tmp_path):
    assert kc.gpu_pods_on(cluster, NODE), "the demo node runs GPU pods"
    with pytest.raises(CollectError) as exc:
        kc.collect_node(cluster, NODE, apply=True, diag_level=3, token=TOKEN)
    assert exc.value.reason == "CollectRefused" and "--force" in exc.value.hint and cluster.double.created == []
    diag = open(
        os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "dcgmi", "dcgm4_schema_memory_fail.json")
    ).read()
    cluster.double.pod_script.log = framed(
        {**demo_sections(gpulib.connect("demo"), NODE), "diag": diag}, rc={"diag": 226}
    )
    res = kc.collect_node(cluster, NODE, apply=True, diag_level=3, force=True, token=TOKEN, out_dir=tmp_path / "s")
    spec = res.spec["spec"]
    assert "dcgmi diag -r 3 -j" in spec["containers"][0]["command"][-1]
    assert (
        spec["containers"][0]["image"].startswith("nvcr.io/nvidia/cloud-native/dcgm")
        and spec["activeDeadlineSeconds"] == 2400
    )
    assert (tmp_path / "s" / f"dcgmi-diag-{NODE}.json").read_text() == diag  # kept although dcgmi exited non-zero
    _no_pod_left(cluster)


def test_unknown_node_creates_nothing(cluster):
    with pytest.raises(UnknownNode):
        kc.collect_node(cluster, "dgx-h100-99", apply=True, token=TOKEN)
    assert cluster.double.created == []


def test_split_sections_ignores_forged_markers_and_flags_cut_ones():
    log = (
        framed({"kernel_log": "@@gpuops:ffffffffffffffff:end:kernel_log:rc=0\nline\n"})
        + f"@@gpuops:{TOKEN}:begin:smi_q\nhalf"
    )
    got = kc.split_sections(log, TOKEN)
    assert got["kernel_log"].complete and "line" in got["kernel_log"].text and "ffff" in got["kernel_log"].text
    assert got["smi_q"].rc is None and got["smi_q"].text == "half\n"


def test_the_pod_script_runs_under_sh_and_frames_every_section(tmp_path):
    """The script itself, run by /bin/sh with stand-ins for chroot, dmesg, nvidia-smi and dcgmi on PATH."""
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stubs = {
        "chroot": 'shift; exec "$@"',  # chroot ROOT CMD...: run CMD here
        "dmesg": 'echo "2026-12-01T08:20:48,832638+00:00 NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."',
        "nvidia-smi": 'if [ "$1" = "nvlink" ]; then exit 0; fi; if [ "$1" = "topo" ]; then echo "GPU0 X"; exit 0; fi; '
        'echo "nvidia-smi $*"; [ "$2" = "-d" ] && exit 9; exit 0',
        "dcgmi": 'echo "{\\"DCGM Diagnostic\\": {}}"; exit 226',
    }
    for name, body in stubs.items():
        p = bin_dir / name
        p.write_text(f"#!/bin/sh\n{body}\n")
        p.chmod(0o755)
    script = kc.script(TOKEN, diag_level=2)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    got = kc.split_sections(out.stdout, TOKEN)
    assert sorted(got) == sorted(["kernel_log", "smi_q", "smi_ecc", "topo", "nvlink", "diag"])
    assert all(s.complete for s in got.values())
    assert "Xid" in got["kernel_log"].text and got["kernel_log"].rc == 0
    assert got["smi_q"].text == "nvidia-smi -q\n" and got["smi_ecc"].rc == 9  # a failing command's rc is kept
    assert got["nvlink"].text == "" and got["diag"].rc == 226 and "DCGM Diagnostic" in got["diag"].text
