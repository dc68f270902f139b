"""Every node command an SOP table prints reaches the node one way, through kubectl.

The form lives in ``gpulib/data/core/node_access.csv`` and :mod:`gpulib.core.nodecmd`; the tables write ``@node`` or
``@driver`` in front of a node command instead of "``# on NODE``" (which assumed SSH). The expected strings below
are written from the kubectl reference (https://kubernetes.io/docs/reference/kubectl/generated/kubectl_debug/) and
the GPU Operator's driver root (NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver @ 7796e735, _mount_rootfs),
not read back from the module.
"""

from __future__ import annotations

import csv
import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "gpulib" / "data"
#: tools that only run on a node (its OS or its driver): a line that starts with one assumes a shell there
NODE_TOOLS = ("nvidia-smi", "nvidia-bug-report.sh", "dmesg", "journalctl", "dcgmi", "fuser", "systemctl",
              "ipmitool", "reboot", "sudo", "mokutil", "lsmod")


def _table_lines() -> list[tuple[str, str]]:
    """(where, line) of every command line of every SOP table: ``*_sop.csv`` (one per line, ``;;`` in xid_sop) and
    ``operator_sop.yaml``."""
    out = []
    for path in sorted(DATA.rglob("*_sop.csv")):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                for line in re.split(r"\n|;;", row.get("commands") or ""):
                    if line.strip():
                        out.append((f"{path.name} {row['key']}", line.strip()))
    for key, entry in (yaml.safe_load((DATA / "gpu_operator" / "operator_sop.yaml").read_text()) or {}).items():
        if isinstance(entry, dict):
            out += [(f"operator_sop.yaml {key}", c) for c in entry.get("commands") or []]
    return out


def test_no_sop_table_line_assumes_a_shell_on_the_node():
    """Failed before: 60-odd lines ran nvidia-smi, dcgmi, journalctl, nvidia-bug-report.sh '# on {node}' by SSH, and
    operator_sop.yaml's kubectl debug lines carried -it and no --profile=sysadmin."""
    bad = []
    for where, line in _table_lines():
        if line.startswith("nccl") or where.startswith("nccl_sop.csv"):
            continue  # the NCCL probe's lines run where the job ran (no node known): left for a later change
        first = line.split()[0]
        if first in NODE_TOOLS or re.search(r"#\s*on (\{node\}|the node|NODE)", line):
            bad.append(f"{where}: {line}")
        if line.startswith("kubectl debug"):
            bad.append(f"{where}: kubectl debug written out instead of @node/@driver: {line}")
    assert bad == [], "\n".join(bad)


def test_a_node_command_runs_in_a_sysadmin_debug_pod_and_pipes_cleanly():
    from gpulib.core.nodecmd import expand

    line = expand("@node journalctl -k --since=-24h | grep -i 'NVRM: Xid'   # the XID lines", "dgx-h100-1")
    argv = shlex.split(line, comments=True)
    assert argv[:7] == ["kubectl", "debug", "node/dgx-h100-1", "-i", "--quiet", "--profile=sysadmin",
                        "--image=ubuntu:22.04"]
    assert argv[7:13] == ["--", "chroot", "/host", "journalctl", "-k", "--since=-24h"]
    assert argv[13:] == ["|", "grep", "-i", "NVRM: Xid"]  # the grep runs on the reader's machine
    assert "-it" not in argv and "-t" not in argv
    # a glob is expanded on the node, not by the reader's shell
    glob = shlex.split(expand("@node fuser -v /dev/nvidia*", "n1"))
    assert glob[-4:] == ["chroot", "/host", "sh", "-c"] or glob[-5:] == ["chroot", "/host", "sh", "-c",
                                                                            "fuser -v /dev/nvidia*"]


def test_nvidia_smi_falls_back_to_the_driver_containers_root():
    from gpulib.core.nodecmd import expand

    argv = shlex.split(expand("@driver nvidia-smi -q -i 6 -d ECC   # Pending must be No", "dgx-h100-1"),
                       comments=True)
    assert argv[:8] == ["kubectl", "debug", "node/dgx-h100-1", "-i", "--quiet", "--profile=sysadmin",
                        "--image=ubuntu:22.04", "--"]
    assert argv[8:10] == ["sh", "-c"] and len(argv) == 11
    script = argv[10]
    assert "/host/run/nvidia/driver/usr/bin/nvidia-smi" in script and script.endswith(
        'chroot "$R" nvidia-smi -q -i 6 -d ECC')
    assert script.startswith("R=/host;")


def test_a_bad_node_name_never_reaches_the_command():
    from gpulib.core.nodecmd import expand

    evil = expand("@node dmesg -T", "n1; rm -rf /")
    assert shlex.split(evil)[2] == "node/n1; rm -rf /"  # one word: the shell never runs the rest
    assert expand("kubectl cordon n1", "n1") == "kubectl cordon n1"


def test_sop_rows_print_the_kubectl_route_for_every_node_step():
    """The SOP tables through their readers: no printed line says '# on', every kubectl debug line has the sysadmin
    profile and no TTY, and every nvidia-smi inside one has the driver-container route."""
    import pandas as pd

    from gpulib.core.sop import keys, sop
    from gpulib.xid.sops import fill_commands
    from gpulib.xid.sops import sop as xid_sop

    vals = {"node": "dgx-h100-1", "gpu": "6", "gpu_word": "6", "namespace": "ml", "pod": "p", "most": 4,
            "count": 3, "lookback": "30d", "what": "x", "share": 0.5}
    printed = []
    for table in ("fleet_sop", "reliability_sop", "mig_sop"):
        for key in keys(table):
            try:
                printed += sop(table, key, **vals).commands
            except Exception as e:  # a row with other placeholders: its values are not this test's concern
                if "gives no value" not in str(e):
                    raise
    import gpulib.xid.sops as xs

    for key in xs._sop_table():
        printed += fill_commands(xid_sop(key)["commands"], "dgx-h100-1", "6", pd.DataFrame())
    assert len(printed) > 60
    bad = []
    for line in printed:
        if re.search(r"#\s*on\s", line) or line.split()[0] in NODE_TOOLS or line.startswith("@"):
            bad.append(line)
        if "kubectl debug" in line:
            if "--profile=sysadmin" not in line or re.search(r"\s-(it|ti|t)\s", line):
                bad.append(line)
            if "nvidia-smi" in line.split("|")[0] and "/run/nvidia/driver" not in line:
                bad.append(line)
    assert bad == [], "\n".join(bad)
    assert any("nvidia-bug-report.sh" in line and line.startswith("kubectl debug") for line in printed)
