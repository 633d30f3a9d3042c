"""`megatron-compile import`: real-shaped launch scripts -> specs that compile back to the same flags.

Each tests/import_scripts/<name>.sh has <name>.report: the exact report lines for what was not
mapped one to one (rewritten by --update-golden). The round trip: the flags Megatron receives from
the compiled spec equal the script's (order aside), except the flags the report names as replaced,
dropped or added.
"""

import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.commands.importer import record_script
from compiler.one_pass import compile_spec
from compiler.plan.shell import argv_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from import_examples import LAUNCHERS, round_trip  # noqa: E402  (the one comparison, shared with the tool)

SCRIPTS = Path(__file__).resolve().parent / "import_scripts"
POSITIONAL = {
    "gpt3_arrays": ["/mnt/megatron/ckpt/gpt3", "/mnt/megatron/tb/gpt3", "/mnt/megatron/tok/gpt2-vocab.json",
                    "/mnt/megatron/tok/gpt2-merges.txt", "/mnt/megatron/data/gpt3_text_document"],
}
CASES = sorted(SCRIPTS.glob("*.sh"))


def _import(script: Path, tmp_path: Path):
    target = tmp_path / f"{script.stem.replace('_', '-')}.yaml"
    out, err = io.StringIO(), io.StringIO()
    argv = ["import", str(script), "-o", str(target)]
    if script.stem in POSITIONAL:
        argv += ["--", *POSITIONAL[script.stem]]
    code = main(argv, out, err)
    return code, target, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("script", CASES, ids=lambda p: p.stem)
def test_import_compiles_and_round_trips(script, tmp_path, update_golden):
    code, target, out, err = _import(script, tmp_path)
    assert code == 0, out + err
    report = [line.removeprefix("  not mapped one to one: ") for line in err.splitlines()
              if line.startswith("  not mapped one to one: ")]
    golden = script.with_suffix(".report")
    if update_golden:
        golden.write_text("".join(f"{line}\n" for line in report))
    assert report == golden.read_text().splitlines()
    text = target.read_text()
    for line in report:
        assert f"#   - {line}\n" in text, "every report line is a comment in the written spec"

    recorded = record_script(script, POSITIONAL.get(script.stem, []))
    result = compile_spec(str(target), target.name)
    assert result.ok, result.diagnostics
    argv = argv_of(result.plan.launch.torchrun)
    compiled = argv[argv.index(next(a for a in argv if a.endswith(".py"))) + 1:]
    assert round_trip(recorded.args, compiled, report) == []


def test_import_maps_torchrun_resources(tmp_path):
    _, target, _, _ = _import(SCRIPTS / "multinode.sh", tmp_path)
    result = compile_spec(str(target), target.name)
    assert (result.spec.resources.workers, result.spec.resources.gpus_per_worker) == (4, 8)
    assert (result.spec.parallelism.tensor, result.spec.parallelism.pipeline) == (8, 4)
    assert result.spec.training.virtual_pipeline == 4


def test_import_types_values_and_keeps_the_rest_verbatim(tmp_path):
    _, target, _, _ = _import(SCRIPTS / "mixtral_moe.sh", tmp_path)
    spec = compile_spec(str(target), target.name).spec
    assert spec.training.model.num_experts == 8 and spec.parallelism.expert == 4
    assert spec.training.optimizer.lr == 1e-4
    assert spec.training.args[:2] == ["--use-mcore-models", "--init-method-std"]
    assert "--moe-grouped-gemm" in spec.training.args


def test_import_extends_a_base_beside_the_output(tmp_path):
    (tmp_path / "base.yaml").write_text((Path(__file__).resolve().parent.parent / "specs" / "base.yaml").read_text())
    code, target, out, err = _import(SCRIPTS / "llama_local.sh", tmp_path)
    assert code == 0, out + err
    text = target.read_text()
    assert "\nextends: base.yaml\n" in text and "\nimage:" not in text


def test_import_refuses_a_script_without_a_launcher(tmp_path):
    script = tmp_path / "nothing.sh"
    script.write_text("echo hello\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["import", str(script), "-o", str(tmp_path / "x.yaml")], out, err) == 1
    assert "never started torchrun" in err.getvalue()
    assert not (tmp_path / "x.yaml").exists()


def test_import_does_not_overwrite(tmp_path):
    (tmp_path / "x.yaml").write_text("mine\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["import", str(SCRIPTS / "continuations.sh"), "-o", str(tmp_path / "x.yaml")], out, err) == 1
    assert (tmp_path / "x.yaml").read_text() == "mine\n"


def test_side_effects_are_stubbed(tmp_path):
    script = tmp_path / "mk.sh"
    marker = tmp_path / "created-by-script"
    script.write_text(f"mkdir -p {shlex.quote(str(marker))}\ntorchrun --nproc_per_node 1 pretrain_gpt.py --num-layers 2\n")
    recorded = record_script(script, [])
    assert recorded.args == ["--num-layers", "2"]
    assert not marker.exists()


REFUSED = sorted((SCRIPTS / "refused").glob("*.sh"))


@pytest.mark.parametrize("script", REFUSED, ids=lambda p: p.stem)
def test_import_refuses_with_what_to_do(script, tmp_path, update_golden):
    """A script a spec cannot express is refused, nothing is written, and the message is its golden."""
    target = tmp_path / "x.yaml"
    out, err = io.StringIO(), io.StringIO()
    assert main(["import", str(script), "-o", str(target)], out, err) == 1
    assert not target.exists()
    message = err.getvalue().removeprefix(f"{script}: cannot import: ")
    golden = script.with_suffix(".report")
    if update_golden:
        golden.write_text(message)
    assert message == golden.read_text()


def test_which_finds_no_slurm_so_the_torchrun_branch_is_imported():
    recorded = record_script(SCRIPTS / "string_lists.sh", [])
    assert recorded.launcher == ["--nproc_per_node", "4"] and "--num-layers" in recorded.args


def test_round_trip_reads_split_as_megatron_does():
    """--split '99,1,0' (quotes and all) and --split 99,1,0 are the same split to Megatron; 99,1,1 is not."""
    assert round_trip(["--split", "'99,1,0'"], ["--split", "99,1,0"], []) == []
    assert round_trip(["--split", "'99,1,0'"], ["--split", "99,1,1"], []) != []


MEGATRON = os.environ.get("MEGATRON_LM")


@pytest.mark.allow_ci_skip
@pytest.mark.skipif(not MEGATRON, reason="MEGATRON_LM does not point at a Megatron-LM checkout")
def test_every_megatron_example_launcher_imports_or_is_refused(tmp_path):
    doc = tmp_path / "import.md"
    repo = Path(__file__).resolve().parent.parent
    committed = (repo / "docs" / "import.md").read_text()
    commit = committed.split("at Megatron-LM ", 1)[1].split(":", 1)[0]
    proc = subprocess.run([sys.executable, str(repo / "tools" / "import_examples.py"), MEGATRON, "--doc", str(doc),
                           "--commit", commit], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in doc.read_text().splitlines() if line.startswith("| `examples/")]
    assert len(rows) == len(LAUNCHERS)
    assert all(row.split(" | ")[2] in ("imports", "refused") for row in rows)
    assert doc.read_text() == committed, "docs/import.md is stale: run tools/import_examples.py MEGATRON_LM"
