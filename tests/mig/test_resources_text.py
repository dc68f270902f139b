"""Texts the MIG sizing runbook shows (gpulib.mig.resources): names, not Python reprs."""

from __future__ import annotations

from gpulib import mig


def test_mixed_profiles_are_listed_as_names_not_a_python_list():
    ok, why = mig.single_strategy_ok([{"1g.10gb": 2}, {"1g.5gb": 1, "3g.40gb": 0}])
    assert not ok
    assert "[" not in why and "'" not in why, why
    assert "node mixes profiles 1g.10gb and 1g.5gb:" in why


def test_three_profiles_read_as_a_list_of_words():
    _, why = mig.single_strategy_ok([{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}])
    assert "node mixes profiles 1g.10gb, 2g.20gb and 3g.40gb:" in why
