"""What failed Megatron-LM runs look like: pure functions from a run root's texts and the spec's
facts to findings (a cause, the evidence line quoted, the fix in the spec's terms).

Every pattern here was seen in a real run of a generated launch command (tests/fixtures/failed-runs:
real torchrun with gloo on a CPU, and pretrain_gpt.py on an H200); each pattern names the fixture
that shows it. Nothing here reads files: compiler/commands/doctor.py does, into RunFiles.

This module orders the findings; the records and log readers are in failures_logs.py, the detectors
in failures_launch.py (up to the rendezvous) and failures_training.py (once training runs).
"""

from __future__ import annotations

import re
from dataclasses import replace

from . import failures_causes, failures_launch, failures_training
from .failures_logs import (
    Detector, Evidence, DoctorFacts, Finding, Fix, Line, RunFiles, WorkerFiles, exit_code, first_match, launch_lines,
    train_lines,
)

__all__ = ["DETECTORS", "CAUSE_ORDER", "Evidence", "DoctorFacts", "Finding", "Fix", "Line", "RunFiles", "WorkerFiles",
           "diagnose", "first_error_lines"]

# Every detector, in the order they were written: those of the launch, then those of training.
DETECTORS: list[Detector] = [*failures_launch.DETECTORS, *failures_training.DETECTORS, *failures_causes.DETECTORS]

# --- the diagnosis -----------------------------------------------------------------------------

# The order findings are reported in: what stops a run earliest (and explains the rest) first.
CAUSE_ORDER = ("never-started", "worker-never-started", "megatron-missing", "megatron-commit-unset", "storage-not-writable",
         "worker-count-mismatch", "gpu-count-mismatch", "no-gpu", "run-root-reused", "helper-build-no-compiler",
         "helper-build-no-pybind11", "helper-build-no-python-headers", "helper-build-no-make",
         "helper-build-failed", "megatron-not-importable", "data-not-prepared", "data-manifest-mismatch",
         "rendezvous-timeout", "megatron-validate-args", "cuda-device-error", "checkpoint-model-mismatch",
         "megatron-local-crash", "megatron-moe-bias-crash", "megatron-needs-apex-or-te", "megatron-needs-apex",
         "megatron-needs-te", "token-beyond-vocab",
         "cuda-device-assert", "cuda-out-of-memory", "dataset-index-hang", "killed-after-training", "worker-vanished",
         "collective-timeout", "nccl-error", "nan-loss", "fp16-no-step", "stopped-saved", "killed-sigterm", "killed-signal",
         "killed-sigkill", "rank-crashed", "weights-not-loaded", "wrong-megatron-commit", "runtime-gpu-count", "logs-incomplete",
         "checkpoint-missing", "unreadable-file")

# Causes that NCCL's errors follow from: the watchdog and DistBackendError lines that ranks log after a
# peer crashed, asserted or vanished are consequences, reported after the cause, never first.
NCCL_CONSEQUENCE_OF = {"megatron-validate-args", "megatron-local-crash", "megatron-moe-bias-crash", "megatron-needs-apex-or-te",
                       "megatron-needs-apex", "megatron-needs-te", "checkpoint-model-mismatch", "token-beyond-vocab", "cuda-device-assert", "cuda-out-of-memory",
                       "worker-vanished", "dataset-index-hang", "data-not-prepared", "nan-loss", "collective-timeout",
                       "cuda-device-error"}
NCCL_TEXT = re.compile(r"NCCL|DistBackendError|Watchdog|ProcessGroupNCCL|collective operation timeout")

ERRORISH = re.compile(r"Error|Exception|Traceback|FAILED|fatal|Killed|No such file|not found|refused|"
                      r"launch\.sh: (?!started|torchrun)", re.I)
NOT_ERROR = re.compile(r"Warning|warnings\.warn|UserWarning|FutureWarning|DeprecationWarning")


def first_error_lines(files: RunFiles) -> list[Line]:
    """For an unknown failure: the first error-looking line of each worker's logs."""
    out = []
    for w in files.workers:
        for lines in (launch_lines(w), train_lines(w)):
            # ERRORISH's lookahead follows "launch.sh: ", never a line's end: the joined text's first look is fit
            line = first_match(lines, ERRORISH, unless=NOT_ERROR, whole=True)
            if line:
                out.append(line)
                break
    return out


def diagnose(files: RunFiles, facts: DoctorFacts) -> list[Finding]:
    """Every finding, most fundamental first; an unknown failure when the run failed and none explains it."""
    found = [f for detect in DETECTORS for f in detect(files, facts) if f is not None]
    found.sort(key=lambda f: (CAUSE_ORDER.index(f.cause) if f.cause in CAUSE_ORDER else len(CAUSE_ORDER),
                              f.worker if f.worker is not None else -1))
    unique: list[Finding] = []
    for f in found:
        if not any(u.cause == f.cause and u.worker == f.worker for u in unique):
            unique.append(f)
    causes = {f.cause for f in unique}
    crashed = any(f.cause == "rank-crashed" and not NCCL_TEXT.search(f.summary) for f in unique)
    if "nccl-error" in causes and (causes & NCCL_CONSEQUENCE_OF or crashed):
        # the NCCL error follows from the cause above it: last, and said so
        nccl = [replace(f, summary=f.summary + " (a consequence of the failure reported first, not its cause)")
                for f in unique if f.cause == "nccl-error"]
        unique = [f for f in unique if f.cause != "nccl-error"]
        if crashed:  # the rank's own exception is the cause: before what its crash explains (killed, …)
            rank = [f for f in unique if f.cause == "rank-crashed"]
            rest = [f for f in unique if f.cause != "rank-crashed"]
            at = sum(1 for f in rest if CAUSE_ORDER.index(f.cause) < CAUSE_ORDER.index("nccl-error")) if rest else 0
            unique = rest[:at] + rank + rest[at:]
        unique += nccl
    failed = any(exit_code(w) != 0 for w in files.workers)
    if failed and not unique:
        lines = first_error_lines(files)
        unique.append(Finding(
            "unknown", "the run failed and no known failure explains it; the first error-looking line of each "
            "worker's logs follows", tuple(x.evidence() for x in lines),
            (Fix("(none known)", "read the quoted lines and the logs around them"),)))
    return unique
