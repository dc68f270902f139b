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
from typing import Any, Callable, ContextManager

import pandas as pd

import gpulib.nccl.history as nh
import gpulib.nccl.job as nccl_job
from gpulib.core.errors import EmptyResult, InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import data_path
from gpulib.fleet import NVLINK_MB_PER_GB, HealthFrames, health_findings
from gpulib.nccl.bands import Band, Verdict, verdict
from gpulib.nccl.env import check_environment
from gpulib.nccl.findings import reference_finding
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


def findings(inp: NcclInputs) -> list[Finding]:
    """The findings of the run from what the steps gathered, in the order of the steps: the verdict of each run,
    the history's drop check, the log's diagnosis (when it has NCCL lines) and environment checks (when there is a
    log), the node's NVLink traffic, and the probe pods' NCCL checks."""
    fs = [v.finding for v in inp.verdicts or [] if v.finding is not None]
    if inp.history is not None:
        fs += nh.history_findings(inp.history)
    if inp.log_text is not None and "NCCL " in inp.log_text:
        fs += diagnose_log(inp.log_text, node=inp.log_node)
    if inp.log_text:
        fs += environment_findings(inp.log_text, node=inp.log_node)
    if inp.nvlink is not None:
        fs += health_findings(inp.nvlink)
    if inp.manifest is not None:
        fs += nccl_job.pod_findings(inp.manifest)
    return fs


def decide(
    src,
    step: Callable[[str], ContextManager],
    *,
    node: str,
    window: str,
    nccl_tests_file: str,
    topology_file: str,
    nccl_log_file: str,
    gpu_model: str,
    interconnect: str,
    expected: str,
    history_dir: str,
    cluster: str,
    instance_type: str,
    record_history: bool,
    probe_nodes: int,
    probe_gpus: int,
    probe_image: str,
    default_tests: str,
    default_topology: str,
    default_history: Callable[[], tuple[pd.DataFrame, str]] | None = None,
    **_: Any,
) -> list[Finding] | None:
    """What ``runbooks/nccl_check.ipynb`` hands to ``rb.finish``, without a kernel and without its charts: the
    notebook's steps that read data or decide, each inside ``step(name)`` (the Runbook's guard: a step without data
    makes the run INCOMPLETE as in the notebook), in its order and under its conditions, then :func:`findings`.
    ``default_tests`` / ``default_topology`` / ``default_history``: the packaged inputs the notebook falls back to
    (it passes the demo's; a domain knows no demo data). ``record_history`` writes the history file, so a caller that
    also renders the notebook must not call this with it (``gpulib.verdict`` does not)."""
    if record_history:
        raise InvalidParameter("record_history=True appends to the history: decide() would record the run twice")
    inp, topo, tests_text, log_text = NcclInputs(), None, None, None
    results: list[NcclTestResult] = []
    judged: list[Verdict] = []
    with step("Topology"):
        topo_text, _where = read_input(topology_file, "topology_file", default_topology)
        topo = parse_topology(topo_text)
    with step("nccl-tests results"):
        tests_text, _where = read_input(nccl_tests_file, "nccl_tests_file", default_tests)
        results = read_results(tests_text)
        judged = inp.verdicts = verdicts(
            results,
            expected=expected,
            text=tests_text,
            **model_kwargs(topology=topo, gpu_model=gpu_model, interconnect=interconnect),
        )
    with step("Results history"):
        inp.history, _where = runbook_history(
            history_dir,
            cluster,
            results=results,
            verdicts=judged,
            record=record_history,
            instance_type=instance_type,
            default_input=not nccl_tests_file,
            default_history=default_history,
        )
    with step("NCCL_DEBUG log"):
        log_text = read_input(nccl_log_file, "nccl_log_file")[0] if nccl_log_file else tests_text
        inp.log_text, inp.log_node = log_text, log_node(results)
    if log_text:  # the notebook's rb.ready(log_text)
        with step("Environment checks"):
            environment_findings(log_text, node=inp.log_node)
            summarize_log(log_text)
    if src is not None and node:  # rb.ready(rb.src, node)
        with step("NVLink traffic"):
            nvlink_rates(nvlink_series(src, node, window))
            inp.nvlink = nvlink_frames(src, node, window)
    with step("In-cluster probe manifest"):
        manifest, _checked = runbook_probe_manifest(probe_nodes, probe_gpus, node, probe_image)
        nccl_job.image_note(manifest)
        inp.manifest = manifest
        nccl_job.pod_findings(manifest)
        nccl_job.to_yaml(manifest)
        nccl_job.apply_commands(manifest, "nccl-probe.yaml")
    return findings(inp)
