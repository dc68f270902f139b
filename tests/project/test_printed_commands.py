"""Every command a runbook, report or SOP data file prints is one the real tool accepts.

The runbooks and the report run in-process on the demo source (window end pinned to ``DEMO_END``): each
notebook's code cells are executed in order with its parameters, the way papermill would, and every
``Finding.commands`` entry, the operator install plan's commands and the NCCL probe's apply commands are
collected; the SOP and cheat-sheet data files add their command templates (placeholders filled with sample
values). ``tests/helpers/commandcheck.py`` says how each tool is checked. The printed kubectl commands run against
``tests/helpers/kubectl_double.py`` loaded with the demo fleet of their GPU Operator scenario
(``tests/helpers/demo_cluster.py``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers.commandcheck import (
    PARSE_ONLY,
    SMI_TABLE,
    Checker,
    fill_placeholders,
    smi_options_from_captures,
    stages,
)
from tests.helpers.demo_cluster import demo_cluster
from tests.helpers.pinned import DEMO_END

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "gpulib" / "data"
pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (.ci/system-deps)")


def _runs() -> list[tuple[str, dict]]:
    runs = [
        ("runbooks/fleet_overview", {}),
        ("runbooks/nccl_check", {}),
        ("runbooks/mig_sizing", {}),
        ("runbooks/vllm_deploy", {}),
        ("reports/gpu_utilization_report", {}),
        ("runbooks/xid_ecc_triage", {"node": "dgx-h100-1", "gpu": ""}),
    ]
    seen = set()
    with (ROOT / "tests" / "decisions" / "xid_triage.csv").open() as fh:
        for row in csv.DictReader(fh):
            key = (row["node"], row["gpu_index"])
            if row["expected"] in ("critical", "warning", "info") and key not in seen and row["gpu"].isdigit():
                seen.add(key)
                runs.append(("runbooks/xid_ecc_triage", {"node": row["node"], "gpu": row["gpu"]}))
    for state in (
        "healthy",
        "driver_crashloop",
        "gfd_missing",
        "policy_not_ready",
        "allocatable_zero",
        "validator_stuck",
        "mig_failed",
    ):
        runs.append(("runbooks/operator_install", {"demo_operator_state": state}))
    return runs


def run_inprocess(notebook: str, params: dict) -> dict:
    """Execute a notebook's code cells in one namespace (parameters cell, then ``params``, then the rest);
    return the namespace."""
    nb = json.loads((ROOT / f"{notebook}.ipynb").read_text())
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            exec(compile("".join(cell["source"]), notebook, "exec"), ns)
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                ns.update(params)
    ns["_stdout"] = out.getvalue()
    return ns


@pytest.fixture(scope="module")
def printed():
    return collect(_runs())


def collect(runs) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(where, command) for every command printed on the demo fleet, and the files those commands read."""
    import os

    old = os.environ.get("GPUOPS_END")
    os.environ["GPUOPS_END"] = DEMO_END.isoformat()
    os.environ.pop("GPUOPS_FINDINGS_PATH", None)
    cmds: list[tuple[str, str]] = []
    files: dict[str, str] = {}
    try:
        for notebook, params in runs:
            ns = run_inprocess(notebook, params)
            where = f"{Path(notebook).name} {params}"
            for f in ns.get("findings") or []:
                cmds += [(f"{where}: {f.title}", c) for c in f.commands]
            plan = ns.get("plan")
            if plan is not None and hasattr(plan, "commands"):
                cmds += [(f"{where}: install plan", block) for block in plan.commands()]
                files["values.yaml"] = plan.values_yaml()
            if ns.get("manifest") is not None:
                import gpulib.nccl.job as nccl_job

                files["nccl-probe.yaml"] = nccl_job.to_yaml(ns["manifest"])
                cmds += [(f"{where}: probe", c) for c in nccl_job.apply_commands(ns["manifest"], "nccl-probe.yaml")]
    finally:
        if old is None:
            os.environ.pop("GPUOPS_END", None)
        else:
            os.environ["GPUOPS_END"] = old
    return cmds, files


def _data(name: str) -> Path:
    [path] = [p for p in DATA.rglob(name) if "captures" not in p.parts]
    return path


