"""The doctor's inputs and outputs, and the readers its detectors share: a run root's texts as plain
records (RunFiles, WorkerFiles), the spec's DoctorFacts, Findings with their Evidence and Fix, and log lines.

Nothing here reads files: compiler/commands/doctor.py does, into RunFiles. The detectors are in
failures_launch.py and failures_training.py; failures.py orders their findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..schema.defaults import MEGATRON_ROOT
from .parallel import data_parallel_size, world_size

# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerFiles:
    """What one worker's launch command left in its log directory (None: the file is absent)."""

    index: int  # the worker's node rank (0 for a single-worker job)
    directory: str  # relative to the run root: "" or "nodes/node-K"
    train_log: str | None = None
    launch_log: str | None = None
    exit_status: str | None = None
    runtime: str | None = None

    def path(self, name: str) -> str:
        """A file of this worker's directory, relative to the run root."""
        return f"{self.directory}/{name}" if self.directory else name


@dataclass(frozen=True)
class RunFiles:
    """A run root's texts: one WorkerFiles per worker the spec asks for, and the checkpoint listing."""

    root: str
    workers: tuple[WorkerFiles, ...]
    checkpoint_files: tuple[str, ...] = ()  # paths under ckpt/, relative to it
    latest_checkpointed_iteration: str | None = None  # ckpt/latest_checkpointed_iteration.txt
    unreadable: tuple[Evidence, ...] = ()  # files of the run that could not be read, and why
    launches: tuple[int, ...] = ()  # per worker: the launches its launch.log records (before cutting to the latest)


@dataclass(frozen=True)
class DoctorFacts:
    """Plain facts from the spec: what the run was meant to be."""

    workers: int
    gpus_per_worker: int
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    megatron_commit: str = ""
    megatron_root: str = MEGATRON_ROOT
    image: str = ""  # the image reference the job runs
    is_pretrain: bool = False
    train_iters: int | None = None
    micro_batch: int | None = None
    global_batch: int | None = None
    vocab_size: int | None = None
    precision: str = "bf16"
    lr: float | None = None
    estimate_peak_mb: float | None = None
    estimate_static_mb: float | None = None  # weights, gradients and optimizer state per GPU
    gpu_memory_gb: float | None = None
    loads_weights: bool = False  # training.resume, or a checkpoint to start from
    resume: bool = False  # training.resume: the run root is meant to hold an earlier run
    default_master_port: int = 29500
    split: str | None = None  # training.data.split (None: Megatron's default)
    data_paths: tuple[str, ...] = ()  # the prefixes training reads
    model: tuple[tuple[str, int], ...] = ()  # training.model's integer fields as the spec gives them

    @property
    def world_size(self) -> int:
        return world_size(self.workers, self.gpus_per_worker)

    @property
    def data_parallel(self) -> int:
        # at least 1: the doctor reads runs of specs that may not divide (a broken run's spec)
        return max(1, data_parallel_size(self.world_size, self.tensor, self.pipeline, self.context))


# --- outputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    file: str  # relative to the run root
    line: int  # 1-based; 0 when the evidence is that the file is absent
    text: str


@dataclass(frozen=True)
class Fix:
    field: str  # a spec field (resources.gpus_per_worker), or what the spec cannot say (the image)
    value: str  # what to set it to, or what to check
    why: str = ""


@dataclass(frozen=True)
class Finding:
    cause: str  # kebab-case code
    summary: str
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[Fix, ...] = ()
    worker: int | None = None
    rank: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause, "summary": self.summary, "worker": self.worker, "rank": self.rank,
            "evidence": [{"file": e.file, "line": e.line, "text": e.text} for e in self.evidence],
            "fixes": [{"field": f.field, "value": f.value, "why": f.why} for f in self.fixes],
        }


# --- reading the texts -------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
RANK_PREFIX = re.compile(r"^\[(?:default)?rank(\d+)\]:")


