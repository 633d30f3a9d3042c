"""Trust under real use (issue 14): hostile and surprising inputs get a diagnostic, never a traceback."""

from __future__ import annotations

import pytest

from compiler.render.quoting import TemplateSafetyError, md, sh
from compiler.text import CONTROL

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
from compiler.one_pass import compile_spec  # noqa: E402

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


# --- emit: concurrent writers, interrupts ----------------------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from helpers import REPO  # noqa: E402


def _compiler(*args: str, cwd: Path = REPO) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "compiler", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_concurrent_compilers_writing_one_directory_take_turns(tmp_path):
    # Before the lock, one writer's clean-up removed the other's temporary files: FileNotFoundError
    # from os.replace in 2 of 4 trials of this shape.
    _batch(tmp_path / "specs", 40)
    for trial in range(4):
        out = tmp_path / f"out{trial}"
        procs = [_compiler(str(tmp_path / "specs"), "-o", str(out), "--set", f"training.env.W=t{trial}w{worker}")
                 for worker in range(3)]
        results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        for code, stdout, stderr in results:
            assert code == 0 and "Traceback" not in stderr, stderr[-2000:]
        assert not _leftovers(tmp_path), _leftovers(tmp_path)
        for spec in sorted((tmp_path / "specs").iterdir()):
            launch = (out / spec.stem / "launch.sh").read_text()
            winner = next(w for w in range(3) if f"t{trial}w{w}" in launch)
            assert f"t{trial}w{winner}" in (out / spec.stem / "job.json").read_text(), "one writer's files"


