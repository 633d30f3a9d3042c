"""Trust under real use (issue 14): hostile and surprising inputs get a diagnostic, never a traceback."""

from __future__ import annotations

import pytest

from compiler.render.quoting import TemplateSafetyError, md, sh
from compiler.schema.formats import CONTROL

from helpers import compile_text, resolved_text

TROJAN = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200b", "\u200d", "\u200f", "\ufeff", "\u061c", "\u2060"]


@pytest.mark.parametrize("char", TROJAN, ids=lambda c: f"U+{ord(c):04X}")
def test_invisible_format_characters_are_rejected_in_any_spec_string(char):
    text = resolved_text("tp2").replace("script: examples/run_simple_mcore_train_loop.py",
                                        f"script: examples/run_simple{char}_mcore_train_loop.py")
    assert char in text
    result = compile_text(text)
    assert not result.files
    assert [d.code for d in result.diagnostics if d.is_error] == ["unsafe-character"]
    assert f"U+{ord(char):04X}" in result.diagnostics[0].message


@pytest.mark.parametrize("char", TROJAN, ids=lambda c: f"U+{ord(c):04X}")
def test_render_filters_refuse_the_same_characters(char):
    assert CONTROL.search(char)
    for quote in (sh, md):
        with pytest.raises(TemplateSafetyError):
            quote(f"a{char}b")


# --- import ---------------------------------------------------------------------------------------

import io  # noqa: E402
from pathlib import Path  # noqa: E402

from compiler.cli import main  # noqa: E402
from compiler.pipeline import compile_spec  # noqa: E402

PRETRAIN = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
            "--micro-batch-size 1 --global-batch-size 2 --train-iters 10 --lr 1e-4 --mock-data "
            "--tokenizer-type NullTokenizer --vocab-size 1000 --save /mnt/megatron/ckpt/x")


def run_import(tmp_path: Path, body: str, *extra: str, name: str = "x"):
    script = tmp_path / f"{name}.sh"
    script.write_text("#!/bin/bash\n" + body)
    target = tmp_path / "specs" / f"{name}.yaml"
    out, err = io.StringIO(), io.StringIO()
    code = main(["import", str(script), "-o", str(target), *extra], out, err)
    return code, target, out.getvalue() + err.getvalue()


def test_import_runs_in_a_directory_laid_out_like_megatron_lm(tmp_path):
    code, target, text = run_import(tmp_path, (
        'for f in pretrain_gpt.py pretrain_mamba.py pretrain_hybrid.py train_rl.py; do\n'
        '  [ -f "$f" ] || { echo "Error: $f not found"; exit 1; }\ndone\n'
        '[ -d megatron ] || exit 1\n'
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN}\n'))
    assert code == 0, text
    assert "script: pretrain_gpt.py" in target.read_text()


def test_an_early_exit_shows_the_last_lines_of_stdout_and_stderr(tmp_path):
    code, target, text = run_import(tmp_path, 'echo "checking the data"\necho "no dataset at /data" >&2\nexit 3\n')
    assert code == 1 and not target.exists()
    assert "bash exit status 3" in text
    assert "checking the data" in text and "no dataset at /data" in text
    assert "Traceback" not in text


def test_an_unset_variable_expands_empty_and_is_reported(tmp_path):
    code, target, text = run_import(tmp_path, (
        'EXTRA=""\n[ -n "$WANDB_PROJECT" ] && EXTRA="--wandb-project $WANDB_PROJECT"\n'
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN} $EXTRA\n'))
    assert code == 0, text
    spec = target.read_text()
    assert "wandb" not in spec.split("\nversion: 1\n", 1)[1], "bash would not pass --wandb-project"
    assert "@unset" not in spec
    assert "unset variable WANDB_PROJECT: the script read it and bash expanded it empty" in text


def test_pwd_and_random_are_reported_and_never_written(tmp_path):
    code, target, text = run_import(tmp_path, (
        'SEED=$RANDOM\nCACHE="${PWD}/cache"\n'
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN} --seed $SEED --data-cache-path $CACHE\n'))
    assert code == 0, text
    spec = target.read_text()
    assert "mc-import-" not in spec and "/tmp" not in spec
    assert "--seed $RANDOM: dropped (the script draws it from $RANDOM)" in text
    assert "--data-cache-path $PWD/cache: dropped (it holds $PWD" in text
    assert compile_spec(str(target), "x.yaml").ok


def test_a_script_path_leaving_the_root_is_refused_and_cwd_places_the_script(tmp_path):
    body = f'torchrun --nproc_per_node 2 ../../pretrain_hybrid.py {PRETRAIN}\n'
    code, target, text = run_import(tmp_path, body)
    assert code == 1 and "--cwd examples/mamba" in text and "Traceback" not in text
    code, target, text = run_import(tmp_path, body, "--cwd", "examples/mamba")
    assert code == 0, text
    assert "script: pretrain_hybrid.py" in target.read_text()


def test_a_warm_start_is_refused_with_what_to_do(tmp_path):
    code, target, text = run_import(tmp_path, (
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN} --load /mnt/megatron/pretrained/llama\n'))
    assert code == 1 and not target.exists()
    assert "--pretrained-checkpoint" in text and "from scratch" in text


def test_a_resume_from_the_save_directory_still_imports(tmp_path):
    code, target, text = run_import(tmp_path, (
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN} --load /mnt/megatron/ckpt/x/\n'))
    assert code == 0, text
    assert "resume: true" in target.read_text()


def test_a_script_running_past_the_timeout_is_a_clear_error(tmp_path):
    code, target, text = run_import(tmp_path, 'echo waiting\nwhile :; do :; done\n', "--timeout", "1")
    assert code == 1 and "still running after 1 s" in text and "waiting" in text
    assert "Traceback" not in text and "TimeoutExpired" not in text


def test_import_drops_credentials_and_never_writes_them(tmp_path):
    key = "0123456789abcdef0123456789abcdef01234567"
    code, target, text = run_import(tmp_path, (
        f'export WANDB_API_KEY={key}\nexport HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345\n'
        'export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nexport NCCL_DEBUG=INFO\n'
        f'torchrun --nproc_per_node 2 pretrain_gpt.py {PRETRAIN} --wandb-api-key {key} --password hunter2\n'))
    assert code == 0, text
    spec = target.read_text()
    for secret in (key, "hf_AbCd", "wJalrXUtnFEMI", "hunter2"):
        assert secret not in spec and secret not in text
    assert "NCCL_DEBUG: INFO" in spec
    assert text.count("dropped, never written (a credential)") == 5
