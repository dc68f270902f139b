"""NVIDIA GPU Operator: install plan, pre-flight and post-install verification (facts.md §6).

Three jobs, each a pure function over frames / Kubernetes JSON so it runs the same on the demo fleet, a
snapshot folder or a live cluster:

* :func:`install_plan` — Helm values and the ``helm install`` / ``helm upgrade --install`` command for the
  components wanted, rejecting contradictory choices (:class:`ContradictoryChoice`) with the reason.
* :func:`preflight` — before installing: GPU nodes found by NFD (PCI vendor ``10de``), kernel and OS from
  NFD labels, container runtime, taints the operands must tolerate, PodSecurity level of the namespace.
* :func:`verify` — after installing: operand DaemonSets desired = ready (with the failing pod's reason),
  validator init containers (which ready-file is missing), ClusterPolicy state and conditions, allocatable
  ``nvidia.com/gpu`` / ``nvidia.com/mig-*`` against GFD's counts, GFD labels, ``mig.config.state``, and
  DCGM series for every GPU (:func:`check_dcgm`). Each failed check is a Finding whose SOP comes from
  ``data/operator_sop.yaml``.

:func:`demo_objects` builds a healthy operator install for the demo fleet (and broken variants for tests);
:func:`collect_state` reads the same from a live cluster through :class:`gpulib.kube.client.KubeCluster`.
"""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

import pandas as pd

from gpulib.core.errors import InvalidParameter, KubernetesError
from gpulib.core.findings import Finding, Severity
from gpulib.kube.client import cluster_policy_status, daemonsets_frame, gpu_resource_name, iter_gpu_nodes
from gpulib.core.knowledge import data_path, load_table, settings

MIG_STRATEGIES = ("none", "single", "mixed")
SHARING = ("none", "time-slicing", "mps")
#: components a user can switch on or off (``operator_components.csv`` rows with a Helm key)
TOGGLES = ("driver", "toolkit", "device_plugin", "gfd", "dcgm", "dcgm_exporter", "mig_manager",
           "node_status_exporter", "nfd")
DEFAULT_COMPONENTS = ("driver", "toolkit", "device_plugin", "gfd", "dcgm_exporter", "mig_manager", "nfd")
#: demo/test scenarios of :func:`demo_objects`
SCENARIOS = ("healthy", "driver_crashloop", "gfd_missing", "policy_not_ready", "allocatable_zero",
             "validator_stuck", "mig_failed")

#: what to do for each ClusterPolicy condition reason (facts.md §6.1, internal/conditions/consts.go)
_REASON_ADVICE = {
    "OperandNotReady": "Each state named in the message maps to one operand DaemonSet (facts.md §6.2): fix its pods.",
    "DriverNotReady": "The driver DaemonSet is not ready on some node: see the driver pod findings.",
    "NFDLabelsMissing": "No node carries NFD labels: enable NFD (nfd.enabled=true) or install node-feature-discovery.",
    "NoGPUNodes": "No node has the NFD pci-10de label: check lspci on the GPU nodes and the NFD worker pods.",
    "NodeStatusExporterNotReady": "The node-status-exporter DaemonSet is not ready: read its pod log.",
    "PrerequisiteNotMet": "A prerequisite of the ClusterPolicy is not met: read the condition message and the operator log.",
    "ReconcileFailed": "The operator failed to reconcile: read the operator Deployment log.",
}


class ContradictoryChoice(InvalidParameter):
    """Install choices that cannot work together (e.g. the driver container on nodes with a host driver).

    (Local subclass of InvalidParameter; the lead may move it to :mod:`gpulib.core.errors`.)
    """

    hint = "change one of the two conflicting parameters; the message names both"


# --------------------------------------------------------------------------------------------
# knowledge
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _components() -> pd.DataFrame:
    return load_table("operator_components").fillna("").set_index("component")


def components() -> pd.DataFrame:
    """The operand table (component, Helm key, DaemonSet, state, deploy label, validator init container)."""
    return _components().reset_index()


def setting(key: str) -> str:
    """A value of ``gpulib/data/operator_settings.csv`` as written there (:func:`gpulib.core.knowledge.settings`)."""
    return settings("operator_settings").text(key)


@lru_cache(maxsize=1)
def sop_table() -> dict[str, dict]:
    """``data/operator_sop.yaml``: check id -> severity, title, sop_step, commands, escalation, source."""
    import yaml

    doc = yaml.safe_load(data_path("operator_sop.yaml").read_text())
    for key, entry in doc.items():
        if not str(entry.get("source", "")).strip():
            raise InvalidParameter(f"operator_sop.yaml entry {key!r} has no source")
    return doc


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def sop(check: str, *, evidence: Iterable[str] = (), node: str | None = None, confidence: float = 1.0,
        **fields: Any) -> Finding:
    """The Finding for a failed check, its texts filled from ``fields`` (unknown placeholders stay ``<x>``)."""
    table = sop_table()
    if check not in table:
        raise InvalidParameter(f"no SOP for check {check!r}; known: {', '.join(table)}")
    e = table[check]
    f = _Blank({"node": node or "", **fields})
    return Finding(Severity(e["severity"]), e["title"].format_map(f), sop_step=e["sop_step"].format_map(f),
                   commands=[c.format_map(f) for c in e.get("commands") or []], evidence=list(evidence),
                   escalation=(e.get("escalation") or "").format_map(f), category="gpu-operator", node=node,
                   confidence=confidence, runbook="operator_install", data={"check": check, **_jsonable(fields)})


def _jsonable(d: dict) -> dict:
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in d.items()}