def _data_commands() -> list[tuple[str, str]]:
    out = []
    with _data("xid_sop.csv").open() as fh:
        for row in csv.DictReader(fh):
            out += [(f"xid_sop.csv {row['key']}", c.strip()) for c in row["commands"].split(";;") if c.strip()]
    with _data("nccl_signatures.csv").open() as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    col = next((i for i, h in enumerate(head) if h in ("commands", "check_commands")), None)
    if col is not None:
        for row in rows[1:]:
            out += [(f"nccl_signatures.csv {row[0]}", c.strip()) for c in row[col].split(";;") if c.strip()]
    for key, entry in (yaml.safe_load(_data("operator_sop.yaml").read_text()) or {}).items():
        if isinstance(entry, dict):
            out += [(f"operator_sop.yaml {key}", c) for c in entry.get("commands") or []]
    with _data("cheatsheet.csv").open() as fh:
        out += [("cheatsheet.csv", row["command"]) for row in csv.DictReader(fh)]
    from gpulib.core.nodecmd import expand  # a node line (@node/@driver) is checked as the kubectl line it prints

    return [(w, expand(fill_placeholders(c), "dgx-h100-1")) for w, c in out if not c.startswith("{")]


def test_smi_table_is_what_the_captures_list():
    with SMI_TABLE.open() as fh:
        committed = list(csv.DictReader(fh))
    assert committed == smi_options_from_captures()
    assert {r["driver"] for r in committed} == {"580.159.04"}
    values = {(r["subcommand"], r["kind"], r["value"]) for r in committed}
    # spot checks read off the capture by eye, not from the builder
    assert ("", "display", "ROW_REMAPPER") in values and ("", "display", "SERIAL") not in values
    assert ("mig", "option", "-lgip") in values and ("topo", "option", "-m") in values


def test_checker_catches_planted_mistakes(tmp_path):
    chk = Checker(tmp_path)
    assert chk.check("kubectl cordon dgx-h100-1") == []
    assert chk.check("kubectl get pods -A --field-selector spec.nodeName=n1 | grep -v Completed") == []
    planted = {
        "kubectl cordon dgx-h100-1 --gpu-only": "unknown flag",
        "kubectl logs -n ml -l app=x --field-selector spec.nodeName=n1": "unknown flag",
        "kubectl cordonn dgx-h100-1": "unknown command",
        "kubectl apply -f cfg.yaml": "kind not set",
        "nvidia-smi -q -d SERIAL": "display type SERIAL",
        "nvidia-smi -q -d HEALTH": "display type HEALTH",
        "nvidia-smi topo --matrixx": "no option",
        "nvidia-smi frob": "no subcommand",
        "dcgmi diag --levels 3": "no option",
        "kubectl get node {node}": "unfilled template",
    }
    chk.files["cfg.yaml"] = "version: v1\nflags:\n  migStrategy: none\n"
    for cmd, why in planted.items():
        problems = chk.check(cmd)
        assert problems and any(why in p for p in problems), (cmd, problems)
    # a pipeline's kubectl stage is checked, and a remote command inside kubectl debug is unwrapped
    assert stages("kubectl debug node/n -it --image=busybox -- chroot /host sh -c 'dmesg | grep -i xid'") == [
        [
            "kubectl",
            "debug",
            "node/n",
            "-it",
            "--image=busybox",
            "--",
            "chroot",
            "/host",
            "sh",
            "-c",
            "dmesg | grep -i xid",
        ],
        ["dmesg"],
        ["grep", "-i", "xid"],
    ]


def test_cluster_checks_catch_planted_commands():
    planted = [
        ("report", "kubectl taint nodes l4-spot-0 nvidia.com/gpu=present:NoSchedule"),
        ("report", "kubectl -n ads delete pod ab-test-scorer-84c6d7f5b9-m2xw8"),
        ("report", "kubectl -n inference scale deployment/vllm-qwen7b --replicas=<n>"),
    ]
    found = _against_the_demo_cluster(planted)
    assert len(found) == 3, found
    assert _against_the_demo_cluster([("report", "kubectl -n ads scale deployment/ab-test-scorer --replicas=0")]) == []


