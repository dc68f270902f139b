"""The demo fleet as Kubernetes objects for :class:`kubectl_double.KubectlDouble`.

From the demo source (``gpulib.connect("demo", operator_scenario=...)``): its nodes (as the operator scenario
leaves them), its workload pods and the GPU Operator's operand pods, DaemonSets, ClusterPolicy and namespace
labels (``operator_objects()``). Added, because the pods imply them:

* each pod's owner chain from its ``ownerReferences``: a ReplicaSet ``<deployment>-<pod-template-hash>`` and its
  Deployment (the ReplicaSet naming of https://kubernetes.io/docs/concepts/workloads/controllers/deployment/),
  StatefulSets, DaemonSets, Jobs and PyTorchJobs, with the pods' labels as their selector;
* every namespace a pod or DaemonSet lives in, plus ``default``, ``kube-system``, ``kube-public`` and
  ``kube-node-lease`` (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces)
  and each node's Lease in ``kube-node-lease``
  (https://kubernetes.io/docs/concepts/architecture/leases/#node-heart-beats);
* a CustomResourceDefinition for each custom resource served (``kubectl get crd clusterpolicies.nvidia.com``).
"""

from __future__ import annotations

import copy
import functools

from tests.helpers.kubectl_double import RESOURCES


def _owner_api() -> dict[str, str]:
    """group/version of each owner kind (gpulib/data/kube/owner_kinds.csv)."""
    from gpulib.core.knowledge import load_table

    t = load_table("owner_kinds")
    return dict(zip(t["kind"], t["api_version"]))


def _owner(kind: str, name: str, ns: str, pods: list[dict]) -> dict:
    labels = dict(pods[0]["metadata"].get("labels") or {})
    labels.pop("pod-template-hash", None) if kind in ("Deployment",) else None
    spec: dict = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": copy.deepcopy(pods[0]["spec"])},
    }
    spec["template"]["spec"].pop("nodeName", None)
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        spec["replicas"] = len(pods)
    if kind == "PyTorchJob":
        spec = {"pytorchReplicaSpecs": {"Worker": {"replicas": len(pods), "template": spec["template"]}}}
    status = {"replicas": len(pods), "readyReplicas": len(pods)} if "replicas" in spec else {}
    return {
        "apiVersion": _owner_api()[kind],
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"{kind.lower()}-{ns}-{name}"},
        "spec": spec,
        "status": status,
    }


@functools.lru_cache(maxsize=None)
def _demo_cluster(scenario: str) -> tuple:
    return tuple(_build(scenario))


def demo_cluster(scenario: str = "healthy") -> list[dict]:
    """Every object of the demo fleet under GPU Operator ``scenario``, window end ``DEMO_END`` (see the module
    docstring); a fresh copy each call."""
    return copy.deepcopy(list(_demo_cluster(scenario)))


