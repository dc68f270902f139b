"""The savings plan pinned row by row: same rows, order, dtypes, text and figures.

Two fixed answers, neither computed by the code under test when the test runs:

* a hand-made fleet (below) whose every figure is worked out by hand from the prices passed in;
* the demo at a pinned window end: ``tests/fixtures/cost/plan_golden/`` (how the files were made and checked:
  ``tests/fixtures/cost/plan_golden/README.md``).

:func:`gpulib.cost.plan.plan_actions` is a speed target of the weekly report (benchmarks/RESULTS.md); these tests keep
any rewrite of it to the same answer, text included.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gpulib.cost as cost
from gpulib.cost.plan import PLAN_COLUMNS, SKIPPED_COLUMNS
from tests.cost.test_plan import _demo
from tests.helpers.cost_frames import frames, node, pod, series

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "cost" / "plan_golden"
PLAN_DTYPES = ["str"] * 6 + ["float64"] * 6 + ["str"] * 2
SKIPPED_DTYPES = ["str"] * 5 + ["float64", "str"]
_TEXT_PLAN = [c for c, d in zip(PLAN_COLUMNS, PLAN_DTYPES) if d == "str"]
_TEXT_SKIPPED = [c for c, d in zip(SKIPPED_COLUMNS, SKIPPED_DTYPES) if d == "str"]


def _read(name: str, text: list[str]) -> pd.DataFrame:
    df = pd.read_csv(GOLDEN / name, keep_default_na=False, dtype={c: str for c in text})
    for c in df.columns:
        if c not in text:
            df[c] = pd.to_numeric(df[c].replace("", float("nan"))).astype("float64")
    return df


def _same(actual: pd.DataFrame, expected: pd.DataFrame, dtypes: list[str]) -> None:
    assert list(actual.columns) == list(expected.columns)
    assert [str(d) for d in actual.dtypes] == dtypes
    assert list(actual.index) == list(range(len(actual)))
    pd.testing.assert_frame_equal(actual, expected, check_dtype=False, check_exact=False, rtol=1e-12)


def test_demo_plan_and_skipped_match_the_golden_files():
    _, rep = _demo("2026-12-01T06:45:00Z", "7d")
    _same(rep.actions, _read("plan_demo_20261201T0645Z_7d.csv", _TEXT_PLAN), PLAN_DTYPES)
    _same(rep.skipped, _read("skipped_demo_20261201T0645Z_7d.csv", _TEXT_SKIPPED), SKIPPED_DTYPES)


# ---------------------------------------------------------------------------------------------
# a hand-made fleet: 8 h window, H100 at 6.88 on demand / 1.5641 spot per GPU-h, L4 at 0.001 (prices passed in)
# month factor = 730 h / 8 h = 91.25
# ---------------------------------------------------------------------------------------------
H = 8
OD, SPOT = 6.88, 1.5641
ACT = "PROF_GR_ENGINE_ACTIVE"


def _hand_fleet(with_serving: bool = True):
    acts, fbs, nodes, pods = [], [], [], []
    # n0: a 4-GPU PyTorchJob at 30 %: right-size to 2 GPUs (60 % target), then spot on what is left
    nodes.append(node("n0", gpus=4))
    pods.append(pod("ml", "train-0", "n0", kind="PyTorchJob", workload="train", req=4, lim=4))
    for g in range(4):
        acts.append(series("n0", str(g), [0.3] * H, pod="train-0", ns="ml"))
        fbs.append(series("n0", str(g), [40000.0] * H, pod="train-0", ns="ml"))
    # n1: no pod: scale down
    nodes.append(node("n1", gpus=2))
    for g in range(2):
        acts.append(series("n1", str(g), [0.0] * H))
        fbs.append(series("n1", str(g), [0.0] * H))
    # n2: a 4-GPU deployment at 30 % whose serving metrics say overloaded: the right-size is vetoed
    nodes.append(node("n2", gpus=4))
    for g in range(4):
        pods.append(pod("inf", f"api-{g}", "n2", workload="api"))
        acts.append(series("n2", str(g), [0.3] * H, pod=f"api-{g}", ns="inf"))
    # n3: a zombie (60 GiB held, 0 % active) and a 1-GPU deployment at 20 % with 8,000 MiB: one 2g MIG instance
    nodes.append(node("n3", gpus=2))
    pods.append(pod("nb", "stuck-0", "n3", kind="StatefulSet", workload="stuck"))
    acts.append(series("n3", "0", [0.0] * H, pod="stuck-0", ns="nb"))
    fbs.append(series("n3", "0", [61440.0] * H, pod="stuck-0", ns="nb"))
    pods.append(pod("inf", "chat-0", "n3", workload="chat"))
    acts.append(series("n3", "1", [0.2] * H, pod="chat-0", ns="inf"))
    fbs.append(series("n3", "1", [8000.0] * H, pod="chat-0", ns="inf"))
    # n4: an idle L4 pod at 0.001/h: 0.73/month, under the 1/month floor
    nodes.append(node("n4", product="NVIDIA-L4", gpus=1, mem_mib=23034))
    pods.append(pod("dev", "tiny-0", "n4", workload="tiny"))
    acts.append(series("n4", "0", [0.0] * H, pod="tiny-0", ns="dev", model="NVIDIA L4"))
    fbs.append(series("n4", "0", [0.0] * H, pod="tiny-0", ns="dev", model="NVIDIA L4"))
    n, p = frames(nodes, pods)
    serving = pd.DataFrame(
        [
            {
                "namespace": "inf",
                "workload": "api",
                "overloaded": True,
                "verdict": "scale_up",
                "signal": "vllm: scale up (requests queue (waiting max 12))",
            },
            {
                "namespace": "inf",
                "workload": "chat",
                "overloaded": False,
                "verdict": "scale_down",
                "signal": "vllm: scale down (KV cache at most 10%, no queue)",
            },
        ]
    )
    return cost.analyze_cost(
        n,
        p,
        pd.concat(acts, ignore_index=True),
        pd.concat(fbs, ignore_index=True),
        window=f"{H}h",
        serving=serving if with_serving else None,
        price_overrides={"H100-80GB": {"on_demand": OD, "spot": SPOT}, "L4": 0.001},
    )


def test_hand_made_fleet_plan_row_by_row():
    rep = _hand_fleet()
    month = 730.0 / H
    train_cost = 4 * H * OD * month  # 20,089.6
    rightsize = 2 * OD * 730.0  # 2 surplus GPUs a month: 10,044.8
    spot_alone = 4 * H * (OD - SPOT) * month  # 15,522.428
    spot_plan = spot_alone / train_cost * (train_cost - rightsize)  # its fraction of what right-sizing left
    chat_cost = H * OD * month  # 5,022.4
    rows = [
        # action, ns, workload, owner_kind, node, pod, gpus, monthly_cost, monthly_saving, saving_alone, window_cost,
        # confidence, signal, detail
        ("rightsize", "ml", "train", "PyTorchJob", "n0", "", 4.0, train_cost, rightsize, rightsize, None, 0.7,
         f"{ACT} mean over the window (no vllm: serving metrics: activity alone decided)",
         "4.0 GPUs at 30% mean activity; 2 GPUs reach the 60% target"),
        ("scale_down", "", "", "", "n1", "", 2.0, 2 * H * OD * month, 2 * H * OD * month, 2 * H * OD * month, None,
         0.8, "no pod held a GPU of the node over the window", "no pod held a GPU for 8h"),
        ("spot", "ml", "train", "PyTorchJob", "n0", "", 4.0, train_cost, spot_plan, spot_alone, None, 0.6,
         "owner kind PyTorchJob (interruptible batch) on on-demand nodes",
         "32.0 on-demand GPU-h of PyTorchJob work; spot saves 77% per GPU-h"),
        ("reclaim", "nb", "stuck", "StatefulSet", "n3", "stuck-0", 1.0, OD * 730.0, OD * 730.0, OD * 730.0, H * OD,
         0.9, f"{ACT} below the idle threshold (zombie: FB_USED held as well)",
         "zombie: FB_USED 60.0 GiB held, activity max 0.0% for 8h (GPU 0); so far 55.04 USD in the window, "
         "5,022 USD/month from now while held"),
        ("consolidate", "inf", "chat", "Deployment", "n3", "", 1.0, chat_cost, chat_cost * 5 / 7, chat_cost * 5 / 7,
         None, 0.6, f"vllm: scale down (KV cache at most 10%, no queue); {ACT} p95 and peak FB_USED",
         "p95 activity 20%, peak FB_USED 7.8 GiB (10% of GPU): one 2g MIG instance"),
    ]  # fmt: skip
    expected = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    expected["window_cost"] = expected["window_cost"].astype("float64")
    _same(rep.actions, expected, PLAN_DTYPES)

    skipped = pd.DataFrame(
        [
            ("rightsize", "inf", "api", "", "n2", 2 * OD * 730.0,
             "vetoed: vllm: scale up (requests queue (waiting max 12)) "
             "(shrinking an overloaded deployment would make it worse)"),
            ("reclaim", "dev", "tiny", "", "n4", 0.001 * 730.0, "saves 0.73 USD/month (< 1): not worth an action"),
        ],
        columns=SKIPPED_COLUMNS,
    )  # fmt: skip
    _same(rep.skipped, skipped, SKIPPED_DTYPES)


def test_hand_made_plan_without_serving_metrics():
    """No serving rows: nothing is vetoed, every shrink says activity alone decided."""
    rep = _hand_fleet(with_serving=False)
    a = rep.actions
    api = a[a["workload"] == "api"]
    assert list(api["action"]) == ["rightsize"] and api["monthly_saving"].tolist() == pytest.approx([2 * OD * 730.0])
    shrink = a[a["action"].isin(["rightsize", "consolidate", "quantise"])]
    assert sorted(shrink["workload"]) == ["api", "chat", "train"]
    assert shrink["signal"].str.endswith("(no vllm: serving metrics: activity alone decided)").all()
    assert list(rep.skipped["workload"]) == ["tiny"]
