"""The doctor on run roots a fuzzer wrote: numbers int() refuses, a checkpoint directory that is a file, and
logs that are large or made of the doctor's patterns over and over.

The contract: on any run-root content `megatron-compile doctor` returns (no traceback, no hang), what it
cannot parse is not matched or is reported unreadable, and it stays linear in the size of the logs.
"""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compiler.commands.doctor import main
from compiler.commands.doctor_read import shadow_root
from compiler.megatron import failures_causes
from helpers import REPO, SPECS

SPEC = SPECS / "tp2.yaml"  # one worker: its files at the run root
PRETRAIN = SPECS / "pretrain-mock.yaml"  # one worker too, and pretrain_gpt.py's checks (iterations, arguments dump)
N = "9" * 4400  # a decimal number longer than int() reads (4,300 digits)

HOSTILE = [
    pytest.param("exit_status", "²", id="exit-status-superscript"),
    pytest.param("exit_status", N, id="exit-status-long"),
    pytest.param("train.log", f"[doctor: {N} lines not read]", id="train-skipped-marker"),
    pytest.param("launch.log", f"[doctor: {N} lines not read]", id="launch-skipped-marker"),
    pytest.param("runtime.txt", f"[doctor: {N} lines not read]", id="runtime-skipped-marker"),
    pytest.param("runtime.txt", "gpu_count: ²", id="runtime-gpu-count-superscript"),
    pytest.param("train.log", f"[rank1]: Watchdog caught collective operation timeout: ran for {N} milliseconds "
                 "before timing out.", id="watchdog-ms-long"),
    pytest.param("train.log", f"[rank1]: Watchdog caught collective operation timeout: ran for {'9' * 401} "
                 "milliseconds before timing out.", id="watchdog-ms-overflow"),
    pytest.param("train.log", f'File ".../megatron/training/arguments.py", line {N}, in validate_args',
                 id="validate-args-frame-line"),
    pytest.param("train.log", f"Global shape mismatch for loaded ({N}) and expected (3) tensor for key x",
                 id="checkpoint-shape"),
    pytest.param("train.log", "CUDA out of memory. Tried to allocate 1 GiB. GPU 0 has a total capacity of 1.2.3 GiB",
                 id="oom-capacity"),
    pytest.param("train.log", "CUDA out of memory. Tried to allocate . GiB. this process has 1 GiB memory in use",
                 id="oom-allocation"),
    pytest.param("launch.log", f"launch.sh: the spec asks for 1 GPUs per worker, but nvidia-smi lists {N}",
                 id="nvidia-smi-count"),
    pytest.param("train.log", f" iteration {N}/ 10 | lm loss: 1 |", id="iteration"),
    pytest.param("train.log", f" iteration 1/ {N} | lm loss: 1.2.3 | number of skipped iterations: {N} | "
                 f"number of nan iterations: {N} |", id="iteration-counts"),
    pytest.param("train.log", f"[rank{N}]: RuntimeError: CUDA error: invalid device ordinal", id="rank-prefix"),
    pytest.param("train.log", "[rank١]: RuntimeError: CUDA error: invalid device ordinal", id="rank-arabic-digit"),
    pytest.param("train.log", f"  world_size ..... {N}", id="arguments-world-size"),
]


def doctor(root: Path, fmt: str = "json", spec: Path = SPEC) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(spec), str(root), "--format", fmt], out, err)
    return code, out.getvalue()


def run_root(tmp: Path, files: dict[str, str]) -> Path:
    root = tmp / "run"
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_numbers_are_read_bounded():
    from compiler.megatron.failures_logs import to_float, to_int
    assert to_int("12") == 12 and to_int(" 143\n") == 143
    assert to_int("²") is None and to_int("١") is None and to_int("9" * 19) is None and to_int(N) is None
    assert to_int("-1") is None and to_int("") is None and to_int(None) is None
    assert to_float("62.50") == 62.5 and to_float("1e-4") == 1e-4
    for bad in ("1.2.3", ".", "nan", "inf", "1e999", "1_0", "²", N * 2, None):
        assert to_float(bad) is None, bad


@pytest.mark.parametrize("spec", [SPEC, PRETRAIN], ids=["tp2", "pretrain"])
@pytest.mark.parametrize("name,line", HOSTILE)
def test_a_hostile_line_is_not_a_traceback(tmp_path, name, line, spec):
    root = run_root(tmp_path, {name: line + "\n"})
    code, out = doctor(root, "json", spec)
    report = json.loads(out)
    assert code == 1 and report["healthy"] is False, out  # a failed run, as for a log nothing matches
    code, out = doctor(root, "text", spec)
    assert code == 1 and out.startswith("doctor: ")


