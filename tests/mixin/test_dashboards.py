"""The dashboards against a real Prometheus holding a fleet mid-upgrade (some nodes on dcgm-exporter 4.10 names and
units, the rest on 4.8: gpulib/data/sources/signals.csv), with their variables filled as Grafana fills them: each
node panel answers for a node of either generation in the canonical unit, the fleet's XID panel finds the XID 79
GPU of the demo on a 4.10 node, and its data link, filled from that series as Grafana would, opens a real runbook
page of ``gpuops serve``."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
import requests

from gpulib.demo.simulator import FleetSimulator
from gpulib.mixin.config import load_config
from gpulib.mixin.dashboards import build
from tests.helpers.pinned import DEMO_END, SCRAPE
from tests.helpers.pinned import need_prometheus as _need_prometheus
from tests.helpers.promharness import PrometheusServer, backfill
from tests.helpers.serveproc import Server

NEW_NODES = ("dgx-h100-1", "h200-infer-0")
OLD_NODE = "a100-80-0"
#: the demo's backfill has no job label: the selector is a setting, emptied here the way `--selector ''` does
CFG = load_config().with_overrides(dcgm_selector="")
#: Grafana's values for the variables of a query: "All" of a multi-value variable is its allValue ``.*``
GRAFANA = {"cluster": ".*", "__rate_interval": "5m", "__range": "1h", "price": "2"}


def grafana_expr(expr: str, **values: str) -> str:
    """``expr`` with ``$var`` / ``${var}`` replaced as Grafana does before sending it; Grafana leaves a name that
    is no variable as written (``$1`` of label_replace), the test fails on any other unknown name."""
    env = {**GRAFANA, **values}

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name.isdigit():
            return m.group(0)
        assert name in env, f"variable {name} has no value in the test"
        return env[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, expr)


def fill_link(url: str, values: dict[str, str]) -> str:
    """A data link URL filled as Grafana fills it: ``${name}`` by its value, ``${name:percentencode}``
    percent-encoded (https://grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/)."""

    def sub(m: re.Match) -> str:
        name, fmt = m.group(1), m.group(2)
        assert name in values, f"{name} is not filled by the panel's series"
        return quote(values[name], safe="") if fmt == "percentencode" else values[name]

    return re.sub(r"\$\{([\w.]+)(?::(\w+))?\}", sub, url)


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    _need_prometheus()
    work = tmp_path_factory.mktemp("prom-mixin")
    sim = FleetSimulator(
        end=DEMO_END, scrape_interval=SCRAPE, exporter="4.8", exporter_nodes=dict.fromkeys(NEW_NODES, "4.10")
    )
    server = PrometheusServer(backfill(sim, "1h", work), work)
    yield server.url
    server.stop()


def query(url: str, expr: str) -> list[dict]:
    r = requests.get(f"{url}/api/v1/query", params={"query": expr, "time": DEMO_END.timestamp()}, timeout=60)
    assert r.status_code == 200, r.text[:500]
    return r.json()["data"]["result"]


def panel(board: dict, title: str) -> dict:
    return next(p for p in board["panels"] if p.get("title") == title)


@pytest.fixture(scope="module")
def boards():
    return build(CFG)


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "title,low,high",
    [
        ("GPU temperature", 20, 95),
        ("Board power", 30, 1000),
        ("SM clock", 200, 2500),  # MHz: the 4.10 name is in hertz, scaled by the contract
        ("Framebuffer used", 0, 200_000),
        ("Graphics engine active", 0, 1),
    ],
)
@pytest.mark.parametrize("node", [OLD_NODE, NEW_NODES[0]])
def test_a_node_panel_answers_for_either_generation_in_the_canonical_unit(prom, boards, title, low, high, node):
    (target,) = panel(boards["gpu-node"], title)["targets"]
    got = query(prom, grafana_expr(target["expr"], node=node))
    assert got, f"{title}: no series for {node}"
    assert {s["metric"]["node"] for s in got} == {node}
    values = [float(s["value"][1]) for s in got]
    assert all(low <= v <= high for v in values), (title, node, values)


@pytest.mark.prometheus
def test_the_node_variable_lists_nodes_of_both_generations(prom, boards):
    (var,) = [v for v in boards["gpu-node"]["templating"]["list"] if v["name"] == "node"]
    expr = re.fullmatch(r"query_result\((.*)\)", var["query"], re.S).group(1)
    rows = query(prom, grafana_expr(expr))
    pattern = re.compile(var["regex"].strip("/"))
    # Grafana applies the regex to each row's text: metric{labels} value timestamp
    texts = ["{" + ", ".join(f'{k}="{v}"' for k, v in r["metric"].items()) + "}" for r in rows]
    nodes = {m.group(1) for t in texts if (m := pattern.search(t))}
    assert {OLD_NODE, *NEW_NODES} <= nodes


@pytest.mark.prometheus
def test_a_fleet_data_link_filled_as_grafana_would_opens_a_runbook_page_of_serve(prom, boards, tmp_path):
    xid_panel = panel(boards["gpu-fleet"], "Last XID code by GPU")
    (target,) = xid_panel["targets"]
    series = query(prom, grafana_expr(target["expr"]))
    hit = [s["metric"] for s in series if s["metric"].get("node") == "dgx-h100-1" and s["value"][1] == "79"]
    assert [m["gpu"] for m in hit] == ["5"], series  # the demo's XID 79 GPU, on a 4.10 node
    triage = next(lk for lk in xid_panel["fieldConfig"]["defaults"]["links"] if "xid_ecc_triage" in lk["url"])
    srv = Server(tmp_path, tmp_path / "runs")
    try:
        srv.wait_up()
        values = {"gpuops": srv.url, **{f"__field.labels.{k}": v for k, v in hit[0].items()}}
        url = fill_link(triage["url"], values)
        assert url == f"{srv.url}/run/xid_ecc_triage?node=dgx-h100-1&gpu=5"
        r = requests.get(url, allow_redirects=False, timeout=60)
        assert r.status_code == 303, r.text[:500]
        assert re.fullmatch(r"/runs/[\w.-]+", r.headers["location"])
        page = requests.get(srv.url + r.headers["location"], timeout=60)
        assert page.status_code == 200 and "xid_ecc_triage" in page.text
    finally:
        srv.kill()


def test_fill_link_encodes_as_grafanas_percentencode():
    url = "${gpuops}/run/node_health?node=${__field.labels.node:percentencode}"
    assert fill_link(url, {"gpuops": "http://g", "__field.labels.node": "a b&c"}) == (
        "http://g/run/node_health?node=a%20b%26c"
    )
    with pytest.raises(AssertionError):
        fill_link(url, {"gpuops": "http://g"})
