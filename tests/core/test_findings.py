"""Findings model and Prometheus-style windows."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from gpulib.core.errors import InvalidWindow
from gpulib.core.findings import (
    Finding,
    FindingList,
    Severity,
    load_findings,
    save_findings,
    sort_findings,
    worst_severity,
)
from gpulib.core.timeutil import format_duration, parse_window


@pytest.mark.parametrize(
    "text,seconds", [("30m", 1800), ("6h", 21600), ("7d", 604800), ("1h30m", 5400), ("90s", 90), ("2w", 1209600)]
)
def test_parse_window(text, seconds):
    assert parse_window(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["6hours", "", "h", "-5m", "0s", "5 m", "1.5h"])
def test_malformed_window_names_the_value(bad):
    with pytest.raises(InvalidWindow) as e:
        parse_window(bad)
    assert repr(bad) in str(e.value) and "30m" in str(e.value)


def test_format_duration():
    assert format_duration(5400) == "1h30m" and format_duration(timedelta(days=1, seconds=5)) == "1d5s"


def _f(sev, title, conf=1.0):
    return Finding(sev, title, confidence=conf, commands=["kubectl cordon n1"], evidence=["x"])


def test_sorting_and_worst():
    fs = [_f("info", "b"), _f("critical", "z", 0.5), _f("warning", "a"), _f("critical", "y", 0.9)]
    assert [f.title for f in sort_findings(fs)] == ["y", "z", "a", "b"]
    assert worst_severity(fs) is Severity.CRITICAL and worst_severity([]) is Severity.OK


def test_json_round_trip(tmp_path):
    f = Finding("warning", "hot GPU", node="n1", gpu="3", data={"temp": 91.0, "nan": float("nan")})
    p = save_findings([f], tmp_path / "f.json", runbook="rb", parameters={"window": "6h"}, errors=["e1"])
    doc = json.loads(p.read_text())
    assert doc["worst"] == "warning" and doc["errors"] == ["e1"] and doc["findings"][0]["data"]["nan"] is None
    back, _ = load_findings(p)
    assert back[0].title == "hot GPU" and back[0].severity is Severity.WARNING and back[0].gpu == "3"


def test_rendering_escapes_html_and_lists_commands():
    f = Finding("critical", "<script>x</script>", commands=["kubectl drain n --ignore-daemonsets"], escalation="RMA")
    h = f._repr_html_()
    assert "<script>x" not in h and "&lt;script&gt;" in h and "kubectl drain" in h
    t = f.as_text()
    assert t.startswith("[CRITICAL]") and "$ kubectl drain" in t and "Escalate: RMA" in t
    assert "no findings" in FindingList()._repr_html_()


def test_confidence_is_validated():
    with pytest.raises(ValueError):
        Finding("info", "x", confidence=1.5)
    with pytest.raises(ValueError):
        Finding("urgent", "x")
