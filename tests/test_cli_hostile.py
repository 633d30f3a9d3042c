"""Hostile command lines for `calibrate`, `import` and `size`: a diagnostic and exit 1 (2 for usage), never a
traceback or a hang. Each runs the installed console script in a child with a timeout (and a memory limit), so a
regression fails here instead of stalling the suite or the machine."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from compiler.commands.size import ModelFacts, candidate_layouts
from compiler.megatron.host_calibration import steady_iterations

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / ".venv" / "bin" / "megatron-compile"
CALIBRATE_SPEC = REPO / "specs" / "calibrate-host.yaml"
TINY = REPO / "tests" / "e2e" / "mem-hc-tiny-l8-ga4.yaml"
TINY_LOG = REPO / "tests" / "fixtures" / "h200-hosts" / "call6" / "mem-hc-tiny-l8-ga4" / "train.log"
GPT_1B = REPO / "tests" / "size_specs" / "gpt-1b.yaml"
NOT_PRETRAIN = REPO / "specs" / "tp2.yaml"  # the bounded example: no training.model
BAD_SPEC = REPO / "tests" / "bad_specs" / "five-independent-mistakes.yaml"
SCRIPT = REPO / "tests" / "import_scripts" / "continuations.sh"
MEMORY_LIMIT = 4 << 30
MAX_GPUS = 16384  # size --max-gpus at most: the largest world a spec can give (1024 workers of 16 GPUs)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def cli(*argv: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The console script in a child; a child still running after `timeout` fails the test (and is killed)."""
    executable = str(CLI) if CLI.exists() else None
    command = [executable] if executable else [sys.executable, "-m", "compiler"]
    try:
        return subprocess.run([*command, *map(str, argv)], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=REPO, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"megatron-compile {' '.join(map(str, argv))[:200]} still running after {timeout} s")


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """In-process work that must end within `seconds`: past it, the test fails instead of hanging."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> str:
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both[-3000:]
    return both


def one_json_failure(proc: subprocess.CompletedProcess[str]) -> list[dict]:
    """stdout is one JSON object saying the command failed, with located diagnostics."""
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict) and doc["ok"] is False
    assert doc["diagnostics"], doc
    for d in doc["diagnostics"]:
        assert {"file", "line", "column", "severity", "message", "code"} <= set(d), d
        assert d["severity"] == "error" and d["message"]
    return doc["diagnostics"]


# ---------------------------------------------------------------------------- calibrate


@pytest.mark.parametrize("line", [
    " iteration        5/      40 | consumed samples: 40 | elapsed time per iteration (ms): . |",
    " iteration        5/      40 | consumed samples: 40 | elapsed time per iteration (ms): 1.2.3 |",
    " iteration " + "9" * 5000 + "/      40 | consumed samples: 40 | elapsed time per iteration (ms): 12.5 |",
    " iteration        5/      40 | consumed samples: 40 | elapsed time per iteration (ms): \u0661\u0662 |",
], ids=["dot", "two-dots", "5000-digit-iteration", "arabic-digits"])
def test_calibrate_malformed_numbers_are_no_iterations(tmp_path: Path, line: str) -> None:
    log = tmp_path / "train.log"
    log.write_text((line + "\n") * 10, encoding="utf-8")
    proc = cli("calibrate", CALIBRATE_SPEC, log)
    assert "fewer than 2 of Megatron's iteration lines" in no_traceback(proc)
    assert proc.returncode == 1


def test_malformed_numbers_beside_good_lines_leave_the_good_ones() -> None:
    good = "".join(f" iteration {k:8d}/      60 | consumed samples: 8 | elapsed time per iteration (ms): {t} |\n"
                   for k, t in ((1, 900.0), (4, 10.0), (5, 12.0), (6, 11.0)))
    bad = (" iteration        7/      60 | x | elapsed time per iteration (ms): 1.2.3 |\n"
           " iteration        8/      60 | x | elapsed time per iteration (ms): . |\n"
           " iteration " + "7" * 5000 + "/      60 | x | elapsed time per iteration (ms): 5.0 |\n")
    assert steady_iterations(good + bad) == [10.0, 12.0, 11.0]


def test_calibrate_a_fifo_log_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "f.log"
    os.mkfifo(fifo)
    proc = cli("calibrate", CALIBRATE_SPEC, fifo, timeout=30)
    assert "is a FIFO" in no_traceback(proc) and proc.returncode == 2


def test_calibrate_a_device_log_is_refused_not_read_forever(tmp_path: Path) -> None:
    link = tmp_path / "zero.log"
    link.symlink_to("/dev/zero")
    proc = cli("calibrate", CALIBRATE_SPEC, link, timeout=30)
    assert "is a device" in no_traceback(proc) and proc.returncode == 2


def test_calibrate_a_line_of_many_iteration_heads_is_linear(tmp_path: Path) -> None:
    # 40,000 heads on one line took 28 s with the pattern `head.*| elapsed`: quadratic
    log = tmp_path / "train.log"
    log.write_text(" iteration 1/ 1 |" * 40_000 + "| elapsed time per iteration (ms): 5\n"
                   + "| elapsed time per iteration (ms): 5" + " iteration 1/ 1 |" * 40_000 + "\n")
    proc = cli("calibrate", CALIBRATE_SPEC, log, timeout=20)
    assert "fewer than 2" in no_traceback(proc) and proc.returncode == 1
    with deadline(5):
        steady_iterations(" iteration 1/ 1 |" * 40_000)


@pytest.mark.parametrize(("argv", "code", "where"), [
    (["calibrate", CALIBRATE_SPEC, "missing.log"], 2, "missing.log"),
    (["calibrate", BAD_SPEC, TINY_LOG], 1, str(BAD_SPEC)),
    (["calibrate", NOT_PRETRAIN, TINY_LOG], 1, str(NOT_PRETRAIN)),
    (["calibrate", REPO / "specs", TINY_LOG], 2, str(REPO / "specs")),
    (["calibrate", TINY, REPO / "tests" / "fixtures" / "h200-hosts" / "call6" / "mem-l24" / "train.log"], 1,
     "mem-l24"),
], ids=["missing-log", "spec-does-not-compile", "not-a-pretrain-spec", "spec-a-directory", "another-jobs-log"])
def test_calibrate_json_failures_are_one_json_object(argv: list[object], code: int, where: str) -> None:
    proc = cli(*argv, "--format", "json")
    no_traceback(proc)
    assert proc.returncode == code
    assert any(where in d["file"] for d in one_json_failure(proc))


def test_calibrate_json_success_still_reports_the_factor() -> None:
    proc = cli("calibrate", TINY, TINY_LOG, "--format", "json")
    doc = json.loads(no_traceback(proc) and proc.stdout)
    assert proc.returncode == 0 and doc["ok"] is True and doc["host_time_factor"] > 0


# ---------------------------------------------------------------------------- import


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-1", "0", "1e-400", "3601", "abc", "--timeout=-inf"])
def test_import_timeout_must_be_a_sane_number_of_seconds(tmp_path: Path, value: str) -> None:
    option = [value] if value.startswith("--") else ["--timeout", value]
    proc = cli("import", SCRIPT, "-o", tmp_path / "x.yaml", *option)
    assert "--timeout" in no_traceback(proc) and proc.returncode == 2
    assert not (tmp_path / "x.yaml").exists()


def test_import_a_sane_timeout_still_imports(tmp_path: Path) -> None:
    proc = cli("import", SCRIPT, "-o", tmp_path / "x.yaml", "--timeout", "60")
    no_traceback(proc)
    assert (tmp_path / "x.yaml").exists() and proc.returncode in (0, 1)  # 1: the spec's own diagnostics


# ---------------------------------------------------------------------------- size


@pytest.mark.parametrize(("option", "value"), [
    ("--max-gpus", "1000000"), ("--max-gpus", str(MAX_GPUS + 1)), ("--max-gpus", "0"), ("--max-gpus", "-8"),
    ("--max-gpus", "9" * 5000), ("--max-gpus", "1.5"), ("--top", "0"), ("--top", "-1"), ("--top", "1000000000"),
    ("--gpus-per-worker", "0"), ("--gpus-per-worker", "-8"), ("--gpus-per-worker", "1000000"),
])
def test_size_out_of_range_options_are_usage_errors(option: str, value: str) -> None:
    proc = cli("size", GPT_1B, f"{option}={value}", timeout=60)
    assert option in no_traceback(proc) and proc.returncode == 2


def test_size_max_gpus_message_says_the_limit() -> None:
    proc = cli("size", GPT_1B, "--max-gpus", "4096000", timeout=60)
    assert str(MAX_GPUS) in no_traceback(proc) and proc.returncode == 2


def test_size_enumeration_does_not_grow_with_max_gpus() -> None:
    facts = ModelFacts(24, 16, None, 2048)
    with deadline(10):
        huge = candidate_layouts(facts, 256, 10**12, 8)
    assert huge == candidate_layouts(facts, 256, 24 * 8 * 8 * 256, 8)  # TP x PP x CP x DP at their largest
    assert candidate_layouts(facts, 256, 64, 8) == [c for c in huge if c.world <= 64]


@pytest.mark.parametrize(("spec", "code"), [(NOT_PRETRAIN, 1), (BAD_SPEC, 1), (REPO / "missing.yaml", 1)],
                         ids=["not-a-pretrain-spec", "does-not-compile", "missing"])
def test_size_json_failures_are_one_json_object(spec: Path, code: int) -> None:
    proc = cli("size", spec, "--format", "json")
    no_traceback(proc)
    assert proc.returncode == code
    assert any(str(spec) in d["file"] for d in one_json_failure(proc))


def test_size_json_unknown_gpu_is_a_usage_error_in_json() -> None:
    proc = cli("size", GPT_1B, "--gpu", "tpu-v9", "--format", "json")
    no_traceback(proc)
    assert proc.returncode == 2 and "tpu-v9" in one_json_failure(proc)[0]["message"]


def test_an_empty_argument_is_named_and_refused() -> None:
    """`megatron-compile ""` (an unset shell variable) says so, under a name a reader can see."""
    proc = cli("")
    assert proc.returncode == 1
    both = no_traceback(proc)
    assert both.startswith("'': error: an empty argument names no spec"), both
