"""DCGM diagnostic results -> the triage's next step: RMA, reset and re-run, fix the deployment, or return to service.

Input: :func:`gpulib.nvidia.dcgmi.parse_dcgmi_diag` rows. Each test name is classed by
``gpulib/data/xid/dcgm_diag_tests.csv`` (memory, pcie, diagnostic, retirement, stress, deployment); the
SOP text and commands are the ``DIAG_*`` rows of ``gpulib/data/xid/xid_sop.csv``:

* a failed memory, PCIe or diagnostic test -> ``DIAG_RMA`` (critical, the GPU stays out of service);
* a failed page-retirement / row-remap check -> ``DIAG_RESET_RERUN`` (the reset applies pending remaps);
* a failed stress/power/bandwidth test -> ``DIAG_STRESS``; failed deployment checks -> ``DIAG_DEPLOYMENT``
  (the run says nothing about the hardware); warnings -> ``DIAG_WARN``; skipped tests -> ``DIAG_SKIP``;
* everything passed, hardware tests included: ``after_reset=True`` -> ``DIAG_RETURN_TO_SERVICE``
  (``kubectl uncordon``), else ``DIAG_PASS`` (a pass before the SOP's reset does not clear its step);
  only deployment checks ran (level 1) -> ``DIAG_NO_HARDWARE``.

A result row is classed by its test name, unless its message or DCGM error id is one of DCGM's memory errors
(``gpulib/data/xid/dcgm_diag_errors.csv``): DCGM reports pending row remaps from its deployment checks (3.x
``Page Retirement/Row Remap``, 4.x ``software``), and that row is the memory's, not the deployment's.

A pass is one piece of evidence, not the verdict: ``dcgmi diag -r 2`` passes while every NVLink of the node is
down (https://github.com/NVIDIA/DCGM/issues/198). With ``nvidia-smi nvlink -s`` (``nvlink``,
:func:`gpulib.nvidia.nvlink.parse_nvlink_status`) showing every link of the GPU down, a pass gives
``DIAG_PASS_NVLINK_DOWN`` (no uncordon); without it, the pass says the links were not checked.

``after_reset`` is the operator's word: dcgmi diag output carries no time and no reset marker (the DCGM 3.3.1,
3.3.7 and 4.2.3 text and JSON layouts of ``tests/fixtures/dcgmi/``), so a reset cannot be seen in it. What
can be seen is a reset still owed: the node's ``nvidia-smi -q`` (:func:`reset_owed`: ``GPU Reset Status``,
``GPU Recovery Action``, pending row remaps or page retirements, or no block for the GPU at all). Then
``after_reset=True`` gives ``DIAG_RESET_NOT_SEEN`` instead of the uncordon, and the XID's step stays.

Every finding quotes the result lines it rests on (``evidence``). No diagnostic rows -> no finding.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.knowledge import load_table
from gpulib.core.validate import node_name, shell_quote
from gpulib.nvidia.nvlink import links_down
from gpulib.xid.sops import sop

HARDWARE_CLASSES = ("memory", "pcie", "diagnostic")
_NVLINK_NOT_CHECKED = (
    "NVLink not checked: dcgmi diag -r 2 passes with every NVLink down (https://github.com/NVIDIA/DCGM/issues/198); "
    "read nvidia-smi nvlink -s before giving the GPU back"
)
_RULE_FOR_FAIL = {
    "memory": "DIAG_RMA",
    "pcie": "DIAG_RMA",
    "diagnostic": "DIAG_RMA",
    "retirement": "DIAG_RESET_RERUN",
    "stress": "DIAG_STRESS",
    "deployment": "DIAG_DEPLOYMENT",
}


@lru_cache(maxsize=1)
def _classes() -> dict[str, str]:
    return {str(r.test): str(r["class"]) for _, r in load_table("dcgm_diag_tests").iterrows()}


@lru_cache(maxsize=1)
def _errors() -> list[tuple[int, str, str]]:
    """(error id, lower-case message fragment, class) of DCGM's memory errors (dcgm_diag_errors.csv)."""
    t = load_table("dcgm_diag_errors")
    return [(int(r.error_id), str(r.message).lower(), str(r["class"])) for _, r in t.iterrows()]


def row_class(r: dict) -> str:
    """The class of one result row: a DCGM memory error named by its error id or message wins over the test name."""
    eid, msg = r.get("error_id"), str(r.get("message") or "").lower()
    for code, fragment, cls in _errors():
        if (eid is not None and not pd.isna(eid) and int(eid) == code) or fragment in msg:
            return cls
    return diag_test_class(r["test"])


def diag_test_class(name: str) -> str:
    """``memory``/``pcie``/``diagnostic``/``retirement``/``stress``/``deployment``, or ``other`` for a test not in the
    table."""
    key = re.sub(r"[\s_-]+", "_", str(name).strip().lower())
    return _classes().get(key, "other")


