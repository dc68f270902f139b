"""The steps of ``runbooks/nccl_check.ipynb``: the runbook's inputs (a file given as a parameter, else a packaged
capture under ``gpulib/data/`` that the runbook names), the parameters applied to the verdict (GPU model,
interconnect, an ``expected`` override), a node's NVLink traffic from DCGM, the results history and the
in-cluster probe manifest.

Each step gathers what it read into one :class:`NcclInputs`; :func:`findings` turns what was gathered into the run's
findings in one call, so a caller without a notebook gets the same verdict. The parsers, bands and verdicts are
:mod:`gpulib.nccl.results`, :mod:`gpulib.nccl.bands` and :mod:`gpulib.nccl.log`; the tables and charts
:mod:`gpulib.nccl.view`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd

import gpulib.nccl.history as nh
import gpulib.nccl.job as nccl_job
from gpulib.core.errors import EmptyResult, InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import data_path
from gpulib.core.runbook import DIR, FILE, FILES_OR_DIRS, Param, Runbook, Step
from gpulib.fleet import NVLINK_MB_PER_GB, HealthFrames, health_findings
from gpulib.nccl.bands import Band, Verdict, verdict
from gpulib.nccl.env import check_environment
from gpulib.nccl.findings import job_findings, reference_finding
from gpulib.nccl.jobcause import analyze, first_errors
from gpulib.nccl.joblog import JobLog, read_job_logs
from gpulib.nccl.log import diagnose_log, summarize_log
from gpulib.nccl.results import NcclTestResult, parse_nccl_tests_all
from gpulib.nvidia.topology import Topology, parse_topology

NVLINK_FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"


def read_input(path: str, parameter: str, default: str | None = None) -> tuple[str, str]:
    """(text, where it came from) of a runbook input file; ``default`` names a packaged capture under
    ``gpulib/data/`` (the runbook passes the real 2xH200 captures the demo uses, e.g.
    :data:`gpulib.demo.artifacts.DEMO_TOPOLOGY`)."""
    if not path:
        if default is None:
            raise InvalidParameter(f"{parameter} is empty and has no default")
        p = data_path(default)
        return p.read_text(errors="replace"), f"packaged capture {default}"
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameter(
            f"{parameter}={path!r}: no such file",
            hint="give the path of a saved capture, or leave it empty for the packaged 2xH200 capture",
        )
    return p.read_text(errors="replace"), str(p)


def parse_expected(expected: str | float | None, collective: str) -> Band | None:
    """The ``expected`` parameter as a band: ``"300"`` (low end only) or ``"300-340"`` (GB/s busbw); empty -> None."""
    if expected in (None, ""):
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*(?:GB/s)?\s*", str(expected))
    if not m:
        raise InvalidParameter(f"expected={expected!r}: give the busbw band in GB/s as '300' or '300-340'")
    low = float(m.group(1))
    high = float(m.group(2)) if m.group(2) else low
    if high < low:
        raise InvalidParameter(f"expected={expected!r}: the high end is below the low end")
    return Band(collective, low, high, "override: runbook parameter expected", "runbook parameter", True)


def model_kwargs(*, topology: Topology | None = None, gpu_model: str = "", interconnect: str = "") -> dict[str, Any]:
    """Keywords for :func:`gpulib.nccl.bands.verdict` from the runbook parameters (empty ones left out, so the
    verdict still reads the GPU model from the run's rank lines)."""
    kw: dict[str, Any] = {}
    if topology is not None and topology.gpus:
        kw["topology"] = topology
    if gpu_model:
        kw["gpu_model"] = gpu_model
    if interconnect:
        kw["interconnect"] = interconnect
    return kw


def capture_hosts(result: NcclTestResult) -> str | None:
    """The host(s) a run's ``#  Rank`` lines name (the machine the findings are about), else None."""
    if result.ranks.empty:
        return None
    return ",".join(dict.fromkeys(str(h) for h in result.ranks["host"]))


def verdicts(
    results: list[NcclTestResult], *, expected: str = "", node: str | None = None, text: str | None = None, **model: Any
) -> list[Verdict]:
    """One verdict per collective run (an ``expected`` override replaces the modelled band); each finding
    names ``node``, else the host(s) of the run's rank lines. A run judged against a band measured on that
    very capture (``text`` equals a file the band's source cites) is a ``reference`` verdict, not a
    comparison: a capture always meets a band derived from itself."""
    out = []
    for r in results:
        host = node or capture_hosts(r)
        v = verdict(r, parse_expected(expected, r.collective or "unknown"), node=host, **model)
        if text is not None and v.band is not None and not expected and _band_measured_on(v.band, text):
            v = replace(v, status="reference", finding=reference_finding(v, host))
        out.append(v)
    return out


def _band_measured_on(band: Band, text: str) -> bool:
    """Whether ``band.source`` cites a capture file of this checkout whose text is ``text``."""
    root = Path(__file__).resolve().parent.parent.parent
    for name in re.findall(r"[\w./-]+\.txt", band.source or ""):
        for cand in (root / name, root / "gpulib" / "data" / name):
            try:
                if cand.is_file() and cand.read_text(errors="replace").strip() == text.strip():
                    return True
            except OSError:
                continue
    return False


def log_node(results: list[NcclTestResult]) -> str | None:
    """The host(s) the NCCL log's findings are about: those of the first run's rank lines."""
    return capture_hosts(results[0]) if results else None


def environment_findings(log_text: str, node: str | None = None) -> list[Finding]:
    """:func:`gpulib.nccl.env.check_environment` on the NCCL_* variables the log says were set by environment."""
    return list(check_environment(summarize_log(log_text).env, node=node))


# ------------------------------------------------------------------------------------ NVLink (DCGM)
def nvlink_rates(series: pd.DataFrame) -> pd.DataFrame:
    """NVLink bandwidth per GPU in GB/s (column ``gbs``) from a SERIES frame of :data:`NVLINK_FIELD`: a bandwidth
    in MB/s, not a byte counter (:data:`gpulib.fleet.health.NVLINK_MB_PER_GB` cites DCGM's field table)."""
    cols = ["timestamp", "node", "gpu", "gbs"]
    if series is None or series.empty:
        return pd.DataFrame(columns=cols)
    df = series.sort_values(["node", "gpu", "timestamp"], kind="stable")
    out = pd.DataFrame(
        {
            "timestamp": df["timestamp"],
            "node": df["node"],
            "gpu": df["gpu"].astype(str),
            "gbs": pd.to_numeric(df["value"], errors="coerce") / NVLINK_MB_PER_GB,
        }
    )
    return out.dropna(subset=["gbs"]).reset_index(drop=True)[cols]


def nvlink_frames(src, node: str, window: str) -> HealthFrames:
    """The node's mean NVLink bandwidth per GPU over the window, as the fleet's health checks read it: its NVLink
    rule (:func:`gpulib.fleet.health_findings`) on this node only is the step's finding."""
    df = src.summary(NVLINK_FIELD, window, "avg", node=node)
    return HealthFrames(window=window, frames={NVLINK_FIELD: df})


def nvlink_series(src, node: str, window: str) -> pd.DataFrame:
    """The node's NVLink bandwidth series; EmptyResult saying why when the field has no samples there."""
    try:
        return src.series(NVLINK_FIELD, window, node=node)
    except EmptyResult as exc:
        raise EmptyResult(
            f"{NVLINK_FIELD} has no samples on {node}: the GPUs may have no NVLink, or the field is not exported",
            query=NVLINK_FIELD,
        ) from exc


# ------------------------------------------------------------------------------------ results history
def runbook_history(
    history_dir: str,
    cluster: str,
    *,
    results: list[NcclTestResult],
    verdicts: list[Verdict],
    record: bool = False,
    instance_type: str = "",
    default_input: bool = True,
    default_history: Callable[[], tuple[pd.DataFrame, str]] | None = None,
) -> tuple[pd.DataFrame | None, str]:
    """(history, where it came from) for the runbook, or (None, why not).

    ``history_dir`` given: ``<history_dir>/<cluster>.csv``, after appending this run's verdicts when ``record``.
    Empty: ``default_history()`` -> (history, where it came from) when the runbook shows the packaged capture
    (``default_input``; the runbook passes :func:`gpulib.demo.nccl_history.runbook_default_history`); none for a
    user's own file (a history of the packaged capture next to it would mislead) or when no ``default_history``
    is given."""
    if not history_dir:
        if record:
            raise InvalidParameter("record_history=True needs history_dir (the folder of the per-cluster CSVs)")
        if not default_input or default_history is None:
            return None, (
                "No results history: set history_dir (and record_history=True to add this run) to chart "
                "busbw over time."
            )
        return default_history()
    path = nh.default_path(cluster, history_dir)
    if record:
        judged = [(r, v) for r, v in zip(results, verdicts) if v.measured_busbw is not None]
        if judged:
            rs, vs = zip(*judged)
            nh.append(
                nh.rows_from_run(
                    list(rs), list(vs), cluster=cluster, instance_type=instance_type, origin="runbook nccl_check"
                ),
                path,
            )
    return nh.load(path), str(path)


# ------------------------------------------------------------------------------------ in-cluster probe
def runbook_probe_manifest(nodes: int, gpus: int, node: str = "", image: str = "") -> tuple[dict[str, Any], list[str]]:
    """The in-cluster probe manifest for the runbook's parameters (the probe's ConfigMap plus a Job on ``node`` for
    one node, a PyTorchJob for several; ``image`` empty: the public default of ``nccl_job_defaults.csv``) and what
    validation said (kubernetes-validate is a test extra: skipped with a line if absent)."""
    manifest = nccl_job.probe_manifest(nodes, gpus=gpus, node=node or None, image=image or None)
    try:
        checked = nccl_job.validate(manifest)
    except ImportError:
        checked = ["kubernetes-validate is not installed: schema validation skipped (pip install kubernetes-validate)"]
    return manifest, checked


def read_results(text: str) -> list[NcclTestResult]:
    """The nccl-tests runs of ``text`` that have a result table or errors (runs that printed nothing are dropped)."""
    return [r for r in parse_nccl_tests_all(text) if len(r.table) or r.errors]


# ------------------------------------------------------------------------------------ the verdict
@dataclass
class NcclInputs:
    """Everything the nccl_check findings are computed from, step by step; None: the step could not read it."""

    #: one verdict per collective run (:func:`verdicts`)
    verdicts: list[Verdict] | None = None
    #: the results history (:func:`runbook_history`)
    history: pd.DataFrame | None = None
    #: the NCCL_DEBUG=INFO log (a file, or the NCCL lines of the nccl-tests output) and the host(s) it is about
    log_text: str | None = None
    log_node: str | None = None
    #: the node's NVLink traffic from DCGM (:func:`nvlink_frames`)
    nvlink: HealthFrames | None = None
    #: the in-cluster probe manifest (:func:`runbook_probe_manifest`)
    manifest: dict[str, Any] | None = None
    #: a failed job's logs, all ranks (:func:`gpulib.nccl.joblog.read_job_logs`), the node of each host they name
    #: and what the source says about it (:func:`node_evidence`)
    joblog: JobLog | None = None
    job_nodes: dict[str, str] | None = None
    job_pods: dict[str, str] | None = None
    node_evidence: dict[str, list[str]] | None = None


def findings(inp: NcclInputs) -> list[Finding]:
    """The findings of the run from what the steps gathered, in the order of the steps: the verdict of each run,
    the history's drop check, the log's diagnosis (when it has NCCL lines) and environment checks (when there is a
    log), the node's NVLink traffic, and the probe pods' NCCL checks."""
    fs = [v.finding for v in inp.verdicts or [] if v.finding is not None]
    if inp.history is not None:
        fs += nh.history_findings(inp.history)
    if inp.joblog is not None:
        fs += job_findings(
            analyze(inp.joblog), inp.joblog, nodes=inp.job_nodes, node_evidence=inp.node_evidence, pods=inp.job_pods
        )
    if inp.log_text is not None and "NCCL " in inp.log_text:
        fs += diagnose_log(inp.log_text, node=inp.log_node, signatures=inp.joblog is None)
    if inp.log_text:
        fs += environment_findings(inp.log_text, node=inp.log_node)
    if inp.nvlink is not None:
        fs += health_findings(inp.nvlink)
    if inp.manifest is not None:
        fs += nccl_job.pod_findings(inp.manifest)
    return fs


# ------------------------------------------------------------------------------------ the runbook
def gather_topology(c) -> None:
    """The ``nvidia-smi topo -m`` of the machine (a file, else the packaged capture the context names)."""
    c.topo_text, c.where = read_input(c.topology_file, "topology_file", c.default_topology)
    c.topo = parse_topology(c.topo_text)


def gather_results(c) -> None:
    """The nccl-tests runs and one verdict per run against its band."""
    c.tests_text, c.where = read_input(c.nccl_tests_file, "nccl_tests_file", c.default_tests)
    c.results = read_results(c.tests_text)
    c.verdicts = c.inp.verdicts = verdicts(
        c.results,
        expected=c.expected,
        text=c.tests_text,
        **model_kwargs(topology=c.topo, gpu_model=c.gpu_model, interconnect=c.interconnect),
    )


def gather_history(c) -> None:
    """The results history (``record_history`` appends this run to it: a side-effect parameter of the runbook)."""
    c.history, c.where = runbook_history(
        c.history_dir,
        c.cluster,
        results=c.results,
        verdicts=c.verdicts,
        record=c.record_history,
        instance_type=c.instance_type,
        default_input=not c.nccl_tests_file,
        default_history=c.default_history,
    )
    c.inp.history = c.history


def node_evidence(src, hosts: list[str]) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """(host -> node, host -> what the source says, host -> namespace of its pod) for each host of the job's logs
    that is a node of the source (hostNetwork pods carry their node's name) or a pod of it (a pod's hostname is its
    name): the node's XID lines from its kernel log, a NotReady condition and the pod's placement."""
    nodes = set(src.known_nodes())
    pods = src.pods()
    placed = {p: (ns, n) for ns, p, n in zip(pods["namespace"], pods["pod"], pods["node"])} if len(pods) else {}
    frame = src.nodes()
    where: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    namespaces: dict[str, str] = {}
    for h in dict.fromkeys(hosts):
        ns, node = (None, h) if h in nodes else placed.get(h, (None, None))
        if not node or node not in nodes:
            continue
        where[h] = node
        if ns:
            namespaces[h] = ns
        lines = [f"pod {ns}/{h} runs on node {node}"] if ns else []
        row = frame[frame["node"] == node]
        if len(row) and "ready" in row and not bool(row["ready"].iloc[0]):
            lines.append(f"node {node} is NotReady")
        klog = src.kernel_log(node) or ""
        lines += [f"kernel log of {node}: {ln.strip()[:200]}" for ln in klog.splitlines() if "NVRM: Xid" in ln][-3:]
        out[h] = lines
    return where, out, namespaces


def job_inputs(src, path: str, inp: NcclInputs) -> JobLog:
    """Read a failed job's logs (``nccl_log_file``) into ``inp``: the events, the text's start for the communicator
    summary and the environment checks, and what ``src`` says about the hosts they name (None: nothing)."""
    job = read_job_logs(path)
    inp.joblog, inp.log_text = job, job.head
    inp.log_node = job.hosts[0] if len(job.hosts) == 1 else None
    if src is not None:
        hosts = [h for e in job.events for h in (e.host, job.host_of(e.peer)) if h]
        inp.job_nodes, inp.node_evidence, inp.job_pods = node_evidence(src, hosts)
    return job


def job_log_findings(src, path: str) -> list[Finding]:
    """The findings of a failed job's logs without a notebook, as the runbook gives them for ``nccl_log_file``."""
    inp = NcclInputs()
    job_inputs(src, path, inp)
    return findings(inp)


def gather_log(c) -> None:
    """The NCCL logs: a file, several (comma-separated) or a folder of a job's pods, streamed and joined with the
    source's node evidence (:func:`job_inputs`); else the NCCL lines of the nccl-tests output."""
    if c.nccl_log_file:
        job = job_inputs(getattr(c, "src", None), c.nccl_log_file, c.inp)
        c.log_text, c.where, c.first_errors = job.head, ", ".join(job.files), first_errors(job)
        return
    c.log_text, c.where = c.tests_text, "the NCCL lines of nccl_tests_file"
    c.inp.log_text, c.inp.log_node = c.log_text, log_node(c.results)


def gather_environment(c) -> None:
    c.env_findings = environment_findings(c.log_text, node=c.inp.log_node)
    c.log_env = summarize_log(c.log_text).env


def gather_nvlink(c) -> None:
    c.rates = nvlink_rates(nvlink_series(c.src, c.node, c.window))
    c.inp.nvlink = nvlink_frames(c.src, c.node, c.window)


def gather_probe(c) -> None:
    """The in-cluster probe manifest (a dry run: nothing is applied)."""
    c.manifest, c.checked = runbook_probe_manifest(c.probe_nodes, c.probe_gpus, c.node, c.probe_image)
    c.image_note = nccl_job.image_note(c.manifest)
    c.inp.manifest = c.manifest
    c.pod_findings = nccl_job.pod_findings(c.manifest)
    c.manifest_yaml = nccl_job.to_yaml(c.manifest)
    c.apply_commands = nccl_job.apply_commands(c.manifest, "nccl-probe.yaml")


def _start(c) -> dict[str, Any]:
    return {
        "inp": NcclInputs(),
        "tests_text": None,
        "topo": None,
        "log_text": None,
        "results": [],
        "verdicts": [],
        "first_errors": None,
    }


def _findings(c) -> list[Finding]:
    return findings(c.inp)


_VIEW = "gpulib.nccl.view:"
RUNBOOK = Runbook(
    name="nccl_check",
    domain="nccl",
    params=(
        Param("source", "demo", "demo | live | snapshot (for the nodes NVLink traffic from DCGM)"),
        Param("snapshot_dir", "", "folder of a snapshot source", kind=DIR),
        Param("node", "dgx-h100-0", "GPU node whose NVLink traffic to check in DCGM; empty: skip"),
        Param("window", "6h", "DCGM window for the NVLink traffic (Prometheus duration)"),
        Param(
            "nccl_tests_file", "", "nccl-tests / gpulib.nccl.probe output; empty: packaged 2xH200 capture", kind=FILE
        ),
        Param("topology_file", "", "`nvidia-smi topo -m` of the machine; empty: packaged 2xH200 capture", kind=FILE),
        Param(
            "nccl_log_file",
            "",
            "a failed jobs logs: a file, several (comma-separated) or a folder of its pods logs (kubectl logs, "
            "NCCL_DEBUG:WARN/INFO, DistBackendError); empty: the NCCL lines inside nccl_tests_file",
            kind=FILES_OR_DIRS,
        ),
        Param("gpu_model", "", "e.g. H200; empty: read from the runs rank lines"),
        Param("interconnect", "", "NVLink3 | NVLink4 | NVLink5 | NVLink-bridge | PCIe; empty: from the topology"),
        Param("expected", "", "override the expected busbw band in GB/s: 300 or 300-340; empty: the models band"),
        Param(
            "history_dir",
            "",
            "folder of per-cluster results histories (<history_dir>/<cluster>.csv); empty: demo history",
        ),
        Param("cluster", "demo", "cluster name: the history file name"),
        Param("instance_type", "", "recorded with this run in the history (e.g. p5.48xlarge)"),
        Param("record_history", False, "append this runs verdicts to <history_dir>/<cluster>.csv"),
        Param("probe_nodes", 1, "in-cluster probe manifest: 1: a Job on `node`, 2+: a Kubeflow PyTorchJob"),
        Param("probe_gpus", 8, "GPUs per node for the in-cluster probe"),
        Param("probe_image", "", "image of the probe pods; empty: the public PyTorch image (nccl_job_defaults.csv)"),
    ),
    steps=(
        Step("Topology", gather_topology, _VIEW + "show_topology", inputs=("nvidia-smi topo -m",)),
        Step("nccl-tests results", gather_results, inputs=("nccl-tests output",)),
        # what was read is shown also when judging it failed (a bad ``expected``): a show-only step of its own
        Step("nccl-tests results shown", None, _VIEW + "show_results"),
        Step("Results history", gather_history, _VIEW + "show_history", inputs=("results history",)),
        Step("NCCL_DEBUG log", gather_log, _VIEW + "show_log", inputs=("NCCL_DEBUG=INFO log",)),
        Step(
            "Environment checks",
            gather_environment,
            _VIEW + "show_environment",
            needs=("log_text",),
            why="no NCCL log to read the environment from (see NCCL log above).",
            inputs=("NCCL_DEBUG=INFO log",),
        ),
        Step(
            "NVLink traffic",
            gather_nvlink,
            _VIEW + "show_nvlink",
            needs=("src", "node"),
            why="no node given (-p node NAME checks its NVLink traffic in DCGM).",
            inputs=(NVLINK_FIELD,),
        ),
        Step("In-cluster probe manifest", gather_probe, _VIEW + "show_probe"),
    ),
    findings=_findings,
    start=_start,
    side_effect_params=("record_history",),
)
