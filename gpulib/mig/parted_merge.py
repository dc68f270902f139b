"""A mig-parted config that is safe to hand to MIG Manager: merged with the configs in use, schema-checked,
and refusing to drop a config name a node label still references.

MIG Manager reads ONE ConfigMap (``migManager.config.name``) and applies, per node, the config named by the
node's ``nvidia.com/mig.config`` label. A generated file holding only the plan's configs would leave every
node labelled ``all-disabled`` (or with its current layout) pointing at a name that no longer exists. So:

* :func:`merge_configs` starts from the configs in use (the cluster's ConfigMap via
  :meth:`gpulib.sources.base.Source.current_mig_config`, or mig-parted's default set shipped as
  ``gpulib/data/mig/mig_parted_default_config.yaml``) and adds the plan's configs;
* :func:`schema_problems` checks the document against mig-parted's own parser rules
  (NVIDIA/mig-parted ``api/spec/v1/spec.go`` @bd7160f4: ``Spec.UnmarshalJSON`` and
  ``MigConfigSpec.UnmarshalJSON``);
* :func:`referenced_names` / :func:`safe_config` refuse (:class:`MigConfigRefused`, with the reason) a config
  that lacks a name some node label references.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib.core import validate
from gpulib.core.errors import (
    GpulibError,
    InvalidParameter,
    KubernetesError,
    MigConfigRefused,
    NotProvided,
    SourceError,
)
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import data_path
from gpulib.core.sop import sop
from gpulib.core.validate import command
from gpulib.kube.labels import MIG_PARTED_DEFAULT_CONFIGMAP as _DEFAULT_CONFIGMAP

__all__ = [
    "MigConfigRefused",
    "default_configs",
    "schema_problems",
    "merge_configs",
    "referenced_names",
    "missing_references",
    "safe_config",
    "ConfigsInUse",
    "configs_in_use",
    "config_for_cluster",
]

#: mig-parted api/spec/v1/spec.go: the only top-level keys and the only keys of one config entry
_SPEC_KEYS = {"version", "mig-configs"}
_ENTRY_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}
#: mig-parted pkg/types/mig_config.go AssertValidFormat -> pkg/types/mig_profile.go ParseMigProfile:
#: "[<c>c.]<g>g.<mem>gb" then attributes such as "+me", "+me.all", "-me", "+gfx"
_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb([+-][a-z]+(\.[a-z0-9]+)?)*$")


@lru_cache(maxsize=1)
def _default_text() -> str:
    return data_path("mig_parted_default_config.yaml").read_text()


def default_configs() -> dict:
    """mig-parted's default config set (``deployments/systemd/config-default.yaml`` @bd7160f4) as a dict."""
    import yaml

    return yaml.safe_load(_default_text())


def schema_problems(doc: Any) -> list[str]:
    """Every way ``doc`` breaks mig-parted's v1 spec parser (empty list = it parses)."""
    out: list[str] = []
    if not isinstance(doc, Mapping):
        return ["top level is not a mapping"]
    if "version" not in doc:
        out.append("unable to parse with missing 'version' field")
    elif doc["version"] != "v1":
        out.append(f"unknown version: {doc['version']}")
    for k in doc:
        if k not in _SPEC_KEYS:
            out.append(f"unexpected field: {k}")
    cfgs = doc.get("mig-configs")
    if not isinstance(cfgs, Mapping) or not cfgs:
        out.append("at least one entry in 'mig-configs' is required")
        return out
    for name, entries in cfgs.items():
        if not isinstance(entries, list) or not entries:
            out.append(f"at least one entry in '{name}' is required")
            continue
        for i, e in enumerate(entries):
            where = f"{name}[{i}]"
            if not isinstance(e, Mapping):
                out.append(f"{where}: not a mapping")
                continue
            for r in ("devices", "mig-enabled"):
                if r not in e:
                    out.append(f"{where}: missing required field: {r}")
            for k in e:
                if k not in _ENTRY_KEYS:
                    out.append(f"{where}: unexpected field: {k}")
            dev = e.get("devices")
            if "devices" in e and not (
                dev == "all"
                or (isinstance(dev, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in dev))
            ):
                out.append(f"{where}: devices must be 'all' or a list of integers, not {dev!r}")
            flt = e.get("device-filter")
            if "device-filter" in e and not (
                isinstance(flt, str) or (isinstance(flt, list) and all(isinstance(x, str) for x in flt))
            ):
                out.append(f"{where}: device-filter must be a string or a list of strings")
            en = e.get("mig-enabled")
            if "mig-enabled" in e and not isinstance(en, bool):
                out.append(f"{where}: mig-enabled must be true or false")
            md = e.get("mig-devices")
            if md is not None and not isinstance(md, Mapping):
                out.append(f"{where}: mig-devices must be a mapping of profile -> count")
                continue
            for p, n in (md or {}).items():
                if not _PROFILE.match(str(p)) or not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    out.append(f"{where}: error validating values in 'mig-devices' field: {p!r}: {n!r}")
            if en is True and md is None:
                out.append(f"{where}: missing required field 'mig-devices' when 'mig-enabled' is true")
            if en is False and md:
                out.append(f"{where}: MIG devices included when 'mig-enabled' is false")
    return out