def clean(line: str) -> str:
    """A log line without terminal colours (gcc's -fdiagnostics-color) and trailing blanks."""
    return ANSI.sub("", line).rstrip()


@dataclass(frozen=True)
class Line:
    file: str
    number: int
    text: str

    def evidence(self) -> Evidence:
        return Evidence(self.file, self.number, self.text[:400])

    @property
    def rank(self) -> int | None:
        m = RANK_PREFIX.match(self.text)
        return int(m.group(1)) if m else None


# What the doctor's bounded reader puts where it skipped lines (the middle of a large log, the earlier
# attempts of an appended one): one line that stands for N lines of the file.
SKIPPED = re.compile(r"^\[doctor: (\d+) lines not read\]$")


def lines_of(file: str, text: str | None) -> list[Line]:
    """The lines of a text, numbered as in the file (a skipped-lines marker counts as its lines)."""
    if text is None:
        return []
    out, number = [], 0
    for t in text.splitlines():
        skipped = SKIPPED.match(t)
        if skipped:
            number += int(skipped.group(1))
            continue
        number += 1
        out.append(Line(file, number, clean(t)))
    return out


def find(lines: list[Line], pattern: str, flags: int = 0) -> Line | None:
    """The first line that matches."""
    regex = re.compile(pattern, flags)
    return next((line for line in lines if regex.search(line.text)), None)


def find_all(lines: list[Line], pattern: str) -> list[Line]:
    regex = re.compile(pattern)
    return [line for line in lines if regex.search(line.text)]


def launch_lines(w: WorkerFiles) -> list[Line]:
    return lines_of(w.path("launch.log"), w.launch_log)


def train_lines(w: WorkerFiles) -> list[Line]:
    return lines_of(w.path("train.log"), w.train_log)


def runtime_value(w: WorkerFiles, key: str) -> Line | None:
    for line in lines_of(w.path("runtime.txt"), w.runtime):
        if line.text.startswith(f"{key}: "):
            return line
    return None


def exit_code(w: WorkerFiles) -> int | None:
    """The exit record's first line as a status; None for no record or `running` (never recorded)."""
    first = (w.exit_status or "").split("\n", 1)[0].strip()
    return int(first) if first.isdigit() else None


def exit_field(w: WorkerFiles, key: str) -> str | None:
    """A `key: value` line of the exit record after its status (stopped, saved_iteration, torchrun_status)."""
    for line in (w.exit_status or "").splitlines()[1:]:
        if line.startswith(key + ": "):
            return line[len(key) + 2:].strip()
    return None


# Megatron's training_log line (print_rank_last, megatron/training/training.py:2692 at 571370c8).
ITERATION = re.compile(r" iteration +(\d+)/ *(\d+) \|")
LOSS = re.compile(r"lm loss: ([-+0-9.eE]+|nan|inf|-inf) \|", re.I)
BAD = re.compile(r"number of skipped iterations: +(\d+) \| number of nan iterations: +(\d+)")


def iteration_lines(w: WorkerFiles) -> list[Line]:
    return [line for line in train_lines(w) if ITERATION.search(line.text)]


def last_rank_worker(files: RunFiles) -> WorkerFiles:
    """The worker whose log holds Megatron's iteration lines: the last rank's, on the last worker."""
    return files.workers[-1]


# --- detectors' registry ---------------------------------------------------------------------

Detector = Callable[[RunFiles, DoctorFacts], Iterator[Finding]]


def registry(into: list[Detector]) -> Callable[[Detector], Detector]:
    """A decorator that appends each detector to `into`, in definition order (the order they report in)."""
    def detector(fn: Detector) -> Detector:
        into.append(fn)
        return fn
    return detector


def _worker_of(files: RunFiles, facts: DoctorFacts, rank: int | None, default: int) -> int:
    if rank is None or facts.gpus_per_worker <= 0:
        return default
    return min(rank // facts.gpus_per_worker, len(files.workers) - 1)