TEMPLATES = ("xid_sop.csv", "operator_sop.yaml", "cheatsheet.csv", "nccl_signatures.csv")


@pytest.fixture(scope="module")
def demo_double(tmp_path_factory):
    """One :class:`KubectlDouble` for the module; each test loads the scenario it needs."""
    from tests.helpers.kubectl_double import KubectlDouble

    double = KubectlDouble([], token=None).start()
    double.write_kubeconfig(tmp_path_factory.mktemp("kubectl-double") / "kubeconfig")
    yield double
    double.stop()


def _scenario(where: str) -> str:
    """The GPU Operator scenario a command was printed under (``operator_install`` runs), else healthy."""
    found = re.search(r"'demo_operator_state': '(\w+)'", where)
    return found.group(1) if found else "healthy"


def check_on_demo_cluster(cmds, files, double, workdir) -> tuple[Checker, list[str]]:
    """Check ``(where, command)`` pairs: printed ones against ``double`` loaded with the demo fleet of their
    operator scenario (in the order printed, each distinct line once per scenario), data-file templates for
    parsing only."""
    problems: list[str] = []
    chk = Checker(workdir, files=dict(files), double=double)
    by_scenario: dict[str, dict[str, str]] = {}
    for where, cmd in cmds:
        by_scenario.setdefault("template" if where.startswith(TEMPLATES) else _scenario(where), {}).setdefault(
            cmd, where
        )
    for scenario, lines in by_scenario.items():
        if scenario != "template":
            double.load(demo_cluster(scenario))
        for cmd, where in lines.items():
            problems += [f"{where}: {p}" for p in chk.check(cmd, live=scenario != "template")]
    return chk, problems


def test_every_printed_command_runs_on_the_demo_cluster(printed, demo_double, tmp_path):
    """Every kubectl stage of every printed command runs against the API double holding the demo fleet (a
    mutating one with ``--dry-run=server``, a read-only one as printed) and exits 0; data-file templates and
    the subcommands the double cannot answer (``commandcheck.PARSE_ONLY``) must parse; nvidia-smi/dcgmi against
    their captured help."""
    cmds, files = printed
    all_cmds = cmds + _data_commands()
    demo_double.dry_runs.clear()
    chk, problems = check_on_demo_cluster(all_cmds, files, demo_double, tmp_path)
    problems += _against_the_demo_cluster(all_cmds)
    print(f"kubectl stages checked: {chk.modes}")
    assert not problems, "\n".join(problems)
    assert chk.checked.get("kubectl", 0) > 30 and chk.checked.get("nvidia-smi", 0) > 5
    assert chk.modes.get("dry-run=server", 0) > 20 and chk.modes.get("read", 0) > 40, chk.modes
    # parsing only: data-file templates and the subcommands the double declares it cannot answer, nothing else
    assert {m for m in chk.modes if m.startswith("parse-only")} <= {
        f"parse-only ({w})" for w in [*PARSE_ONLY, "template"]
    }
    writes = {m for m, _ in demo_double.dry_runs}
    assert {"PATCH", "POST", "DELETE"} <= writes, writes  # cordon/label/scale, eviction/apply, delete


@pytest.mark.parametrize("nodes", [1, 2])
def test_probe_commands_run_on_the_demo_cluster(demo_double, tmp_path, nodes):
    """The NCCL probe's apply / wait / logs / delete lines, for a Job (1 node) and a PyTorchJob (2 nodes, which
    no demo runbook run prints), against the demo cluster: the wait and logs address what the apply created."""
    import gpulib.nccl.job as nccl_job

    manifest = nccl_job.probe_manifest(nodes=nodes)
    demo_double.load(demo_cluster("healthy"))
    demo_double.dry_runs.clear()
    chk = Checker(tmp_path, files={"nccl-probe.yaml": nccl_job.to_yaml(manifest)}, double=demo_double)
    problems = [p for c in nccl_job.apply_commands(manifest, "nccl-probe.yaml") for p in chk.check(c)]
    assert not problems, problems
    assert chk.modes == {"dry-run=server": 3, "read": 2}, chk.modes  # dry run, apply, delete; wait, logs
    assert ("DELETE", "/api/v1/namespaces/default/configmaps/nccl-probe-script") in demo_double.dry_runs


