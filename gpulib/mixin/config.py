"""The mixin's ``_config`` (kubernetes-mixin's convention: selectors, ``clusterLabel``, ``runbookURLPattern``;
kubernetes-monitoring/kubernetes-mixin: config.libsonnet @ aa38e2bf) and the PromQL helpers every dashboard
query is built with.

The settings are the rows of ``gpulib/data/mixin/mixin_config.csv``; ``gpuops mixin`` overrides the URL, the
cluster label and the selector. Every value is validated before it reaches PromQL or a URL.

Both exporter generations: a query reads a signal under every name ``gpulib/data/sources/signals.csv`` gives it
(:func:`series`, an ``or`` of one selector per name, each scaled to the canonical unit), and the host label under
both spellings (``Hostname`` up to dcgm-exporter 4.x, ``hostname`` after): :func:`with_node` copies whichever is
set into a ``node`` label, which legends and data links use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table, settings
from gpulib.sources.promql_scope import LABEL_NAME
from gpulib.sources.signals import aliases, scale
from gpulib.xid.alerts import check_base_url, check_cluster_label

#: one label matcher of a selector: ``name op "value"`` (https://prometheus.io/docs/prometheus/latest/querying/basics/)
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n]|\\.)*)"\s*')
#: the host label of dcgm-exporter under both spellings (gpulib/xid/alerts.py HOST_ID)
HOSTS = ("Hostname", "hostname")


def check_selector(sel: str) -> str:
    """A comma-separated list of label matchers (or ""), as it may sit inside ``{...}``; InvalidParameter else."""
    sel = (sel or "").strip()
    if not sel:
        return ""
    pos = 0
    while True:
        m = _MATCHER.match(sel, pos)
        if not m:
            raise InvalidParameter(
                f"selector {sel[:80]!r} is not a list of label matchers",
                hint='write matchers the way they sit inside {...}, e.g. job=~".*dcgm.*"',
            )
        pos = m.end()
        if pos == len(sel):
            return sel
        if sel[pos] != ",":
            raise InvalidParameter(f"selector {sel[:80]!r}: expected ',' at position {pos}")
        pos += 1


@dataclass(frozen=True)
class MixinConfig:
    cluster_label: str
    dcgm_selector: str
    gpuops_url: str
    runbook_url_pattern: str
    guard_for_s: float
    guard_skip: tuple[str, ...]
    price_per_gpu_hour: float
    currency: str
    price_model: str
    time_from: str
    refresh: str
    uid_prefix: str

    def runbook_url(self, runbook: str, base: str | None = None) -> str:
        """The pattern with ``runbook`` and the base (``${gpuops}`` in a dashboard, the URL in a rule) filled in."""
        return self.runbook_url_pattern.format(gpuops_url=base or self.gpuops_url, runbook=runbook)

    def with_overrides(
        self, *, gpuops_url: str | None = None, cluster_label: str | None = None, dcgm_selector: str | None = None
    ) -> MixinConfig:
        return replace(
            self,
            gpuops_url=check_base_url(gpuops_url) if gpuops_url else self.gpuops_url,
            cluster_label=check_cluster_label(cluster_label) if cluster_label else self.cluster_label,
            dcgm_selector=self.dcgm_selector if dcgm_selector is None else check_selector(dcgm_selector),
        )


def _price(model: str, provider: str, pricing: str) -> tuple[float, str]:
    t = load_table("gpu_prices")
    hit = t[(t["model"] == model) & (t["provider"] == provider) & (t["pricing"] == pricing)]
    if hit.empty:
        raise InvalidParameter(
            f"gpulib/data/cost/gpu_prices.csv has no {model} {provider} {pricing} price",
            hint="fix price_model / price_provider / price_pricing in gpulib/data/mixin/mixin_config.csv",
        )
    return float(hit.iloc[0]["price_per_gpu_hour"]), str(hit.iloc[0]["currency"])


def load_config() -> MixinConfig:
    """The settings of ``gpulib/data/mixin/mixin_config.csv``, validated."""
    s = settings("mixin_config")
    pattern = s.text("runbook_url_pattern")
    if "{runbook}" not in pattern or not pattern.startswith("{gpuops_url}/"):
        raise InvalidParameter(f"runbook_url_pattern {pattern!r} must start with {{gpuops_url}}/ and hold {{runbook}}")
    price, currency = _price(s.text("price_model"), s.text("price_provider"), s.text("price_pricing"))
    prefix = s.text("uid_prefix")
    if not re.fullmatch(r"[a-z0-9-]{1,24}", prefix):
        raise InvalidParameter(f"uid_prefix {prefix!r}: lower-case letters, digits and '-', at most 24")
    return MixinConfig(
        cluster_label=check_cluster_label(s.text("cluster_label")),
        dcgm_selector=check_selector(s.text("dcgm_selector")),
        gpuops_url=check_base_url(s.text("gpuops_url")),
        runbook_url_pattern=pattern,
        guard_for_s=s.number("guard_for_s"),
        guard_skip=tuple(s.items_list("guard_skip")),
        price_per_gpu_hour=price,
        currency=currency,
        price_model=s.text("price_model"),
        time_from=s.text("time_from"),
        refresh=s.text("refresh"),
        uid_prefix=prefix,
    )


# ---------------------------------------------------------------------------------------------------- PromQL


def matchers(cfg: MixinConfig, *extra: str, raw: bool = True) -> str:
    """The matchers of one selector: the cluster variable, the DCGM selector on a raw series, then ``extra``."""
    parts = [f'{cfg.cluster_label}=~"$cluster"']
    if raw and cfg.dcgm_selector:
        parts.append(cfg.dcgm_selector)
    parts += [e for e in extra if e]
    return ", ".join(parts)


def series(cfg: MixinConfig, field: str, *extra: str, node: bool = False, template: str = "{m}") -> str:
    """``field`` under every name it has had (signals.csv), each name's value in the canonical unit, as one
    instant vector without a metric name; ``node=True`` keeps only the ``$node`` variable's host under either host
    label. ``template`` wraps each selector (``rate({m}[$__rate_interval])``: a function linear in the value)."""
    terms = []
    for name in aliases(field):
        hosts = [f'{h}=~"$node"' for h in HOSTS] if node else [""]
        for h in hosts:
            sel = f"{name}{{{matchers(cfg, *extra, h)}}}"
            t = template.format(m=sel)
            terms.append(t if scale(name) == 1.0 else f"({t}) * {scale(name):.12g}")
    return f"(({' or '.join(terms)}) + 0)"


def any_name(cfg: MixinConfig, field: str) -> str:
    """A series selector of ``field`` under every name it has had (``{__name__=~"A|B", ...}``), without the
    cluster matcher: what ``label_values(selector, label)`` of a variable takes (a selector, not an expression)."""
    sel = ", ".join([f'__name__=~"{"|".join(aliases(field))}"'] + ([cfg.dcgm_selector] if cfg.dcgm_selector else []))
    return "{" + sel + "}"


def with_node(expr: str) -> str:
    """``expr`` with a ``node`` label copied from ``hostname`` or ``Hostname`` (whichever the series has)."""
    out = expr
    for h in HOSTS:
        out = f'label_replace({out}, "node", "$1", "{h}", "(.+)")'
    return out


def recorded(cfg: MixinConfig, name: str, *extra: str) -> str:
    """A recording rule of ``prometheus_rules.yaml`` with the cluster matcher (its series carry no job)."""
    return f"{name}{{{matchers(cfg, *extra, raw=False)}}}"


def check_label(name: str) -> str:
    if not LABEL_NAME.match(name):
        raise InvalidParameter(f"{name!r} is not a Prometheus label name")
    return name
