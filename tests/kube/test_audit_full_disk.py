"""The remediation audit log on a disk that fills up: a record is on disk whole or not at all (never a cut line), the
intent is read back before anything is sent, and the error says truthfully whether the change was sent.

The disk is filled for real in a child process: ``RLIMIT_FSIZE`` (``man 2 setrlimit``) makes the kernel cut a write at
the limit (a short write) and fail the next one (EFBIG), as a full filesystem cuts and then fails (ENOSPC). The child
cordons a node of the Kubernetes API double, which runs in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.procs import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
DGX = "dgx-a100-07"

CHILD = r"""
import json, os, resource, signal, sys
import gpulib.kube.client as k8s
import gpulib.kube.remediate as remediate
from gpulib.core.errors import GpulibError

kubeconfig, log, when, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us


def fill(extra):
    size = os.path.getsize(log) if os.path.exists(log) else 0
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + extra, resource.RLIM_INFINITY))


if when == "before":
    fill(limit)
else:  # the disk fills while the change is being sent
    real = k8s.KubeCluster.patch_node

    def patch_node(self, name, patch, *, dry_run=True):
        out = real(self, name, patch, dry_run=dry_run)
        fill(limit)
        return out

    k8s.KubeCluster.patch_node = patch_node
kc = k8s.KubeCluster(kubeconfig=kubeconfig, sleep=lambda s: None, retries=1)
try:
    remediate.cordon("dgx-a100-07", cluster=kc, apply=True, audit_log=log, max_share=0.5)
    print(json.dumps({"error": None}))
except GpulibError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _cordon_on_a_filling_disk(double, tmp_path, when: str, limit: int) -> tuple[dict, Path]:
    log = tmp_path / "audit.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    p = subprocess.run(
        [sys.executable, "-B", "-c", CHILD, str(double.kubeconfig), str(log), when, str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        preexec_fn=die_with_parent,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), log


def _applied(double):
    return [r for r in double.requests_to("PATCH", "/api/v1/nodes/*") if r.param("dryRun") is None]


def _whole_records(log: Path) -> list[dict]:
    text = log.read_text() if log.exists() else ""
    assert text == "" or text.endswith("\n"), f"a cut record: {text[-80:]!r}"
    return [json.loads(line) for line in text.splitlines()]  # every line whole JSON


def test_an_intent_cut_by_a_full_disk_stops_the_change_and_says_nothing_was_sent(k8s_double, tmp_path):
    out, log = _cordon_on_a_filling_disk(k8s_double, tmp_path, "before", 100)  # the intent needs more than 100 bytes
    assert out["error"] and "audit" in out["error"]
    assert "not sent" in out["error"] or "nothing was sent" in out["error"], out["error"]
    assert _applied(k8s_double) == []
    assert "unschedulable" not in k8s_double.node(DGX)["spec"]
    assert _whole_records(log) == []


def test_an_outcome_the_full_disk_refuses_says_the_change_was_sent(k8s_double, tmp_path):
    out, log = _cordon_on_a_filling_disk(k8s_double, tmp_path, "after", 40)  # the outcome record is cut at 40 bytes
    assert len(_applied(k8s_double)) == 1 and k8s_double.node(DGX)["spec"].get("unschedulable") is True
    assert out["error"] and "audit" in out["error"]
    assert "was sent" in out["error"].lower() and "nothing was changed" not in out["error"], out["error"]
    assert [r["phase"] for r in _whole_records(log)] == ["intent"]