def merge_configs(plan: Mapping[str, list], base: Mapping | str | None = None) -> dict:
    """``base`` (a mig-parted document, its YAML text, or None for mig-parted's default set) plus ``plan``'s
    configs. A plan name that ``base`` already defines differently is refused (it would change what nodes
    labelled with it get)."""
    import yaml

    doc = default_configs() if base is None else (yaml.safe_load(base) if isinstance(base, str) else dict(base))
    bad = schema_problems(doc)
    if bad:
        raise MigConfigRefused(f"the configs in use do not parse as mig-parted v1: {'; '.join(bad[:5])}")
    merged = {"version": "v1", "mig-configs": dict(doc["mig-configs"])}
    for name, sels in plan.items():
        if name in merged["mig-configs"] and merged["mig-configs"][name] != list(sels):
            raise MigConfigRefused(
                f"config {name!r} already exists in the configs in use with a different layout; pick another name"
            )
        merged["mig-configs"][name] = list(sels)
    return merged


def referenced_names(nodes: pd.DataFrame | None) -> dict[str, list[str]]:
    """config name -> nodes whose ``nvidia.com/mig.config`` label names it."""
    out: dict[str, list[str]] = {}
    if nodes is None or len(nodes) == 0:
        return out
    for node, cfg in zip(nodes["node"].astype(str), nodes["mig_config"].astype("string").fillna("")):
        if cfg:
            out.setdefault(str(cfg), []).append(node)
    return out


def missing_references(
    doc: Mapping, nodes: pd.DataFrame | None, extra: Mapping[str, Iterable[str]] | None = None
) -> list[str]:
    """One line per config name referenced by a node label (or by ``extra``: name -> nodes the plan will
    label) that ``doc`` does not define."""
    have = set((doc.get("mig-configs") or {}).keys())
    refs = referenced_names(nodes)
    for name, ns in (extra or {}).items():
        refs.setdefault(name, []).extend(ns)
    return [
        f"{name!r} (labelled on {', '.join(sorted(set(ns)))})" for name, ns in sorted(refs.items()) if name not in have
    ]


