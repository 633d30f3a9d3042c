"""The doctor's inputs and outputs, and the readers its detectors share: a run root's texts as plain
records (RunFiles, WorkerFiles), the spec's DoctorFacts, Findings with their Evidence and Fix, and log lines.

Nothing here reads files: compiler/commands/doctor.py does, into RunFiles. The detectors are in
failures_launch.py and failures_training.py; failures.py orders their findings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
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

# A run root is input like any other: a number in a log may be 5,000 digits long (int() refuses more than
# 4,300), a superscript (str.isdigit() accepts it, int() does not), or "1.2.3". Every number the detectors
# read from a log goes through to_int or to_float, which give None for what they cannot read: the line is
# then treated as not matching.
MAX_DIGITS = 18


def to_int(text: str | None) -> int | None:
    """A count or status as a log writes it (ASCII digits, at most MAX_DIGITS of them); None otherwise."""
    if text is None:
        return None
    t = text.strip()
    if not t or len(t) > MAX_DIGITS or not (t.isascii() and t.isdecimal()):
        return None
    return int(t)


def to_float(text: str | None) -> float | None:
    """A finite decimal number as a log writes it (62.50, 1e-4); None for anything else (1.2.3, nan, 1e999)."""
    if text is None:
        return None
    t = text.strip()
    if not t or len(t) > 64 or not t.isascii() or "_" in t:
        return None
    try:
        value = float(t)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
RANK_PREFIX = re.compile(r"^\[(?:default)?rank([0-9]+)\]:")


def clean(line: str) -> str:
    """A log line without terminal colours (gcc's -fdiagnostics-color) and trailing blanks."""
    return (ANSI.sub("", line) if "\x1b" in line else line).rstrip()


@dataclass(frozen=True, slots=True)
class Line:
    file: str
    number: int
    text: str

    def evidence(self) -> Evidence:
        return Evidence(self.file, self.number, self.text[:400])

    @property
    def rank(self) -> int | None:
        m = RANK_PREFIX.match(self.text)
        return to_int(m.group(1)) if m else None


# What the doctor's bounded reader puts where it skipped lines (the middle of a large log, the earlier
# attempts of an appended one): one line that stands for N lines of the file.
SKIPPED = re.compile(r"^\[doctor: ([0-9]+) lines not read\]$")


class Lines(list[Line]):
    """lines_of's lines, and their texts joined by newlines (`joined`): one search of the whole text finds
    the first line that can match, instead of a search per line (first_possible)."""

    joined: str = ""
    size: int = 0  # len() when `joined` was made: a list changed since is searched line by line


def lines_of(file: str, text: str | None) -> list[Line]:
    """The lines of a text, numbered as in the file (a skipped-lines marker counts as its lines; one whose
    count is not a number read as one is an ordinary line)."""
    if text is None:
        return []
    # every detector reads the same logs: split them once (a new list each time; the Lines are frozen).
    # The cache holds a few texts of at most doctor_read's HEAD_BYTES + TAIL_BYTES each.
    cut, joined = _lines_of(file, text)
    out = Lines(cut)
    out.joined, out.size = joined, len(cut)
    return out


@lru_cache(maxsize=16)
def _lines_of(file: str, text: str) -> tuple[tuple[Line, ...], str]:
    out, number = [], 0
    for t in text.splitlines():
        skipped = SKIPPED.match(t) if t.startswith("[doctor: ") else None
        count = to_int(skipped.group(1)) if skipped else None
        if count is not None:
            number += count
            continue
        number += 1
        out.append(Line(file, number, clean(t)))
    return tuple(out), "\n".join(x.text for x in out)


def joined_text(lines: list[Line]) -> str:
    """The lines' texts, one a line (kept by lines_of; joined here for any other list)."""
    if isinstance(lines, Lines) and len(lines) == lines.size:
        return lines.joined
    return "\n".join(x.text for x in lines)


# A whole-text search is a first look only where a pattern that matches a line also matches the joined text
# (MULTILINE makes ^ and $ those of each line); a lookaround (it sees the next line), \A and \Z may not.
_NOT_WHOLE = re.compile(r"\(\?[<=!]|\\A|\\Z")


def first_possible(lines: list[Line], regex: re.Pattern[str], whole: bool | None = None) -> int:
    """The index of the first line that can match REGEX (len(lines): none can), from one search of lines_of's
    joined text: a line's match is a match there, so none starts earlier. 0 (look at every line) for other
    lists and, unless WHOLE says the pattern is fit, the patterns _NOT_WHOLE names."""
    fit = whole if whole is not None else not _NOT_WHOLE.search(regex.pattern)
    if not fit or not isinstance(lines, Lines) or len(lines) != lines.size or len(lines) < 64:
        return 0
    m = re.compile(regex.pattern, regex.flags | re.MULTILINE).search(lines.joined)
    return len(lines) if m is None else lines.joined.count("\n", 0, m.start())


def first_match(lines: list[Line], regex: re.Pattern[str], unless: re.Pattern[str] | None = None,
                whole: bool | None = None) -> Line | None:
    """The first line REGEX matches (and UNLESS does not), its search confined to the lines that can match."""
    start = first_possible(lines, regex, whole)
    return next((line for line in islice(lines, start, None) if regex.search(line.text) and
                 (unless is None or not unless.search(line.text))), None)


def find(lines: list[Line], pattern: str, flags: int = 0) -> Line | None:
    """The first line that matches."""
    return first_match(lines, re.compile(pattern, flags))


def find_all(lines: list[Line], pattern: str) -> list[Line]:
    regex = re.compile(pattern)
    start = first_possible(lines, regex)
    return [line for line in islice(lines, start, None) if regex.search(line.text)]


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
    return to_int(first)


def exit_field(w: WorkerFiles, key: str) -> str | None:
    """A `key: value` line of the exit record after its status (stopped, saved_iteration, torchrun_status)."""
    for line in (w.exit_status or "").splitlines()[1:]:
        if line.startswith(key + ": "):
            return line[len(key) + 2:].strip()
    return None


# Megatron's training_log line (print_rank_last, megatron/training/training.py:2692 at 571370c8).
ITERATION = re.compile(r" iteration +([0-9]+)/ *([0-9]+) \|")
LOSS = re.compile(r"lm loss: ([-+0-9.eE]+|nan|inf|-inf) \|", re.I)
BAD = re.compile(r"number of skipped iterations: +([0-9]+) \| number of nan iterations: +([0-9]+)")


def iteration_of(line: Line) -> int | None:
    """The iteration an iteration line logs; None for a line that is not one (or whose number is not read)."""
    m = ITERATION.search(line.text)
    return to_int(m.group(1)) if m and to_int(m.group(2)) is not None else None


def iteration_lines(w: WorkerFiles) -> list[Line]:
    lines = train_lines(w)
    return [line for line in islice(lines, first_possible(lines, ITERATION), None) if iteration_of(line) is not None]


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