def _line(r: dict) -> str:
    where = f"GPU {r['gpu']}" if r["gpu"] else "all GPUs"
    msg = f" — {r['message']}" if r.get("message") else ""
    return f"dcgmi diag {r['category'] + ' / ' if r['category'] else ''}{r['test']} ({where}): {r['status']}{msg}"


def _finding(rule: str, node: str, gpu: str | None, rows: list[dict], title: str, source: str) -> Finding:
    row = sop(rule)
    q = shell_quote(node)
    commands = [
        c.format(node=q, gpu=shell_quote(gpu if gpu not in (None, "") else "<gpu>"))
        for c in row["commands"]
        if c and c.lower() != "nan"
    ]
    esc = row.get("escalation")
    return Finding(
        Severity(row["severity"]),
        title,
        sop_step=str(row["sop_step"]),
        commands=commands,
        evidence=[_line(r) for r in rows[:12]] + [f"diagnostic from {source}"]
        if source
        else [_line(r) for r in rows[:12]],
        escalation="" if esc is None or pd.isna(esc) else str(esc),
        category="diagnostic",
        node=node,
        gpu=gpu,
        runbook="xid_ecc_triage",
        data={"rule": rule, "diag_level_tests": sorted({r["test"] for r in rows})},
    )


#: ``nvidia-smi -q`` facts (columns of :func:`gpulib.nvidia.smi.parse_query`) that say a reset is still owed;
#: layout: tests/fixtures/smi/h100x2_incident_q.txt (``GPU Reset Status``, ``Remapped Rows / Pending``); pending
#: remaps and retirements apply at the reset (``ROW_REMAP_PENDING`` / ``RETIRED_PAGES_PENDING`` of
#: gpulib/data/xid/xid_sop.csv and their sources)
_OWED = (
    ("reset_required", "Reset Required: Yes"),
    ("drain_and_reset_recommended", "Drain and Reset Recommended: Yes"),
    ("remapped_rows_pending", "Remapped Rows Pending: Yes"),
    ("retired_pages_pending", "Pending Page Blacklist: Yes"),
)


def reset_owed(smi: pd.DataFrame | None, gpu: str | None = None, *, pci_bus_id: str = "", uuid: str = "") -> list[str]:
    """Evidence lines of ``nvidia-smi -q`` (:func:`gpulib.nvidia.smi.parse_query` rows) saying that the GPU still
    owes a reset: a reset flag, a ``GPU Recovery Action`` other than None (NVML's recovery actions,
    gpulib/data/xid/xid_recovery_actions.csv), a pending remap or retirement, or no block for the GPU (it did
    not come back: nvidia-smi prints ``Unable to determine the device handle`` for a GPU off the bus). The GPU
    is found by PCI bus id or UUID, else by index; ``gpu`` None: every GPU of the report. No report: []."""
    if smi is None or smi.empty:
        return []
    rows = smi
    if gpu not in (None, "") or pci_bus_id or uuid:
        pci = normalise_pci_bus_id(pci_bus_id)
        if pci or uuid:
            hit = smi["pci_bus_id"].map(normalise_pci_bus_id).eq(pci) if pci else pd.Series(False, index=smi.index)
            rows = smi[hit | (smi["uuid"].eq(uuid) if uuid else False)]
        elif str(gpu).isdigit():
            rows = smi[pd.to_numeric(smi["index"], errors="coerce").eq(float(gpu))]
        else:  # a UUID given as the GPU
            rows, uuid = smi[smi["uuid"].eq(str(gpu))], str(gpu)
        if rows.empty:
            stamp = smi["timestamp"].dropna().iloc[0] if smi["timestamp"].notna().any() else "no timestamp"
            where = f"GPU {gpu}" if gpu not in (None, "") else "the GPU"
            if (
                not (pci or uuid) and smi["index"].isna().all()
            ):  # parse_query leaves index empty when a GPU has no block
                return [
                    f"nvidia-smi -q ({stamp}) is missing a GPU's block, so {where} cannot be found in it by index: "
                    "the GPU may not be back"
                ]
            return [
                f"nvidia-smi -q ({stamp}) has no block for {where}"
                + (f" (PCI {pci_bus_id})" if pci_bus_id else "")
                + ": the GPU is not back"
            ]
    out = []
    for r in rows.to_dict("records"):
        label = gpu if gpu not in (None, "") else (str(int(r["index"])) if pd.notna(r["index"]) else r["pci_bus_id"])
        head = f"nvidia-smi -q ({r.get('timestamp') or 'no timestamp'}): GPU {label}"
        out += [f"{head} {text}" for col, text in _OWED if r.get(col) == 1.0]
        action = r.get("recovery_action")
        if isinstance(action, str) and action.strip() and action.strip().lower() not in ("none", "n/a"):
            out.append(f"{head} GPU Recovery Action: {action.strip()}")
    return out