def test_demo_cluster_holds_the_owners_the_pods_imply():
    objs = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in demo_cluster("healthy")}
    # read off the demo pods' ownerReferences (gpulib/data/demo/demo_fleet.yaml) and the operator's operands
    for key in [
        ("Deployment", "ads", "ab-test-scorer"),
        ("ReplicaSet", "ads", "ab-test-scorer-84c6d7f5b9"),
        ("StatefulSet", "notebooks", "dev-bob"),
        ("Job", "search", "embed-batch-7f9c2"),
        ("PyTorchJob", "ads", "forecast-train"),
        ("DaemonSet", "logging", "fluent-bit"),
        ("DaemonSet", "gpu-operator", "nvidia-dcgm-exporter"),
        ("Deployment", "gpu-operator", "gpu-operator"),
        ("Namespace", None, "default"),
        ("Namespace", None, "notebooks"),
        ("Lease", "kube-node-lease", "dgx-h100-1"),
        ("CustomResourceDefinition", None, "clusterpolicies.nvidia.com"),
        ("ClusterPolicy", None, "cluster-policy"),
    ]:
        assert key in objs, key
    assert ("Deployment", "notebooks", "dev-bob") not in objs and ("Namespace", None, "ml") not in objs
    assert objs[("Deployment", "inference", "vllm-llama70b")]["spec"]["replicas"] == 2
    assert (
        objs[("Namespace", None, "gpu-operator")]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        == "privileged"
    )


