"""The panel and variable builders the three dashboards share, on grafana-foundation-sdk
(https://github.com/grafana/grafana-foundation-sdk, the Python package ``grafana-foundation-sdk``).

Every panel reads the ``${datasource}`` variable, has a unit, and shows missing data as missing: lines are not
joined across a gap (``spanNulls: false``), a panel without data says so (``noValue``), and no query turns an
absent series into 0 (a count that may be legitimately empty is written ``count(x) or 0 * count(base)``: 0 when
the base series exist, nothing when they do not; nvidia_gpu_exporter #470/#474 ask for exactly that distinction).

Data links go to ``gpuops serve``'s ``/run/<runbook>`` (:func:`link`); Grafana fills ``${__field.labels.X}``
(a series' label) and ``${__data.fields.X}`` (a table row's field), and ``:percentencode`` escapes the value
for the query string (https://grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from gpulib.mixin.config import MixinConfig

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
NO_DATA = "no data: the series is missing (not 0)"
#: the dashboard variable holding gpuops serve's address
GPUOPS_VAR = "gpuops"


def link(
    cfg: MixinConfig, title: str, runbook: str, params: dict[str, str], *, row: bool = False
) -> dash.DashboardLink:
    """A data link to ``runbook`` with each parameter filled from a series label (or a table field, ``row``)."""
    src = "__data.fields" if row else "__field.labels"
    q = "&".join(f"{k}=${{{src}.{v}:percentencode}}" for k, v in params.items())
    url = cfg.runbook_url(runbook, base=f"${{{GPUOPS_VAR}}}") + (f"?{q}" if q else "")
    return dash.DashboardLink(title).url(url).target_blank(True)


def _target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        q = q.legend_format(legend)
    if instant:
        q = q.instant().format(PromQueryFormat.TABLE)
    return q


def _targets(panel, queries: list[tuple[str, str]], instant: bool = False):
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_target(expr, legend, chr(ord("A") + i), instant))
    return panel


def ts(
    title: str,
    unit: str,
    queries: list[tuple[str, str]],
    *,
    description: str = "",
    links: list[dash.DashboardLink] | None = None,
    width: int = 12,
    height: int = 8,
) -> timeseries.Panel:
    p = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .no_value(NO_DATA)
        .span_nulls(False)
        .line_width(1)
        .fill_opacity(0)
        .span(width)
        .height(height)
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING))
    )
    if links:
        p = p.data_links(links)
    return _targets(p, queries)


def single(title: str, unit: str, expr: str, *, description: str = "", width: int = 6, decimals: int = 0) -> stat.Panel:
    p = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .decimals(decimals)
        .no_value(NO_DATA)
        .span(width)
        .height(4)
        .graph_mode(common.BigValueGraphMode.AREA)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]))
    )
    return _targets(p, [(expr, "")])


def rows_table(
    title: str,
    unit: str,
    expr: str,
    *,
    description: str = "",
    links: list[dash.DashboardLink] | None = None,
    width: int = 24,
) -> table.Panel:
    p = table.Panel().title(title).description(description).datasource(DS).unit(unit).no_value(NO_DATA)
    p = p.span(width).height(8)
    if links:
        p = p.data_links(links)
    return _targets(p, [(expr, "")], instant=True)


def variables(cfg: MixinConfig, base_selector: str, extra: list | None = None) -> list:
    """datasource, cluster (All = ``.*``, which also matches a series without the label), gpuops, then ``extra``."""
    out = [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dash.QueryVariable("cluster")
        .label("Cluster")
        .datasource(DS)
        .query(f"label_values({base_selector}, {cfg.cluster_label})")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .include_all(True)
        .all_value(".*")
        .multi(True)
        .current(VariableOption(selected=True, text="All", value="$__all")),
        dash.TextBoxVariable(GPUOPS_VAR)
        .label("gpuops serve URL")
        .description("where gpuops serve is reached; data links open /run/<runbook> there")
        .default_value(cfg.gpuops_url)
        .current(VariableOption(selected=True, text=cfg.gpuops_url, value=cfg.gpuops_url)),
    ]
    return out + (extra or [])


def host_variable(cfg: MixinConfig, temp_query: str, name: str = "node", multi: bool = False) -> dash.QueryVariable:
    """The node variable: both host-label spellings, read from the query result (``query_result``)."""
    v = (
        dash.QueryVariable(name)
        .label("Node")
        .datasource(DS)
        .query(f"query_result(count by (Hostname, hostname) ({temp_query}))")
        .regex('/[Hh]ostname="([^"]+)"/')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
    )
    return v


def board(cfg: MixinConfig, slug: str, title: str, description: str, tags: list[str]) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(f"{cfg.uid_prefix}-{slug}")
        .description(description)
        .tags(["gpu-runbooks", "dcgm", *tags])
        .editable()
        .time(cfg.time_from, "now")
        .refresh(cfg.refresh)
        .timezone("utc")
    )
