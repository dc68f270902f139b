"""gpulib/kube/requests.py: the request/limit findings take their SOP text from gpulib/data/kube/kube_sop.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gpulib.kube
from gpulib.core.sop import keys
from gpulib.kube.requests import request_limit_findings
from tests.helpers.sopcheck import scan, unknown_keys, unused_rows


def _problem(**kw):
    row = {
        "namespace": "ml",
        "pod": "trainer-0",
        "node": "h100-0",
        "workload": "trainer",
        "container": "main",
        "problem": "request without limit",
        "detail": "nvidia.com/gpu: request 1, no limit",
        "resource": "nvidia.com/gpu",
        "request": 1,
        "limit": None,
    }
    return pd.DataFrame([{**row, **kw}])


def test_request_limit_finding_text_comes_from_kube_sop_with_names_quoted():
    (f,) = request_limit_findings(_problem(namespace="ml team", pod="p'1"))
    assert f.summary == "The API server rejects this pod spec (Invalid): nvidia.com/gpu: request 1, no limit."
    assert f.sop_step == (
        "Set only limits: {nvidia.com/gpu: <whole number>} (requests default to the limit); "
        "for a fraction of a GPU use MIG or the time-slicing/MPS replicas."
    )
    assert f.commands == ["kubectl -n 'ml team' get pod 'p'\"'\"'1' -o jsonpath='{.spec.containers[*].resources}'"]


def test_a_brace_in_the_detail_is_printed_as_it_is():
    (f,) = request_limit_findings(_problem(detail="nvidia.com/gpu: request {1}"))
    assert f.summary == "The API server rejects this pod spec (Invalid): nvidia.com/gpu: request {1}."


def test_every_kube_sop_row_is_used_and_every_key_asked_for_exists():
    pkg, rows = Path(gpulib.kube.__file__).parent, set(keys("kube_sop"))
    assert scan(pkg, "kube_sop")[0] == rows
    assert unknown_keys(pkg, "kube_sop", rows) == [] and unused_rows(pkg, "kube_sop", rows) == []


_ODD_VALUES = [None, float("nan"), 0, 1, -1, 2.5, True, False, "1", " 2 ", "1_000", "1k", "", "inf", "abc", "٣", b"2"]


@pytest.mark.parametrize("value", _ODD_VALUES, ids=repr)
def test_a_gpu_request_is_read_as_pandas_reads_one_value(value):
    """requests_nvidia and the per-pod resources read a request as pd.to_numeric(errors="coerce") does (they read
    plain numbers without building a Series per value now)."""
    from gpulib.kube.requests import _frame_resources, requests_nvidia

    x = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    positive = bool(pd.notna(x) and x > 0)
    assert requests_nvidia({"gpu_request": value}) is positive
    assert requests_nvidia({"gpu_limit": value}) is positive
    want = {"nvidia.com/gpu": int(x) if float(x).is_integer() else float(x)} if positive else {}
    got = _frame_resources(value, None)
    assert got == want and all(type(v) is type(want[k]) for k, v in got.items()), (got, want)