def test_demo_cluster_check_catches_planted_mistakes(demo_double, tmp_path):
    demo_double.load(demo_cluster("healthy"))
    demo_double.dry_runs.clear()
    chk = Checker(tmp_path, double=demo_double)
    good = [
        "kubectl cordon dgx-h100-1",
        "kubectl -n notebooks scale statefulset/dev-bob --replicas=0",
        "kubectl taint nodes dgx-h100-1 nvidia.com/gpu-rma=true:NoSchedule",
        "kubectl -n gpu-operator logs --tail=50 $(kubectl -n gpu-operator get pods -l app=nvidia-dcgm-exporter "
        "--field-selector spec.nodeName=dgx-h100-1 -o name)",
    ]
    for cmd in good:
        assert chk.check(cmd) == [], cmd
    assert chk.modes == {"dry-run=server": 3, "read": 2}, chk.modes  # the $(...) inner get is a read too
    for cmd in [
        "kubectl debug node/dgx-h100-1 -it --image=busybox -- chroot /host dmesg -T",
        "kubectl -n gpu-operator exec $(kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset "
        "--field-selector spec.nodeName=dgx-h100-1 -o name) -c nvidia-driver-ctr -- nvidia-smi",
    ]:
        assert chk.check(cmd) == [], cmd  # streams: parsed, and their node / pod / container exist
    assert ("PATCH", "/api/v1/nodes/dgx-h100-1") in demo_double.dry_runs
    assert "unschedulable" not in demo_double.get("Node", "dgx-h100-1")["spec"]  # a dry run changes nothing
    bad_effect = json.dumps(
        {"spec": {"taints": [{"key": "nvidia.com/gpu-rma", "value": "true", "effect": "NoScheduel"}]}}
    )
    planted = {
        "kubectl cordon dgx-h100-9": 'nodes "dgx-h100-9" not found',
        "kubectl drain dgx-h100-9 --ignore-daemonsets": 'nodes "dgx-h100-9" not found',
        "kubectl -n notebooks scale deployment/dev-bob --replicas=0": 'deployments.apps "dev-bob" not found',
        "kubectl -n notebooks rollout restart deployment/dev-bob": 'deployments.apps "dev-bob" not found',  # no dry run
        "kubectl taint nodes dgx-h100-1 nvidia.com/gpu-rma=true:NoScheduel": "invalid taint effect",
        f"kubectl patch node dgx-h100-1 -p {shlex.quote(bad_effect)}": "Unsupported value: 'NoScheduel'",
        "kubectl -n research get pytorchjob/forecast-train": 'pytorchjobs.kubeflow.org "forecast-train" not found',
        "kubectl -n ml logs train-0": 'namespaces "ml" not found',
        "kubectl -n gpu-operator logs nvidia-driver-daemonset-fa6fd -c nvidia-driver-ctr "
        "--previous": "previous terminated container",
        "kubectl -n gpu-operator logs nvidia-operator-validator-ccaf1 -c driver-validaton": "is not valid for pod",
        "kubectl get pods -A --field-selector spec.node=dgx-h100-1": "not a known field selector",
        "kubectl -n gpu-operator logs --tail=50 $(kubectl -n gpu-operator get pods -l app=nvidia-dcgm-exporter "
        "--field-selector spec.nodeName=dgx-h100-9 -o name)": "kubectl rejects it",
        "kubectl -n default delete job/nccl-probe": 'jobs.batch "nccl-probe" not found',
        "kubectl -n gpu-operator get pods -l app=nvidia-dcgm-exportr -o wide": "No resources found",
        "kubectl debug node/dgx-h100-9 -it --image=busybox -- chroot /host dmesg -T": 'nodes "dgx-h100-9" not found',
        "kubectl -n gpu-operator exec $(kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset "
        "--field-selector spec.nodeName=dgx-h100-1 -o name) "
        "-c nvidia-driver -- nvidia-smi": "has no container 'nvidia-driver'",
        "kubectl -n gpu-operator logs -l app=nvidia-dcgm-exportr --tail=50": "No resources found",
        "kubectl label node dgx-h100-1 nvidia.com/mig.config=all-1g.10gb": "already has a value",  # no --overwrite
    }
    job = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: probe, namespace: NS}\nspec:\n  backoffLimit: 0\n"
        "  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n"
    )
    chk.files.update(
        {
            "typo.yaml": job.replace("NS", "default").replace("backoffLimit", "backofLimit"),
            "elsewhere.yaml": job.replace("NS", "nccl"),
        }
    )
    planted.update(
        {
            "kubectl apply -f typo.yaml": "'backofLimit' was unexpected",
            "kubectl apply -f elsewhere.yaml": 'namespaces "nccl" not found',
        }
    )
    for cmd, why in planted.items():
        problems = chk.check(cmd)
        assert problems and any(why in p for p in problems), (cmd, problems)
    assert all(m in ("PATCH", "POST") for m, _ in demo_double.dry_runs)
    # a write that forgot --dry-run=server is refused, never applied
    refused, _ = chk._run(["cordon", "dgx-h100-1"], str(demo_double.kubeconfig), None, "without --dry-run")
    assert refused and "answers writes only with dryRun=All" in refused[0], (refused, demo_double.requests[-3:])
    assert "unschedulable" not in demo_double.get("Node", "dgx-h100-1")["spec"]


def _against_the_demo_cluster(cmds) -> list[str]:
    """Commands that parse but do nothing or harm on the demo cluster: a taint the node already has (its pods
    tolerate it), ``kubectl delete pod`` of a pod a Deployment/StatefulSet recreates, a ``<placeholder>`` the
    shell would read as a redirection."""
    import re

    from gpulib.demo.simulator import FleetSimulator

    sim = FleetSimulator(end=DEMO_END)
    taints = {
        n["metadata"]["name"]: {(t["key"], t["effect"]) for t in n["spec"].get("taints") or []}
        for n in sim.nodes_json()["items"]
    }
    owners = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): (p["metadata"].get("ownerReferences") or [{}])[0].get(
            "kind"
        )
        for p in sim.pods_json()["items"]
    }
    out = []
    for where, cmd in cmds:
        if where.startswith(("xid_sop.csv", "operator_sop.yaml", "cheatsheet.csv", "nccl_signatures.csv")):
            continue
        if re.search(r"<[A-Za-z][A-Za-z0-9 _-]*>", cmd.split("#")[0]):
            out.append(f"{where}: placeholder the shell reads as a redirection: {cmd!r}")
        for argv in stages(cmd):
            if argv[:2] == ["kubectl", "taint"] and len(argv) > 4 and not argv[-1].endswith("-"):
                node, spec = argv[3], argv[4]
                key, effect = spec.split("=")[0].split(":")[0], spec.rsplit(":", 1)[-1]
                if (key, effect) in taints.get(node, set()):
                    out.append(f"{where}: node {node} already has taint {key}:{effect}: {cmd!r}")
            if (
                argv[:1] == ["kubectl"]
                and "delete" in argv
                and ("pod" in argv or any(a.startswith("pod/") for a in argv))
            ):
                ns = argv[argv.index("-n") + 1] if "-n" in argv else "default"
                names = [a.split("/", 1)[1] for a in argv if a.startswith("pod/")] or [argv[argv.index("pod") + 1]]
                for name in names:
                    if owners.get((ns, name)) in ("ReplicaSet", "StatefulSet", "Deployment"):
                        out.append(
                            f"{where}: {ns}/{name} is recreated by its {owners[(ns, name)]}: scale the owner: {cmd!r}"
                        )
    return out


