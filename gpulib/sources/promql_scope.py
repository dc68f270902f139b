"""One cluster of a multi-cluster Prometheus (Thanos, Mimir, VictoriaMetrics, a federating Prometheus): every query
the ``prometheus``/``live`` source sends carries the cluster matcher, added to each vector selector the way
prom-label-proxy does it (https://github.com/prometheus-community/prom-label-proxy). The label's name follows
kubernetes-mixin's ``clusterLabel`` (default ``cluster``; kubernetes-monitoring/kubernetes-mixin: config.libsonnet @
aa38e2bf), set by ``GPUOPS_PROMETHEUS_CLUSTER_LABEL``; the value by ``GPUOPS_PROMETHEUS_CLUSTER``.

:func:`scoped` walks the PromQL's tokens: a ``name{...}`` selector gains the matcher inside its braces, a bare
``name`` gains ``{matcher}``, a bare ``{...}`` gains it too; label lists (``by``/``without``/``on``/``ignoring``/
``group_left``/``group_right``), strings, durations and ranges are left alone, and so is a selector that already
names the label.
"""

from __future__ import annotations

import re

from gpulib.core.errors import InvalidParameter
from gpulib.core.validate import promql_string

#: a Prometheus label name (https://prometheus.io/docs/concepts/data_model/#metric-names-and-labels)
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`'  # strings
    r"|[0-9][0-9A-Za-z_.]*"  # numbers and durations (5m, 0.95, 1e3)
    r"|[A-Za-z_:][A-Za-z0-9_:]*"  # identifiers
    r"|\s+|.",
    re.S,
)
_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
#: aggregation operators may be followed by ``by``/``without`` before their parenthesis
_AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}
_KEYWORDS = _LISTS | _AGGREGATIONS | {"bool", "offset", "and", "or", "unless", "inf", "nan", "atan2"}


def cluster_matcher(label: str | None, value: str | None) -> str:
    """``label="value"`` (escaped), or "" when no cluster is set; InvalidParameter for a label that is not a label
    name."""
    if not value:
        return ""
    label = label or "cluster"
    if not LABEL_NAME.match(label):
        raise InvalidParameter(
            f"cluster label {label[:60]!r} is not a Prometheus label name",
            hint="GPUOPS_PROMETHEUS_CLUSTER_LABEL: letters, digits and underscores, not starting with a digit",
        )
    return f"{label}={promql_string(value)}"


def _close(tokens: list[str], i: int, open_: str, close: str) -> int:
    """The index of the token that closes the ``open_`` at ``tokens[i]``."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] == open_:
            depth += 1
        elif tokens[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise InvalidParameter(f"unbalanced {open_!r} in PromQL: {''.join(tokens)[:200]!r}")


def _next(tokens: list[str], i: int) -> str:
    for t in tokens[i:]:
        if not t.isspace():
            return t
    return ""


def scoped(promql: str, matcher: str) -> str:
    """``promql`` with ``matcher`` (``label="value"``) in every vector selector; unchanged when ``matcher`` is ""."""
    if not matcher:
        return promql
    label = matcher.split("=", 1)[0]
    tokens = _TOKEN.findall(promql)
    out: list[str] = []
    i = 0

    def braces(j: int) -> int:
        end = _close(tokens, j, "{", "}")
        inner = "".join(tokens[j + 1 : end])
        names = {t for t in tokens[j + 1 : end] if LABEL_NAME.match(t)}
        if label in names:
            out.append("{" + inner + "}")
        else:
            out.append("{" + (inner.rstrip().rstrip(",") + "," if inner.strip() else "") + matcher + "}")
        return end + 1

    while i < len(tokens):
        t = tokens[i]
        if t == "{":
            i = braces(i)
        elif t == "[":
            end = _close(tokens, i, "[", "]")
            out.append("".join(tokens[i : end + 1]))
            i = end + 1
        elif re.match(r"[A-Za-z_:]", t):
            nxt = _next(tokens, i + 1)
            out.append(t)
            i += 1
            if t in _LISTS and nxt == "(":
                while tokens[i] != "(":
                    out.append(tokens[i])
                    i += 1
                end = _close(tokens, i, "(", ")")
                out.append("".join(tokens[i : end + 1]))
                i = end + 1
            elif t in _KEYWORDS or nxt == "(":
                continue
            elif nxt == "{":
                while tokens[i] != "{":
                    out.append(tokens[i])
                    i += 1
                i = braces(i)
            else:
                out.append("{" + matcher + "}")
        else:
            out.append(t)
            i += 1
    return "".join(out)
