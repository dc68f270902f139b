"""The steps of ``runbooks/xid_ecc_triage.ipynb``: the inputs gathered from a source, the verdict over them, and the
dry-run remediation that follows from it.

:func:`collect` fetches the inputs from any source (kernel log, ``nvidia-smi -q``, ``dcgmi diag``, DCGM summaries
and series) and says what is missing; :func:`findings` is the one call that turns the gathered inputs into the run's
findings (the rules are :mod:`gpulib.xid.triage`, the Findings :mod:`gpulib.xid.findings`), so a caller without a
notebook gets the same verdict; :func:`remediation_plan` plans the drain (:mod:`gpulib.kube.remediate`) the top
finding calls for. The tables and charts are :mod:`gpulib.xid.view`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import gpulib.kube.remediate as remediate
import gpulib.xid.findings as xfindings
import gpulib.xid.triage as triage
from gpulib.core.errors import EmptyResult, InvalidParameter, NoInput, SourceError
from gpulib.core.findings import Finding, Severity
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.nodecmd import expand
from gpulib.core.runbook import DIR, FILE, Param, Runbook, Step
from gpulib.core.timeutil import parse_window
from gpulib.core.validate import command, node_name
from gpulib.kube import agents
from gpulib.nvidia import fabric
from gpulib.nvidia.dcgmi import parse_dcgmi_diag
from gpulib.nvidia.nvlink import parse_nvlink_status
from gpulib.nvidia.smi import parse_query
from gpulib.sources.base import default_step
from gpulib.xid.catalog import lookup
from gpulib.xid.diag import diag_findings
from gpulib.xid.evidence import check_evidence, evidence_groups, present_inputs
from gpulib.xid.kernel_log import parse_kernel_log
from gpulib.xid.sops import pod_impact
from gpulib.xid.target import Target, resolve

#: DCGM fields the triage reads as one value per GPU over the window, with the stat it needs
SUMMARY_STATS = {
    triage.DBE_VOL: "increase",
    triage.SBE_VOL: "increase",
    triage.UNC_REMAP: "increase",
    triage.REMAP_FAILURE: "max",
    triage.REMAP_PENDING: "max",
    triage.RETIRED_PENDING: "max",
    triage.GPU_TEMP: "p95",
}
#: gauges read as the max over each step, so an event shorter than a step is never missed (a plain range
#: query returns one sample per step: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries)
EVENT_GAUGES = (triage.XID_GAUGE, triage.REMAP_FAILURE)
#: DCGM fields drawn over time (the XID gauge is also read for its changes)
SERIES_FIELDS = [
    triage.XID_GAUGE,
    triage.DBE_VOL,
    triage.SBE_VOL,
    triage.UNC_REMAP,
    triage.REMAP_FAILURE,
    triage.GPU_TEMP,
    "DCGM_FI_DEV_POWER_USAGE",
]

#: SOP rules of triage that take the GPU out of service (besides XID buckets in triage.DRAIN_BUCKETS)
_DRAIN_RULES = {"ROW_REMAP_FAILURE", "DBE_ERRORS"}
DEBUG_IMAGE = "ubuntu:22.04"


def kernel_log_command(node: str) -> str:
    """How to fetch a node's NVRM lines (the node route of :mod:`gpulib.core.nodecmd`): the Xid lines and the
    "fallen off the bus" messages the driver prints without an Xid (:func:`gpulib.xid.catalog.parse_kernel_log`)."""
    return expand("@node dmesg -T | grep -i -E 'NVRM: Xid|fallen off the bus'", node)


def collect_command(node: str) -> str:
    """The ``gpuops collect`` line that fetches the node's kernel log and nvidia-smi reports
    (:mod:`gpulib.kube.collect`)."""
    return command("gpuops", "collect", node_name(node), "--apply")


def smi_query_commands(node: str) -> list[str]:
    """How to get ``nvidia-smi -q`` from a node: its GPU Operator pods, and nvidia-smi by the driver route of
    :mod:`gpulib.core.nodecmd` (the host's driver, or the operator's driver container's)."""
    return [
        command("kubectl", "-n", "gpu-operator", "get", "pods", "-o", "wide", f"--field-selector=spec.nodeName={node}"),
        expand("@driver nvidia-smi -q > nvidia-smi-q.txt", node),
    ]


@dataclass
class TriageInputs:
    """Everything the triage of one node (and GPU) reads, and what could not be had."""

    node: str
    gpu: str | None
    window: str
    kernel_log: str | None = None
    kernel_log_from: str = ""
    xid_events: pd.DataFrame | None = None
    smi_text: str | None = None
    smi_from: str = ""
    smi: pd.DataFrame | None = None
    summaries: dict[str, pd.DataFrame] = field(default_factory=dict)
    series: dict[str, pd.DataFrame] = field(default_factory=dict)
    pods: pd.DataFrame | None = None
    diag_text: str | None = None
    #: ``nvidia-smi nvlink -s`` of the node (the source's), None when it has none
    nvlink_text: str | None = None
    diag_from: str = ""
    diag: pd.DataFrame | None = None
    after_reset: bool = False
    missing: list[str] = field(default_factory=list)
    target: Target | None = None
    #: the end of the window (the source's :attr:`~gpulib.sources.base.Source.end`): the timeline's right edge
    end: Any = None
    #: other agents' GPU conditions on the node (:func:`gpulib.kube.agents.agent_conditions`), None when unread
    agents: pd.DataFrame | None = None

    @property
    def missing_dcgm(self) -> list[str]:
        """The DCGM fields this source did not export (so the ECC/row-remap step could not check them)."""
        return [f for f in self.missing if f.startswith("DCGM_")]

    @property
    def dcgm(self) -> dict[str, pd.DataFrame]:
        """DCGM frames for :func:`gpulib.xid.triage.triage_node`: summaries plus the XID gauge series."""
        out = dict(self.summaries)
        if triage.XID_GAUGE in self.series:
            out[triage.XID_GAUGE] = self.series[triage.XID_GAUGE]
        return out


def _read(path: str, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameter(
            f"{what}={path!r}: no such file", hint="give the path of a saved text capture, or leave it empty"
        )
    return p.read_text(errors="replace")


def validate(src, node: str, gpu: Any, window: str) -> tuple[str, str | None]:
    """Check the parameters against the source: UnknownNode, UnknownGPU, InvalidWindow name the bad value.
    Returns (node, GPU index or None); a UUID or MIG UUID is resolved to its GPU's index (:mod:`gpulib.xid.target`)."""
    t = _target(src, node, gpu, window)
    return t.node, t.gpu


def _target(src, node: str, gpu: Any, window: str, smi: pd.DataFrame | None = None) -> Target:
    parse_window(window)
    if not node:
        raise InvalidParameter("node is empty: give the GPU node from the alert (its hostname label)")
    node = node_name(node)
    if gpu in (None, ""):
        src.gpus(node, window)  # UnknownNode for a node the source does not have
    return resolve(src, node, gpu, window, smi)


def collect(
    src,
    node: str,
    gpu: Any = None,
    window: str = "6h",
    *,
    kernel_log_file: str = "",
    smi_file: str = "",
    diag_file: str = "",
    after_reset: bool = False,
) -> TriageInputs:
    """Gather the triage inputs for ``node`` (and ``gpu``: index, GPU UUID or MIG UUID) from ``src``; files
    given override the source's. A ``gpu`` matching none of the node's GPUs raises UnknownGPU.

    ``diag_file`` / the source's ``diag_report``: a ``dcgmi diag`` result (JSON or table) read by
    :func:`gpulib.xid.diag.diag_findings`; ``after_reset``: the SOP's reset or reboot was done before it ran."""
    parse_window(window)
    if not node:
        raise InvalidParameter("node is empty: give the GPU node from the alert (its hostname label)")
    node = node_name(node)

    def text_input(path: str, param: str, fetch):  # a file given overrides what the source has
        return (_read(path, param), path) if path else (fetch(node), src.describe())

    smi_text, smi_from = text_input(smi_file, "smi_file", src.smi_query)
    smi = parse_query(smi_text) if smi_text is not None else None
    target = _target(src, node, gpu, window, smi)
    inp = TriageInputs(
        node=node, gpu=target.gpu, window=window, target=target, after_reset=bool(after_reset), end=src.end
    )
    inp.diag_text, inp.diag_from = text_input(diag_file, "diag_file", src.diag_report)
    if inp.diag_text is not None:
        inp.diag = parse_dcgmi_diag(inp.diag_text)
        inp.nvlink_text = src.nvlink_status(node)  # a diag pass with every NVLink down is not healthy
    inp.kernel_log, inp.kernel_log_from = text_input(kernel_log_file, "kernel_log_file", src.kernel_log)
    if inp.kernel_log is not None:
        inp.xid_events = parse_kernel_log(inp.kernel_log)
    else:
        inp.missing.append("kernel log")
    inp.smi_text, inp.smi_from, inp.smi = smi_text, smi_from, smi
    if smi is None:
        inp.missing.append("nvidia-smi -q")
    for f, stat in SUMMARY_STATS.items():
        try:
            inp.summaries[f] = src.summary(f, window, stat, node=node)
        except EmptyResult:
            inp.missing.append(f)
    step = default_step(parse_window(window))
    for f in SERIES_FIELDS:
        try:
            if f in EVENT_GAUGES:
                inp.series[f] = src.series(f, window, node=node, step=step, agg="max")
            else:
                inp.series[f] = src.series(f, window, node=node)
        except EmptyResult:
            if f not in inp.missing:
                inp.missing.append(f)
    inp.pods = src.pods()
    inp.agents = agent_rows(src, node)
    return inp


def agent_rows(src, node: str) -> pd.DataFrame | None:
    """Other agents' GPU conditions on ``node`` from the source's Node objects (and ComputeDomains where it has
    them, which decide the IMEX false positive); None when the source has no Node objects."""
    try:
        mine = [n for n in src.objects("nodes") if ((n.get("metadata") or {}).get("name")) == node]
    except SourceError:
        return None
    try:
        cds = src.objects("computedomains")
    except (SourceError, InvalidParameter):
        cds = None
    return agents.agent_conditions({"items": mine}, compute_domains=cds)


def gpu_map(inp: TriageInputs) -> pd.DataFrame:
    """GPU index <-> UUID <-> PCI bus id on the node, from nvidia-smi and the node's DCGM rows (``pci_bus_id``)."""
    frames = [inp.smi] + [f for f in list(inp.summaries.values()) + list(inp.series.values()) if f is not None]
    return triage.node_gpu_ids(inp.node, *frames)


def xid_timeline(inp: TriageInputs) -> pd.DataFrame:
    """Every XID event on the node: kernel-log lines (GPU index and UUID found by PCI bus id through
    nvidia-smi or DCGM's ``pci_bus_id`` label) and DCGM gauge changes (PCI bus id filled the same way).

    Columns: timestamp, gpu (index as str, "" when unknown), uuid, pci_bus_id, xid, mnemonic, source, message.
    """
    cols = ["timestamp", "gpu", "uuid", "pci_bus_id", "xid", "mnemonic", "source", "message"]
    ids = gpu_map(inp).to_dict("records")
    by_pci = {r["pci_bus_id"]: r for r in ids if r["pci_bus_id"]}
    by_gpu = {r["gpu"]: r for r in ids if r["gpu"]}
    rows = []
    if inp.xid_events is not None:
        for r in inp.xid_events.to_dict("records"):
            pci = normalise_pci_bus_id(r.get("pci_bus_id"))
            hit = by_pci.get(pci, {})
            rows.append(
                {
                    "timestamp": r.get("timestamp"),
                    "gpu": hit.get("gpu") or "",
                    "uuid": hit.get("uuid") or "",
                    "pci_bus_id": pci or "",
                    "xid": int(r["xid"]),
                    "source": "kernel log",
                    "message": str(r.get("message") or ""),
                }
            )
    ev = triage.xid_events_from_gauge(inp.series.get(triage.XID_GAUGE))
    for r in ev.to_dict("records"):
        hit = by_gpu.get(str(r["gpu"]), {})
        rows.append(
            {
                "timestamp": r["timestamp"],
                "gpu": str(r["gpu"]),
                "uuid": (r["uuid"] if isinstance(r.get("uuid"), str) and r["uuid"] else hit.get("uuid") or ""),
                "pci_bus_id": hit.get("pci_bus_id") or "",
                "xid": int(r["xid"]),
                "source": triage.XID_GAUGE + (" (before the window)" if r["carried_over"] else ""),
                "message": "gauge changed to this code",
            }
        )
    df = pd.DataFrame(rows, columns=[c for c in cols if c != "mnemonic"])
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce")
    df["mnemonic"] = [lookup(x).mnemonic for x in df["xid"]]
    return df[cols].sort_values("timestamp", kind="stable").reset_index(drop=True)


def for_gpu(events: pd.DataFrame, gpu: str | None) -> pd.DataFrame:
    """Events of one GPU (all when ``gpu`` is None; events whose GPU is unknown are kept)."""
    if gpu is None or events.empty:
        return events
    return events[(events["gpu"] == str(gpu)) | (events["gpu"] == "")]


def impact(inp: TriageInputs) -> pd.DataFrame:
    """Pods on the affected GPU (or the node's GPU pods), with owners (:func:`gpulib.xid.sops.pod_impact`)."""
    uuid = None
    if inp.gpu is not None:
        ids = gpu_map(inp)
        hit = ids[ids["gpu"] == inp.gpu]
        uuid = hit["uuid"].iloc[0] if len(hit) else None
    return pod_impact(inp.node, inp.gpu, pods=inp.pods, dcgm=inp.dcgm, uuid=uuid)


def has_input(inp: TriageInputs) -> bool:
    """Whether anything the triage reads was there: a kernel log, nvidia-smi -q, or a DCGM frame with rows."""
    frames = list(inp.summaries.values()) + list(inp.series.values())
    diag = getattr(inp, "diag", None)
    return (
        inp.kernel_log is not None
        or inp.smi is not None
        or (diag is not None and len(diag) > 0)
        or any(f is not None and len(f) for f in frames)
    )


def findings(inp: TriageInputs) -> list[Finding]:
    """The findings of the run, from the gathered inputs alone: :func:`gpulib.xid.findings.triage_node` and the
    ``dcgmi diag`` results (:func:`gpulib.xid.diag.diag_findings`), restricted to the requested GPU.
    NoInput (the run is INCOMPLETE) when none of the inputs could be read: no input, no verdict."""
    if not has_input(inp):
        raise NoInput(
            f"no input to triage {inp.node}: no kernel log, no nvidia-smi -q and no DCGM series for the node "
            f"in the last {inp.window} (missing: {', '.join(inp.missing)})"
        )
    fs = xfindings.triage_node(
        inp.node, gpu=inp.gpu, window=inp.window, xid_events=inp.xid_events, smi=inp.smi, dcgm=inp.dcgm, pods=inp.pods
    )
    t = inp.target
    ds = diag_findings(
        inp.diag,
        inp.node,
        inp.gpu,
        after_reset=inp.after_reset,
        source=inp.diag_from,
        smi=inp.smi,
        pci_bus_id=t.pci_bus_id if t else "",
        uuid=t.uuid if t else "",
        nvlink=parse_nvlink_status(inp.nvlink_text) if inp.nvlink_text else None,
    )
    extra = fabric.gpu_findings(inp.smi, inp.node, inp.gpu)  # the GPU's NVLink fabric verdict (nvidia-smi -q)
    if any(f.severity != Severity.OK for f in extra):
        fs = [f for f in fs if f.category != "ok"]  # "no XID, ECC or thermal problem" is no longer the verdict
    fs += extra
    if inp.agents is not None:  # an agent's XID finding folds into ours of the same XID: one fault, one finding
        fs = agents.fold_agent_findings(fs, agents.agent_findings(inp.agents))
    return xfindings.combine(fs, ds, inp.node, inp.gpu)


def takes_gpu_out(f: Finding | None) -> bool:
    """Whether a finding's SOP step drains the node (XID bucket or memory rule that takes the GPU out of service)."""
    if f is None or f.severity not in (Severity.CRITICAL, Severity.WARNING):
        return False
    return f.data.get("bucket") in triage.DRAIN_BUCKETS or f.data.get("rule") in _DRAIN_RULES


def remediation_plan(fs: list[Finding], node: str, cluster: Any = None):
    """Dry-run remediation for the top finding: a drain (cordon + GPU pod evictions) when its SOP takes the
    GPU out of service, nothing otherwise. ``cluster``: a KubeCluster for a server-side dry run, else a plan."""
    top = fs[0] if fs else None
    if not takes_gpu_out(top):
        return []
    return [remediate.drain(node, cluster=cluster, apply=False, reason=f"xid_ecc_triage: {top.title}")]


# ------------------------------------------------------------------------------------------------- the runbook
def gather_inputs(c) -> None:
    """Check the parameters against the source and gather every input (:func:`collect`), then the XID events."""
    c.inp = collect(
        c.src,
        c.node,
        c.gpu,
        c.window,
        kernel_log_file=c.kernel_log_file,
        smi_file=c.smi_file,
        diag_file=c.diag_file,
        after_reset=c.after_reset,
    )
    c.events = xid_timeline(c.inp)
    c.target = c.inp.target.label


def gather_meaning(c) -> None:
    c.mine = for_gpu(c.events, c.inp.gpu)


def gather_impact(c) -> None:
    c.hit = impact(c.inp)


def gather_timeline(c) -> None:
    """Where the source has no kernel log, the commands that fetch it (they check the node's name)."""
    c.log_commands = (collect_command(c.inp.node), kernel_log_command(c.inp.node)) if c.inp.kernel_log is None else ()


def gather_memory(c) -> None:
    """Where the source has no ``nvidia-smi -q``, the commands that fetch it."""
    c.smi_commands = smi_query_commands(c.inp.node) if c.inp.smi is None else []


def gather_triage(c) -> None:
    c.fs = findings(c.inp)


def gather_evidence(c) -> None:
    """What each decision of the triage rested on; INCOMPLETE (NoInput) when a decision had none of its inputs."""
    have = present_inputs(c.inp)
    c.evidence = [(g.decision, [i for i in g.inputs if i in have]) for g in evidence_groups()]
    check_evidence(c.inp, [kernel_log_command(c.inp.node)])


def gather_plan(c) -> None:
    """The dry-run drain (against a cluster a server-side dry run with an audit record: ``effects``)."""
    c.plan = remediation_plan(c.fs, c.inp.node, cluster=c.src.kube_cluster())


def _start(c) -> dict[str, Any]:
    return {"inp": None, "events": None, "fs": None, "target": None}


def _verdict(c) -> list[Finding] | None:
    return c.fs


_VIEW = "gpulib.xid.view:"
RUNBOOK = Runbook(
    name="xid_ecc_triage",
    domain="xid",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param(
            "snapshot_dir",
            "",
            "folder with nodes.json, pods.json, metrics*.txt, dmesg-<node>.txt, nvidia-smi-q-<node>.txt",
            kind=DIR,
        ),
        Param("node", "dgx-h100-1", "GPU node from the alert (its hostname label)"),
        Param("gpu", "5", "GPU index, GPU UUID or MIG UUID from the alert; empty: every GPU of the node"),
        Param("window", "6h", "how far back to look (Prometheus duration: 30m, 6h, 2d)"),
        Param(
            "kernel_log_file",
            "",
            "optional: a saved `dmesg -T` / `journalctl -k` of the node (overrides the sources)",
            kind=FILE,
        ),
        Param("smi_file", "", "optional: a saved `nvidia-smi -q` of the node (overrides the sources)", kind=FILE),
        Param("diag_file", "", "optional: a saved dcgmi diag -r 3 -j of the node (JSON or table)", kind=FILE),
        Param(
            "after_reset",
            False,
            "true once the SOP reset or reboot was done before that diagnostic (checked against nvidia-smi -q)",
        ),
        Param(
            "collect",
            False,
            "live source: read the kernel log and nvidia-smi from the node with a short-lived pod (gpuops collect)",
        ),
    ),
    steps=(
        Step(
            "Check the parameters and gather the inputs",
            gather_inputs,
            _VIEW + "show_inputs",
            needs=("src",),
            inputs=("kernel log", "nvidia-smi -q", "dcgmi diag", *SUMMARY_STATS, *SERIES_FIELDS),
        ),
        Step("Meaning", gather_meaning, _VIEW + "show_meaning", needs=("inp",), inputs=("XID events",)),
        Step("Impact", gather_impact, _VIEW + "show_impact", needs=("inp",), inputs=("pods",)),
        Step("XID timeline", gather_timeline, _VIEW + "show_timeline", needs=("inp",), inputs=("XID events",)),
        Step("ECC and row remapping", gather_memory, _VIEW + "show_memory", needs=("inp",)),
        Step("Temperature and power", None, _VIEW + "show_thermal", needs=("inp",)),
        Step("Triage", gather_triage, _VIEW + "show_triage", needs=("inp",)),
        Step("Evidence behind the verdict", gather_evidence, _VIEW + "show_evidence", needs=("inp",)),
        Step("Remediation plan (dry run)", gather_plan, _VIEW + "show_plan", needs=("fs",), effects=True),
    ),
    findings=_verdict,
    start=_start,
)