def diag_findings(
    diag: pd.DataFrame | None,
    node: str,
    gpu: str | None = None,
    *,
    after_reset: bool = False,
    source: str = "",
    smi: pd.DataFrame | None = None,
    pci_bus_id: str = "",
    uuid: str = "",
    nvlink: pd.DataFrame | None = None,
) -> list[Finding]:
    """Findings from a parsed diagnostic of ``node`` (restricted to ``gpu`` and all-GPU rows when given).
    ``smi``: the node's parsed ``nvidia-smi -q``, checked with :func:`reset_owed` before ``after_reset`` is
    believed (``pci_bus_id`` / ``uuid`` find the GPU in it). ``nvlink``: the node's parsed ``nvidia-smi nvlink -s``;
    a GPU whose every link is down is not given back on a pass."""
    if diag is None or diag.empty:
        return []
    node = node_name(node)
    df = diag if gpu in (None, "") else diag[(diag["gpu"] == str(gpu)) | (diag["gpu"] == "")]
    rows = [dict(r, cls=row_class(r)) for r in df.to_dict("records")]
    out: list[Finding] = []
    failed = [r for r in rows if r["status"] == "Fail"]
    for cls in ("memory", "pcie", "diagnostic", "retirement", "stress", "deployment", "other"):
        hit = [r for r in failed if r["cls"] == cls]
        if not hit:
            continue
        rule = _RULE_FOR_FAIL.get(cls, "DIAG_STRESS")
        gpus = sorted({r["gpu"] for r in hit if r["gpu"]})
        target = gpu or (gpus[0] if len(gpus) == 1 else None)
        tests = ", ".join(sorted({r["test"] for r in hit}))
        verb = {"DIAG_RMA": "RMA", "DIAG_RESET_RERUN": "reset and re-run", "DIAG_DEPLOYMENT": "fix the deployment"}.get(
            rule, "investigate"
        )
        out.append(
            _finding(
                rule,
                node,
                target,
                hit,
                f"dcgmi diag failed {tests} on {node}" + (f" GPU {', '.join(gpus)}" if gpus else "") + f": {verb}",
                source,
            )
        )
    if failed:
        return out
    warned = [r for r in rows if r["status"] == "Warn"]
    if warned:
        out.append(
            _finding(
                "DIAG_WARN",
                node,
                gpu,
                warned,
                f"dcgmi diag warned on {node}: {', '.join(sorted({r['test'] for r in warned}))}",
                source,
            )
        )
    skipped = [r for r in rows if r["status"] == "Skip"]
    if skipped:
        out.append(
            _finding(
                "DIAG_SKIP",
                node,
                gpu,
                skipped,
                f"dcgmi diag skipped {len({r['test'] for r in skipped})} test(s) on {node}",
                source,
            )
        )
    passed = [r for r in rows if r["status"] == "Pass"]
    if warned or not passed:
        return out
    hardware = [r for r in passed if r["cls"] in HARDWARE_CLASSES]
    if skipped and not hardware:
        return out
    if not hardware:
        out.append(
            _finding("DIAG_NO_HARDWARE", node, gpu, passed, f"dcgmi diag on {node} ran deployment checks only", source)
        )
    elif down := links_down(nvlink, gpu):
        f = _finding(
            "DIAG_PASS_NVLINK_DOWN",
            node,
            gpu,
            hardware,
            f"dcgmi diag passed on {node}, but every NVLink of the GPU is down: not healthy",
            source,
        )
        f.evidence = down + f.evidence
        out.append(f)
    elif after_reset and (owed := reset_owed(smi, gpu, pci_bus_id=pci_bus_id, uuid=uuid)):
        f = _finding(
            "DIAG_RESET_NOT_SEEN",
            node,
            gpu,
            hardware,
            f"dcgmi diag passed on {node}, but nvidia-smi -q still owes a reset: no uncordon",
            source,
        )
        f.evidence = owed + f.evidence
        out.append(f)
    elif after_reset:
        f = _finding(
            "DIAG_RETURN_TO_SERVICE",
            node,
            gpu,
            hardware,
            f"dcgmi diag passed on {node} after the reset: return to service (uncordon)",
            source,
        )
        f.evidence.insert(
            len(f.evidence) - bool(source),
            "the reset is the operator's word (after_reset=true); "
            + (
                "nvidia-smi -q of the node owes none"
                if smi is not None and len(smi)
                else "no nvidia-smi -q was read to check it"
            ),
        )
        out.append(f)
    else:
        out.append(_finding("DIAG_PASS", node, gpu, hardware, f"dcgmi diag passed on {node}", source))
    if nvlink is None and out and out[-1].data["rule"] in ("DIAG_PASS", "DIAG_RETURN_TO_SERVICE"):
        out[-1].evidence.insert(len(out[-1].evidence) - bool(source), _NVLINK_NOT_CHECKED)
    return out
