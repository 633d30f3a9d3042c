"""--print shows what applies to the spec's script: pretrain_gpt.py's typed fields only for pretrain_gpt.py."""

from __future__ import annotations

import io

import yaml

from compiler.cli import main
from compiler.one_pass import compile_spec


def _print(*argv: str) -> str:
    out = io.StringIO()
    assert main(["--print", *argv], out, io.StringIO()) == 0
    return out.getvalue()


def test_the_bounded_example_prints_no_pretrain_defaults(in_repo):
    text = _print("specs/tp2.yaml")
    training = yaml.safe_load(text)["training"]
    assert list(training) == ["script", "args", "env", "resume"]
    assert text.rstrip("\n").splitlines()[-1].startswith(
        "# training: examples/run_simple_mcore_train_loop.py does not read the pretrain_gpt.py fields")


def test_a_pretrain_spec_prints_every_default(in_repo):
    training = yaml.safe_load(_print("specs/pretrain-mock.yaml"))["training"]
    assert {"logging", "eval", "precision", "fused_kernels", "checkpoint"} <= set(training)


def test_the_print_compiles_back_to_the_same_spec(in_repo, tmp_path):
    """Only defaults are left out: the printed spec is the spec."""
    printed = tmp_path / "tp2.yaml"
    printed.write_text(_print("specs/tp2.yaml"))
    again, original = compile_spec(str(printed), "tp2.yaml"), compile_spec("specs/tp2.yaml", "specs/tp2.yaml")
    assert again.ok and again.spec == original.spec


def test_a_value_that_differs_from_its_default_is_printed(in_repo):
    """Nothing a spec sets is hidden, even where the script does not read it."""
    text = _print("specs/tp2.yaml", "--set", "training.precision=fp16")
    assert yaml.safe_load(text)["training"]["precision"] == "fp16"
    assert "precision" not in text.rstrip("\n").splitlines()[-1]