def test_the_command_line_prints_no_traceback(tmp_path):
    root = run_root(tmp_path, {"exit_status": N + "\n", "train.log": f"[doctor: {N} lines not read]\n",
                               "runtime.txt": "gpu_count: ²\n"})
    proc = subprocess.run([sys.executable, "-m", "compiler", "doctor", str(SPEC), str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.startswith("doctor: ")


@pytest.mark.parametrize("kind", ["file", "symlink-loop"])
def test_a_checkpoint_directory_that_is_not_one(tmp_path, kind):
    root = run_root(tmp_path, {"exit_status": "0\n"})
    if kind == "file":
        (root / "ckpt").write_text("x\n")
    else:
        os.symlink("ckpt", root / "ckpt")
    code, out = doctor(root)
    report = json.loads(out)
    assert code == 1
    assert "unreadable-file" in [f["cause"] for f in report["findings"]], out
    # verify.sh's view of the run root holds the ckpt entry as it is, not a directory made up for it
    view = shadow_root(str(root), {"ckpt/latest_checkpointed_iteration.txt": ""}, str(tmp_path / "view"))
    assert os.path.islink(os.path.join(view, "ckpt")) and os.path.islink(os.path.join(view, "exit_status"))


def _timed(root: Path) -> tuple[int, float]:
    start = time.perf_counter()
    code, _ = doctor(root)
    return code, time.perf_counter() - start


def _warm(tmp: Path) -> None:
    """One run first, so that neither timed run pays for the first compile of the spec."""
    doctor(run_root(tmp / "warm", {"train.log": _log(10)}))


def _log(lines: int) -> str:
    return "[rank0]: line of the log\n" * lines


def test_a_large_log_costs_its_size_once(tmp_path, monkeypatch):
    """validate_refused used to cut each of validate_args's ~300 messages for every line of the log."""
    calls = [0]
    literal = failures_causes._literal

    def counted(message: str) -> str:
        calls[0] += 1
        if calls[0] > 5_000:
            raise AssertionError("validate_args's messages are cut once per line of the log")
        return literal(message)

    monkeypatch.setattr(failures_causes, "_literal", counted)
    cached = getattr(failures_causes, "_refusals", None)
    if cached is not None:
        cached.cache_clear()
    line = len("[rank0]: line of the log\n")
    small = run_root(tmp_path / "small", {"train.log": _log(1_200_000 // line)})
    big = run_root(tmp_path / "big", {"train.log": _log(12_000_000 // line)})
    _warm(tmp_path)
    small_code, small_s = _timed(small)
    big_code, big_s = _timed(big)
    assert small_code == big_code == 1
    assert calls[0] <= 1_000
    # the doctor (and verify.sh) read at most 8 MB of the 12 MB: about 7 times the small log, 45 if quadratic
    assert big_s < 40 * small_s, (big_s, small_s)


def test_a_record_filled_with_megabytes_is_read_as_its_head_and_tail(tmp_path):
    """exit_status and runtime.txt are a few lines the launch writes; verify.sh reads them line by line in bash, so
    one a job filled with 8 MB of lines (20 s and more before, the doctor's limit 120 s) is given to it as 64 KiB."""
    filler = "x\n" * (8_000_000 // 2)
    small = run_root(tmp_path / "small", {"train.log": _log(100), "exit_status": "1\n" + "x\n" * 1000})
    big = run_root(tmp_path / "big", {"train.log": _log(100), "exit_status": "1\n" + filler,
                                      "runtime.txt": filler})
    _warm(tmp_path)
    small_code, small_s = _timed(small)
    big_code, big_s = _timed(big)
    assert small_code == big_code == 1
    assert big_s < 5 * small_s + 1.0, (big_s, small_s)


# What each detector looks for, repeated over a long line: a pattern `A.*B` searched again from every A
# is quadratic in the line (minutes for a few of these lines).
REPEATED = ["CUDA out of memory ", "CheckpointingException: ", "Global shape mismatch for loaded (",
            ") and expected (", "ProcessGroupNCCL ", "launch.sh: the data prefix ", "Indexing.cu ", "IndexKernel.cu ",
            "indexSelect", "> finished creating ", "failed to connect to ", "launch.sh: ",
            "launch.sh: the runtime probe ", "Tried to allocate 1 GiB "]


def test_lines_made_of_the_patterns_are_read_in_linear_time(tmp_path):
    hostile = "".join(unit * (150_000 // len(unit)) + "\n" for unit in REPEATED)
    shape = "Global shape mismatch for loaded (1" + ") and expected (" * 10_000 + "\n"
    root = run_root(tmp_path / "hostile", {"train.log": shape + hostile, "launch.log": hostile})
    # the same lines, of the same lengths, made of one letter
    def plain_of(text: str) -> str:
        return "".join("x" * len(line) + "\n" for line in text.splitlines())

    plain = run_root(tmp_path / "plain", {"train.log": plain_of(shape + hostile), "launch.log": plain_of(hostile)})
    _warm(tmp_path)
    plain_code, plain_s = _timed(plain)
    code, hostile_s = _timed(root)
    assert plain_code == code == 1
    assert hostile_s < 10 * plain_s, (hostile_s, plain_s)


@pytest.mark.parametrize("case", ["spec", "root"])
def test_json_gives_one_object_when_there_is_nothing_to_read(tmp_path, case):
    # a spec that does not compile (exit 2) or a run root that is not there (exit 1): with --format json stdout was
    # empty, the messages joined on stderr without their place; now one object whose diagnostics are located
    spec = tmp_path / "bad.yaml"
    spec.write_text("version: 1\nname: x\n")
    argv = [str(spec), str(tmp_path)] if case == "spec" else [str(SPECS / "tp2.yaml"), str(tmp_path / "none")]
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--format", "json"], out, err)
    got = json.loads(out.getvalue())
    assert code == (2 if case == "spec" else 1) and got["ok"] is False and got["diagnostics"]
    assert all(d["file"] and d["severity"] == "error" for d in got["diagnostics"])
    if case == "spec":
        assert got["diagnostics"][0]["line"] == 1
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, out, err) == code and ": error: " in err.getvalue()
