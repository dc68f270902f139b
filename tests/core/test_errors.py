"""Every gpulib exception lives in gpulib/core/errors.py and tells the user what to check next (its ``hint``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import gpulib
import gpulib.core.errors as errors
from gpulib.core.errors import GpulibError

#: modules that need a GPU stack to import (imported where it is installed)
_OPTIONAL = {"gpulib.nccl.probe"}


def _all_error_classes() -> dict[type, str]:
    found: dict[type, str] = {}
    for m in pkgutil.walk_packages(gpulib.__path__, "gpulib."):
        try:
            mod = importlib.import_module(m.name)
        except ImportError:
            if m.name in _OPTIONAL:
                continue
            raise
        for obj in vars(mod).values():
            if inspect.isclass(obj) and issubclass(obj, GpulibError):
                found.setdefault(obj, obj.__module__)
    return found


def test_every_exception_is_defined_in_core_errors():
    assert (
        sorted(f"{mod}.{cls.__name__}" for cls, mod in _all_error_classes().items() if mod != "gpulib.core.errors")
        == []
    )


def test_every_gpulib_error_subclass_has_a_hint():
    classes = [c for c in _all_error_classes() if c is not GpulibError]
    assert len(classes) >= 20
    assert sorted(c.__name__ for c in classes if not str(c.hint).strip()) == []


@pytest.mark.parametrize(
    "where, name",
    [
        ("gpulib.cost.prices", "PriceFileError"),
        ("gpulib.gpu_operator.plan", "ContradictoryChoice"),
        ("gpulib.kube.frames", "MalformedKubernetesObject"),
        ("gpulib.kube.remediate", "RemediationRefused"),
        ("gpulib.kube.lease", "LockBusy"),
        ("gpulib.mig.catalog", "UnknownGPUModel"),
        ("gpulib.mig.catalog", "UnknownProfile"),
        ("gpulib.mig.smi_parsers", "MigParseError"),
        ("gpulib.mig.parted_merge", "MigConfigRefused"),
        ("gpulib.nccl.launcher", "ProbeError"),
        ("gpulib.nvidia.nvml", "NVMLUnavailable"),
        ("gpulib.vllm.sizing", "DoesNotFit"),
        ("gpulib.vllm.memory", "UnknownModel"),
    ],
)
def test_moved_exceptions_still_importable_where_they_were(where, name):
    assert getattr(importlib.import_module(where), name) is getattr(errors, name)


def test_hint_reaches_the_message_and_can_be_overridden():
    e = errors.InvalidParameter("window=abc")
    assert str(e).startswith("window=abc (hint: ") and e.hint == errors.InvalidParameter.hint
    assert errors.EmptyResult("none", hint="look here").hint == "look here"
    assert errors.PrometheusHTTPError("x", status=403).hint.startswith("check GPUOPS_PROMETHEUS_TOKEN")


def test_no_finding_of_a_run_points_at_the_runbook_being_read_not_even_a_usage_error():
    """'Next runbook' never names the runbook the engineer is reading: a usage error says to correct the
    parameter, it does not send the reader to the same page again."""
    from gpulib.core.errors import InvalidParameter
    from gpulib.core.findings import Finding, Severity
    from gpulib.runbook import Runbook

    rb = Runbook("nccl_check", source="demo")
    with rb.step("NVLink traffic"):
        raise InvalidParameter("node='nosuch-node' is not a GPU node of this source")
    rb.add(Finding(Severity.INFO, "a finding that names its own runbook", runbook="nccl_check"))
    fl = rb.finish()
    assert fl[0].category == "usage"
    assert [f.title for f in fl if f.runbook == "nccl_check"] == []
