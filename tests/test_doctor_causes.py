"""The doctor's causes behind the echoes, its bounded reads, and launch.sh's data check.

The real run roots (tests/fixtures/failed-runs/gpu-checkpoint-model-mismatch, gpu-token-beyond-vocab,
gpu-dataset-index-hang, gpu-killed-after-training, gpu-data-not-prepared) are tested with the rest of
the corpus in test_doctor.py. Here: what one H200 cannot make (several workers, a collective timeout),
as STAND-INS built from the texts torch prints, and the run roots a hostile or broken platform leaves
(a FIFO, a symlink loop, a binary file, a 2 GB log, an empty directory).
"""

import io
import json
import os
import re
import time
from pathlib import Path

import pytest

from compiler.commands import doctor as doctor_command
from compiler.commands.doctor import main
from compiler.commands.doctor_read import latest_attempt, read_bounded
from compiler.megatron.failures import DoctorFacts, RunFiles, WorkerFiles, diagnose
from compiler.megatron.failures_logs import lines_of
from helpers import FIXTURES, compile_text, resolved_text, run_launch

FAILED = FIXTURES / "failed-runs"
HEALTHY = FAILED / "gpu-healthy"


def doctor(*argv: str) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--format", "json"], out, err)
    return code, json.loads(out.getvalue()) if out.getvalue() else {"error": err.getvalue()}


def healthy_root(tmp: Path) -> Path:
    from test_doctor import materialize
    return materialize(HEALTHY, tmp / "run")


def test_the_healthy_fixture_is_healthy(tmp_path):
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(healthy_root(tmp_path)))
    assert code == 0 and report["healthy"], report


# --- a run root that never started -------------------------------------------------------------


def test_an_empty_run_root_never_started(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(root))
    assert code == 1 and report["findings"][0]["cause"] == "never-started"
    assert "storage.run_root" in {f["field"] for f in report["findings"][0]["fixes"]}


# --- bounded reads ----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_log_is_reported_not_read_and_the_run_is_not_healthy(tmp_path):
    root = healthy_root(tmp_path)
    (root / "runtime.txt").unlink()
    os.mkfifo(root / "runtime.txt")
    started = time.monotonic()
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(root))
    assert time.monotonic() - started < 60
    assert code == 1
    unreadable = [f for f in report["findings"] if f["cause"] == "unreadable-file"]
    assert unreadable and "FIFO" in unreadable[0]["evidence"][0]["text"]


def test_a_symlink_loop_and_a_binary_file_are_reported(tmp_path):
    root = healthy_root(tmp_path)
    (root / "runtime.txt").unlink()
    os.symlink("runtime.txt", root / "runtime.txt")  # a link to itself: ELOOP
    (root / "train.log").write_bytes(b"\0\x01\x02" * 1000)
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(root))
    assert code == 1
    texts = " | ".join(e["text"] for f in report["findings"] if f["cause"] == "unreadable-file" for e in f["evidence"])
    assert "binary" in texts and "cannot be read" in texts


def test_a_2_gb_log_is_read_head_and_tail_in_seconds_with_its_line_numbers(tmp_path):
    root = healthy_root(tmp_path)
    log = root / "train.log"
    head = log.read_text()
    oom = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
           "capacity of 139.81 GiB of which 1.00 GiB is free.")
    with open(log, "w") as f:
        f.write(head)
        f.truncate(2 * 1024**3)  # sparse: 2 GB of zero bytes after the head, no newline among them
    with open(log, "a") as f:
        f.write("\nlast words before\n" + oom + "\n")
    started = time.monotonic()
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(root))
    seconds = time.monotonic() - started
    assert seconds < 30, seconds
    first = report["findings"][0]
    assert code == 1 and first["cause"] == "cuda-out-of-memory"
    # the head's lines, the zeros' one line, "last words before", then the error
    assert first["evidence"][0]["line"] == head.count("\n") + 3


def test_the_bounded_reader_keeps_line_numbers(tmp_path, monkeypatch):
    from compiler.commands import doctor_read
    monkeypatch.setattr(doctor_read, "HEAD_BYTES", 100)
    monkeypatch.setattr(doctor_read, "TAIL_BYTES", 100)
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    got = read_bounded(str(path))
    assert got.bounded and got.problem is None
    lines = lines_of("log", got.text)
    assert all(x.text == f"line {x.number}" for x in lines)
    assert lines[-1].number == 1000 and len(lines) < 60


def test_a_run_verify_cannot_judge_is_not_healthy(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_command, "run_verify", lambda *a: None)
    code, report = doctor(str(HEALTHY / "spec.yaml"), str(healthy_root(tmp_path)))
    assert code == 1 and report["findings"][0]["cause"] == "not-checked"


