"""What the live node history (gpulib/sources/prom_history.py) asks Prometheus for grows with the events in the
window, not with its samples: a 30-day reliability report reads 90 days of history, 25,920 steps per series, and at
8,192 GPUs a query that returned every step of every node's series would send the client hundreds of millions of
points. Counted on the fake Prometheus of tests/sources/test_prom_history_semantics.py, which answers each query
shape as Prometheus does over exact series at the history's steps."""

from __future__ import annotations

from gpulib.sources.prom_history import prometheus_history
from tests.sources.test_prom_history_semantics import WINDOW, FakePrometheus, N, at, series


class Counting(FakePrometheus):
    """Counts the points of every answer."""

    points = 0

    def _range_arrays(self, promql, start, end, step):
        res = super()._range_arrays(promql, start, end, step)
        self.points += sum(len(r["ts"]) for r in res)
        return res


def fleet(nodes: int, cordoned: dict[str, range] | None = None) -> list[dict]:
    """``nodes`` quiet nodes: every series there at every step, nothing changing (but the cordons asked for)."""
    data = []
    for i in range(nodes):
        n = f"n{i}"
        spell = (cordoned or {}).get(n, range(0))
        data += [
            series("kube_node_spec_unschedulable", {"node": n}, {k: float(k in spell) for k in range(N)}),
            series("kube_node_status_condition", {"node": n, "condition": "Ready", "status": "true"}, 1.0),
            series("kube_node_status_condition", {"node": n, "condition": "Ready", "status": "false"}, 0.0),
            series("kube_node_status_condition", {"node": n, "condition": "Ready", "status": "unknown"}, 0.0),
            series("up", {"job": "nvidia-dcgm-exporter", "node": n}, 1.0),
            series("kube_node_labels", {"node": n, "label_nvidia_com_cuda_driver_version_full": "550.90.07"}, 1.0),
            series(
                "kube_pod_container_status_restarts_total",
                {"namespace": "gpu-operator", "pod": f"exporter-{n}", "container": "exporter"},
                2.0,
            ),
            series("kube_pod_info", {"namespace": "gpu-operator", "pod": f"exporter-{n}", "node": n}, 1.0),
            *(series("DCGM_FI_DEV_XID_ERRORS", {"Hostname": n, "gpu": str(g)}, 43.0) for g in range(8)),
        ]
    return data


def test_a_quiet_fleet_costs_a_few_points_whatever_its_size_and_a_cordon_costs_its_steps():
    quiet = {k: Counting(fleet(k)) for k in (4, 40)}
    for nodes, src in quiet.items():
        assert prometheus_history(src, WINDOW, None).events.empty
        # every series is there at all N steps: returning each step would be nodes x series x N points; what comes
        # back is each node's driver when the window opens, the nodes that export the XID gauge, and a point per
        # presence check
        assert src.points <= 2 * nodes + len(src.queries) < N
    assert len(quiet[4].queries) == len(quiet[40].queries)  # the number of queries does not grow with the fleet
    one = Counting(fleet(40, {"n7": range(100, 112)}))
    ev = prometheus_history(one, WINDOW, None).events
    cordons = ev[ev["signal"] == "cordon"]
    assert list(zip(cordons["node"], cordons["time"], cordons["end"])) == [("n7", at(100), at(112))]
    assert one.points - quiet[40].points <= 12  # the spell's steps, no more
