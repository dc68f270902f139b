"""Lesson ``learn_training``: a PyTorchJob NCCL can run in, the NCCL environment variables, bus bandwidth and how
to read nccl-tests output, on the real 2x H200 capture; defined once in :data:`RUNBOOK`, rendered by
``runbooks/learn/learn_training.ipynb``."""

from __future__ import annotations

import gpulib.nccl as nccl
from gpulib.core.knowledge import load_table
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn.lessons import lesson_text, md_table, pytorchjob_worker_spec, pytorchjob_yaml, question, show_md
from gpulib.learn.session import next_step

__all__ = ["RUNBOOK"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
RANKS = (2, 4, 8, 16)


def gather_pod_spec(c) -> None:
    c.spec_checks = [
        (name, nccl.check_pod_spec(spec, multi_node=False))
        for name, spec in (
            ("without /dev/shm", pytorchjob_worker_spec(shm=False)),
            ("with /dev/shm emptyDir", pytorchjob_worker_spec(shm=True)),
        )
    ]


def show_pod_spec(c, ui) -> None:
    for name, fs in c.spec_checks:
        show_md(f"**{name}:** " + ("; ".join(f"{f.severity.value}: {f.title}" for f in fs) or "no findings"))
    show_md("```yaml\n" + pytorchjob_yaml("llm-finetune", workers=2, gpus_per_worker=8) + "```")


def show_env(c, ui) -> None:
    env = load_table("nccl_env_vars")
    show_md(md_table(env, {"name": "variable", "category": "category", "default": "default", "meaning": "meaning"}))


def gather_factors(c) -> None:
    c.factors = [{"collective": k, **{f"n={n}": nccl.bus_factor(k, n) for n in RANKS}} for k in COLLECTIVES]


def show_factors(c, ui) -> None:
    show_md(md_table(c.factors, floatfmt=".3f"))
    f2, f8 = nccl.bus_factor("all_reduce", 2), nccl.bus_factor("all_reduce", 8)
    question(
        "An all_reduce on 2 GPUs and one on 8 GPUs report the same algbw. Which uses its links better, and which "
        "number do you compare with the link's bandwidth?",
        f"The 8-GPU run: busbw = algbw x {f8:.3f} on 8 ranks but x {f2:.3f} on 2, so the same algbw moves "
        f"{f8 / f2:.2f}x the data over each link. Compare busbw with the link, never algbw.",
        "A ring all_reduce sends 2(n-1)/n of the buffer over every link (nccl_bus_factors.csv); busbw removes the "
        "rank count so results of any size of job compare with the hardware.",
    )


def gather_capture(c) -> None:
    c.results = nccl.parse_nccl_tests_all(lesson_text("2xh200_nccl_probe.txt"))
    c.ar = c.results[0]
    c.ar_verdict = nccl.verdict(c.ar, gpu_model="H200")
    c.figures["h200_all_reduce_peak_busbw"] = c.ar.peak_busbw


def show_capture(c, ui) -> None:
    summary = [
        {
            "collective": r.collective,
            "ranks": nccl.infer_nranks(r),
            "sizes": len(r.table),
            "avg busbw GB/s": r.avg_busbw,
            "peak busbw GB/s": r.peak_busbw,
        }
        for r in c.results
    ]
    show_md(md_table(summary, floatfmt=",.1f"))
    ar, v = c.ar, c.ar_verdict
    cols = {
        "size_bytes": "bytes",
        "oop_time_us": "time us",
        "oop_algbw": "algbw GB/s",
        "oop_busbw": "busbw GB/s",
        "oop_wrong": "#wrong",
    }
    show_md(md_table(ar.table.tail(6), cols, floatfmt=",.1f"))
    question(
        "Would you sign off this 2x H200 node for training from the all_reduce above? What did you compare?",
        f"{'Yes' if v.status == 'healthy' else 'Not yet'} ({v.status}): the busbw of the largest messages "
        f"({ar.peak_busbw:.1f} GB/s) against what this GPU pair is expected to reach, and no #wrong.",
        str(v) + " Judge the largest messages against the link's expected bus bandwidth, and #wrong must be 0.",
    )
    question(
        "A colleague reports the 'Avg bus bandwidth' line as the node's speed. Why is that misleading?",
        f"The average ({ar.avg_busbw:.1f} GB/s) runs over every size of the sweep; the node's speed is the "
        f"large-message busbw ({ar.peak_busbw:.1f} GB/s).",
        "The average runs over every size in the sweep; small messages are latency-bound. Judge the link at the "
        "largest sizes, where training's gradient buckets sit.",
    )


RUNBOOK = Runbook(
    name="learn_training",
    domain="learn",
    kind=LESSON,
    params=(Param("source", "demo", "lessons run on packaged captures; kept for the CLI"),),
    steps=(
        Step("Pod spec check", gather_pod_spec, show_pod_spec),
        Step("NCCL env", show=show_env),
        Step("Bus factors", gather_factors, show_factors, inputs=("nccl_bus_factors.csv",)),
        Step("2x H200 capture", gather_capture, show_capture, inputs=("2xh200_nccl_probe.txt",)),
        next_step("nccl_check"),
    ),
)
