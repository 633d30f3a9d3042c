"""SkyPilot's task.yaml: every generated one passes SkyPilot's own schemas (tests/fixtures/skypilot,
extracted from the skypilot package), the way sky.Task.from_yaml validates a task, and runs the same
launch.sh with SkyPilot's node variables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

from compiler.one_pass import compile_spec

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "skypilot"
SCHEMAS = json.loads((FIXTURE / "schemas.json").read_text(encoding="utf-8"))
SKYPILOT = "skypilot:\n  accelerator: H200\n  storage: {name: megatron-shared, store: s3}\n"


def _case_insensitive_enum(validator: Any, enums: list[str], instance: Any, schema: Any) -> Iterator[Any]:
    if instance.lower() not in [e.lower() for e in enums]:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


def _case_sensitive_enum(validator: Any, enums: list[str], instance: Any, schema: Any) -> Iterator[Any]:
    if instance not in enums:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


# SkyPilot's validator (sky/utils/validator.py): Draft 7 with its two enum keywords.
VALIDATOR = jsonschema.validators.extend(jsonschema.Draft7Validator, validators={
    "case_insensitive_enum": _case_insensitive_enum, "case_sensitive_enum": _case_sensitive_enum})


def problems(text: str) -> list[str]:
    """What SkyPilot's schemas say of a task.yaml, as Task.from_yaml checks it: the task (None
    fields dropped), its resources, and each bucket of file_mounts."""
    task = yaml.safe_load(text)
    found = []

    def check(document: Any, schema: str, where: str) -> None:
        if isinstance(document, dict):
            document = {k: v for k, v in document.items() if v is not None}
        found.extend(f"{where}: {e.message}" for e in VALIDATOR(SCHEMAS[schema]).iter_errors(document))

    check(task, "task", "task")
    check(task.get("resources", {}), "resources", "resources")
    for path, mount in (task.get("file_mounts") or {}).items():
        if isinstance(mount, dict):
            check(mount, "storage", f"file_mounts[{path}]")
    return found


def _generated_tasks() -> list[Path]:
    return sorted(REPO.glob("generated/*/task*.yaml"))


def _engine_spec(tmp_path: Path, stem: str) -> Path:
    specs = tmp_path / "specs"
    if not specs.exists():
        shutil.copytree(REPO / "specs", specs)
    path = specs / f"{stem}-sky.yaml"
    path.write_text(f"extends: {stem}.yaml\nplatform: skypilot\n" + SKYPILOT, encoding="utf-8")
    return path


def test_the_fixture_is_skypilots_own():
    """schemas.json is what extract.py writes from the package: its recorded source hash and version
    are checked against the installed package when there is one (it needs ~60 dependencies the tests
    do not install), and its text is extract.py's serialisation of itself (no hand edits)."""
    sys.path.insert(0, str(FIXTURE))
    try:
        import extract
    finally:
        sys.path.remove(str(FIXTURE))
    assert (FIXTURE / "schemas.json").read_text(encoding="utf-8") == extract.text(SCHEMAS)
    assert SCHEMAS["version"] in (FIXTURE / "README.md").read_text(encoding="utf-8")
    try:
        import sky.utils.schemas  # noqa: F401
    except ImportError:
        return
    assert extract.extracted() == SCHEMAS


def test_the_validator_refuses_what_skypilot_refuses():
    """The schemas are not vacuous: SkyPilot's own mistakes fail."""
    good = "name: x\nresources:\n  accelerators: H200:8\n  image_id: docker:a/b:c\nnum_nodes: 2\nrun: echo\n"
    assert problems(good) == []
    assert problems(good + "nodes: 2\n")  # unknown task field
    assert problems(good.replace("num_nodes: 2", "num_nodes: two"))
    assert problems(good.replace("  image_id", "  gpus: 8\n  image_id"))  # unknown resources field
    assert problems(good + "file_mounts:\n  /data:\n    name: b\n    mode: SOMETIMES\n")


def test_there_is_a_generated_task():
    assert [p.parent.name for p in _generated_tasks()] == ["tp2-dp2-skypilot"]


@pytest.mark.parametrize("path", _generated_tasks(), ids=lambda p: p.parent.name)
def test_every_generated_task_passes_skypilots_schema(path: Path):
    assert problems(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("stem", ["tp2-dp2", "pretrain-prepared", "qwen3-0.6b"])
def test_every_step_of_a_skypilot_spec_passes_skypilots_schema(tmp_path: Path, stem: str):
    path = _engine_spec(tmp_path, stem)
    result = compile_spec(str(path), f"specs/{path.name}")
    assert result.ok and result.files is not None, result.diagnostics
    tasks = [name for name in result.files if name.startswith("task")]
    assert tasks and all(problems(result.files[name]) == [] for name in tasks), tasks


def test_the_task_asks_for_what_the_spec_says():
    task = yaml.safe_load((REPO / "generated" / "tp2-dp2-skypilot" / "task.yaml").read_text())
    launch = (REPO / "generated" / "tp2-dp2-skypilot" / "launch.sh").read_text()
    assert task["resources"]["accelerators"] == "H200:2"
    assert task["num_nodes"] == 2
    assert task["resources"]["image_id"] == "docker:cr.infini-ai.com/te-0123456789abcdef/megatron-core:0.18.2-cu128"
    assert task["file_mounts"]["/mnt/megatron"] == {"name": "megatron-shared", "mode": "MOUNT_CACHED"}
    # run: carries launch.sh verbatim in its here-document
    run = task["run"]
    body = run[run.index("<<'LAUNCH_SH'\n") + len("<<'LAUNCH_SH'\n"):run.index("\nLAUNCH_SH\n")] + "\n"
    assert body == launch
    for name in ("SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES"):
        assert "${" + name + ":?" in launch
    assert '"$SKYPILOT_NODE_IPS"' in run


def _stub_bin(tmp_path: Path) -> Path:
    """nvidia-smi listing 2 GPUs, make and python as no-ops, torchrun printing its argv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stubs = {"nvidia-smi": "printf '0\\n1\\n'", "make": "exit 0", "python": "exit 0",
             "torchrun": 'printf "torchrun %s\\n" "$*"'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_the_run_section_starts_launch_sh_with_skypilots_variables(tmp_path: Path):
    """run: on node 1 of 2 with SkyPilot's variables: launch.sh sees node 0's address from
    SKYPILOT_NODE_IPS and hands torchrun SkyPilot's node count and rank."""
    task = yaml.safe_load((REPO / "generated" / "tp2-dp2-skypilot" / "task.yaml").read_text())
    run_root = tmp_path / "run"
    megatron = tmp_path / "megatron"
    megatron.mkdir()
    script = (task["run"].replace("/mnt/megatron/runs/mcore-tp2-dp2-skypilot-01", str(run_root))
              .replace("/opt/Megatron-LM", str(megatron)))
    env = {"PATH": f"{_stub_bin(tmp_path)}:{os.environ['PATH']}", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NODE_IPS": "10.0.0.7\n10.0.0.8", "MEGATRON_COMMIT": "abc",
           "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    log = (run_root / "nodes" / "node-1" / "train.log").read_text()
    assert "--nnodes=2" in log and "--node_rank=1" in log and "--master_addr=10.0.0.7" in log
    assert "--master_port=29500" in log
