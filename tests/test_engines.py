"""Engines as adapters: one module per engine under compiler/platform/, one table (platform/engines.py),
and no engine name compared anywhere else; every step of a spec is a job of the spec's own engine."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.platform.engine import Engine
from compiler.platform.engines import ENGINES
from compiler.one_pass import compile_spec

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "compiler"
NAMES = {name.lower() for name in ENGINES} | {e.title.lower() for e in ENGINES.values()}
# The schema states the spec's shape: `platform:`'s values and the engines' section names are fields.
SHAPE = ("platform", "schema")
ENGINE_SECTIONS = {
    "slurm": "slurm:\n  partition: batch\n  container:\n    mounts: ['/lustre/megatron:/mnt/megatron']\n",
    "kubernetes": "kubernetes:\n  volume: {claim: megatron-shared}\n",
    "skypilot": "skypilot:\n  accelerator: H200\n  storage: {name: megatron-shared}\n",
}


def _engine_modules() -> set[str]:
    return {sys.modules[type(e).__module__].__file__ or "" for e in ENGINES.values()}


def test_every_engine_is_one_module_of_platform_with_one_adapter():
    for name, adapter in ENGINES.items():
        assert isinstance(adapter, Engine)
        module = Path(sys.modules[type(adapter).__module__].__file__ or "")
        assert module.parent == PACKAGE / "platform", f"{name}'s adapter lives in {module}"
        assert adapter.name == name
    assert len(_engine_modules()) == len(ENGINES)


def _strings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, (ast.Attribute, ast.Name, ast.keyword)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else node.arg
            if name and re.fullmatch(r"(on|is|for)_(" + "|".join(NAMES) + ")", name):
                yield getattr(node, "lineno", 0), name


def test_no_engine_name_outside_platform():
    """No string equal to an engine's name (or an on_<engine> flag) outside compiler/platform/ and
    the schema: choosing an engine is a lookup in platform/engines.py, never a comparison."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in SHAPE:
            continue
        for line, text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if text.lower() in NAMES or text.startswith(("on_", "is_", "for_")) and text.split("_", 1)[1] in NAMES:
                found.append(f"compiler/{rel}:{line}: {text!r}")
    assert not found, "engine names outside compiler/platform/:\n" + "\n".join(found)


def test_launch_template_has_no_engine_branch():
    text = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "templates").glob("launch*.j2")))
    tags = re.findall(r"{%.*?%}|{{.*?}}", text)
    assert not [t for t in tags if any(n in t.lower() for n in NAMES)], tags
    # and its prose names no engine: the engine's own lines come from its adapter's node_env
    assert not any(n in text.lower() for n in NAMES)


def _engine_spec(tmp_path: Path, stem: str, engine: str) -> Path:
    """specs/<stem>.yaml moved onto `engine`, written beside a copy of the specs it extends."""
    specs = tmp_path / "specs"
    if not specs.exists():
        shutil.copytree(REPO / "specs", specs)
    path = specs / f"{stem}-{engine}.yaml"
    path.write_text(f"extends: {stem}.yaml\nplatform: {engine}\n" + ENGINE_SECTIONS.get(engine, ""), encoding="utf-8")
    return path


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("stem", ["pretrain-prepared", "qwen3-0.6b"])
def test_every_step_is_a_job_of_the_specs_engine(tmp_path: Path, stem: str, engine: str):
    """A Slurm spec with a preparation step gets a Slurm job for it, not AIStudio's job-prepare.json;
    the same for init_from's download, convert and export."""
    path = _engine_spec(tmp_path, stem, engine)
    result = compile_spec(str(path), f"specs/{path.name}")
    assert result.ok, result.diagnostics
    assert result.plan is not None and result.files is not None
    adapter = ENGINES[engine]
    runs = [step for step in result.plan.steps if step.kind != "image"]
    assert len(runs) >= 2
    for step in runs:
        document = adapter.document(step.kind)
        assert step.job is not None and type(step.job).__module__ == type(adapter).__module__, step
        assert document.file in result.files, (step.kind, sorted(result.files))
    others = {ENGINES[e].document(k).file for e in ENGINES if e != engine for k in ("prepare", "convert", "train")}
    assert not others & set(result.files) - {adapter.document(s.kind).file for s in runs}


def test_slurm_prepare_step_is_a_batch_job_that_lints(tmp_path: Path):
    path = _engine_spec(tmp_path, "pretrain-prepared", "slurm")
    result = compile_spec(str(path), f"specs/{path.name}")
    assert result.files is not None
    script = result.files["job-prepare.sbatch"]
    assert "job-prepare.json" not in result.files
    assert "#SBATCH --nodes=1" in script and "--gpus-per-node" not in script
    assert "MASTER_ADDR" not in script  # no rendezvous: the preparation is not torchrun
    assert 'LAUNCH_NAME="slurm/prepare-$SLURM_JOB_ID.sh"' in script and 'bash "$RUN_ROOT/$LAUNCH_NAME"' in script
    assert "printf 'job-prepare.sbatch: srun exited with status %s\\n'" in script
    target = tmp_path / "job-prepare.sbatch"
    target.write_text(script)
    assert subprocess.run(["bash", "-n", str(target)]).returncode == 0
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    lint = subprocess.run([shellcheck, "--shell=bash", str(target)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_kubernetes_steps_pass_the_trainer_schema(tmp_path: Path):
    from kube_schema import trainer_schemas

    for stem in ("pretrain-prepared", "qwen3-0.6b"):
        path = _engine_spec(tmp_path, stem, "kubernetes")
        result = compile_spec(str(path), f"specs/{path.name}")
        assert result.files is not None
        documents = [name for name in result.files if name.startswith("trainjob")]
        assert len(documents) >= 2
        for name in documents:
            problems = trainer_schemas().validate_text(result.files[name])
            assert problems == [], (name, problems)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_explain_json_names_the_engine(tmp_path: Path, capsys, engine: str):
    path = _engine_spec(tmp_path, "tp2-dp2", engine)
    assert main(["--explain", "--format", "json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["specs"][0]["platform"] == engine


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_engines_launch_script_is_valid_bash(tmp_path: Path, engine: str):
    path = _engine_spec(tmp_path, "tp2-dp2", engine)
    result = compile_spec(str(path), f"specs/{path.name}")
    assert result.files is not None
    target = tmp_path / "launch.sh"
    target.write_text(result.files["launch.sh"])
    assert subprocess.run(["bash", "-n", str(target)]).returncode == 0
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    lint = subprocess.run([shellcheck, "--shell=bash", str(target)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    env = ENGINES[engine].node_env
    for param in (env.nnodes, env.node_rank, env.master_addr, env.master_port):
        assert "${" + param.source + ":" in result.files["launch.sh"]


@pytest.mark.parametrize("value", ["[slurm]", "{a: 1}", "7", "null", "lsf"])
def test_a_platform_that_is_no_engine_is_a_located_error_not_a_crash(tmp_path: Path, value: str):
    path = _engine_spec(tmp_path, "tp2", "aistudio")
    path.write_text(f"extends: tp2.yaml\nplatform: {value}\n", encoding="utf-8")
    result = compile_spec(str(path), f"specs/{path.name}")
    assert not result.ok and any(d.key_path == ("platform",) for d in result.diagnostics), result.diagnostics