# --------------------------------------------------------------------------------------------
# install plan
# --------------------------------------------------------------------------------------------
@dataclass
class InstallPlan:
    """Helm values for the GPU Operator chart plus the objects and commands that go with them."""

    values: dict
    components: tuple[str, ...]
    namespace: str
    release: str
    version: str | None = None
    objects: list[dict] = field(default_factory=list)   # e.g. the device-plugin sharing ConfigMap
    notes: list[str] = field(default_factory=list)

    def set_flags(self) -> list[str]:
        """``--set key=value`` flags equivalent to :attr:`values` (sorted, deterministic)."""
        out: list[str] = []

        def walk(prefix: str, v: Any) -> None:
            if isinstance(v, dict):
                for k in sorted(v):
                    walk(f"{prefix}.{k}" if prefix else k, v[k])
            else:
                out.append(f"{prefix}={str(v).lower() if isinstance(v, bool) else v}")
        walk("", self.values)
        return out

    def values_yaml(self) -> str:
        import yaml
        return yaml.safe_dump(self.values, sort_keys=True)

    def helm_command(self, *, upgrade: bool = False) -> str:
        """``helm install`` (first install) or ``helm upgrade --install`` with every value as ``--set``."""
        verb = "upgrade --install" if upgrade else "install"
        parts = [f"helm {verb} {self.release} {setting('chart')}", f"-n {self.namespace}", "--create-namespace",
                 "--wait"]
        if self.version:
            parts.append(f"--version {self.version}")
        parts += [f"--set {s}" for s in self.set_flags()]
        return " \\\n  ".join(parts)

    def commands(self) -> list[str]:
        """Everything to run, in order: repo, namespace with its PodSecurity label, sharing ConfigMap, install."""
        ns = self.namespace
        cmds = [f"helm repo add {setting('helm_repo_name')} {setting('helm_repo_url')} && helm repo update",
                f"kubectl create namespace {ns} --dry-run=client -o yaml | kubectl apply -f -",
                f"kubectl label --overwrite namespace {ns} {setting('pod_security_label')}={setting('pod_security_required')}"]
        for obj in self.objects:
            cmds.append(f"kubectl apply -f {obj['metadata']['name']}.yaml   # {obj['kind']} below")
        cmds.append(self.helm_command(upgrade=True))
        cmds.append(f"kubectl get clusterpolicy {setting('clusterpolicy_name')} -w   # wait for STATUS ready")
        return cmds


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    v = str(value).strip().lower()
    if v not in allowed:
        raise InvalidParameter(f"{name}={value!r}; use one of {', '.join(allowed)}")
    return v


def install_plan(components: Iterable[str] | str = DEFAULT_COMPONENTS, *, driver_preinstalled: bool = False,
                 toolkit_preinstalled: bool = False, mig_strategy: str = "none", sharing: str = "none",
                 replicas: int = 4, nodes: pd.DataFrame | None = None, namespace: str | None = None,
                 release: str | None = None, version: str | None = None) -> InstallPlan:
    """Helm values for ``components`` (subset of :data:`TOGGLES`), with contradictions rejected.

    ``driver_preinstalled`` / ``toolkit_preinstalled``: the nodes already run the NVIDIA driver / container
    toolkit on the host. ``mig_strategy``: none | single | mixed. ``sharing``: none | time-slicing | mps
    with ``replicas`` per GPU. ``nodes`` (NODE frame, optional) lets the plan check NFD labels.
    ``components`` may be a comma-separated string (the runbook parameter). Raises :class:`ContradictoryChoice`
    naming the two choices that conflict.
    """
    if isinstance(components, str):
        components = [c for c in components.split(",") if c.strip()]
    comps = tuple(dict.fromkeys(str(c).strip().lower().replace("-", "_") for c in components))
    unknown = [c for c in comps if c not in TOGGLES]
    if unknown:
        raise InvalidParameter(f"unknown component(s) {unknown}; choose from {', '.join(TOGGLES)}")
    mig_strategy = _check_choice("mig_strategy", mig_strategy, MIG_STRATEGIES)
    sharing = _check_choice("sharing", sharing, SHARING)
    has = set(comps).__contains__
    if has("driver") and driver_preinstalled:
        raise ContradictoryChoice(
            "driver enabled on nodes that already run a host driver (driver_preinstalled=True): the driver "
            "container cannot load its kernel module while the host's is loaded; drop 'driver' from the "
            "components (driver.enabled=false)")
    if not has("driver") and not driver_preinstalled:
        raise ContradictoryChoice(
            "no driver anywhere: 'driver' is not among the components and driver_preinstalled=False; enable the "
            "driver container or confirm the host driver is installed")
    if has("toolkit") and toolkit_preinstalled:
        raise ContradictoryChoice(
            "toolkit enabled on nodes whose container runtime is already configured by a host "
            "nvidia-container-toolkit (toolkit_preinstalled=True); drop 'toolkit' (toolkit.enabled=false)")
    if sharing != "none" and not has("device_plugin"):
        raise ContradictoryChoice(f"sharing={sharing!r} is a device-plugin setting but 'device_plugin' is not enabled")
    if sharing == "mps" and mig_strategy != "none":
        raise ContradictoryChoice(f"sharing='mps' with mig_strategy={mig_strategy!r}: MPS is not supported on "
                                  "MIG-enabled devices (facts.md §6.4); use time-slicing or no MIG")
    if mig_strategy != "none" and not has("device_plugin"):
        raise ContradictoryChoice(f"mig_strategy={mig_strategy!r} is applied by the device plugin and GFD, "
                                  "but 'device_plugin' is not enabled")
    if nodes is not None and not has("nfd") and len(nodes):
        if not any(k.startswith("feature.node.kubernetes.io/") for labels in nodes["labels"] for k in labels):
            raise ContradictoryChoice("'nfd' disabled but no node carries NFD labels (feature.node.kubernetes.io/*): "
                                      "the operator would report NFDLabelsMissing and deploy nothing; enable 'nfd'")
    rows = _components()
    values: dict[str, Any] = {}
    for comp in TOGGLES:
        values.setdefault(rows.loc[comp, "helm_key"], {})["enabled"] = has(comp)
    values["mig"] = {"strategy": mig_strategy}
    objects: list[dict] = []
    notes: list[str] = []
    ns = namespace or setting("namespace")
    if sharing != "none":
        import gpulib.mig.sharing as sh
        cfg = sh.time_slicing_config(replicas, mig_strategy=mig_strategy) if sharing == "time-slicing" \
            else sh.mps_config(replicas)
        name = f"{sharing}-config"
        objects.append(sh.device_plugin_configmap({"any": cfg}, name=name, namespace=ns))
        values["devicePlugin"]["config"] = {"name": name, "default": "any"}
        notes.append(f"{sharing}: each GPU is advertised {replicas} times; expect allocatable nvidia.com/gpu = "
                     f"{replicas} x nvidia.com/gpu.count after install")
    if mig_strategy != "none" and not has("mig_manager"):
        notes.append("MIG strategy set without mig-manager: partition the GPUs yourself (nvidia-smi mig / mig-parted)")
    if driver_preinstalled:
        notes.append("driver.enabled=false: the host driver version must support the CUDA of your images")
    return InstallPlan(values, comps, ns, release or setting("release"), version, objects, notes)


