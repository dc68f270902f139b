"""AWS spot rows of gpulib/data/cost/gpu_prices.csv compared like with like with their on-demand rows.

The spot samples are from one catalog snapshot (skypilot-org/skypilot-catalog: catalogs/v7/aws/vms.csv @001367d2,
2025-01, us-east-1/2), taken before AWS cut P4d/P4de/P5 on-demand prices in June 2025 (AWS News Blog 2025-06-05,
https://aws.amazon.com/blogs/aws/announcing-up-to-45-price-reduction-for-amazon-ec2-nvidia-gpu-accelerated-instances/).
A saving computed as 1 - spot / on-demand must use two prices of the same date: the expected values below are
that snapshot's own on-demand price and the midpoint of its us-east-1/2 spot range, per instance.
"""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.core.knowledge import load_table

#: instance -> (on-demand $/h, lowest spot $/h, highest spot $/h) in us-east-1/2 of that snapshot (read from the file)
SNAPSHOT = {
    "p4d.24xlarge": (32.7726, 5.0933, 9.6107),
    "p4de.24xlarge": (40.96575, 5.8394, 7.8074),
    "p5.48xlarge": (98.32, 14.3773, 30.326),
    "g6e.xlarge": (1.861, 0.5945, 1.2079),
    "g5.xlarge": (1.006, 0.3600, 0.4177),
    "g4dn.xlarge": (0.526, 0.1758, 0.2010),
}


def _aws() -> pd.DataFrame:
    p = load_table("gpu_prices")
    return p[p["provider"] == "aws"]


@pytest.mark.parametrize("instance", sorted(SNAPSHOT))
def test_spot_saving_is_the_snapshots_own_ratio(instance):
    od_then, lo, hi = SNAPSHOT[instance]
    ratio_then = (lo + hi) / 2 / od_then
    rows = _aws()[_aws()["instance_type"] == instance].set_index("pricing")
    assert {"spot", "on_demand"} <= set(rows.index), f"{instance}: spot and on-demand rows must name the same instance"
    od_now, spot_now = float(rows.loc["on_demand", "price_per_gpu_hour"]), float(rows.loc["spot", "price_per_gpu_hour"])
    assert spot_now / od_now == pytest.approx(ratio_then, rel=0.01), (instance, spot_now / od_now, ratio_then)


def test_h100_spot_saving_is_not_a_2025_spot_against_a_2026_on_demand():
    """p5.48xlarge: 2025-01 spot midpoint 22.35 $/h against that snapshot's 98.32 $/h on-demand = 77 % off; the
    old row set 2.79 $/GPU-h against the post-cut 6.88 (59 %), comparing two dates."""
    rows = _aws()[_aws()["model"] == "H100-80GB"].set_index("pricing")
    saving = 1 - rows.loc["spot", "price_per_gpu_hour"] / rows.loc["on_demand", "price_per_gpu_hour"]
    assert saving == pytest.approx(1 - 22.35165 / 98.32, abs=0.005)


@pytest.mark.parametrize(
    "model,instance,per_gpu,dearer",
    [
        # tsaol/aws-gpu: data/g6e_instances.js and data/g5_instances.js @77fcd9fe (instances.vantage.sh, 2026-01-21),
        # us-east-1 on-demand $/h of the one-GPU sizes
        ("L40S", "g6e.xlarge", 1.861, {"g6e.2xlarge": 2.24208, "g6e.4xlarge": 3.00424}),
        ("A10G", "g5.xlarge", 1.006, {"g5.2xlarge": 1.212, "g5.4xlarge": 1.624}),
    ],
)
def test_single_gpu_rows_use_the_cheapest_instance_per_gpu(model, instance, per_gpu, dearer):
    rows = _aws()[_aws()["model"] == model]
    assert set(rows["instance_type"]) == {instance}, rows["instance_type"].tolist()
    od = rows[rows["pricing"] == "on_demand"].iloc[0]
    assert float(od["price_per_gpu_hour"]) == pytest.approx(per_gpu)
    assert all(per_gpu < v for v in dearer.values())
    assert "cheapest" in od["source"] and instance in od["source"]