# --- the latest attempt of an appended log -------------------------------------------------------


def test_only_the_latest_attempt_of_an_appended_log_is_read():
    first = "UserWarning: x\nusing world size: 1, data\nWARNING: could not find the metadata file ckpt/x\n" \
            " iteration        4/       4 | lm loss: 1.0E+01 |\n"
    second = "UserWarning: x\n  warnings.warn(\nusing world size: 1, data\n[rank0]: RuntimeError: boom\n"
    text = latest_attempt(first + second, "train")
    lines = lines_of("train.log", text)
    assert lines[0].number == first.count("\n") + 1 and lines[0].text == "UserWarning: x"
    assert not any("metadata file" in x.text for x in lines)
    launch = "launch.sh: started a\nlaunch.sh: torchrun exited with status 0\nlaunch.sh: started b\nx\n"
    assert [x.number for x in lines_of("launch.log", latest_attempt(launch, "launch"))] == [3, 4]


# --- several workers: STAND-INS from torch's own texts -------------------------------------------

WATCHDOG = ("[rank{r}]:[E1201 12:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600050 milliseconds before timing out.")
BACKEND = "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, remote process exited"


def _worker(index: int, train: str, status: str | None) -> WorkerFiles:
    return WorkerFiles(index, f"nodes/node-{index}", train_log=train, exit_status=status,
                       launch_log="launch.sh: started x\nlaunch.sh: torchrun starts; its output is in y\n")


def test_a_vanished_worker_is_the_cause_and_its_peers_nccl_errors_follow():
    facts = DoctorFacts(workers=2, gpus_per_worker=1, is_pretrain=True, train_iters=10)
    files = RunFiles("/r", (
        _worker(0, " iteration 3/ 10 |\n" + BACKEND.format(r=0) + "\n", "1\n"),
        _worker(1, " iteration 3/ 10 |\n", None),  # its log stops; no exit record
    ))
    found = diagnose(files, facts)
    assert found[0].cause == "worker-vanished" and found[0].worker == 1
    nccl = [f for f in found if f.cause == "nccl-error"]
    assert nccl and found.index(nccl[0]) > 0 and "consequence" in nccl[0].summary


def test_a_collective_timeout_names_the_rank_that_never_arrived():
    facts = DoctorFacts(workers=2, gpus_per_worker=2, is_pretrain=True)
    files = RunFiles("/r", (
        _worker(0, WATCHDOG.format(r=0) + "\n" + WATCHDOG.format(r=1) + "\n", "1\n"),
        _worker(1, WATCHDOG.format(r=2) + "\n" + "[rank3]: saving a very large checkpoint\n", "1\n"),
    ))
    found = diagnose(files, facts)
    first = found[0]
    assert first.cause == "collective-timeout" and first.rank == 3 and first.worker == 1
    assert "ALLREDUCE" in first.summary and "10 minutes" in first.summary
    assert any("--distributed-timeout-minutes" in x.value for x in first.fixes)


def test_a_rank_that_crashed_comes_before_the_nccl_errors_it_caused():
    facts = DoctorFacts(workers=1, gpus_per_worker=2, is_pretrain=True)
    train = ("[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: bad batch\n"
             + BACKEND.format(r=0) + "\nRoot Cause (first observed failure):\n[0]:\n  time      : x\n"
             "  host      : h\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 2)\n=====\n")
    found = diagnose(RunFiles("/r", (WorkerFiles(0, "", train_log=train, exit_status="1\n",
                                                 launch_log="launch.sh: torchrun starts\n"),)), facts)
    assert [f.cause for f in found][:2] == ["rank-crashed", "nccl-error"]
    assert "ValueError: bad batch" in found[0].summary


# --- launch.sh's data check ----------------------------------------------------------------------


def _prepared_launch(tmp_path: Path) -> tuple[str, Path, Path]:
    """pretrain-prepared's launch.sh with its data prefix moved under tmp_path; (script, prefix, spec)."""
    text = resolved_text("pretrain-prepared")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    result = compile_text(text, "specs/prep.yaml", tmp=tmp_path)
    assert result.ok, result.diagnostics
    script = result.files["launch.sh"]
    assert re.search(r"^check_data_prefix \S+$", script, re.M), "launch.sh checks the data prefixes before torchrun"
    prefix = tmp_path / "data" / "wiki_text_document"
    prefix.parent.mkdir()
    return re.sub(r"^check_data_prefix \S+$", f"check_data_prefix '{prefix}'", script, flags=re.M), prefix, spec


