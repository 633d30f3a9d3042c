"""`import` refuses what it cannot map, with the reason (issue 29, item 4), and maps what it can: each
case is a small launch script written here, imported through the CLI."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
import yaml

from compiler.cli import main

FLAGS = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
         "--micro-batch-size 1 --global-batch-size 8 --train-iters 10 --lr 0.001 --mock-data "
         "--tokenizer-type NullTokenizer --vocab-size 1000")


def _import(tmp_path: Path, body: str, *extra: str) -> tuple[int, str, Path]:
    script = tmp_path / "launch.sh"
    script.write_text("#!/bin/bash\nset -e\n" + textwrap.dedent(body))
    target = tmp_path / "job.yaml"
    out, err = io.StringIO(), io.StringIO()
    code = main(["import", str(script), "-o", str(target), *extra], out, err)
    return code, out.getvalue() + err.getvalue(), target


@pytest.mark.parametrize(("script", "reason"), [
    ("examples/qwen2/pretrain_qwen.py", "another project's entry point (Alibaba Pai-Megatron-Patch"),
    ("examples/llama3_1/pretrain_llama.py", "Pai-Megatron-Patch"),
    ("pretrain_gpt2.py", "Megatron-LM removed pretrain_gpt2.py"),
    ("pretrain_gtp.py", "did you mean pretrain_gpt.py?"),
    ("tasks/main_xyz.py", "is not a file of Megatron-LM at 571370c8"),
])
def test_a_script_megatron_lm_does_not_have_is_refused_with_the_reason(tmp_path, script, reason):
    code, text, target = _import(tmp_path, f"torchrun --nproc_per_node 2 {script} {FLAGS}\n")
    assert code != 0 and reason in text, text
    assert "Traceback" not in text and not target.exists()


def test_a_moved_script_is_imported_at_its_new_place(tmp_path):
    code, text, target = _import(tmp_path, f"torchrun --nproc_per_node 2 pretrain_t5.py {FLAGS}\n")
    assert target.exists(), text
    assert yaml.safe_load(target.read_text())["training"]["script"] == "examples/t5/pretrain_t5.py"
    assert "Megatron-LM moved it; imported as examples/t5/pretrain_t5.py" in target.read_text()


def test_a_python_helper_in_a_command_substitution_is_not_taken_for_the_trainer(tmp_path):
    code, text, target = _import(tmp_path, f"""
        DATA_ARGS=$(python3 tools/make_data_args.py --config data.yaml)
        torchrun --nproc_per_node 2 pretrain_gpt.py {FLAGS} $DATA_ARGS
        """)
    assert target.exists(), text
    spec = yaml.safe_load(target.read_text())
    assert spec["training"]["script"] == "pretrain_gpt.py"
    assert "computed at run time by `python`" in target.read_text()


def test_a_helper_then_python_pretrain_takes_the_trainer(tmp_path):
    code, text, target = _import(tmp_path, f"""
        N=$(python3 -c 'print(2)' helper.py)
        python3 pretrain_gpt.py {FLAGS}
        """)
    assert target.exists(), text
    assert yaml.safe_load(target.read_text())["training"]["script"] == "pretrain_gpt.py"


@pytest.mark.parametrize("launch", [
    "torchrun --nproc_per_node $GPUS --nnodes 1 pretrain_gpt.py {flags}",
    "torchrun --nproc_per_node $GPUS --nnodes $NODES pretrain_gpt.py {flags}",
    "torchrun --nnodes $NODES --nproc_per_node 2 pretrain_gpt.py {flags}",
    "torchrun --nproc_per_node $GPUS pretrain_gpt.py {flags}",
])
def test_an_option_that_lost_its_value_is_refused_not_taken_as_the_script(tmp_path, launch):
    code, text, target = _import(tmp_path, launch.format(flags=FLAGS) + "\n")
    assert code != 0 and not target.exists(), text
    assert "has no value of its own" in text or "not a Python file" in text, text
    assert "script: '1'" not in text


@pytest.mark.parametrize("launch", ["torchrun -m megatron.training.pretrain {flags}",
                                    "torchrun --nproc_per_node 2 --module pretrain_gpt {flags}"])
def test_a_module_launch_is_refused(tmp_path, launch):
    code, text, target = _import(tmp_path, launch.format(flags=FLAGS) + "\n")
    assert code != 0 and "runs a Python module" in text and not target.exists(), text


@pytest.mark.parametrize("launch", [
    "deepspeed --num_gpus 8 pretrain_gpt.py {flags} --deepspeed --deepspeed_config ds.json",
    "deepspeed pretrain_gpt.py {flags}",
    "torchrun --nproc_per_node 2 pretrain_gpt.py {flags} --deepspeed --zero-stage 2",
    "python3 pretrain_gpt.py {flags} --deepspeed_config ds.json",
])
def test_deepspeed_launches_are_refused_with_what_they_are(tmp_path, launch):
    code, text, target = _import(tmp_path, launch.format(flags=FLAGS) + "\n")
    assert code != 0 and "this is a DeepSpeed job" in text and not target.exists(), text


def test_parallel_flags_of_an_untyped_entry_point_become_parallelism(tmp_path):
    code, text, target = _import(tmp_path, "torchrun --nproc_per_node 8 pretrain_mamba.py --num-layers 4 "
                                           "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n")
    spec = yaml.safe_load(target.read_text())
    assert spec["parallelism"] == {"tensor": 2, "pipeline": 2}, text
    assert "--tensor-model-parallel-size" in spec["training"]["args"]


def test_the_key_order_keeps_every_section():
    from compiler.commands.import_map import _ordered

    data = {"training": {"script": "x.py"}, "platform": "slurm", "slurm": {"partition": "p"}, "version": 1,
            "kubernetes": {}, "init_from": {}, "name": "n", "unknown": 1}
    assert set(_ordered(data)) == set(data)
    assert list(_ordered(data))[:2] == ["version", "name"]
