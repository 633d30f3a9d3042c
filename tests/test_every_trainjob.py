"""Every TrainJob the compiler writes passes Kubeflow Trainer v2.3.0's schema, CEL rules and webhook
checks (tests/kube_schema.py): each trainjob*.yaml under generated/, and each step's TrainJob of the
Kubernetes variant of every shipped spec (prepare, download, convert, export and train), not one
sample. Also the Slurm and Kubernetes settings of issue 29, item 10."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.one_pass import compile_spec
from helpers import REPO, compile_text
from kube_schema import trainer_schemas

K8S = {"platform": "kubernetes", "kubernetes": {"namespace": "training", "volume": {"claim": "megatron-shared"},
                                                "image_pull_secrets": ["cr-infini-ai"]}}


def _generated() -> list[Path]:
    return sorted((REPO / "generated").glob("*/trainjob*.yaml"))


@pytest.mark.parametrize("path", _generated(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_generated_trainjob_passes_the_trainer_schema(path):
    problems = trainer_schemas().validate_text(path.read_text())
    assert problems == [], "\n".join(map(str, problems))


def _kubernetes_variants() -> list[str]:
    """The shipped specs that compile, each as the Kubernetes engine would run it (bases merged)."""
    names = []
    for path in sorted((REPO / "specs").glob("*.yaml")):
        result = compile_spec(str(path), f"specs/{path.name}", render_files=False)
        if result.ok:
            names.append(path.name)
    return names


@pytest.mark.parametrize("name", _kubernetes_variants())
def test_each_step_of_each_spec_on_kubernetes_is_a_valid_trainjob(tmp_path, name):
    # the spec itself, extended, in a copy of specs/ (its bases and init_from's config.json beside it)
    import shutil

    specs = tmp_path / "specs"
    shutil.copytree(REPO / "specs", specs)
    overlay = {"extends": name, **K8S, "slurm": None, "skypilot": None}
    spec_path = specs / f"k8s-variant-{name}"
    spec_path.write_text(yaml.safe_dump(overlay, sort_keys=False))
    variant = compile_spec(str(spec_path), f"specs/{name}")
    errors = [d for d in variant.diagnostics if d.is_error]
    assert variant.ok, errors
    documents = {file: text for file, text in variant.files.items() if file.startswith("trainjob")}
    assert "trainjob.yaml" in documents
    for file, text in documents.items():
        problems = trainer_schemas().validate_text(text)
        assert problems == [], f"{name} {file}:\n" + "\n".join(map(str, problems))
        pod = yaml.safe_load(text)["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
        pod = pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "cr-infini-ai"}], file


def test_a_runtime_without_the_torch_plugin_is_refused(tmp_path):
    text = (REPO / "tests" / "bad_specs" / "kubernetes-runtime.yaml").read_text()
    for runtime in ("mlx-distributed", "my-runtime", "deepspeed-distributed"):
        result = compile_text(text.replace("deepspeed-distributed", runtime), "specs/k.yaml", tmp=tmp_path)
        assert [d.code for d in result.diagnostics if d.is_error] == ["kubernetes-runtime"], result.diagnostics
    ok = compile_text(text.replace("deepspeed-distributed", "torchtune-llama3.2-1b"), "specs/k.yaml", tmp=tmp_path)
    assert not [d for d in ok.diagnostics if d.is_error]


@pytest.mark.parametrize(("partition", "ok"), [("gpu a100", False), ("gpu,debug", True), ("gpu'x", False),
                                               ("h200_long", True), ("", False)])
def test_slurm_partition_names(tmp_path, partition, ok):
    text = (REPO / "tests" / "bad_specs" / "slurm-name.yaml").read_text()
    text = text.replace("  partition: gpu a100", f"  partition: {partition!r}").replace('  account: "team;x"', "  account: null")
    text = text.replace("    - relative/dir:/opt/data\n", "")
    result = compile_text(text, "specs/s.yaml", tmp=tmp_path)
    assert (not [d for d in result.diagnostics if d.is_error]) == ok, result.diagnostics


@pytest.mark.parametrize(("mounts", "host_root"), [
    (["/lustre/megatron:/mnt/megatron"], "/lustre/megatron/runs/x"),
    (["/lustre/megatron:/mnt/megatron:rw", "/scratch:/mnt/megatron/runs"], "/scratch/x"),
    (["/mnt/megatron"], "/mnt/megatron/runs/x"),
    (["/lustre/a/:/mnt/megatron/"], "/lustre/a/runs/x"),
])
def test_slurm_host_paths_go_through_the_mount_source(mounts, host_root):
    from compiler.platform.slurm import host_path

    assert host_path("/mnt/megatron/runs/x", mounts) == host_root


def test_the_image_installs_what_the_hugging_face_steps_run_pinned_and_without_resolving():
    """download.sh runs modelscope, convert/export run Bridge: the Dockerfile installs both, every
    package pinned (==) and with --no-deps, so pip adds nothing that was not validated (issue 29, item 6)."""
    import re

    from compiler.megatron.huggingface import BRIDGE_REQUIREMENTS, MODELSCOPE_REQUIREMENTS

    dockerfile = (REPO / "generated" / "qwen3-0.6b" / "Dockerfile").read_text()
    download = (REPO / "generated" / "qwen3-0.6b" / "download.sh").read_text()
    assert "modelscope download" in download
    run = next(line for line in dockerfile.splitlines() if line.startswith('RUN ["pip", "install"'))
    words = yaml.safe_load(run[len("RUN "):])
    assert "--no-deps" in words
    packages = [w for w in words if not w.startswith("-") and w not in ("pip", "install")]
    assert packages == list(BRIDGE_REQUIREMENTS["0.5.1"] + MODELSCOPE_REQUIREMENTS)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", p) for p in packages), packages
    assert not any(p.startswith("megatron-core") for p in packages)  # the pinned source is Megatron
    # the wheels docs/bridge.md lists as installed for the validated run
    documented = (REPO / "docs" / "bridge.md").read_text()
    for package in BRIDGE_REQUIREMENTS["0.5.1"][1:]:
        name, version = package.split("==")
        assert f"{name} {version}" in documented, package
