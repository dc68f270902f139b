"""The three dashboards of the mixin: fleet, node and namespace (built on :mod:`gpulib.mixin.panels`).

* **fleet** -- allocation and activity (the utilization report's recording rules), health by node and GPU model,
  the firing alerts that have a runbook (the open incidents), each leading to its runbook;
* **node** -- every GPU of one node on one time axis (shared crosshair and tooltip), XIDs as annotations,
  NVLink and fabric, the alerts of the node and links to its runs;
* **namespace** -- allocated against active GPU-hours, the idle GPU-hours and their cost, the pods holding GPU
  memory while idle (zombie candidates): a view an application team reads for its own namespaces.

Idle/active follow the report's one rule (the recording rules of ``prometheus_rules.yaml``,
:mod:`gpulib.cost.recording`); a GPU counts as allocated while dcgm-exporter labels it with a pod.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DashboardCursorSync, DashboardLinkType, VariableOption

from gpulib.core.knowledge import threshold
from gpulib.cost.recording import ACTIVITY, FB, HELD_IDLE, IDLE, rule_name, rule_resolution
from gpulib.mixin.config import MixinConfig, any_name, recorded, series, with_node
from gpulib.mixin.panels import DS, GPUOPS_VAR, board, host_variable, link, rows_table, single, ts, variables

XID = "DCGM_FI_DEV_XID_ERRORS"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
GPU = "{{node}} GPU {{gpu}}"


def _present_or_zero(count_expr: str, base: str) -> str:
    """``count_expr``, or 0 while ``base`` has series (an empty count is a healthy zero only when data exists)."""
    return f"({count_expr}) or (0 * count({base}))"


def _gpu_links(cfg: MixinConfig) -> list:
    return [
        link(cfg, "XID / ECC triage of this GPU", "xid_ecc_triage", {"node": "node", "gpu": "gpu"}),
        link(cfg, "Health of this node", "node_health", {"node": "node"}),
    ]


def fleet(cfg: MixinConfig):
    act, idle, held = (recorded(cfg, rule_name(m)) for m in (ACTIVITY, IDLE, HELD_IDLE))
    act_pod, idle_pod = (recorded(cfg, rule_name(m), 'pod!=""') for m in (ACTIVITY, IDLE))
    temp = series(cfg, TEMP)
    xid = series(cfg, XID)
    alerts = f'ALERTS{{alertstate="firing", runbook!="", {cfg.cluster_label}=~"$cluster"}}'
    node_link = [link(cfg, "Health of this node", "node_health", {"node": "node"})]
    busy = threshold("idle_activity_max")
    b = board(
        cfg,
        "fleet",
        "GPU fleet",
        "Allocation, activity and health of every GPU dcgm-exporter reports, with links to the gpu-runbooks runbooks.",
        ["fleet"],
    ).tooltip(DashboardCursorSync.CROSSHAIR)
    for v in variables(cfg, any_name(cfg, TEMP)):
        b = b.with_variable(v)
    b = (
        b.with_row(dash.Row("Allocation and activity"))
        .with_panel(single("GPUs reporting", "none", f"count({temp})", description="GPUs with a temperature series"))
        .with_panel(
            single(
                "GPUs allocated to a pod",
                "none",
                _present_or_zero(f"count({act_pod})", act),
                description="GPUs dcgm-exporter labels with a pod (recording rule " + rule_name(ACTIVITY) + ")",
            )
        )
        .with_panel(
            single(
                "Allocated GPUs idle",
                "none",
                _present_or_zero(f"sum({idle_pod})", act),
                description="idle a whole step",
            )
        )
        .with_panel(
            single(
                "GPUs holding memory while idle",
                "none",
                f"sum({held})",
                description="zombie candidates: memory held, activity below the zombie threshold (0 = none)",
            )
        )
        .with_panel(
            ts(
                "GPUs allocated and active",
                "none",
                [
                    (f"count({act_pod})", "allocated"),
                    (f"count({act_pod} >= {busy:g})", f"active (>= {busy:.0%})"),
                    (f"sum({idle_pod})", "allocated, idle"),
                ],
                description="A gap is missing data, not an idle fleet.",
            )
        )
        .with_panel(
            ts(
                "Activity by GPU model",
                "percentunit",
                [(f"avg by (modelName) ({act})", "{{modelName}}")],
                description="Mean activity ratio (GR_ENGINE_ACTIVE, else GPU_UTIL/100) per model.",
            )
        )
        .with_row(dash.Row("Health by node and model"))
        .with_panel(
            ts(
                "Firing GPU alerts by node",
                "none",
                [(f"count by (node, alertname) ({with_node(alerts)})", "{{node}} {{alertname}}")],
                links=node_link,
            )
        )
        .with_panel(
            ts("Hottest GPU by node", "celsius", [(f"max by (node) ({with_node(temp)})", "{{node}}")], links=node_link)
        )
        .with_panel(
            ts(
                "Last XID code by GPU",
                "none",
                [(with_node(f"{xid} > 0"), GPU)],
                description="DCGM_FI_DEV_XID_ERRORS holds the last XID code (sticky); click a series to triage.",
                links=_gpu_links(cfg),
            )
        )
        .with_panel(
            ts(
                "GPUs with an XID, by model",
                "none",
                [(_present_or_zero(f"count by (modelName) ({xid} > 0)", xid), "{{modelName}}")],
            )
        )
        .with_row(dash.Row("Open incidents"))
        .with_panel(
            rows_table(
                "Open incidents: firing alerts with a runbook",
                "none",
                with_node(alerts),
                description="Each row opens the node's health runbook in gpuops serve.",
                links=[link(cfg, "Health of this node", "node_health", {"node": "node"}, row=True)],
            )
        )
    )
    return b


def node(cfg: MixinConfig):
    def s(field: str, template: str = "{m}") -> str:
        return series(cfg, field, node=True, template=template)

    rate = "rate({m}[$__rate_interval])"
    incr = "increase({m}[$__rate_interval])"
    gl = _gpu_links(cfg)
    temp_all = series(cfg, TEMP)
    b = board(
        cfg,
        "node",
        "GPU node",
        "Every GPU of one node on one time axis: activity, heat, power, memory, errors, NVLink; XIDs as annotations.",
        ["node"],
    ).tooltip(DashboardCursorSync.TOOLTIP)
    for v in variables(cfg, any_name(cfg, TEMP), [host_variable(cfg, temp_all)]):
        b = b.with_variable(v)
    b = b.annotations(
        [
            dash.AnnotationQuery()
            .name("XID")
            .datasource(DS)
            .enable(True)
            .icon_color("red")
            .expr(with_node(f"{s(XID)} > 0 and {s(XID, 'changes({m}[2m])')} > 0"))
        ]
    ).links(
        [
            dash.DashboardLink("Run the node health runbook")
            .type(DashboardLinkType.LINK)
            .url(cfg.runbook_url("node_health", base=f"${{{GPUOPS_VAR}}}") + "?node=${node:percentencode}")
            .target_blank(True),
            dash.DashboardLink("Runs of gpuops serve")
            .type(DashboardLinkType.LINK)
            .url(f"${{{GPUOPS_VAR}}}/runs")
            .target_blank(True),
        ]
    )
    panels = [
        dash.Row("Activity"),
        ts("Graphics engine active", "percentunit", [(with_node(s("DCGM_FI_PROF_GR_ENGINE_ACTIVE")), GPU)], links=gl),
        ts(
            "SM active / tensor active",
            "percentunit",
            [
                (with_node(s("DCGM_FI_PROF_SM_ACTIVE")), GPU + " SM"),
                (with_node(s("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")), GPU + " tensor"),
            ],
            links=gl,
        ),
        ts("GPU utilization (coarse)", "percent", [(with_node(s("DCGM_FI_DEV_GPU_UTIL")), GPU)], links=gl),
        ts("Framebuffer used", "mbytes", [(with_node(s("DCGM_FI_DEV_FB_USED")), GPU)], links=gl),
        dash.Row("Heat, power and clocks"),
        ts("GPU temperature", "celsius", [(with_node(s(TEMP)), GPU)], links=gl),
        ts("HBM temperature", "celsius", [(with_node(s("DCGM_FI_DEV_MEMORY_TEMP")), GPU)], links=gl),
        ts("Board power", "watt", [(with_node(s("DCGM_FI_DEV_POWER_USAGE")), GPU)], links=gl),
        ts("SM clock", "rotmhz", [(with_node(s("DCGM_FI_DEV_SM_CLOCK")), GPU)], links=gl),
        ts(
            "Time throttled (power / thermal)",
            "percentunit",
            [
                (with_node(f"{s('DCGM_FI_DEV_POWER_VIOLATION', rate)} / 1e9"), GPU + " power"),
                (with_node(f"{s('DCGM_FI_DEV_THERMAL_VIOLATION', rate)} / 1e9"), GPU + " thermal"),
            ],
            links=gl,
        ),
        dash.Row("Errors"),
        ts("XID (last code)", "none", [(with_node(s(XID)), GPU)], links=gl),
        ts(
            "ECC errors per interval",
            "none",
            [
                (with_node(s("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", incr)), GPU + " single-bit"),
                (with_node(s("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", incr)), GPU + " double-bit"),
            ],
            links=gl,
        ),
        ts(
            "Row remapping",
            "none",
            [
                (with_node(s("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")), GPU + " uncorrectable rows"),
                (with_node(s("DCGM_FI_DEV_ROW_REMAP_PENDING")), GPU + " pending"),
                (with_node(s("DCGM_FI_DEV_ROW_REMAP_FAILURE")), GPU + " failed"),
            ],
            links=gl,
        ),
        ts("PCIe replays per second", "ops", [(with_node(s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", rate)), GPU)], links=gl),
        dash.Row("Fabric and NVLink"),
        ts(
            "NVLink bandwidth",
            "MBs",
            [(with_node(s("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")), GPU)],
            links=[link(cfg, "NCCL check of this node", "nccl_check", {"node": "node"})],
        ),
        ts(
            "NVLink errors per interval",
            "none",
            [
                (with_node(s(c, incr)), GPU + " " + c.split("NVLINK_")[1].split("_ERROR")[0].lower())
                for c in (
                    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
                )
            ],
            links=[link(cfg, "NCCL check of this node", "nccl_check", {"node": "node"})],
        ),
        ts(
            "Fabric health (1 healthy, 2 unhealthy, 3 limited)",
            "none",
            [(with_node(s("DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY")), GPU)],
            description="Only where a custom counters file adds field 175 (gpulib/data/sources/signals.csv).",
            links=[link(cfg, "NCCL check of this node", "nccl_check", {"node": "node"})],
        ),
        dash.Row("Alerts and runs"),
        ts(
            "Firing alerts on this node",
            "none",
            [
                (
                    with_node(
                        f'ALERTS{{alertstate="firing", {cfg.cluster_label}=~"$cluster", Hostname=~"$node"}} or '
                        f'ALERTS{{alertstate="firing", {cfg.cluster_label}=~"$cluster", hostname=~"$node"}}'
                    ),
                    "{{alertname}} {{gpu}} ({{runbook}})",
                )
            ],
            description="Each alert's runbook_url starts a run in gpuops serve; the dashboard links list its runs.",
            links=[link(cfg, "Health of this node", "node_health", {"node": "node"})],
            width=24,
        ),
    ]
    for p in panels:
        b = b.with_row(p) if isinstance(p, dash.Row) else b.with_panel(p)
    return b


def namespace(cfg: MixinConfig):
    step_h = rule_resolution() / 3600
    ns = 'namespace=~"$namespace"'
    act = recorded(cfg, rule_name(ACTIVITY), ns, 'pod!=""')
    idle = recorded(cfg, rule_name(IDLE), ns, 'pod!=""')
    held = recorded(cfg, rule_name(HELD_IDLE), ns, 'pod!=""')
    fb = recorded(cfg, rule_name(FB), ns, 'pod!=""')
    alloc_h = f"sum by (namespace) (count_over_time({act}[$__range])) * {step_h:g}"
    idle_h = f"sum by (namespace) (sum_over_time({idle}[$__range])) * {step_h:g}"
    price = (
        dash.TextBoxVariable("price")
        .label(f"Price per GPU-hour ({cfg.currency})")
        .description(f"default: {cfg.price_model} on-demand, gpulib/data/cost/gpu_prices.csv")
        .default_value(f"{cfg.price_per_gpu_hour:g}")
        .current(VariableOption(selected=True, text=f"{cfg.price_per_gpu_hour:g}", value=f"{cfg.price_per_gpu_hour:g}"))
    )
    alloc_base = recorded(cfg, rule_name(ACTIVITY), 'pod!=""')
    nsvar = (
        dash.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DS)
        .query(f"label_values({alloc_base}, namespace)")
        .multi(True)
        .include_all(True)
        .current(VariableOption(selected=True, text="All", value="$__all"))
    )
    b = board(
        cfg,
        "namespace",
        "GPU namespace",
        "What a namespace's GPUs did: allocated against active GPU-hours, idle cost, pods holding memory while idle.",
        ["namespace", "cost"],
    ).tooltip(DashboardCursorSync.CROSSHAIR)
    for v in variables(cfg, rule_name(ACTIVITY), [nsvar, price]):
        b = b.with_variable(v)
    zombie_link = [link(cfg, "Fleet overview (zombies and idle GPUs)", "fleet_overview", {})]
    return (
        b.with_row(dash.Row("GPU-hours in the time range"))
        .with_panel(single("Allocated GPU-hours", "h", f"sum({alloc_h})", decimals=1))
        .with_panel(single("Active GPU-hours", "h", f"sum({alloc_h}) - sum({idle_h})", decimals=1))
        .with_panel(single("Idle GPU-hours", "h", f"sum({idle_h})", decimals=1))
        .with_panel(single("Idle cost", f"currency{cfg.currency}", f"sum({idle_h}) * $price", decimals=0))
        .with_panel(
            rows_table(
                "By namespace: allocated and idle GPU-hours, idle cost",
                "h",
                f'label_replace({alloc_h}, "figure", "allocated", "", "") or '
                f'label_replace({idle_h}, "figure", "idle", "", "")',
                description="Idle: a whole recording step below the idle threshold (the utilization report's rule).",
            )
        )
        .with_row(dash.Row("Over time"))
        .with_panel(
            ts(
                "GPUs allocated and idle by namespace",
                "none",
                [
                    (f"count by (namespace) ({act})", "{{namespace}} allocated"),
                    (f"sum by (namespace) ({idle})", "{{namespace}} idle"),
                ],
            )
        )
        .with_panel(
            ts(
                "Framebuffer held by namespace",
                "mbytes",
                [(f"sum by (namespace) ({fb})", "{{namespace}}")],
            )
        )
        .with_row(dash.Row("Zombies"))
        .with_panel(
            ts(
                "Pods holding GPU memory while idle",
                "none",
                [(f"sum by (namespace, pod) ({held}) > 0", "{{namespace}}/{{pod}}")],
                description="Memory held and activity below the zombie threshold (recording rule "
                + rule_name(HELD_IDLE)
                + "); the fleet overview runbook lists them with their owners.",
                links=zombie_link,
                width=24,
            )
        )
    )


BOARDS = {"gpu-fleet": fleet, "gpu-node": node, "gpu-namespace": namespace}


def build(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """file stem -> the dashboard as a JSON-ready dict (through the SDK's own encoder)."""
    out = {}
    for stem, fn in BOARDS.items():
        board = json.loads(JSONEncoder(sort_keys=True).encode(fn(cfg).build()))
        for i, panel in enumerate(board["panels"], start=1):  # the SDK leaves ids unset; Grafana wants them unique
            panel["id"] = i
        out[stem] = board
    return out