def _build(scenario: str) -> list[dict]:
    import gpulib
    from tests.helpers.pinned import DEMO_END

    src = gpulib.connect("demo", end=DEMO_END, operator_scenario=scenario)
    op = src.operator_objects()
    pods = copy.deepcopy(src.pod_objects()) + copy.deepcopy(op["pods"])
    objects: list[dict] = [dict(n, apiVersion="v1", kind="Node") for n in copy.deepcopy(op["nodes"])]
    objects += [dict(p, apiVersion="v1", kind="Pod") for p in pods]
    objects += [dict(d, apiVersion="apps/v1", kind="DaemonSet") for d in copy.deepcopy(op["daemonsets"])]
    objects += [
        dict(c, apiVersion="nvidia.com/v1", kind="ClusterPolicy") for c in copy.deepcopy(op["cluster_policies"])
    ]
    have = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    owned: dict[tuple[str, str, str], list[dict]] = {}
    for p in pods:
        for ref in p["metadata"].get("ownerReferences") or []:
            owned.setdefault((ref["kind"], p["metadata"]["namespace"], ref["name"]), []).append(p)
    for (kind, ns, name), its_pods in sorted(owned.items()):
        if kind == "ReplicaSet":
            deploy = name.rsplit("-", 1)[0]
            if ("Deployment", ns, deploy) not in have:
                objects.append(_owner("Deployment", deploy, ns, its_pods))
                have.add(("Deployment", ns, deploy))
        if (kind, ns, name) not in have:
            objects.append(_owner(kind, name, ns, its_pods))
            have.add((kind, ns, name))
    # the operator itself, which reconciles the ClusterPolicy: Deployment gpu-operator, label app: gpu-operator
    # (NVIDIA/gpu-operator: deployments/gpu-operator/templates/operator.yaml); the demo source models its operands only
    op_ns = next(iter(op.get("namespaces") or {"gpu-operator": {}}))
    op_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "gpu-operator-7c9f8d6b5d-q2x4z",
            "namespace": op_ns,
            "labels": {
                "app": "gpu-operator",
                "app.kubernetes.io/component": "gpu-operator",
                "pod-template-hash": "7c9f8d6b5d",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "controller": True,
                    "name": "gpu-operator-7c9f8d6b5d",
                    "uid": "rs-gpu-operator",
                }
            ],
        },
        "spec": {"containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v24.6.2"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "gpu-operator", "ready": True, "restartCount": 0, "state": {"running": {}}}],
        },
    }
    objects.append(op_pod)
    for kind, name in (("ReplicaSet", "gpu-operator-7c9f8d6b5d"), ("Deployment", "gpu-operator")):
        objects.append(_owner(kind, name, op_ns, [op_pod]))
    ns_labels = dict(op.get("namespaces") or {})
    names = {o["metadata"].get("namespace") for o in objects} - {None}
    names |= {"default", "kube-system", "kube-public", "kube-node-lease"}
    for ns in sorted(names):
        labels = {"kubernetes.io/metadata.name": ns, **ns_labels.get(ns, {})}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
        )
    for n in [o for o in objects if o["kind"] == "Node"]:
        name = n["metadata"]["name"]
        objects.append(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": 40,
                    "renewTime": "2026-11-29T11:59:50.000000Z",
                },
            }
        )
    for g, v, plural, kind, namespaced, short, _ in RESOURCES:
        if "." in g and not g.endswith("k8s.io"):
            objects.append(
                {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": f"{plural}.{g}"},
                    "spec": {
                        "group": g,
                        "scope": "Namespaced" if namespaced else "Cluster",
                        "names": {"plural": plural, "kind": kind, "singular": kind.lower(), "shortNames": short},
                        "versions": [{"name": v, "served": True, "storage": True}],
                    },
                }
            )
    return objects


def as_applied(manifest: str) -> list[dict]:
    """The objects a real ``kubectl apply -f`` of ``manifest`` leaves once its controllers ran: each object with a
    uid; a Job also with the selector and pod labels the API server adds, a ``Complete`` condition, and its one
    Succeeded pod (https://kubernetes.io/docs/concepts/workloads/controllers/job/), so the ``kubectl wait``,
    ``kubectl logs job/...`` and ``kubectl delete`` printed after the apply address what exists."""
    import yaml

    out = []
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    for doc in [i for d in docs for i in (d.get("items") or [] if d.get("kind") == "List" else [d])]:
        obj = copy.deepcopy(doc)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default") if obj["kind"] not in ("Namespace", "ClusterPolicy", "Node") else None
        meta["uid"] = f"applied-{obj['kind'].lower()}-{meta['name']}"
        out.append(obj)
        if obj["kind"] == "PyTorchJob":  # the training operator names its pods <job>-<replica type>-<index>
            # (https://www.kubeflow.org/docs/components/trainer/legacy-v1/user-guides/pytorch/: pytorch-simple-master-0)
            obj["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
            for rtype, rspec in (obj["spec"].get("pytorchReplicaSpecs") or {}).items():
                for i in range(int(rspec.get("replicas", 1))):
                    out.append(
                        _finished_pod(
                            f"{meta['name']}-{rtype.lower()}-{i}",
                            meta,
                            rspec["template"],
                            {
                                "training.kubeflow.org/job-name": meta["name"],
                                "training.kubeflow.org/replica-type": rtype.lower(),
                                "training.kubeflow.org/replica-index": str(i),
                            },
                            "PyTorchJob",
                            "kubeflow.org/v1",
                        )
                    )
        if obj["kind"] != "Job":
            continue
        labels = {
            "batch.kubernetes.io/controller-uid": meta["uid"],
            "batch.kubernetes.io/job-name": meta["name"],
            "controller-uid": meta["uid"],
            "job-name": meta["name"],
        }
        tmpl = obj["spec"]["template"]
        tmpl.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        obj["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}}
        obj["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        out.append(_finished_pod(f"{meta['name']}-x7k2p", meta, tmpl, {}, "Job", "batch/v1"))
    return out


def _finished_pod(name: str, owner_meta: dict, template: dict, labels: dict, kind: str, api: str) -> dict:
    containers = template["spec"]["containers"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner_meta["namespace"],
            "labels": {**((template.get("metadata") or {}).get("labels") or {}), **labels},
            "ownerReferences": [
                {
                    "apiVersion": api,
                    "kind": kind,
                    "name": owner_meta["name"],
                    "uid": owner_meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": copy.deepcopy(template["spec"]),
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
                for c in containers
            ],
        },
    }
