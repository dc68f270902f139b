"""The in-cluster probe runs on a public PyTorch image: the manifest is a ``v1 List`` of a ConfigMap holding the
probe script (and the bus-factor table it reads) plus the Job / PyTorchJob that mounts it and runs it with
``torchrun``. The script in the ConfigMap must run with only the image's Python and torch: no gpulib, no pandas."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest

import gpulib.nccl.job as J
import gpulib.nccl.probe as P
import gpulib.nccl.results as R
from gpulib.core.knowledge import data_path

K8S = "1.30.0"
MIB = 1 << 20  # a ConfigMap holds at most 1 MiB (https://kubernetes.io/docs/concepts/configuration/configmap/)


def _items(manifest):
    assert (manifest["apiVersion"], manifest["kind"]) == ("v1", "List")
    return {i["kind"]: i for i in manifest["items"]}


def _templates(workload):
    if workload["kind"] == "Job":
        return [workload["spec"]["template"]]
    return [rs["template"] for rs in workload["spec"]["pytorchReplicaSpecs"].values()]


def _script_path(container) -> str:
    """The .py argument torchrun runs (list command, or the ``sh -c`` line of a PyTorchJob)."""
    argv = shlex.split(container["command"][-1]) if container["command"][0] == "/bin/sh" else container["command"]
    assert "torchrun" in argv
    (script,) = [a for a in argv if a.endswith(".py")]
    return script


def _extract(manifest, where: Path) -> Path:
    """Write every ConfigMap key to ``where`` as a file, as the kubelet mounts them; returns the script path."""
    cm = _items(manifest)["ConfigMap"]
    where.mkdir(parents=True, exist_ok=True)
    for key, text in cm["data"].items():
        (where / key).write_text(text)
    return where / J.defaults()["probe_script_key"]


# ------------------------------------------------------------------ the image


def test_default_image_is_public_not_the_project_image():
    image = J.defaults()["image"]
    assert not image.split("/")[-1].startswith("gpu-runbooks"), image
    # a public registry path: Docker Hub's official pytorch org or NGC's nvidia/pytorch
    assert image.startswith(("pytorch/pytorch:", "docker.io/pytorch/pytorch:", "nvcr.io/nvidia/pytorch:")), image
    for m in (J.job_manifest(gpus=2), J.pytorchjob_manifest(nodes=2)):
        for tpl in _templates(J.workload(m)):
            assert tpl["spec"]["containers"][0]["image"] == image


def test_the_image_row_cites_its_tag_page_and_release_notes():
    import csv

    with data_path("nccl/nccl_job_defaults.csv").open() as fh:
        row = next(r for r in csv.DictReader(fh) if r["key"] == "image")
    assert "hub.docker.com/r/pytorch/pytorch/tags" in row["source"] or "catalog.ngc.nvidia.com" in row["source"]
    assert "releases/tag/v" in row["source"] or "pytorch-release-notes" in row["source"]


def test_custom_image_is_an_option_and_still_mounts_the_script():
    m = J.job_manifest(gpus=2, image="registry.internal:5000/gpu-runbooks-nccl-probe:0.1.0")
    (tpl,) = _templates(J.workload(m))
    assert tpl["spec"]["containers"][0]["image"] == "registry.internal:5000/gpu-runbooks-nccl-probe:0.1.0"
    assert _script_path(tpl["spec"]["containers"][0]).startswith(J.defaults()["probe_mount_path"] + "/")


def test_image_note_says_which_image_and_that_it_is_public():
    note = J.image_note(J.job_manifest(gpus=2))
    assert J.defaults()["image"] in note and "public" in note and "ConfigMap" in note
    custom = J.image_note(J.job_manifest(gpus=2, image="registry.internal/probe:1"))
    assert "registry.internal/probe:1" in custom and "a public image" not in custom
    assert "deploy/nccl-probe/Dockerfile" in custom


# ------------------------------------------------------------------ the manifest


@pytest.mark.parametrize(
    "make", [lambda: J.job_manifest(gpus=4, node="gpu-node-7"), lambda: J.pytorchjob_manifest(nodes=3, gpus_per_node=8)]
)
def test_manifest_is_a_list_of_configmap_and_workload_all_strictly_valid(make):
    m = make()
    items = _items(m)
    assert [i["kind"] for i in m["items"]][0] == "ConfigMap"  # created before the pods that mount it
    kubernetes_validate.validate(items["ConfigMap"], K8S, strict=True)
    if "Job" in items:
        kubernetes_validate.validate(items["Job"], K8S, strict=True)
    checked = J.validate(m)
    cm_name = items["ConfigMap"]["metadata"]["name"]
    assert f"ConfigMap/{cm_name}: valid for Kubernetes {K8S} (strict)" in checked
    assert any("mounts ConfigMap" in c for c in checked)
    assert items["ConfigMap"]["metadata"]["namespace"] == J.workload(m)["metadata"]["namespace"]


@pytest.mark.parametrize("make", [lambda: J.job_manifest(gpus=2), lambda: J.pytorchjob_manifest(nodes=2)])
def test_workload_mounts_the_configmap_and_runs_its_key(make):
    m = make()
    cm = _items(m)["ConfigMap"]
    for tpl in _templates(J.workload(m)):
        spec = tpl["spec"]
        (c,) = spec["containers"]
        vols = {v["name"]: v for v in spec["volumes"]}
        mounted = [(vols[vm["name"]], vm) for vm in c["volumeMounts"] if "configMap" in vols[vm["name"]]]
        assert len(mounted) == 1
        vol, vm = mounted[0]
        assert vol["configMap"]["name"] == cm["metadata"]["name"] and vm.get("readOnly") is True
        script = _script_path(c)
        assert os.path.dirname(script) == vm["mountPath"]
        assert os.path.basename(script) in cm["data"]
        assert "gpulib" not in " ".join(c["command"])  # nothing from the project image is needed


def test_validate_catches_a_broken_mount():
    m = J.job_manifest(gpus=2)
    J.workload(m)["spec"]["template"]["spec"]["volumes"][-1]["configMap"]["name"] = "other"
    with pytest.raises(J.InvalidParameter, match="ConfigMap"):
        J.validate(m)
    m = J.job_manifest(gpus=2)
    del _items(m)["ConfigMap"]["data"][J.defaults()["probe_script_key"]]
    with pytest.raises(J.InvalidParameter, match="nccl_probe.py"):
        J.validate(m)


def test_configmap_is_generated_from_the_probe_source_and_far_under_the_limit():
    cm = _items(J.job_manifest(gpus=8))["ConfigMap"]
    assert cm["data"][J.defaults()["probe_script_key"]] == Path(P.__file__).read_text()
    assert cm["data"]["nccl_bus_factors.csv"] == data_path("nccl/nccl_bus_factors.csv").read_text()
    size = len(json.dumps(cm).encode())
    assert size < MIB // 10, size  # under 10 % of the 1 MiB limit
    assert J.configmap_bytes(cm) == sum(len(v.encode()) for v in cm["data"].values())
    from gpulib.nccl.probe_files import configmap_limit_bytes

    assert configmap_limit_bytes() == MIB
    big = J.job_manifest(gpus=2)
    _items(big)["ConfigMap"]["data"]["padding.txt"] = "x" * MIB  # over the limit: refused
    with pytest.raises(J.InvalidParameter, match="1 MiB"):
        J.validate(big)


def test_yaml_round_trip_and_commands_clean_up_the_configmap(tmp_path):
    import yaml

    m = J.job_manifest("probe-h100", gpus=8, namespace="ml")
    text = J.to_yaml(m)
    assert yaml.safe_load(text) == m
    cmds = J.apply_commands(m, "p.yaml")
    assert "kubectl logs -n ml job/probe-h100 > probe-h100.txt" in cmds
    assert cmds[-1] == "kubectl delete -n ml job/probe-h100 configmap/probe-h100-script"


# ------------------------------------------------------------------ the script in the ConfigMap


def test_script_imports_only_stdlib_and_torch():
    src = _items(J.job_manifest(gpus=2))["ConfigMap"]["data"][J.defaults()["probe_script_key"]]
    roots = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            roots.add(node.module.split(".")[0])
    outside = {r for r in roots if r != "torch" and r not in sys.stdlib_module_names}
    assert outside == set(), outside
    assert "torch" in roots


def test_script_compiles_and_runs_isolated_without_torch(tmp_path):
    script = _extract(J.job_manifest(gpus=2), tmp_path / "probe")
    subprocess.run([sys.executable, "-I", "-m", "py_compile", str(script)], check=True)
    # -I: no PYTHONPATH, no user site, no cwd on sys.path; -S: no site-packages (no torch, no gpulib, no pandas)
    iso = [sys.executable, "-I", "-S", str(script)]
    h = subprocess.run(iso + ["--help"], capture_output=True, text=True, cwd=tmp_path)
    assert h.returncode == 0, h.stderr
    assert "--collectives" in h.stdout
    p = subprocess.run(
        iso + ["--collectives", "all_reduce", "--max-bytes", "1K"], capture_output=True, text=True, cwd=tmp_path
    )
    assert p.returncode == 2 and "needs PyTorch" in p.stderr, p.stderr
    bad = subprocess.run(iso + ["--collectives", "alltoall"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode != 0 and "alltoall" in bad.stderr


def test_script_reads_the_bus_factors_next_to_it(tmp_path):
    script = _extract(J.job_manifest(gpus=2), tmp_path / "probe")
    code = (
        "import runpy, sys; g = runpy.run_path(sys.argv[1]); "
        "print(g['bus_factor']('all_reduce', 8), g['bus_factor']('all_gather', 4), g['bus_factor']('alltoall', 2))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(script)], capture_output=True, text=True, check=True
    )
    # 2(n-1)/n at n = 8 is 1.75; (n-1)/n at n = 4 is 0.75 and at n = 2 is 0.5 (NVIDIA/nccl-tests doc/PERFORMANCE.md)
    assert out.stdout.split() == ["1.75", "0.75", "0.5"]
    (script.parent / "nccl_bus_factors.csv").unlink()
    gone = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(script)], capture_output=True, text=True)
    assert gone.returncode != 0 and "nccl_bus_factors.csv" in gone.stderr


def test_script_with_a_stub_torch_reaches_the_cuda_check(tmp_path):
    script = _extract(J.job_manifest(gpus=2), tmp_path / "probe")
    stub = tmp_path / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("class cuda:\n    @staticmethod\n    def is_available(): return False\n")
    code = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[2:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    p = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(stub.parent), str(script), "--max-bytes", "64"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "no CUDA device visible" in p.stderr, p.stderr


def test_bus_factor_formulas_are_one_rule():
    # results.py evaluates the formulas of nccl_bus_factors.csv with the probe's function, not a copy
    assert R.factor_from_formula is P.factor_from_formula
    assert R.bus_factor("all_reduce", 8) == P.bus_factor("all_reduce", 8) == 1.75
    assert "lambda n" not in Path(R.__file__).read_text()


def test_committed_device_fixture_is_current(tmp_path):
    """tests/fixtures/nccl_probe/probe_job.json is what the H200 device script extracts the ConfigMap from (JSON,
    so the device needs no PyYAML); it must be today's one-GPU manifest."""
    fixture = Path(__file__).parents[1] / "fixtures" / "nccl_probe" / "probe_job.json"
    assert json.loads(fixture.read_text()) == J.job_manifest(gpus=1), (
        "regenerate: python3 -m gpulib.nccl.job --gpus 1 --json --out tests/fixtures/nccl_probe/probe_job.json"
    )
    # the CLI writes the same manifest, in both formats
    out = tmp_path / "m.json"
    assert J.main(["--gpus", "1", "--json", "--out", str(out)]) == 0 and out.read_text() == fixture.read_text()
    assert J.main(["--gpus", "0"]) == 2
