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

Every finding quotes the result lines it rests on (``evidence``). No diagnostic rows -> no finding.
"""
from __future__ import annotations

import re
from functools import lru_cache

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.validate import node_name, shell_quote
from gpulib.xid.triage import sop

HARDWARE_CLASSES = ("memory", "pcie", "diagnostic")
_RULE_FOR_FAIL = {"memory": "DIAG_RMA", "pcie": "DIAG_RMA", "diagnostic": "DIAG_RMA", "retirement": "DIAG_RESET_RERUN",
                  "stress": "DIAG_STRESS", "deployment": "DIAG_DEPLOYMENT"}


@lru_cache(maxsize=1)
def _classes() -> dict[str, str]:
    from gpulib.core.knowledge import load_table

    return {str(r.test): str(r["class"]) for _, r in load_table("dcgm_diag_tests").iterrows()}


def diag_test_class(name: str) -> str:
    """``memory``/``pcie``/``diagnostic``/``retirement``/``stress``/``deployment``, or ``other`` for a test not in the table."""
    key = re.sub(r"[\s_-]+", "_", str(name).strip().lower())
    return _classes().get(key, "other")


def _line(r: dict) -> str:
    where = f"GPU {r['gpu']}" if r["gpu"] else "all GPUs"
    msg = f" — {r['message']}" if r.get("message") else ""
    return f"dcgmi diag {r['category'] + ' / ' if r['category'] else ''}{r['test']} ({where}): {r['status']}{msg}"


def _finding(rule: str, node: str, gpu: str | None, rows: list[dict], title: str, source: str) -> Finding:
    row = sop(rule)
    q = shell_quote(node)
    commands = [c.format(node=q, gpu=shell_quote(gpu if gpu not in (None, "") else "<gpu>"))
                for c in row["commands"] if c and c.lower() != "nan"]
    esc = row.get("escalation")
    return Finding(Severity(row["severity"]), title, sop_step=str(row["sop_step"]), commands=commands,
                   evidence=[_line(r) for r in rows[:12]] + [f"diagnostic from {source}"] if source else [_line(r) for r in rows[:12]],
                   escalation="" if esc is None or pd.isna(esc) else str(esc), category="diagnostic", node=node,
                   gpu=gpu, runbook="xid_ecc_triage", data={"rule": rule, "diag_level_tests": sorted({r["test"] for r in rows})})


def diag_findings(diag: pd.DataFrame | None, node: str, gpu: str | None = None, *, after_reset: bool = False,
                  source: str = "") -> list[Finding]:
    """Findings from a parsed diagnostic of ``node`` (restricted to ``gpu`` and all-GPU rows when given)."""
    if diag is None or diag.empty:
        return []
    node = node_name(node)
    df = diag if gpu in (None, "") else diag[(diag["gpu"] == str(gpu)) | (diag["gpu"] == "")]
    rows = df.assign(cls=[diag_test_class(t) for t in df["test"]]).to_dict("records")
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
        verb = {"DIAG_RMA": "RMA", "DIAG_RESET_RERUN": "reset and re-run", "DIAG_DEPLOYMENT": "fix the deployment"}.get(rule, "investigate")
        out.append(_finding(rule, node, target, hit,
                            f"dcgmi diag failed {tests} on {node}" + (f" GPU {', '.join(gpus)}" if gpus else "") + f": {verb}",
                            source))
    if failed:
        return out
    warned = [r for r in rows if r["status"] == "Warn"]
    if warned:
        out.append(_finding("DIAG_WARN", node, gpu, warned, f"dcgmi diag warned on {node}: {', '.join(sorted({r['test'] for r in warned}))}", source))
    skipped = [r for r in rows if r["status"] == "Skip"]
    if skipped:
        out.append(_finding("DIAG_SKIP", node, gpu, skipped, f"dcgmi diag skipped {len({r['test'] for r in skipped})} test(s) on {node}", source))
    passed = [r for r in rows if r["status"] == "Pass"]
    if warned or not passed:
        return out
    hardware = [r for r in passed if r["cls"] in HARDWARE_CLASSES]
    if skipped and not hardware:
        return out
    if not hardware:
        out.append(_finding("DIAG_NO_HARDWARE", node, gpu, passed, f"dcgmi diag on {node} ran deployment checks only", source))
    elif after_reset:
        out.append(_finding("DIAG_RETURN_TO_SERVICE", node, gpu, hardware,
                            f"dcgmi diag passed on {node} after the reset: return to service (uncordon)", source))
    else:
        out.append(_finding("DIAG_PASS", node, gpu, hardware, f"dcgmi diag passed on {node}", source))
    return out