def test_an_interrupt_while_writing_removes_the_staging(tmp_path, monkeypatch):
    from compiler import emit

    real, calls = emit.write_temp, []

    def interrupted(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    files = {"a.sh": "# Generated by megatron-compile\n", "b.sh": "x\n", "c.sh": "y\n", "d.sh": "z\n"}
    target = tmp_path / "out" / "new"
    monkeypatch.setattr(emit, "write_temp", interrupted)
    with pytest.raises(KeyboardInterrupt):  # a new directory, staged beside it
        emit.write_outputs(target, files, force=False, spec_file="s.yaml")
    assert not _leftovers(tmp_path) and not target.exists()
    monkeypatch.setattr(emit, "write_temp", real)
    emit.write_outputs(target, files, force=False, spec_file="s.yaml")
    calls.clear()
    monkeypatch.setattr(emit, "write_temp", interrupted)
    with pytest.raises(KeyboardInterrupt):  # an update, through temporary files inside it
        emit.write_outputs(target, {k: v + "2\n" for k, v in files.items()}, force=True, spec_file="s.yaml")
    assert not _leftovers(tmp_path)
    assert (target / "b.sh").read_text() == "x\n", "nothing was replaced"


def _batch(directory: Path, count: int) -> None:
    text = resolved_text("tp2")
    directory.mkdir()
    for index in range(count):
        (directory / f"s{index:03}.yaml").write_text(text.replace("name: mcore-tp2-01", f"name: s{index:03}"))


def _live_members(group: int) -> list[int]:
    """The processes of a process group that have not exited (zombies left out)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(group) and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _interrupt(tmp_path: Path, trial: int, delay: float) -> str:
    out = tmp_path / f"out{trial}"
    proc = _compiler(str(tmp_path / "specs"), "-o", str(out))
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole process group
    proc.wait(timeout=60)
    # No pool worker outlives the compiler (one forked as Ctrl-C arrived used to, blocked on a lock
    # it inherited, holding the stderr pipe open: tests/test_batch_workers.py). Any survivor is
    # killed before reading, so that a failure here is reported instead of hanging.
    deadline = time.monotonic() + 10
    while (left := _live_members(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {left} of the interrupted compiler's group outlived it"
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    # a worker the pool terminates (SIGTERM) cannot clean up; the next run removes what it left
    again = _compiler(str(tmp_path / "specs"), "-o", str(out))
    assert again.wait(timeout=300) == 0, again.stderr.read()  # type: ignore[union-attr]
    assert not _leftovers(out.parent), _leftovers(out.parent)
    return stderr


def test_an_interrupted_batch_leaves_no_staging_directory(tmp_path):
    _batch(tmp_path / "specs", 40)
    for trial, delay in enumerate((0.4, 0.7, 1.0, 1.3)):
        _interrupt(tmp_path, trial, delay)


def test_the_next_run_removes_a_killed_runs_staging(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale_dir = out / f".tp2.{dead.pid}.tmp"
    stale_dir.mkdir(parents=True)
    (stale_dir / "launch.sh").write_text("half\n")
    other = out / f".other.{os.getpid()}.tmp"  # a live process's: not ours to remove
    other.mkdir()
    proc = _compiler("specs/tp2.yaml", "-o", str(out))
    assert proc.wait(timeout=60) == 0, proc.stderr.read()  # type: ignore[union-attr]
    assert not stale_dir.exists() and other.exists()
    (out / "tp2" / f".launch.sh.{dead.pid}.tmp").write_text("half\n")
    proc = _compiler("specs/tp2.yaml", "-o", str(out), "--set", "training.env.X=y")
    assert proc.wait(timeout=60) == 0, proc.stderr.read()  # type: ignore[union-attr]
    assert not (out / "tp2" / f".launch.sh.{dead.pid}.tmp").exists()


# --- init --extends -----------------------------------------------------------------------------


def _init(tmp_path: Path, *args: str, cwd: Path | None = None):
    old = os.getcwd()
    os.chdir(cwd or tmp_path)
    try:
        out, err = io.StringIO(), io.StringIO()
        code = main(["init", *args], out, err)
    finally:
        os.chdir(old)
    return code, out.getvalue() + err.getvalue()


def test_init_defaults_to_the_base_beside_the_spec(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "base.yaml").write_text((REPO / "specs" / "base.yaml").read_text())
    code, text = _init(tmp_path, "job", "--gpus-per-worker", "2", "-o", "specs/job.yaml")
    assert code == 0, text
    assert "\nextends: base.yaml" in (tmp_path / "specs" / "job.yaml").read_text()


def test_init_extends_relative_to_the_spec_or_the_working_directory(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "base.yaml").write_text((REPO / "specs" / "base.yaml").read_text())
    code, text = _init(tmp_path, "a", "--gpus-per-worker", "2", "-o", "specs/a.yaml", "--extends", "base.yaml")
    assert code == 0, text  # base.yaml beside the spec, as extends: writes it
    assert "\nextends: base.yaml" in (tmp_path / "specs" / "a.yaml").read_text()
    code, text = _init(tmp_path, "b", "--gpus-per-worker", "2", "-o", "specs/b.yaml", "--extends", "specs/base.yaml")
    assert code == 0, text  # from the working directory, as the shell sees it
    assert "\nextends: base.yaml" in (tmp_path / "specs" / "b.yaml").read_text()
    code, text = _init(tmp_path, "c", "-o", "specs/c.yaml", "--extends", "nope.yaml")
    assert code == 2 and "no such file" in text and not (tmp_path / "specs" / "c.yaml").exists()


# --- the credential prefilter ----------------------------------------------------------------------

CREDENTIAL_SAMPLES = [
    "nvapi-AbCdEfGh12", "NVAPI-AbCdEfGh12", "Bearer abcdefgh1234", "bearer ABCDEFGH1234", "BEARER x",
    "-----BEGIN RSA PRIVATE KEY-----", "-----begin private key-----", "ghp_" + "a" * 20, "GHP_" + "a" * 20,
    "github_pat_" + "A1" * 10, "AKIA" + "ABCDEFGHIJKLMNOP", "akia" + "abcdefghijklmnop", "hf_" + "x" * 20,
    "HF_" + "x" * 20, "sk-proj-" + "y" * 20, "SK-" + "y" * 20, "xoxb-1234567890", "XOXB-1234567890",
    "https://user:pw@host/x", "WANDB_API_KEY=" + "0123456789abcdef" * 3, "token: " + "AB" * 16,
    "db_password=hunter2", "PASSWD: 'x'", "tokenizer_model", "HuggingFaceTokenizer", "/mnt/megatron/data",
    "--secret-file", "sk-short", "hf_short", "keys: abc", "",
    "pa\u017f\u017fword=hunter2", "\u212aEY=" + "0123456789abcdef" * 2,  # re's IGNORECASE: long s, Kelvin sign
]


@pytest.mark.parametrize("text", CREDENTIAL_SAMPLES)
def test_the_combined_credential_pattern_matches_exactly_when_one_pattern_does(text):
    from compiler.check.rules import safety

    one_by_one = any(pattern.search(text) for pattern, _ in safety._compiled_credentials())
    assert bool(safety._any_credential().search(text)) is one_by_one
    assert (safety.credential_shape(text) is not None) is one_by_one
    if one_by_one:
        assert safety.may_hold_credential(text)


def _credential_patterns() -> list[tuple[str, int]]:
    from compiler.check.rules import safety

    return [(pattern, flags) for pattern, flags, _ in safety._CREDENTIALS]


@pytest.mark.parametrize("pattern, flags", _credential_patterns())
def test_every_string_a_credential_pattern_matches_passes_the_literal_prefilter(pattern, flags):
    """The literals of may_hold_credential are a necessary condition of each pattern: a string it
    turns away is never compiled against the patterns, so it must match none of them (hypothesis
    draws strings each pattern matches, with text around them)."""
    import re

    from hypothesis import given, settings, strategies as st

    from compiler.check.rules import safety

    compiled = re.compile(pattern, flags)

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(compiled, fullmatch=False))
    def check(text: str) -> None:
        assert compiled.search(text)
        assert safety.may_hold_credential(text), text

    check()