# --------------------------------------------------------------------------------------------
# pre-flight
# --------------------------------------------------------------------------------------------
def _nfd_gpu(labels: dict) -> bool:
    return any(str(labels.get(k, "")).lower() == "true" for k in setting("nfd_gpu_labels").split(";"))


def _auto_tolerated(key: str) -> bool:
    # the DaemonSet controller adds tolerations for the node.kubernetes.io/* condition taints
    return key.startswith("node.kubernetes.io/")


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    """Kubernetes toleration matching (key/operator/value/effect)."""
    for t in tolerations:
        op = t.get("operator", "Equal") or "Equal"
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if op == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if op == "Equal" and t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


#: the chart's default operand toleration (ClusterPolicy spec.daemonsets.tolerations)
DEFAULT_OPERAND_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def node_table(nodes: pd.DataFrame, runtimes: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per node: NFD GPU label, kernel and OS (NFD labels, else nodeInfo), runtime, taints."""
    rows = []
    for r in nodes.itertuples(index=False):
        lab = r.labels or {}
        rows.append({"node": r.node, "nfd_gpu": _nfd_gpu(lab), "gfd_product": r.gpu_product,
                     "kernel_nfd": lab.get(setting("nfd_kernel_label"), ""),
                     "os_nfd": " ".join(x for x in (lab.get(setting("nfd_os_id_label"), ""),
                                                     lab.get(setting("nfd_os_version_label"), "")) if x),
                     "kernel": r.kernel, "os_image": r.os_image, "runtime": (runtimes or {}).get(r.node, ""),
                     "taints": ", ".join(f"{t['key']}{'=' + t['value'] if t['value'] else ''}:{t['effect']}"
                                         for t in r.taints or [])})
    return pd.DataFrame(rows, columns=["node", "nfd_gpu", "gfd_product", "kernel_nfd", "os_nfd", "kernel",
                                       "os_image", "runtime", "taints"])


def preflight(nodes: pd.DataFrame, *, namespace_labels: dict | None = None, runtimes: dict[str, str] | None = None,
              plan: InstallPlan | None = None, operand_tolerations: list[dict] | None = None,
              namespace: str | None = None) -> list[Finding]:
    """Checks before ``helm install``. ``namespace_labels``: labels of the operator namespace (None: it does
    not exist yet or could not be read); ``runtimes``: node -> containerRuntimeVersion."""
    ns = namespace or (plan.namespace if plan else setting("namespace"))
    table = node_table(nodes, runtimes)
    gpu = table[table["nfd_gpu"]]
    out: list[Finding] = []
    if gpu.empty:
        out.append(sop("no_gpu_nodes", ns=ns, evidence=[f"{len(table)} node(s), none labelled pci-10de by NFD"]
                       + [f"{r.node}: GFD product {r.gfd_product}" for r in table.itertuples() if r.gfd_product][:5]))
        return out
    out.append(Finding(Severity.OK, f"{len(gpu)} GPU node(s) found by NFD (PCI vendor 10de)", category="gpu-operator",
                       evidence=[f"{r.node}: {r.os_nfd or r.os_image}, kernel {r.kernel_nfd or r.kernel}"
                                 + (f", {r.runtime}" if r.runtime else "") for r in gpu.itertuples()][:12]))
    driver_on = plan is None or "driver" in plan.components
    no_os = gpu[(gpu["kernel_nfd"] == "") | (gpu["os_nfd"] == "")]
    if len(no_os) and driver_on:
        out.append(Finding(Severity.WARNING, f"{len(no_os)} GPU node(s) lack NFD kernel/OS labels", category="gpu-operator",
                           summary="The driver DaemonSet picks its image (<os><version>) and kernel from NFD's "
                                   "kernel-version.full and system-os_release labels.",
                           evidence=[f"{r.node}: kernel {r.kernel or '?'}, {r.os_image or '?'} (from nodeInfo)" for r in no_os.itertuples()][:10],
                           sop_step="Check the NFD worker pods on these nodes (system and kernel feature sources).",
                           commands=["kubectl get pods -A -o wide | grep node-feature-discovery-worker",
                                     f"kubectl get node {no_os['node'].iloc[0]} -o jsonpath='{{.metadata.labels}}'"]))
    kernels = sorted(set(gpu["kernel_nfd"].where(gpu["kernel_nfd"] != "", gpu["kernel"])) - {""})
    if len(kernels) > 1 and driver_on:
        out.append(Finding(Severity.INFO, f"GPU nodes run {len(kernels)} different kernels", category="gpu-operator",
                           summary="The driver container builds (or needs a precompiled image) per kernel; "
                                   "expect one driver DaemonSet rollout per kernel.", evidence=kernels[:8]))
    runtimes_seen = sorted({r.split("://")[0] for r in gpu["runtime"] if r})
    if len(runtimes_seen) > 1:
        out.append(Finding(Severity.WARNING, f"GPU nodes use different container runtimes: {', '.join(runtimes_seen)}",
                           category="gpu-operator", sop_step="The toolkit configures one default runtime "
                           "(operator.defaultRuntime); split the install or align the runtimes.",
                           evidence=[f"{r.node}: {r.runtime}" for r in gpu.itertuples()][:10]))
    tolerations = operand_tolerations if operand_tolerations is not None else DEFAULT_OPERAND_TOLERATIONS
    untolerated = []
    for r in nodes[nodes["node"].isin(gpu["node"])].itertuples(index=False):
        for t in r.taints or []:
            if t["effect"] in ("NoSchedule", "NoExecute") and not _auto_tolerated(t["key"]) and not _tolerated(t, tolerations):
                untolerated.append((r.node, t))
    if untolerated:
        keys = sorted({t["key"] for _, t in untolerated})
        tol = ", ".join(f"{{key: {k}, operator: Exists}}" for k in keys)
        out.append(Finding(Severity.WARNING, f"{len({n for n, _ in untolerated})} GPU node(s) carry taints the operands do not tolerate",
                           category="gpu-operator", summary="Operand pods (driver, toolkit, device plugin...) would stay "
                           "Pending on these nodes.",
                           evidence=[f"{n}: {t['key']}={t['value']}:{t['effect']}" for n, t in untolerated][:10],
                           sop_step=f"Add the taints to the chart's daemonsets.tolerations: [{tol}]",
                           commands=[f"helm upgrade {setting('release')} {setting('chart')} -n {ns} --reuse-values "
                                     f"--set 'daemonsets.tolerations[1].key={keys[0]}' --set 'daemonsets.tolerations[1].operator=Exists'"]))
    out += _pod_security(namespace_labels, ns)
    return out


def _pod_security(labels: dict | None, ns: str) -> list[Finding]:
    key, need = setting("pod_security_label"), setting("pod_security_required")
    cmd = f"kubectl label --overwrite namespace {ns} {key}={need}"
    if labels is None:
        return [Finding(Severity.INFO, f"Namespace {ns} not found (or not readable): create it privileged",
                        category="gpu-operator", sop_step="Create the namespace and label it before installing; "
                        "operand pods are privileged.", commands=[f"kubectl create namespace {ns}", cmd])]
    level = labels.get(key, "")
    if level and level != need:
        return [Finding(Severity.CRITICAL, f"Namespace {ns} enforces PodSecurity '{level}': operand pods will be rejected",
                        category="gpu-operator", evidence=[f"{key}={level}"],
                        sop_step=f"The driver, toolkit and device plugin run privileged; label the namespace {need}.",
                        commands=[cmd], data={"check": "pod_security"})]
    if not level:
        return [Finding(Severity.INFO, f"Namespace {ns} has no PodSecurity enforce label", category="gpu-operator",
                        sop_step="Fine unless the cluster default level is baseline/restricted; label it to be explicit.",
                        commands=[cmd])]
    return []


# --------------------------------------------------------------------------------------------
# post-install verification
# --------------------------------------------------------------------------------------------
def _owner_ds(pod: dict) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet":
            return ref.get("name", "")
    return ""


def _waiting_reason(pod: dict) -> tuple[str, str]:
    """(reason, container) of the first waiting/failed container (init containers first), else ("", "")."""
    st = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            state = cs.get("state") or {}
            if "waiting" in state and (state["waiting"] or {}).get("reason") not in (None, "", "PodInitializing"):
                reason = state["waiting"]["reason"]
                return (f"Init:{reason}" if key == "initContainerStatuses" else reason), cs.get("name", "")
            if "terminated" in state and (state["terminated"] or {}).get("exitCode", 0) != 0:
                return f"Error (exit {state['terminated'].get('exitCode')})", cs.get("name", "")
    return "", ""


def _pod_ready(pod: dict) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") == "Succeeded":
        return True
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    if "Ready" in conds:
        return conds["Ready"] == "True"
    cs = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and bool(cs) and all(c.get("ready") for c in cs)


def _expected_daemonsets(policy: dict | None, gpu_nodes: int) -> dict[str, str]:
    """DaemonSet -> component for the components the ClusterPolicy enables (chart defaults without one)."""
    spec = (policy or {}).get("spec") or {}
    out = {}
    for comp, r in _components().iterrows():
        if not r["daemonset"]:
            continue
        section = spec.get(r["helm_key"])
        enabled = section.get("enabled") if isinstance(section, dict) and "enabled" in section else r["default_enabled"] == "yes"
        if enabled and gpu_nodes:
            out[r["daemonset"]] = comp
    return out


def check_daemonsets(daemonsets: pd.DataFrame, pods: list[dict], nodes: pd.DataFrame, *,
                     policy: dict | None = None, namespace: str | None = None) -> list[Finding]:
    """Operand DaemonSets: present when enabled, desired = ready; the failing pod's reason picks the SOP."""
    ns = namespace or setting("namespace")
    kernels = dict(zip(nodes["node"], nodes["kernel"])) if len(nodes) else {}
    gpu_nodes = len(list(iter_gpu_nodes(nodes))) if len(nodes) else 0
    out: list[Finding] = []
    present = set(daemonsets["daemonset"]) if len(daemonsets) else set()
    comps = _components()
    for ds, comp in _expected_daemonsets(policy, gpu_nodes).items():
        if ds not in present:
            f = sop("daemonset_missing", ds=ds, ns=ns, state=comps.loc[comp, "state"] or comp,
                    evidence=[f"enabled in the ClusterPolicy (spec.{comps.loc[comp, 'helm_key']})",
                              f"DaemonSets in {ns}: {', '.join(sorted(present)) or 'none'}"])
            if comp == "gfd":
                f.title = "GPU feature discovery (gpu-feature-discovery DaemonSet) is missing"
            out.append(f)
    by_ds: dict[str, list[dict]] = {}
    for p in pods:
        by_ds.setdefault(_owner_ds(p), []).append(p)
    for r in daemonsets.itertuples(index=False):
        if r.desired == r.ready and not r.unavailable:
            continue
        bad = [p for p in by_ds.get(r.daemonset, []) if not _pod_ready(p)]
        specific = []
        for p in bad:
            reason, container = _waiting_reason(p)
            node = (p.get("spec") or {}).get("nodeName", "")
            name = p["metadata"]["name"]
            ev = [f"DaemonSet {r.daemonset}: desired {r.desired}, ready {r.ready}",
                  f"pod {name} on {node or '(unscheduled)'}: {reason or (p.get('status') or {}).get('phase', '?')}"
                  + (f" in container {container}" if container else "")]
            restarts = sum(cs.get("restartCount", 0) for cs in (p.get("status") or {}).get("containerStatuses") or [])
            if restarts:
                ev.append(f"{restarts} restarts")
            if r.daemonset == "nvidia-driver-daemonset" and "CrashLoopBackOff" in reason:
                specific.append(sop("driver_crashloop", pod=name, node=node, ns=ns, reason=reason,
                                    kernel=kernels.get(node, "?"), evidence=ev + [f"node kernel {kernels.get(node, '?')}"]))
            elif r.daemonset == "nvidia-operator-validator":
                continue  # check_validator names the missing ready-file
            elif reason:
                specific.append(sop("operand_crashloop", pod=name, node=node, ns=ns, reason=reason, evidence=ev))
        if specific:
            out += specific
        elif r.daemonset != "nvidia-operator-validator" or not bad:
            out.append(sop("daemonset_not_ready", ds=r.daemonset, ns=ns, ready=r.ready, desired=r.desired,
                           evidence=[f"desired {r.desired}, current {r.current}, ready {r.ready}, unavailable {r.unavailable}"]))
    return out


def check_validator(pods: list[dict], *, namespace: str | None = None) -> list[Finding]:
    """Validator pods whose init containers did not all complete: name the stuck one and its ready-file."""
    ns = namespace or setting("namespace")
    table = _components()
    init_map = {r["validator_init"]: (comp, r["ready_file"]) for comp, r in table.iterrows() if r["validator_init"]}
    out = []
    for p in pods:
        if _owner_ds(p) != "nvidia-operator-validator" and not p["metadata"]["name"].startswith("nvidia-operator-validator-"):
            continue
        statuses = (p.get("status") or {}).get("initContainerStatuses") or []
        stuck = next((cs for cs in statuses if not (((cs.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
                                                    and "terminated" in (cs.get("state") or {}))), None)
        if stuck is None:
            continue
        name = stuck.get("name", "")
        comp, ready_file = init_map.get(name, (name, "?"))
        state = stuck.get("state") or {}
        how = next(iter(state), "unknown")
        detail = (state.get(how) or {}).get("reason", "") if isinstance(state.get(how), dict) else ""
        node = (p.get("spec") or {}).get("nodeName", "")
        driver_pod = f"nvidia-driver-daemonset pod on {node}"
        done = [cs.get("name") for cs in statuses[:statuses.index(stuck)]]
        out.append(sop("validator_init", node=node, ns=ns, pod=p["metadata"]["name"], container=name,
                       ready_file=ready_file, component=comp.replace("_", " "), driver_pod=driver_pod,
                       evidence=[f"init containers completed: {', '.join(done) or 'none'}",
                                 f"{name}: {how}{' (' + detail + ')' if detail else ''}, "
                                 f"restarts {stuck.get('restartCount', 0)}",
                                 f"/run/nvidia/validations/{ready_file} not written"]))
    return out


def check_cluster_policy(policy: dict | None, *, namespace: str | None = None) -> list[Finding]:
    """ClusterPolicy ``status.state`` and its Ready/Error conditions (facts.md §6.1)."""
    ns = namespace or setting("namespace")
    st = cluster_policy_status(policy)
    if st["state"] == "absent":
        return [sop("policy_absent", ns=ns, evidence=["kubectl get clusterpolicies.nvidia.com: no items"])]
    ev = [f"status.state={st['state'] or '(empty)'}"] + [
        f"condition {c['type']}={c['status']} reason={c['reason']}: {c['message']}" for c in st["conditions"]]
    if st["state"] == "ready":
        return [Finding(Severity.OK, f"ClusterPolicy {st['name']} is ready", category="gpu-operator", evidence=ev)]
    if st["state"] == "ignored":
        return [sop("policy_ignored", name=st["name"], ns=ns, evidence=ev)]
    cond = next((c for c in st["conditions"] if c["type"] == "Ready" and c["status"] != "True"), None) \
        or next((c for c in st["conditions"] if c["type"] == "Error" and c["status"] == "True"), None) \
        or {"reason": "not reconciled yet", "message": "no conditions"}
    return [sop("policy_not_ready", name=st["name"] or setting("clusterpolicy_name"), state=st["state"] or "not reconciled",
                reason=cond["reason"], message=cond["message"], ns=ns,
                advice=_REASON_ADVICE.get(cond["reason"], "Read the operator log for the failing state."), evidence=ev)]


def expected_devices(row) -> dict[str, int]:
    """Resource -> count the node should advertise, from GFD labels: ``nvidia.com/gpu`` = gpu.count x replicas
    (``nvidia.com/gpu.shared`` when the device plugin renames shared GPUs, :func:`gpulib.kube.client.gpu_resource_name`);
    under the MIG mixed strategy each ``nvidia.com/mig-<profile>`` = its ``.count`` label."""
    labels = row.labels or {}
    out: dict[str, int] = {}
    for k, v in labels.items():
        if k.startswith("nvidia.com/mig-") and k.endswith(".count") and str(v).isdigit():
            out[k[:-len(".count")]] = int(v)
    if row.mig_strategy == "mixed" and (out or row.mig_capacity):
        # GFD's per-profile counts when present, else what the node's capacity says
        return {k: out.get(k, v) for k, v in {**(row.mig_capacity or {}), **out}.items()}
    if pd.notna(row.gpu_count):
        reps = int(row.gpu_replicas) if pd.notna(row.gpu_replicas) and int(row.gpu_replicas) > 0 else 1
        return {gpu_resource_name(row): int(row.gpu_count) * reps}
    return {}


def check_nodes(nodes: pd.DataFrame, *, namespace: str | None = None) -> list[Finding]:
    """Per GPU node: GFD labels, ``mig.config.state``, allocatable against GFD's counts."""
    ns = namespace or setting("namespace")
    out = []
    for r in nodes.itertuples(index=False):
        labels = r.labels or {}
        if not (_nfd_gpu(labels) or r.gpu_product or r.gpu_capacity or r.mig_capacity):
            continue
        missing = [k for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.count") if k not in labels]
        if missing:
            out.append(sop("gfd_labels_missing", node=r.node, ns=ns, missing=", ".join(missing),
                           evidence=[f"capacity nvidia.com/gpu {r.gpu_capacity}", f"NFD pci-10de: {_nfd_gpu(labels)}"]))
        if r.mig_config_state == "failed":
            out.append(sop("mig_config_failed", node=r.node, ns=ns, config=r.mig_config or "<config>",
                           evidence=[f"nvidia.com/mig.config={r.mig_config}", "nvidia.com/mig.config.state=failed"]))
        if not r.ready:
            continue  # allocatable of a NotReady node says nothing about the operator
        alloc = {gpu_resource_name(r): int(r.gpu_allocatable), **(r.mig_allocatable or {})}
        for res, exp in expected_devices(r).items():
            have = alloc.get(res, 0)
            ev = [f"allocatable {res} = {have}", f"expected {exp} (GFD labels: gpu.count={r.gpu_count}, "
                  f"replicas={r.gpu_replicas}, strategy={r.mig_strategy or 'none'})"]
            if exp > 0 and have == 0:
                out.append(sop("allocatable_zero", node=r.node, ns=ns, resource=res, expected=exp, evidence=ev))
            elif have < exp:
                out.append(sop("allocatable_short", node=r.node, ns=ns, resource=res, alloc=have, expected=exp, evidence=ev))
    return out


EXPORTER_TARGET_COLUMNS = ["node", "instance", "job", "up"]


def exporter_targets(up: list[dict] | None, node_names: Iterable[str] = ()) -> pd.DataFrame:
    """dcgm-exporter scrape targets from Prometheus ``up`` samples, one row per target: ``node`` (from a
    node label, see ``dcgm_target_node_labels``, else the instance's host when it is a node name; "" when
    unknown), ``instance``, ``job``, ``up`` (float)."""
    keys = setting("dcgm_target_node_labels").split(";")
    names = set(node_names)
    rows = []
    for u in up or []:
        metric = u.get("metric") or {}
        inst = str(metric.get("instance", ""))
        node = next((str(metric[k]) for k in keys if metric.get(k)), "")
        host = inst.rsplit(":", 1)[0]
        if not node and host in names:
            node = host
        rows.append({"node": node, "instance": inst or "?", "job": str(metric.get("job", "")),
                     "up": float((u.get("value") or [0, "nan"])[1])})
    return pd.DataFrame(rows, columns=EXPORTER_TARGET_COLUMNS)


def check_dcgm(last: pd.DataFrame | None, nodes: pd.DataFrame, *, up: list[dict] | None = None,
               namespace: str | None = None, field: str | None = None) -> list[Finding]:
    """DCGM series present for every physical GPU of every GPU node; dcgm-exporter targets ``up``.

    ``last``: a SUMMARY frame (``src.summary(field, "5m", "last")``); ``up``: Prometheus ``up`` samples of the
    exporter job (``[{"metric": {...}, "value": [t, "1"]}]``) when the backend has them (``None`` otherwise).
    With ``up``: a target at 0 is reported once (its node's missing series follow from it); when the targets
    name their nodes, a GPU node without any target is reported; a GPU missing while its node's target is up
    is a GPU the exporter itself does not see.
    """
    ns = namespace or setting("namespace")
    field = field or setting("dcgm_presence_field")
    out = []
    targets = exporter_targets(up, nodes["node"].astype(str))
    for t in targets[targets["up"] == 0].itertuples(index=False):
        ev = [f"up{{instance={t.instance!r}}} = 0"]
        if t.node:
            ev.append(f"no DCGM series can arrive from {t.node} while its exporter is not scraped")
        out.append(sop("dcgm_target_down", node=t.node or None, instance=t.instance, ns=ns, evidence=ev))
    down = set(targets.loc[targets["up"] == 0, "node"]) - {""}
    target_up = {t.node: t.instance for t in targets[targets["up"] > 0].itertuples(index=False) if t.node}
    named = bool((targets["node"] != "").any())
    seen = last if last is not None else pd.DataFrame(columns=["node", "gpu"])
    for r in nodes.itertuples(index=False):
        if r.node not in set(iter_gpu_nodes(nodes.loc[nodes["node"] == r.node])) or not r.ready or r.node in down:
            continue
        if named and r.node not in target_up:
            out.append(sop("dcgm_target_absent", node=r.node, ns=ns,
                           evidence=[f"{len(targets)} dcgm-exporter target(s) in Prometheus "
                                     f"({', '.join(sorted(set(targets['job']) - {''})) or 'no job label'}), none for {r.node}"]))
            continue
        have = set(seen.loc[seen["node"] == r.node, "gpu"].astype(str))
        single_mig = "-MIG-" in str(r.gpu_product)  # gpu.count counts MIG devices, not GPUs
        if single_mig or pd.isna(r.gpu_count):
            missing = [] if have else ["all"]
        else:
            missing = [str(i) for i in range(int(r.gpu_count)) if str(i) not in have]
        if missing:
            ev = [f"{field}: series for GPU(s) {', '.join(sorted(have, key=lambda x: (len(x), x))) or 'none'} "
                  f"of {r.gpu_count if pd.notna(r.gpu_count) else '?'}"]
            if r.node in target_up:
                ev.append(f"dcgm-exporter target {target_up[r.node]} is up: the exporter is scraped but does not "
                          "report these GPUs (check nvidia-smi on the node for a GPU that fell off the bus)")
            out.append(sop("dcgm_missing", node=r.node, ns=ns, gpus=", ".join(missing), evidence=ev))
    return out


def dcgm_presence(src, window: str | None = None) -> tuple[pd.DataFrame | None, list[dict] | None]:
    """(last sample per GPU in ``window``, Prometheus ``up`` of the exporter or None) from any source."""
    from gpulib.core.errors import EmptyResult, SourceError

    window = window or setting("dcgm_presence_window")
    try:
        last = src.summary(setting("dcgm_presence_field"), window, "last")
    except EmptyResult:
        last = None
    up = None
    if hasattr(src, "query"):
        try:
            up = src.query('up{job=~".*dcgm.*"}') or None
        except SourceError:
            up = None
    return last, up


def verify(state: dict, nodes: pd.DataFrame, *, dcgm_last: pd.DataFrame | None = None,
           dcgm_up: list[dict] | None = None, check_metrics: bool = True, namespace: str | None = None) -> list[Finding]:
    """All post-install checks over an operator ``state`` (see :func:`collect_state`) and the NODE frame.

    Returns the failed checks (each with its SOP) or one OK Finding when everything passed.
    """
    ns = namespace or state.get("namespace") or setting("namespace")
    policy = state.get("cluster_policy")
    pods = state.get("pods") or []
    out = check_cluster_policy(policy, namespace=ns)
    problems = [f for f in out if f.severity != Severity.OK]
    problems += check_daemonsets(state.get("daemonsets", daemonsets_frame({"items": []})), pods, nodes,
                                 policy=policy, namespace=ns)
    problems += check_validator(pods, namespace=ns)
    problems += check_nodes(nodes, namespace=ns)
    if check_metrics:
        problems += check_dcgm(dcgm_last, nodes, up=dcgm_up, namespace=ns)
    if problems:
        return problems
    gpu = list(iter_gpu_nodes(nodes))
    return [Finding(Severity.OK, "GPU Operator verified", category="gpu-operator",
                    summary="Operands ready, validator passed, ClusterPolicy ready, every GPU advertised and reporting DCGM.",
                    evidence=[f"{len(gpu)} GPU node(s)", f"{len(state.get('daemonsets', []))} operand DaemonSet(s) ready"],
                    sop_step="Run the CUDA test pod (cuda_test_pod()) as a last end-to-end check.",
                    commands=["kubectl apply -f cuda-vectoradd.yaml", "kubectl logs -f cuda-vectoradd   # 'Test PASSED'"])]


def cuda_test_pod(*, namespace: str = "default", name: str = "cuda-vectoradd", image: str | None = None,
                  node: str | None = None, resource: str = "nvidia.com/gpu") -> dict:
    """A one-shot CUDA vectorAdd pod requesting one GPU (or MIG device ``resource``) with the GPU toleration."""
    spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "containers": [{"name": "cuda-vectoradd", "image": image or setting("cuda_test_image"),
                        "resources": {"limits": {resource: 1}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


# --------------------------------------------------------------------------------------------
# state: live cluster, files, demo
# --------------------------------------------------------------------------------------------
def state_from_objects(objects: dict, namespace: str | None = None) -> dict:
    """Operator state from raw objects (``daemonsets``/``cluster_policies``/``pods`` item lists, optional
    ``namespaces`` {name: labels} and ``nodes`` items for runtimes)."""
    ns = namespace or setting("namespace")
    pols = objects.get("cluster_policies") or []
    policy = next((p for p in pols if (p.get("metadata") or {}).get("name") == setting("clusterpolicy_name")),
                  pols[0] if pols else None)
    ds_items = [d for d in objects.get("daemonsets") or [] if (d.get("metadata") or {}).get("namespace", ns) == ns]
    pods = [p for p in objects.get("pods") or [] if (p.get("metadata") or {}).get("namespace") == ns]
    runtimes = {(n.get("metadata") or {}).get("name", ""): ((n.get("status") or {}).get("nodeInfo") or {}).get(
        "containerRuntimeVersion", "") for n in objects.get("nodes") or []}
    return {"namespace": ns, "daemonsets": daemonsets_frame({"items": ds_items}), "cluster_policy": policy,
            "pods": pods, "namespace_labels": (objects.get("namespaces") or {}).get(ns), "runtimes": runtimes}


def collect_state(kube, namespace: str | None = None) -> dict:
    """Operator state from a live cluster (:class:`gpulib.kube.client.KubeCluster`): DaemonSets, ClusterPolicy
    (None when absent or the CRD is not installed), the namespace's pods, its labels, node runtimes."""
    ns = namespace or setting("namespace")
    try:
        policies = kube.list_cluster_policies()["items"]
    except KubernetesError as exc:
        if exc.status != 404:
            raise
        policies = []
    labels = None
    try:
        from gpulib.kube.client import _Call
        obj = kube._request(kube.core.read_namespace, _Call("get", "namespaces", f"/api/v1/namespaces/{ns}"), name=ns)
        obj = obj.to_dict() if hasattr(obj, "to_dict") else obj
        labels = dict(((obj or {}).get("metadata") or {}).get("labels") or {})
    except KubernetesError:
        labels = None
    return state_from_objects({"daemonsets": kube.list_daemonsets(ns)["items"], "cluster_policies": policies,
                               "pods": kube.list_pods(ns)["items"], "namespaces": {ns: labels} if labels is not None else {},
                               "nodes": kube.list_nodes()["items"]}, ns)


def _suffix(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:5]


def _running(name: str, image: str, *, ready: bool = True, restarts: int = 0) -> dict:
    return {"name": name, "image": image, "ready": ready, "restartCount": restarts, "started": ready,
            "state": {"running": {"startedAt": "2026-11-27T08:00:00Z"}}}


def demo_objects(nodes_json: dict, scenario: str = "healthy", *, namespace: str | None = None) -> dict:
    """A GPU Operator install on ``nodes_json`` as raw objects (DaemonSets, ClusterPolicy, operand pods,
    namespace labels, and the nodes, possibly modified), healthy or broken per ``scenario`` (:data:`SCENARIOS`)."""
    if scenario not in SCENARIOS:
        raise InvalidParameter(f"operator scenario {scenario!r}; use one of {', '.join(SCENARIOS)}")
    ns = namespace or setting("namespace")
    nodes = copy.deepcopy(nodes_json.get("items", []))
    gpu_nodes = [n for n in nodes if _nfd_gpu(n["metadata"].get("labels") or {})]
    mig_nodes = [n for n in gpu_nodes if (n["metadata"].get("labels") or {}).get("nvidia.com/mig.capable") == "true"]
    victim = gpu_nodes[0]["metadata"]["name"] if gpu_nodes else ""
    comps = _components()
    enabled = ["driver", "toolkit", "device_plugin", "gfd", "dcgm_exporter", "mig_manager", "validator"]
    wanted = list(enabled)
    if scenario == "gfd_missing":
        wanted.remove("gfd")
        for n in gpu_nodes:
            for k in [k for k in n["metadata"]["labels"] if k.startswith(("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig."))
                      and not k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.present"]:
                del n["metadata"]["labels"][k]
    images = {"driver": "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04",
              "toolkit": "nvcr.io/nvidia/k8s/container-toolkit:v1.16.2-ubuntu20.04",
              "device_plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2-ubi8",
              "gfd": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2-ubi8",
              "dcgm_exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
              "mig_manager": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.8.0-ubuntu20.04",
              "validator": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.6.2"}
    daemonsets, pods = [], []
    for comp in wanted:
        ds = comps.loc[comp, "daemonset"]
        targets = mig_nodes if comp == "mig_manager" else gpu_nodes
        ready = 0
        for n in targets:
            node = n["metadata"]["name"]
            pod = _operand_pod(ds, comp, node, ns, images[comp], scenario, victim)
            ready += _pod_ready(pod)
            pods.append(pod)
        daemonsets.append({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": ds, "namespace": ns, "labels": {"app": ds, "app.kubernetes.io/managed-by": "gpu-operator"}},
            "spec": {"selector": {"matchLabels": {"app": ds}}, "template": {
                "metadata": {"labels": {"app": ds}},
                "spec": {"nodeSelector": {comps.loc[comp, "deploy_label"]: "true"},
                         "containers": [{"name": ds, "image": images[comp]}]}}},
            "status": {"desiredNumberScheduled": len(targets), "currentNumberScheduled": len(targets),
                       "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": len(targets),
                       "numberMisscheduled": 0, **({"numberUnavailable": len(targets) - ready} if ready < len(targets) else {})}})
    if scenario == "allocatable_zero":
        n = next(n for n in gpu_nodes if int(n["status"]["capacity"].get("nvidia.com/gpu", "0")) > 0)
        n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    if scenario == "mig_failed" and mig_nodes:
        mig = next((n for n in mig_nodes if "nvidia.com/mig.config.state" in n["metadata"]["labels"]), mig_nodes[0])
        mig["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    spec = {comps.loc[c, "helm_key"]: {"enabled": c in enabled} for c in TOGGLES}
    spec.update({"mig": {"strategy": "mixed"}, "operator": {"defaultRuntime": "containerd"},
                 "daemonsets": {"tolerations": DEFAULT_OPERAND_TOLERATIONS}})
    not_ready = {"driver_crashloop": "state-driver", "policy_not_ready": "state-mig-manager",
                 "validator_stuck": "state-operator-validation", "allocatable_zero": "",
                 "gfd_missing": ""}.get(scenario)
    if not_ready:
        msg = f"ClusterPolicy is not ready, states not ready: [{not_ready}]"
        status = {"state": "notReady", "namespace": ns, "conditions": [
            {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": msg,
             "lastTransitionTime": "2026-11-29T10:05:13Z"},
            {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": msg,
             "lastTransitionTime": "2026-11-29T10:05:13Z"}]}
    else:
        status = {"state": "ready", "namespace": ns, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ClusterPolicy is ready",
             "lastTransitionTime": "2026-11-27T08:05:13Z"},
            {"type": "Error", "status": "False", "reason": "Reconciled", "message": "",
             "lastTransitionTime": "2026-11-27T08:05:13Z"}]}
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
              "metadata": {"name": setting("clusterpolicy_name"), "generation": 1}, "spec": spec, "status": status}
    return {"daemonsets": daemonsets, "cluster_policies": [policy], "pods": pods, "nodes": nodes,
            "namespaces": {ns: {setting("pod_security_label"): setting("pod_security_required"),
                                "kubernetes.io/metadata.name": ns}}}


def _operand_pod(ds: str, comp: str, node: str, ns: str, image: str, scenario: str, victim: str) -> dict:
    name = f"{ds}-{_suffix(ds, node)}"
    status: dict[str, Any] = {"phase": "Running", "hostIP": "10.0.0.1", "startTime": "2026-11-27T08:00:00Z",
                              "conditions": [{"type": "Ready", "status": "True"}],
                              "containerStatuses": [_running(f"{ds.replace('-daemonset', '')}-ctr" if comp == "driver" else ds, image)]}
    if comp == "driver":
        status["containerStatuses"][0]["name"] = "nvidia-driver-ctr"
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": status["containerStatuses"][0]["name"], "image": image}]}
    broken = node == victim
    if comp == "driver" and scenario == "driver_crashloop" and broken:
        status["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
        status["containerStatuses"][0].update(ready=False, started=False, restartCount=14, state={"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off 5m0s restarting failed container=nvidia-driver-ctr pod={name}_{ns}"}},
            lastState={"terminated": {"exitCode": 1, "reason": "Error"}})
    if comp == "validator":
        inits = [r for r in ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")]
        stuck_at = {"driver_crashloop": "driver-validation", "validator_stuck": "toolkit-validation"}.get(scenario) if broken else None
        statuses = []
        for c in inits:
            if stuck_at and inits.index(c) > inits.index(stuck_at):
                statuses.append({"name": c, "image": image, "ready": False, "restartCount": 0,
                                 "state": {"waiting": {"reason": "PodInitializing"}}})
            elif c == stuck_at:
                statuses.append({"name": c, "image": image, "ready": False, "restartCount": 0,
                                 "state": {"running": {"startedAt": "2026-11-29T09:00:00Z"}}})
            else:
                statuses.append({"name": c, "image": image, "ready": True, "restartCount": 0,
                                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}})
        status["initContainerStatuses"] = statuses
        spec["initContainers"] = [{"name": c, "image": image} for c in inits]
        if stuck_at:
            status["phase"] = "Pending"
            status["conditions"] = [{"type": "Initialized", "status": "False"}, {"type": "Ready", "status": "False"}]
            status["containerStatuses"][0].update(ready=False, started=False, state={"waiting": {"reason": "PodInitializing"}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": ds},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "controller": True,
                                              "uid": f"ds-{_suffix(ds)}"}]},
            "spec": spec, "status": status}
