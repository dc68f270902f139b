"""Lesson ``learn_troubleshooting``: the commands an on-call engineer runs on a GPU node, what each output means, and
the same outputs parsed by ``gpulib`` from real captures (2x H200 ``nvidia-smi``, ``-q``, ``topo -m``; kernel-log
XID lines; ``nvidia-smi mig -lgip``); defined once in :data:`RUNBOOK`, rendered by
``runbooks/learn/learn_troubleshooting.ipynb``."""

from __future__ import annotations

import gpulib.mig as mig
import gpulib.nvidia as nvidia
import gpulib.nvidia.smi as smi
import gpulib.xid as xid
from gpulib.core.knowledge import load_table
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import lesson_text, md_table, question, show_md, smi_section, xid_sop
from gpulib.learn.session import next_step

__all__ = ["RUNBOOK"]

#: the captures the lesson reads (gpulib/data/captures/ and gpulib/data/learn/)
SMI_MISC, SMI_Q = "2xh200_smi_misc.txt", "2xh200_580.159.04_smi_q.txt"
DMESG, LGIP = "dmesg_xid.txt", "h100_80gb_lgip.txt"


def show_cheat(c, ui) -> None:
    cols = {"command": "command", "shows": "what it shows", "look_for": "look for", "parsed_by": "parsed by"}
    show_md(md_table(load_table("learn/cheatsheet"), {**cols, "runbook": "runbook"}))


def gather_smi(c) -> None:
    c.misc = lesson_text(SMI_MISC)
    c.smi_table = smi.parse_table(smi_section(c.misc, "nvidia-smi"))


def show_smi(c, ui) -> None:
    tab = c.smi_table
    show_md(
        f"Driver **{tab.driver_version}**, CUDA **{tab.cuda_version}**, {len(tab.gpus)} GPUs, {len(tab.processes)} "
        "processes."
    )
    show_md(md_table(tab.gpus, floatfmt="g"))


def gather_query(c) -> None:
    c.query = smi.parse_query(lesson_text(SMI_Q))
    c.reasons = smi.clock_event_table().set_index("name")
    c.active = list(c.query.iloc[0]["clock_event_reasons"] or [])
    c.sbe = frames.gpus_with_sbe(c.query)


def show_query(c, ui) -> None:
    cols = {
        "index": "GPU",
        "name": "name",
        "ecc_dbe_volatile": "DBE volatile",
        "ecc_sbe_aggregate": "SBE aggregate",
        "remapped_rows_pending": "remap pending",
        "remapped_rows_failure": "remap failure",
        "temperature_gpu_c": "temp C",
        "power_draw_w": "power W",
        "power_limit_w": "limit W",
        "clock_event_reasons": "clock events",
        "pcie_gen_current": "PCIe gen",
        "pcie_width_current": "PCIe width",
    }
    show_md(md_table(c.query, cols, floatfmt="g"))
    known = [r for r in c.active if r in c.reasons.index]
    benign = all(c.reasons.loc[r, "kind"] == "benign" for r in known)
    question(
        "GPU 0 of the capture runs below its top clock. Do you act on it?",
        (", ".join(c.active) or "no reason active")
        + (": no, nothing to fix" if benign else ": yes, find what limits it (power, heat)")
        + ". "
        + "; ".join(f"{r}: {c.reasons.loc[r, 'meaning']}" for r in known),
        "Read the clock-event reason before calling a slow GPU faulty: idle and application-clock reasons are "
        "normal, thermal and power slowdowns point at cooling or the power cap (clock_event_reasons.csv kind).",
    )
    question(
        "Does any GPU in the capture show memory errors, and would you drain it?",
        f"GPU {', '.join(map(str, c.sbe))} has aggregate single-bit (corrected) errors; no DBE, no pending remap: no "
        "drain"
        if c.sbe
        else "no",
        "Corrected SBEs are handled by ECC; act on DBE, remap pending/failure, or an SBE rate above thresholds.csv "
        "ecc_sbe_rate_warn.",
    )


def gather_topo(c) -> None:
    c.topo = nvidia.parse_topology(smi_section(c.misc, "nvidia-smi topo -m"))


def show_topo(c, ui) -> None:
    topo = c.topo
    show_md(md_table(topo.links.reset_index(names="").astype(str)))
    link = topo.links.iloc[0, 1]
    question(
        "A job on GPU0 and GPU1 of this machine is slow in all_reduce. Does the topology explain it, and what do you "
        "check next?",
        f"{link} ({topo.interconnect}): "
        + (
            "NVLink connects them, so not the wiring: run nccl-tests (nccl_check) and compare busbw with the link, "
            "then check the NCCL log for the transport used (P2P off, NCCL_P2P_DISABLE) and the job's own settings."
            if str(link).startswith("NV")
            else "they talk over PCIe or the CPU: that is the bottleneck; place the job on NVLink-connected GPUs."
        ),
        "NV# = a bonded set of # NVLinks (nvidia-smi topo -m legend); gpulib.nvidia.parse_topology infers the "
        "interconnect.",
    )


def gather_xids(c) -> None:
    ev = xid.annotate(xid.parse_kernel_log(lesson_text(DMESG)))
    c.sops = {code: xid_sop(code) for code in sorted(set(ev["xid"].astype(int)))}
    c.events = ev.assign(
        action=[c.sops[int(x)]["bucket"] for x in ev["xid"]], drain=[c.sops[int(x)]["takes_gpu_out"] for x in ev["xid"]]
    )


def show_xids(c, ui) -> None:
    cols = {"xid": "XID", "pci_bus_id": "PCI bus", "mnemonic": "mnemonic", "category": "category"}
    show_md(md_table(c.events, {**cols, "action": "NVIDIA bucket", "drain": "take GPU out"}))
    drain = sorted(code for code, s in c.sops.items() if s["takes_gpu_out"])
    rest = sorted(code for code in c.sops if code not in drain)
    question(
        "This log is from one node overnight. Which XIDs make you take a GPU out of service now, and which can wait "
        "for the workload's owner in the morning?",
        f"Now: XID {', '.join(map(str, drain)) or 'none'} (cordon, drain, then reset or reboot per the SOP). Can "
        f"wait: XID {', '.join(map(str, rest)) or 'none'} (the application's own fault: restart the workload).",
        "NVIDIA's resolution bucket decides (gpulib.xid.triage.DRAIN_BUCKETS over xid_catalog.csv + xid_sop.csv): "
        "a GPU-side fault keeps failing every job scheduled onto it; an application fault does not.",
    )


def show_lgip(c, ui) -> None:
    show_md(md_table(mig.parse_lgip(lesson_text(LGIP)), floatfmt="g"))


RUNBOOK = Runbook(
    name="learn_troubleshooting",
    domain="learn",
    kind=LESSON,
    start=lambda c: {"misc": None},
    params=(Param("source", "demo", "lessons run on packaged captures; kept for the CLI"),),
    steps=(
        Step("Cheat sheet", show=show_cheat),
        Step("nvidia-smi", gather_smi, show_smi, inputs=(SMI_MISC,)),
        Step("nvidia-smi -q", gather_query, show_query, inputs=(SMI_Q,)),
        Step("topo -m", gather_topo, show_topo, needs=("misc",), inputs=(SMI_MISC,)),
        Step("dmesg XIDs", gather_xids, show_xids, inputs=(DMESG,)),
        Step("mig -lgip", show=show_lgip, inputs=(LGIP,)),
        next_step("xid_ecc_triage", "nccl_check"),
    ),
)