def _manifest(prefix: Path, **changes: str) -> None:
    fields = {"tokenizer_type": "GPT2BPETokenizer", "tokenizer_vocab_file": "/mnt/megatron/tokenizers/gpt2/vocab.json",
              "tokenizer_merge_file": "/mnt/megatron/tokenizers/gpt2/merges.txt", "max_token_id": "50000", **changes}
    Path(str(prefix) + ".manifest").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))


@pytest.mark.parametrize("case, cause, text", [
    ("missing", "data-not-prepared", "has no"),
    ("tokenizer", "data-manifest-mismatch", "was prepared with tokenizer_type: HuggingFaceTokenizer"),
    ("vocab", "data-manifest-mismatch", "token ids up to 99999, beyond the model's 50304 embedding rows"),
])
def test_launch_refuses_data_that_is_not_the_specs_and_doctor_names_it(tmp_path, case, cause, text):
    script, prefix, spec = _prepared_launch(tmp_path)
    if case != "missing":
        for ext in (".bin", ".idx"):
            Path(str(prefix) + ext).write_bytes(b"x")
        _manifest(prefix, **({"tokenizer_type": "HuggingFaceTokenizer"} if case == "tokenizer" else
                             {"max_token_id": "99999"}))
    run = run_launch(script, tmp_path, gpus=1)
    assert run.returncode == 1 and not (run.calls / "torchrun.argv").exists()
    log = (run.run_root / "launch.log").read_text()
    assert text in log, log
    code, report = doctor(str(spec), str(run.run_root))
    assert code == 1 and report["findings"][0]["cause"] == cause, report["findings"]


def test_launch_runs_torchrun_when_the_data_is_the_specs(tmp_path):
    script, prefix, _ = _prepared_launch(tmp_path)
    for ext in (".bin", ".idx"):
        Path(str(prefix) + ext).write_bytes(b"x")
    _manifest(prefix)
    run = run_launch(script, tmp_path, gpus=1)
    assert (run.calls / "torchrun.argv").exists(), run.stderr


# --- crashes the compiler knows, recognised in a log (the texts the H200 runs printed) -----------

CRASH_TEXTS = [
    ("[rank0]: AssertionError: sequence parallel not supported by torch LayerNorm", "megatron-needs-apex-or-te",
     "training.sequence_parallel"),
    ("[rank0]: RuntimeError: Output 0 of _ReduceFromModelParallelRegionBackward is a view and is being modified "
     "inplace. This view was created inside a custom Function", "megatron-local-crash",
     "training.model.disable_bias_linear"),
    ("[rank0]: NameError: name 'FP8GlobalStateManager' is not defined", "megatron-needs-te", "training.args"),
    # tests/fixtures/h200-hosts/call15/crashes (an H200, TE 2.14.1)
    ("[rank0]: AssertionError: bias_dropout_fusion is not supported in TEGroupedMLP when add_bias_linear=True",
     "megatron-moe-bias-crash", "training.model.disable_bias_linear"),
    ('[rank0]:     raise NotImplementedError("Bias is not supported for weighted swiglu fusion")\n'
     "[rank0]: NotImplementedError: Bias is not supported for weighted swiglu fusion", "megatron-moe-bias-crash",
     "training.model.disable_bias_linear"),
    ("[rank0]: ValueError: Only support fusion of swiglu and quick_gelu in TEGroupedMLP.", "megatron-moe-bias-crash",
     "training.model.disable_bias_linear"),
    ('[rank0]:   File "/opt/Megatron-LM/megatron/training/arguments.py", line 1344, in validate_args\n'
     "[rank0]:     assert args.start_weight_decay is not None\n[rank0]: AssertionError", "megatron-validate-args",
     "training.args"),
    ("--checkpoint-activations is no longer valid, use --recompute-activations, or, for more control, "
     "--recompute-granularity and --recompute-method.", "megatron-validate-args", "training.args"),
]


@pytest.mark.parametrize("text, cause, field", CRASH_TEXTS)
def test_a_crash_the_compiler_knows_is_named_with_its_field(text, cause, field):
    train = text + "\n" + BACKEND.format(r=1) + "\nRoot Cause (first observed failure):\n[0]:\n  rank      : 0 " \
        "(local_rank: 0)\n  exitcode  : 1 (pid: 2)\n=====\n"
    found = diagnose(RunFiles("/r", (WorkerFiles(0, "", train_log=train, exit_status="1\n",
                                                 launch_log="launch.sh: torchrun starts\n"),)),
                     DoctorFacts(workers=1, gpus_per_worker=2, is_pretrain=True))
    assert found[0].cause == cause and found[0].fixes[0].field == field, found
    if cause == "megatron-validate-args":
        assert "arguments.py:" in found[0].summary
    assert found[-1].cause == "nccl-error"
