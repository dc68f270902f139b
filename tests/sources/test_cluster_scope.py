"""Multi-cluster: a Prometheus that holds several clusters (Thanos, Mimir, VictoriaMetrics) is read one cluster at a
time. The cluster label follows kubernetes-mixin's ``clusterLabel`` (default ``cluster``;
kubernetes-monitoring/kubernetes-mixin: config.libsonnet @ aa38e2bf); every query the source sends carries it
(gpulib/sources/promql_scope.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pandas as pd
import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.demo.history import demo_history
from gpulib.demo.history_series import write_history_openmetrics
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources.prometheus import PrometheusSource, load_settings
from gpulib.sources.promql_scope import cluster_matcher, scoped
from tests.helpers.pinned import DEMO_END, need_prometheus
from tests.helpers.promharness import PrometheusServer, blocks_from_openmetrics

M = 'cluster="eu-1"'


@pytest.mark.parametrize(
    "promql,want",
    [
        ("DCGM_FI_DEV_GPU_TEMP", 'DCGM_FI_DEV_GPU_TEMP{cluster="eu-1"}'),
        ('up{job=~".*dcgm.*"} == 0', 'up{job=~".*dcgm.*",cluster="eu-1"} == 0'),
        (
            'count by (__name__, hostname) ({__name__=~"DCGM_.+"})',
            'count by (__name__, hostname) ({__name__=~"DCGM_.+",cluster="eu-1"})',
        ),
        (
            'sum by (node) (a * on (namespace, pod) group_left (node) max by (namespace, pod, node) (b{node="n"}))',
            'sum by (node) (a{cluster="eu-1"} * on (namespace, pod) group_left (node) max by (namespace, pod, node) '
            '(b{node="n",cluster="eu-1"}))',
        ),
        (
            "increase(y[5m] offset 1h) and changes(z[30d] @ 1234) > 0",
            'increase(y{cluster="eu-1"}[5m] offset 1h) and changes(z{cluster="eu-1"}[30d] @ 1234) > 0',
        ),
        ('quantile_over_time(0.95, a{cluster="x"}[5m])', 'quantile_over_time(0.95, a{cluster="x"}[5m])'),
        ("sum(rate(a[5m])) by (b)", 'sum(rate(a{cluster="eu-1"}[5m])) by (b)'),
        ('label_replace(up, "a", "$1", "b", "(.+)")', 'label_replace(up{cluster="eu-1"}, "a", "$1", "b", "(.+)")'),
    ],
)
def test_every_selector_gets_the_cluster_matcher(promql, want):
    assert scoped(promql, M) == want
    assert scoped(promql, "") == promql


def test_the_cluster_value_is_escaped_and_the_label_validated():
    assert cluster_matcher("cluster", 'a"}or{x="') == 'cluster="a\\"}or{x=\\""'
    assert cluster_matcher("k8s_cluster", "") == ""
    with pytest.raises(InvalidParameter):
        cluster_matcher("bad-label", "eu-1")
    with pytest.raises(InvalidParameter):
        load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://p:9090", "GPUOPS_PROMETHEUS_CLUSTER_LABEL": "1x"})
    s = load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://p:9090", "GPUOPS_PROMETHEUS_CLUSTER": "eu-1"})
    assert (s.cluster, s.cluster_label) == ("eu-1", "cluster")


def _with_cluster(text: str, cluster: str) -> str:
    """OpenMetrics sample lines with a ``cluster`` label added (what each cluster's Prometheus attaches as an
    external label before the samples reach a shared store)."""
    return re.sub(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{", rf'\1{{cluster="{cluster}",', text, flags=re.M)


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory):
    """One Prometheus holding two demo fleets with the same node names: eu-1 (the demo) and us-2 (another seed)."""
    need_prometheus()
    work = tmp_path_factory.mktemp("two-clusters")
    sims = {"eu-1": FleetSimulator(end=DEMO_END), "us-2": FleetSimulator(end=DEMO_END, seed=11)}
    parts = []
    for name, sim in sims.items():
        write_history_openmetrics(sim, work / f"{name}.om", "3d", 600.0)
        text = (work / f"{name}.om").read_text().replace("# EOF\n", "")
        parts.append(_with_cluster(text, name))
    om = work / "both.om"
    om.write_text("".join(parts) + "# EOF\n")
    blocks_from_openmetrics(om, work / "tsdb")
    server = PrometheusServer(work / "tsdb", work)
    yield server.url, sims
    server.stop()


@pytest.mark.prometheus
@pytest.mark.parametrize("cluster", ["eu-1", "us-2"])
def test_the_node_history_of_one_cluster_is_that_clusters_own(two_clusters, cluster):
    url, sims = two_clusters
    hist = PrometheusSource(url, end=DEMO_END, cluster=cluster).node_history(timedelta(days=2))
    truth = demo_history(sims[cluster])
    truth = truth[(truth["time"] > pd.Timestamp(DEMO_END) - pd.Timedelta("2d")) & (truth["time"] <= DEMO_END)]
    got = hist.events[hist.events["signal"] == "pod_restart"].groupby("node")["value"].sum()
    want = truth[truth["signal"] == "pod_restart"].groupby("node")["value"].sum()
    assert got.to_dict() == want.to_dict()
    x = hist.events[hist.events["signal"] == "xid"]
    want_x = truth[truth["signal"] == "xid"]
    assert sorted(zip(x["node"], x["gpu"], x["code"])) == sorted(zip(want_x["node"], want_x["gpu"], want_x["code"]))