def test_every_kubectl_debug_command_in_the_sop_tables_can_read_the_kernel_ring_and_pipes_cleanly():
    """A node command from an SOP table reads dmesg only with --profile=sysadmin where kernel.dmesg_restrict=1, and
    ``-t`` (a TTY) into a pipe fails or garbles the output: ``-i --quiet``, as the triage's kernel_log_command
    (gpulib/xid/steps.py)."""
    root = Path(__file__).resolve().parents[2] / "gpulib" / "data"
    bad = []
    for path in sorted(root.rglob("*.csv")):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                for line in (row.get("commands") or "").splitlines():
                    if line.startswith("kubectl debug"):
                        if "--profile=sysadmin" not in line or re.search(r"\s-(it|ti|t)\s", line):
                            bad.append(f"{path.relative_to(root)}: {line}")
    assert bad == []


def test_every_node_command_a_demo_run_prints_goes_through_kubectl(printed):
    """Every ``kubectl debug`` line a demo run prints carries --profile=sysadmin and no TTY,
    every nvidia-smi in one has the driver-container route (/run/nvidia/driver), and no line asks for a shell on the
    node ("# on NODE", sudo). Failed before: fleet_overview's nvidia-smi lines ran in a CUDA image without the
    driver, and the triage printed 'sudo nvidia-bug-report.sh   # on dgx-h100-1'."""
    cmds, _ = printed
    bad = []
    for where, cmd in cmds + _data_commands():
        for line in cmd.splitlines():
            if re.search(r"#\s*on\s", line) or line.startswith("sudo "):
                bad.append(f"{where}: {line}")
            if "kubectl debug" in line:
                if "--profile=sysadmin" not in line or re.search(r"\s-(it|ti|t)\s", line):
                    bad.append(f"{where}: {line}")
                if "nvidia-smi" in line.split(" | ")[0] and "/run/nvidia/driver" not in line:
                    bad.append(f"{where}: {line}")
    assert bad == [], "\n".join(bad)
    assert sum("kubectl debug" in c for _, c in cmds) >= 3


def test_a_reused_kubectl_answer_never_hides_a_change_of_the_cluster(demo_double, tmp_path):
    """A read asked again on the same objects is not run again; on other objects it is answered from the first run
    only where the double answers kubectl's requests as before (here: another node's objects changed), else kubectl
    runs again (here: the node it reads is gone, and the check fails)."""
    healthy = demo_cluster("healthy")
    demo_double.load(healthy)
    chk = Checker(tmp_path, double=demo_double)
    read = "kubectl get node dgx-h100-1 -o wide"
    assert chk.check(read) == [] and chk.check(read) == []
    assert chk.runs == 1
    other = [o for o in healthy if not (o["kind"] == "Node" and o["metadata"]["name"] == "a100-80-0")]
    demo_double.load(other)
    assert chk.check(read) == [] and chk.runs == 1  # the same conversation: the answer stands
    demo_double.load([o for o in healthy if not (o["kind"] == "Node" and o["metadata"]["name"] == "dgx-h100-1")])
    problems = chk.check(read)
    assert chk.runs == 2 and problems and 'nodes "dgx-h100-1" not found' in problems[0], problems
    assert chk.check("kubectl cordon dgx-h100-1") != [] and chk.check("kubectl cordon dgx-h100-1") != []
    assert chk.runs == 4  # writes (--dry-run=server) always run