def safe_config(
    plan: Mapping[str, list],
    nodes: pd.DataFrame | None,
    base: Mapping | str | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """The merged mig-parted YAML, or :class:`MigConfigRefused` naming what would break.

    ``labels``: node -> config name the plan's label commands set.
    """
    import yaml

    doc = merge_configs(plan, base)
    bad = schema_problems(doc)
    if bad:
        raise MigConfigRefused(f"the generated config does not parse as mig-parted v1: {'; '.join(bad[:5])}")
    extra: dict[str, list[str]] = {}
    for node, name in (labels or {}).items():
        extra.setdefault(name, []).append(node)
    missing = missing_references(doc, nodes, extra)
    if missing:
        raise MigConfigRefused(
            "refusing to emit a mig-parted config without config name(s) that node labels reference: "
            + "; ".join(missing)
            + ". MIG Manager would fail on those nodes."
        )
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass
class ConfigsInUse:
    """Step "MIG Manager configs in use": the base the generated config merges into (``text``; None: mig-parted's
    default set), a sentence saying where it came from, and, when it is a fallback, the commands that show the
    cluster's own ConfigMap and the error that kept it from being read (a 403, a 5xx: the run is then
    INCOMPLETE, see :meth:`raise_error`)."""

    text: str | None
    where: str
    fallback: bool = False
    commands: list[str] = field(default_factory=list)
    error: GpulibError | None = None
    namespace: str = "gpu-operator"
    configmap: str = ""  # the cluster's MIG Manager ConfigMap the base was read from ("" when not read)

    def note(self) -> tuple[str, str]:
        """(HTML-escaped text, level) for :func:`gpulib.runbook.note`."""
        if not self.fallback:
            return html.escape(f"Base config: {self.where}."), "info"
        return html.escape(
            f"Base config: {self.where}. The cluster's own MIG Manager ConfigMap was NOT read, so "
            "configs it holds that no node label names yet would be missing from the file below: check "
            "it against the cluster's ConfigMap before applying (" + "; ".join(self.commands) + ")."
        ), "warning"

    def findings(self) -> list[Finding]:
        if not self.fallback:
            return []
        t = sop("mig_sop", "config_base_fallback", where=self.where)
        return [
            Finding(
                Severity.WARNING,
                "mig-parted config built on mig-parted's default set, not the cluster's MIG Manager ConfigMap",
                category="mig",
                summary=t.summary,
                sop_step=t.sop_step,
                commands=list(self.commands),
            )
        ]

    def apply_commands(self) -> list[str]:
        """How to hand the printed file (saved as ``config.yaml``) to MIG Manager: replace the custom ConfigMap in
        use, else create one and point ClusterPolicy ``spec.migManager.config.name`` at it (the operator owns and
        reconciles ``default-mig-parted-config``; NVIDIA/gpu-operator controllers/object_controls.go @a22dbf67)."""
        if self.configmap and self.configmap != _DEFAULT_CONFIGMAP:
            return [
                command(
                    "kubectl",
                    "-n",
                    self.namespace,
                    "create",
                    "configmap",
                    self.configmap,
                    "--from-file=config.yaml",
                    "--dry-run=client",
                    "-o",
                    "yaml",
                )
                + " | kubectl apply -f -"
            ]
        return [
            command(
                "kubectl", "-n", self.namespace, "create", "configmap", "custom-mig-config", "--from-file=config.yaml"
            ),
            command(
                "kubectl",
                "patch",
                "clusterpolicies.nvidia.com",
                "cluster-policy",
                "--type=merge",
                "-p",
                '{"spec":{"migManager":{"config":{"name":"custom-mig-config"}}}}',
            ),
        ]

    def raise_error(self) -> None:
        """Raise the error that forced the fallback (never a silent default)."""
        if self.error is not None:
            raise self.error


def check_commands(namespace: str) -> list[str]:
    """The commands that show the MIG Manager ConfigMap in use: its name (ClusterPolicy
    ``spec.migManager.config.name``; empty means ``default-mig-parted-config``), then the ConfigMap."""
    return [
        command(
            "kubectl", "get", "clusterpolicies.nvidia.com", "-o", "jsonpath={.items[*].spec.migManager.config.name}"
        ),
        command("kubectl", "-n", namespace, "get", "configmap", _DEFAULT_CONFIGMAP, "-o", "yaml"),
    ]


def configs_in_use(src, current_config_path: str = "", namespace: str = "gpu-operator") -> ConfigsInUse:
    """Where the generated config's base comes from: the file ``current_config_path`` (the MIG Manager ConfigMap's
    config.yaml) when given, else the source's MIG Manager ConfigMap (:meth:`Source.current_mig_config`), else
    mig-parted's default set. The fallback is never silent: the result says so, lists the commands to check the
    cluster's ConfigMap, and keeps the error when the ConfigMap exists but could not be read (403, 5xx)."""
    ns = validate.namespace(namespace, param="operator_namespace")
    if current_config_path:
        p = Path(current_config_path)
        if not p.is_file():
            raise InvalidParameter(f"current_mig_config={current_config_path!r} is not a file")
        return ConfigsInUse(p.read_text(), f"the configs in {current_config_path} (current_mig_config)", namespace=ns)
    default = "mig-parted's default config set (gpulib/data/mig/mig_parted_default_config.yaml)"
    try:
        cur = src.current_mig_config(ns)
    except NotProvided as exc:
        return ConfigsInUse(None, f"{default}: {exc.args[0]}", True, check_commands(ns), namespace=ns)
    except KubernetesError as exc:
        if exc.status == 404:  # no ClusterPolicy / ConfigMap / config.yaml key: nothing to merge with
            return ConfigsInUse(None, f"{default}: {exc.args[0]}", True, check_commands(ns), namespace=ns)
        return ConfigsInUse(
            None,
            f"{default}: the cluster's ConfigMap could not be read",
            True,
            check_commands(ns),
            error=exc,
            namespace=ns,
        )
    except SourceError as exc:
        return ConfigsInUse(
            None,
            f"{default}: the cluster's ConfigMap could not be read",
            True,
            check_commands(ns),
            error=exc,
            namespace=ns,
        )
    return ConfigsInUse(cur.text, cur.where, namespace=ns, configmap=cur.configmap)


def config_for_cluster(plan, src, base: ConfigsInUse) -> str:
    """The plan's safe mig-parted YAML merged into ``base`` (:func:`configs_in_use`). Every node label of
    ``src.nodes()`` must still resolve, or :class:`MigConfigRefused` says which does not."""
    return plan.safe_mig_parted_config(src.nodes(), base.text)
