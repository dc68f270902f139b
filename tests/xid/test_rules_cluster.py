"""Multi-cluster rules: every ``by``/``on`` list of every generated alert and recording rule carries the cluster
label (kubernetes-mixin's ``clusterLabel``, default ``cluster``: kubernetes-monitoring/kubernetes-mixin:
config.libsonnet @ aa38e2bf), and a recorded series keeps at most 30 labels, the default per-series cap of Mimir
(``-validation.max-label-names-per-series`` 30,
https://grafana.com/docs/mimir/latest/configure/configuration-parameters/) and of VictoriaMetrics
(``-maxLabelsPerTimeseries`` 30 in its releases before 1.117, 40 later:
https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#list-of-command-line-flags): a
series over the cap is rejected or loses labels. deploy/prometheus/tests/cluster_test.yaml runs two clusters that
share a node name through promtool (tests/xid/test_alerts.py::test_promtool_cases_pass)."""

from __future__ import annotations

import re

import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.xid import alerts
from tests.helpers.pinned import ROOT

#: the per-series label cap of Mimir and (before 1.117) VictoriaMetrics, see the module docstring
MAX_LABELS = 30
GROUPING = re.compile(r"\b(by|on)\s*\(([^)]*)\)")


def _rules(doc):
    return [r for g in doc["groups"] for r in g["rules"]]


def _lists(expr: str) -> list[list[str]]:
    return [[n.strip() for n in m.group(2).split(",") if n.strip()] for m in GROUPING.finditer(expr)]


@pytest.mark.parametrize("label", ["cluster", "k8s_cluster"])
def test_every_grouping_of_every_rule_carries_the_cluster_label(label):
    rules = _rules(alerts.rules_document(cluster_label=label))
    lists = [(r.get("alert") or r.get("record"), names) for r in rules for names in _lists(r["expr"])]
    assert len(lists) >= 10  # the NVLink, ECC and XID alerts match on(...), the recording rules aggregate by(...)
    assert [(name, names) for name, names in lists if label not in names] == []
    assert all(r["expr"].count(label) == len(_lists(r["expr"])) for r in rules if label == "k8s_cluster")


def test_the_committed_rule_files_carry_the_default_cluster_label():
    text = (ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text()
    assert text == alerts.generated_files()["gpu-alerts.yaml"]
    assert "on(cluster, UUID, gpu, Hostname, hostname)" in text


@pytest.mark.parametrize("bad", ["", "1cluster", "k8s-cluster", 'cluster"}'])
def test_a_cluster_label_that_is_not_a_label_name_is_refused(bad):
    with pytest.raises(InvalidParameter):
        alerts.rules_document(cluster_label=bad)


def test_recorded_series_keep_at_most_30_labels():
    """A recording rule's series hold the labels of its aggregation (every ``by`` list of the rule, an upper bound),
    the rule's own labels and ``__name__``; a rule without an aggregation would keep every input label."""
    records = [r for r in _rules(alerts.rules_document()) if "record" in r]
    assert records
    for r in records:
        by = [names for m, names in zip(GROUPING.finditer(r["expr"]), _lists(r["expr"])) if m.group(1) == "by"]
        assert by, f"{r['record']} has no aggregation: its series keep every label of their inputs"
        labels = set().union(*map(set, by)) | set(r.get("labels", {})) | {"__name__"}
        assert len(labels) <= MAX_LABELS, (r["record"], sorted(labels))
