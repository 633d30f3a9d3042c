"""What failed Megatron-LM runs look like: pure functions from a run root's texts and the spec's
facts to findings (a cause, the evidence line quoted, the fix in the spec's terms).

Every pattern here was seen in a real run of a generated launch command (tests/fixtures/failed-runs:
real torchrun with gloo on a CPU, and pretrain_gpt.py on an H200); each pattern names the fixture
that shows it. Nothing here reads files: compiler/commands/doctor.py does, into RunFiles.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

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


@dataclass(frozen=True)
class Facts:
    """Plain facts from the spec: what the run was meant to be."""

    workers: int
    gpus_per_worker: int
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    megatron_commit: str = ""
    megatron_root: str = "/opt/Megatron-LM"
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

    @property
    def world_size(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def data_parallel(self) -> int:
        return max(1, self.world_size // (self.tensor * self.pipeline * self.context))


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

    def as_dict(self) -> dict:
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


def lines_of(file: str, text: str | None) -> list[Line]:
    return [] if text is None else [Line(file, i, clean(t)) for i, t in enumerate(text.splitlines(), 1)]


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
    if w.exit_status is None or not w.exit_status.strip().isdigit():
        return None
    return int(w.exit_status.strip())


# Megatron's training_log line (print_rank_last, megatron/training/training.py:2692 at 571370c8).
ITERATION = re.compile(r" iteration +(\d+)/ *(\d+) \|")
LOSS = re.compile(r"lm loss: ([-+0-9.eE]+|nan|inf|-inf) \|", re.I)
BAD = re.compile(r"number of skipped iterations: +(\d+) \| number of nan iterations: +(\d+)")


def iteration_lines(w: WorkerFiles) -> list[Line]:
    return [line for line in train_lines(w) if ITERATION.search(line.text)]


def last_rank_worker(files: RunFiles) -> WorkerFiles:
    """The worker whose log holds Megatron's iteration lines: the last rank's, on the last worker."""
    return files.workers[-1]


# --- detectors ---------------------------------------------------------------------------------

Detector = Callable[[RunFiles, Facts], Iterator[Finding]]
DETECTORS: list[Detector] = []


def detector(fn: Detector) -> Detector:
    DETECTORS.append(fn)
    return fn


def _worker_of(files: RunFiles, facts: Facts, rank: int | None, default: int) -> int:
    if rank is None or facts.gpus_per_worker <= 0:
        return default
    return min(rank // facts.gpus_per_worker, len(files.workers) - 1)


@detector
def worker_missing(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """A worker whose launch command left nothing at all: it never started, or not with this run root."""
    if len(files.workers) < 2:
        return
    for w in files.workers:
        if all(x is None for x in (w.launch_log, w.train_log, w.exit_status, w.runtime)):
            others = [o for o in files.workers if o is not w and o.launch_log is not None]
            if not others:
                continue
            yield Finding(
                "worker-never-started",
                f"worker {w.index} left nothing under {w.directory}/: its launch command never ran with this "
                "run root (the platform did not start it, or it started with another storage.run_root)",
                (Evidence(w.path("launch.log"), 0, "(absent)"),),
                (Fix("resources.workers", f"{facts.workers}: the job must start this many workers, all of them "
                     "with the same launch command", "every worker writes its own nodes/node-K/launch.log"),),
                worker=w.index,
            )


@detector
def megatron_missing(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    # launch.sh: "Megatron-LM is not at $MEGATRON_ROOT" (fixtures cpu-megatron-missing, gpu-megatron-missing)
    for w in files.workers:
        line = find(launch_lines(w), r"launch\.sh: Megatron-LM is not at ")
        if line:
            yield Finding(
                "megatron-missing", f"Megatron-LM is not in the image at {facts.megatron_root}",
                (line.evidence(),),
                (Fix("megatron.root", "the directory where the image holds Megatron-LM (the Dockerfile copies it "
                     f"to megatron.root; now {facts.megatron_root})"),
                 Fix("image.tag", f"an image built from this spec (now {facts.image or 'the spec image'}), not "
                     "one without Megatron-LM")),
                worker=w.index,
            )


@detector
def megatron_not_importable(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    # The runtime probe: "ModuleNotFoundError: No module named 'megatron'" (cpu-megatron-not-importable)
    for w in files.workers:
        lines = launch_lines(w)
        line = find(lines, r"No module named '?megatron") or find(lines, r"launch\.sh: the runtime probe .* failed")
        if line:
            ev = [line.evidence()]
            die = find(lines, r"launch\.sh: the runtime probe .* failed")
            if die and die is not line:
                ev.append(die.evidence())
            yield Finding(
                "megatron-not-importable",
                "`import megatron.core` failed before training: Megatron-LM is not on the worker's Python path",
                tuple(ev),
                (Fix("image (Dockerfile ENV)", f"PYTHONPATH={facts.megatron_root}: an image built from this spec "
                     "sets it; a job environment that overrides PYTHONPATH must keep it"),
                 Fix("megatron.root", f"where the image holds Megatron-LM (now {facts.megatron_root})")),
                worker=w.index,
            )


HELPER_CAUSES = (
    # (pattern in make's output, cause, what is missing); seen in cpu-no-compiler, cpu-no-pybind11
    (r"make: (g\+\+|c\+\+|cc|gcc): (No such file or directory|[Cc]ommand not found)", "helper-build-no-compiler",
     "a C++ compiler (g++)"),
    (r"pybind11/pybind11\.h: No such file or directory|No module named pybind11", "helper-build-no-pybind11",
     "pybind11 (the Python package, for its headers)"),
    (r"Python\.h: No such file or directory", "helper-build-no-python-headers", "the Python headers (python3-dev)"),
    (r"make: (command )?not found|make: No such file", "helper-build-no-make", "make"),
)


@detector
def helper_build(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """Megatron's C++ dataset helper (megatron/core/datasets/Makefile) did not build."""
    for w in files.workers:
        lines = launch_lines(w)
        die = find(lines, r"launch\.sh: building Megatron's dataset helper failed")
        error = find(lines, r"^make: \*\*\* .*Error \d+")
        if not die and not error:
            continue
        for pattern, cause, missing in HELPER_CAUSES:
            line = find(lines, pattern)
            if line:
                break
        else:
            cause, missing, line = "helper-build-failed", "what make's output names", None
        ev = tuple(x.evidence() for x in (line, error, die) if x is not None)
        yield Finding(
            cause, f"Megatron's C++ dataset helper did not build: the image lacks {missing}", ev,
            (Fix("image.base", "an image with make, g++, the Python headers and pybind11 (the NGC PyTorch images "
                 f"have them); the job ran {facts.image or 'the spec image'}"),),
            worker=w.index,
        )


@detector
def gpu_count(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    # launch.sh's nvidia-smi check (cpu-gpu-count, gpu-too-many-gpus)
    for w in files.workers:
        lines = launch_lines(w)
        line = find(lines, r"launch\.sh: the spec asks for \d+ GPUs per worker, but nvidia-smi lists \d+")
        none = find(lines, r"launch\.sh: nvidia-smi failed")
        if line:
            m = re.search(r"lists (\d+)", line.text)
            seen = int(m.group(1)) if m else 0
            yield Finding(
                "gpu-count-mismatch",
                f"worker {w.index} has {seen} GPU(s), the spec asks for {facts.gpus_per_worker} per worker",
                (line.evidence(),),
                (Fix("resources.gpus_per_worker", f"{seen} (what the worker has), with parallelism that divides "
                     f"{seen * facts.workers} ranks" if seen else "a worker with GPUs"),
                 Fix("resources.worker_flavor", f"a flavor with {facts.gpus_per_worker} GPUs per worker")),
                worker=w.index,
            )
        elif none:
            yield Finding("no-gpu", f"nvidia-smi failed on worker {w.index}: it sees no GPU", (none.evidence(),),
                          (Fix("resources.worker_flavor", "a GPU flavor; the worker has no usable driver"),),
                          worker=w.index)


@detector
def launch_refusals(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """The launch command's other refusals: a run root already used, the platform's worker count, storage."""
    for w in files.workers:
        lines = launch_lines(w)
        reused = find(lines, r"launch\.sh: .*already exists: an earlier run used this run root")
        if reused:
            yield Finding(
                "run-root-reused",
                "a launch found an earlier run's train.log in this run root and refused to start: the results "
                "here are the earlier run's",
                (reused.evidence(),),
                (Fix("storage.run_root", "a directory of its own for this run (one directory per run)"),
                 Fix("training.resume", "true, only if this run is meant to continue the earlier one")),
                worker=w.index,
            )
        workers = find(lines, r"launch\.sh: the spec asks for \d+ workers, but the platform started")
        if workers:
            yield Finding("worker-count-mismatch", "the platform started another number of workers than the spec "
                          "asks for", (workers.evidence(),),
                          (Fix("resources.workers", "the job's worker count (job.json's is generated from it: "
                               "submit the regenerated job.json)"),), worker=w.index)
        storage = find(lines, r"launch\.sh: cannot create |Read-only file system|Permission denied")
        if storage:
            yield Finding("storage-not-writable", "the run root could not be written", (storage.evidence(),),
                          (Fix("storage.mount_path", "the shared storage the job mounts writable"),
                           Fix("storage.run_root", "a directory under it")), worker=w.index)
        commit = find(lines, r"MEGATRON_COMMIT is required")
        if commit:
            yield Finding("megatron-commit-unset", "the image does not set MEGATRON_COMMIT", (commit.evidence(),),
                          (Fix("image.tag", "an image built from this spec (its Dockerfile sets MEGATRON_COMMIT="
                               f"{facts.megatron_commit})"),), worker=w.index)


@detector
def launches_on_one_root(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """More than one launch on the run root of a spec that does not resume: the root is shared."""
    if facts.resume:
        return
    for w in files.workers:
        starts = find_all(launch_lines(w), r"^launch\.sh: started ")
        if len(starts) > 1 and not find(launch_lines(w), r"already exists: an earlier run used this run root"):
            yield Finding("run-root-reused", f"{len(starts)} launches used this run root; a run root holds one run",
                          tuple(s.evidence() for s in starts),
                          (Fix("storage.run_root", "a directory of its own for each run"),), worker=w.index)


@detector
def rendezvous(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    # torchrun's static rendezvous: "DistStoreError: Timed out after 21 seconds waiting for clients. 1/2
    # clients joined." (cpu-rendezvous-timeout); a worker that cannot reach the master: DistNetworkError
    for w in files.workers:
        lines = train_lines(w)
        line = find(lines, r"Timed out after \d+ seconds waiting for clients|RendezvousTimeoutError|"
                           r"DistNetworkError|Connection refused|Name or service not known|"
                           r"Socket Timeout|failed to connect to .*:\d+")
        if not line:
            continue
        m = re.search(r"(\d+)/(\d+) clients joined", line.text)
        joined = f" ({m.group(1)} of {m.group(2)} workers joined)" if m else ""
        missing = [o.index for o in files.workers if o.launch_log is None and o.train_log is None]
        who = f"; worker(s) {', '.join(map(str, missing))} left nothing in the run root" if missing else ""
        yield Finding(
            "rendezvous-timeout",
            f"multi-worker initialisation did not complete on worker {w.index}{joined}{who}",
            (line.evidence(),),
            (Fix("resources.workers", f"{facts.workers}: the platform must start exactly this many workers "
                 "(NNODES = WORLD_SIZE)"),
             Fix("platform: RANK / MASTER_ADDR / MASTER_PORT", "each worker a distinct RANK below the worker count, "
                 "all the same MASTER_ADDR (worker 0) and MASTER_PORT "
                 f"(default {facts.default_master_port}), reachable from every worker"),
             Fix("resources.gpus_per_worker", f"{facts.gpus_per_worker}: the same on every worker"),
             Fix("resources.rdma", "the network between the workers (RDMA) when the workers can reach each "
                 "other only through it")),
            worker=w.index,
        )


# torch's caching allocator message (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. Tried to
# allocate 62.50 GiB. GPU 0 has a total capacity of 139.81 GiB of which … is free. Including non-PyTorch
# memory, this process has 70.02 GiB memory in use. Of the allocated memory … is allocated by PyTorch, …"
OOM = re.compile(r"(?:CUDA out of memory|OutOfMemoryError).*?Tried to allocate ([0-9.]+) ([GMK]iB)"
                 r"(?:.*?total capacity of ([0-9.]+) GiB)?")
IN_USE = re.compile(r"this process has ([0-9.]+) ([GMK]iB) memory in use")


def _mib(value: str, unit: str) -> float:
    return float(value) * {"GiB": 1024.0, "MiB": 1.0, "KiB": 1 / 1024}[unit]


def cheapest_micro(facts: Facts, capacity_mb: float) -> int | None:
    """The largest micro batch below the spec's whose estimate fits 90% of the GPU and that divides the
    global batch per data-parallel rank; the estimate's activations scale with the micro batch."""
    if None in (facts.micro_batch, facts.global_batch, facts.estimate_peak_mb, facts.estimate_static_mb):
        return None
    micro, peak, static = facts.micro_batch, facts.estimate_peak_mb, facts.estimate_static_mb
    assert micro is not None and peak is not None and static is not None and facts.global_batch is not None
    per_micro = (peak - static) / micro
    for m in range(micro - 1, 0, -1):
        if facts.global_batch % (m * facts.data_parallel) == 0 and static + per_micro * m <= 0.9 * capacity_mb:
            return m
    return None


@detector
def out_of_memory(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    for w in files.workers:
        lines = train_lines(w)
        line = find(lines, r"CUDA out of memory|OutOfMemoryError")
        if not line:
            continue
        full = next((x for x in lines if x.number >= line.number and OOM.search(x.text)), line)
        m = OOM.search(full.text)
        capacity_gb = float(m.group(3)) if m and m.group(3) else facts.gpu_memory_gb
        parts = []
        if facts.estimate_peak_mb is not None:
            parts.append(f"the compiler's peak estimate is {facts.estimate_peak_mb / 1024:,.1f} GiB per GPU")
        if capacity_gb:
            parts.append(f"the GPU has {capacity_gb:,.1f} GiB")
        in_use = IN_USE.search(full.text)
        if m and in_use:
            needed = _mib(m.group(1), m.group(2)) + _mib(in_use.group(1), in_use.group(2))
            parts.append(f"the process held {in_use.group(1)} {in_use.group(2)} and asked for {m.group(1)} "
                         f"{m.group(2)} more: at least {needed / 1024:,.1f} GiB measured")
        elif m:
            parts.append(f"the allocation that failed asked for {m.group(1)} {m.group(2)}")
        fixes = []
        micro = cheapest_micro(facts, capacity_gb * 1024) if capacity_gb else None
        if micro is not None:
            fixes.append(Fix("training.batch.micro", str(micro), "the largest micro batch whose estimate fits 90% "
                             "of the GPU (more micro batches per step keep the global batch)"))
        fixes += [Fix("training.recompute", "granularity: full (recompute activations)"),
                  Fix("parallelism.tensor", f"more than {facts.tensor} (split the layers across GPUs)"),
                  Fix("resources.gpu_memory_gb", "the GPU's memory, so that the compile-time check "
                      "(memory-over-capacity) catches this before the job")]
        yield Finding("cuda-out-of-memory", "CUDA ran out of memory: " + "; ".join(parts),
                      (full.evidence(),), tuple(fixes), worker=w.index,
                      rank=full.rank if full.rank is not None else line.rank)


@detector
def bad_iterations(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """NaN/Inf losses, NaN iterations and skipped iterations in Megatron's iteration lines, and Megatron's
    NaN checks (rerun_state_machine: 'Unexpected result nan')."""
    w = last_rank_worker(files)
    first_bad = None
    for line in iteration_lines(w):
        loss = LOSS.search(line.text)
        bad = BAD.search(line.text)
        if (loss and loss.group(1).lower() in ("nan", "inf", "-inf")) or (bad and (bad.group(1) != "0" or bad.group(2) != "0")):
            first_bad = line
            break
    raised = None
    for x in files.workers:
        raised = find(train_lines(x), r"Unexpected result (nan|inf)|found NaN in|is NaN|loss is nan", re.I)
        if raised:
            break
    if not first_bad and not raised:
        return
    ev = tuple(e.evidence() for e in (first_bad, raised) if e is not None)
    lr = f" (now {facts.lr:g})" if facts.lr is not None else ""
    fixes = [Fix("training.optimizer.lr", f"a smaller learning rate{lr}: 1e-4 to 3e-4 is usual for GPT pretraining"),
             Fix("training.optimizer.clip_grad", "1.0 (clip the gradient norm)")]
    if facts.precision == "fp16":
        fixes.append(Fix("training.precision", "bf16 (fp16's range overflows; the loss scaler skips iterations)"))
    yield Finding("nan-loss", "the loss became NaN/Inf or iterations were skipped" +
                  (f" from iteration {ITERATION.search(first_bad.text).group(1)}" if first_bad else ""),  # type: ignore[union-attr]
                  ev, tuple(fixes), worker=w.index, rank=raised.rank if raised else None)


@detector
def weights_not_loaded(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """Meant to continue or start from a checkpoint, but the loss started where random weights start:
    ln(vocab). Megatron says so too (checkpointing.py:1342-1343 at 571370c8)."""
    if not facts.loads_weights:
        return
    w0, wl = files.workers[0], last_rank_worker(files)
    said = find(train_lines(w0), r"will not load any checkpoints and will start from random") or \
        find(train_lines(w0), r"could not find the metadata file")
    first = next(iter(iteration_lines(wl)), None)
    loss = LOSS.search(first.text) if first else None
    random_start = None
    if loss and facts.vocab_size and loss.group(1).lower() not in ("nan", "inf", "-inf"):
        value, expected = float(loss.group(1)), math.log(facts.vocab_size)
        if abs(value - expected) < 0.5:
            random_start = (first, value, expected)
    if not said and not random_start:
        return
    parts = []
    if random_start:
        parts.append(f"the first loss {random_start[1]:.2f} is ln(vocab {facts.vocab_size}) = {random_start[2]:.2f}, "
                     "a random model's")
    if said:
        parts.append("Megatron found no checkpoint to load")
    ev = tuple(e.evidence() for e in (said, random_start[0] if random_start else None) if e is not None)
    yield Finding("weights-not-loaded", "weights were meant to be loaded, but training started from random: "
                  + "; ".join(parts), ev,
                  (Fix("storage.run_root", "the run root of the run to continue (its ckpt/ holds "
                       "latest_checkpointed_iteration.txt)"),
                   Fix("training.resume", "false, if this run is meant to start fresh")),
                  worker=w0.index)


NCCL = re.compile(r"NCCL error|ncclInvalidUsage|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|"
                  r"ncclRemoteError|DistBackendError|Watchdog caught collective operation timeout|"
                  r"ProcessGroupNCCL.*(?:timeout|Timeout|timed out)")


@detector
def nccl(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    hits = []
    for w in files.workers:
        line = next((x for x in train_lines(w) if NCCL.search(x.text)), None)
        if line:
            hits.append((w, line))
    if not hits:
        return
    w, line = hits[0]
    detail = next((x for x in train_lines(w) if x.number >= line.number and
                   re.search(r"Last error|Duplicate GPU|timeout|Timeout", x.text)), line)
    fixes = []
    if "Duplicate GPU" in detail.text or "Duplicate GPU" in line.text:
        fixes.append(Fix("resources.gpus_per_worker", f"{facts.gpus_per_worker}: each rank needs a GPU of its "
                         "own; two ranks share one (check CUDA_VISIBLE_DEVICES and the worker flavor)"))
    fixes += [Fix("training.env", "NCCL_DEBUG: INFO (NCCL says which transport and peer failed)"),
              Fix("resources.rdma", "the inter-worker network (RDMA) the workers need")]
    rank = line.rank if line.rank is not None else detail.rank
    yield Finding("nccl-error", f"NCCL failed first on worker {w.index}" + (f", rank {rank}" if rank is not None else ""),
                  tuple(dict.fromkeys((line.evidence(), detail.evidence()))), tuple(fixes),
                  worker=w.index, rank=rank)


@detector
def cuda_device(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    # torch.cuda.set_device(local_rank) on a worker with fewer GPUs (megatron/training/initialize.py:262)
    for w in files.workers:
        line = find(train_lines(w), r"invalid device ordinal|CUDA error: no CUDA-capable device|"
                                    r"No CUDA GPUs are available|CUDA driver initialization failed")
        if line:
            yield Finding(
                "cuda-device-error",
                f"the processes on worker {w.index} exited during initialisation: a rank asked for a GPU the "
                "worker does not have", (line.evidence(),),
                (Fix("resources.gpus_per_worker", f"the GPUs the worker really has (the spec says "
                     f"{facts.gpus_per_worker}; torchrun starts one process per GPU it is told of)"),
                 Fix("parallelism.tensor", f"a size that divides the {facts.world_size} processes "
                     f"(now {facts.tensor})")),
                worker=w.index, rank=line.rank,
            )


ROOT_CAUSE = re.compile(r"^Root Cause \(first observed failure\):")


def _root_cause(lines: list[Line]) -> dict[str, Line]:
    """torchrun's ChildFailedError report: the first observed failure's fields."""
    fields: dict[str, Line] = {}
    start = next((i for i, x in enumerate(lines) if ROOT_CAUSE.search(x.text)), None)
    if start is None:
        return fields
    for x in lines[start + 1:start + 12]:
        m = re.match(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*: (.*)$", x.text)
        if m:
            fields[m.group(1)] = x
        elif x.text.startswith("====="):
            break
    return fields


def _last_line(lines: list[Line]) -> tuple[Evidence, ...]:
    """Where a log stops: its last non-blank line."""
    last = next((x for x in reversed(lines) if x.text.strip()), None)
    return (last.evidence(),) if last else ()


@detector
def killed_or_crashed(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """Exit records and torchrun's failure report: killed from outside (SIGTERM/SIGKILL) or a crash."""
    for w in files.workers:
        code = exit_code(w)
        lines = train_lines(w)
        started = find(launch_lines(w), r"^launch\.sh: torchrun starts")
        if code in (143, 129, 130):
            sig = {143: "SIGTERM", 129: "SIGHUP", 130: "SIGINT"}[code]
            last = iteration_lines(last_rank_worker(files))
            where = f"; the last logged iteration was {ITERATION.search(last[-1].text).group(1)}" if last else ""  # type: ignore[union-attr]
            yield Finding(
                "killed-sigterm" if code == 143 else "killed-signal",
                f"worker {w.index}'s launch command was stopped from outside by {sig} (a job stop or time limit), "
                f"not a crash{where}", (Evidence(w.path("exit_status"), 1, str(code)),) + _last_line(lines),
                (Fix("platform: job time limit", "longer than the run, or"),
                 Fix("training.checkpoint.save_interval", "small enough that a checkpoint lands before the limit; "
                     "with training.checkpoint.resume a restarted job continues")),
                worker=w.index,
            )
            continue
        if code is None and started:
            yield Finding(
                "killed-sigkill",
                f"worker {w.index} has no exit record although torchrun started: its launch command was killed "
                "with SIGKILL while torchrun ran (or the machine was lost; or it is still running)",
                (Evidence(w.path("exit_status"), 0, "(absent)"), started.evidence()) + _last_line(lines),
                (Fix("platform: job time limit / memory", "the job's time limit and host memory (SIGKILL comes "
                     "from outside: the platform, or the host's out-of-memory killer)"),
                 Fix("training.checkpoint.save_interval", "small enough that a checkpoint lands before the limit")),
                worker=w.index,
            )
            continue
        root = _root_cause(lines)
        if code not in (None, 0) and root:
            rank_line = root.get("rank")
            m = re.match(r"\s*rank\s*: (\d+)", rank_line.text) if rank_line else None
            rank = int(m.group(1)) if m else None
            exc = None
            if rank is not None:
                exc = next((x for x in reversed(lines) if x.rank == rank and
                            re.search(r"^\[rank\d+\]: \w[\w.]*(Error|Exception|Interrupt)\b", x.text)), None)
            ev = [root[k].evidence() for k in ("rank", "exitcode") if k in root]
            if exc:
                ev.insert(0, exc.evidence())
            exitcode = root["exitcode"].text if "exitcode" in root else ""
            signal = "SIGKILL" if ": -9" in exitcode else ("SIGTERM" if ": -15" in exitcode else None)
            summary = (f"rank {rank} on worker {w.index} failed first" +
                       (f": {exc.text.split(': ', 1)[1]}" if exc else "") +
                       (f" (killed by {signal}: the host's out-of-memory killer or the platform)" if signal else ""))
            yield Finding("rank-crashed", summary, tuple(ev),
                          (Fix("(the exception)", "the traceback above the quoted line names the failing call"),),
                          worker=w.index, rank=rank)


@detector
def runtime_record(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """runtime.txt against the spec: the Megatron commit the image carries, the GPUs torch saw."""
    for w in files.workers:
        commit = runtime_value(w, "megatron_commit")
        if commit and facts.megatron_commit and commit.text.split(": ", 1)[1] != facts.megatron_commit:
            found = commit.text.split(": ", 1)[1]
            yield Finding(
                "wrong-megatron-commit",
                f"the image carries Megatron-LM {found[:12]}, the spec pins {facts.megatron_commit[:12]}",
                (commit.evidence(),),
                (Fix("image.tag", f"an image built from this spec at megatron.commit {facts.megatron_commit} "
                     "(rebuild and push it: buildx.sh or regctl.sh), or"),
                 Fix("megatron.commit", f"{found}, if that commit is the one meant")),
                worker=w.index,
            )
        gpus = runtime_value(w, "gpu_count")
        if gpus and gpus.text.split(": ", 1)[1].strip().isdigit() and \
                int(gpus.text.split(": ", 1)[1]) != facts.gpus_per_worker:
            yield Finding("runtime-gpu-count", f"torch saw {gpus.text.split(': ', 1)[1]} GPU(s) on worker {w.index}, "
                          f"the spec asks for {facts.gpus_per_worker}", (gpus.evidence(),),
                          (Fix("resources.gpus_per_worker", "the GPUs the worker has"),), worker=w.index)


@detector
def arguments_dump(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """Megatron's arguments dump (rank 0) against the spec: another run's log in this run root."""
    if not facts.is_pretrain:
        return
    w = files.workers[0]
    line = find(train_lines(w), r"^  world_size \.+ (\d+)$")
    if line and int(line.text.rsplit(" ", 1)[1]) != facts.world_size:
        yield Finding("run-root-reused", f"the log in this run root is of a run with another world size "
                      f"({line.text.rsplit(' ', 1)[1]}, the spec: {facts.world_size}): another run used this run root",
                      (line.evidence(),), (Fix("storage.run_root", "a directory of its own for this run"),),
                      worker=w.index)


@detector
def incomplete(files: RunFiles, facts: Facts) -> Iterator[Finding]:
    """The job looks successful but the logs are not complete, or the checkpoint did not persist."""
    codes = [exit_code(w) for w in files.workers]
    if any(c != 0 for c in codes):
        return
    if facts.is_pretrain and facts.train_iters:
        w = last_rank_worker(files)
        its = iteration_lines(w)
        last = int(ITERATION.search(its[-1].text).group(1)) if its else None  # type: ignore[union-attr]
        if last is None or last < facts.train_iters:
            ev = its[-1].evidence() if its else Evidence(w.path("train.log"), 0, "no iteration line")
            yield Finding("logs-incomplete", f"every worker recorded exit status 0, but worker {w.index}'s log "
                          f"(the last rank's) ends at iteration {last}, not {facts.train_iters}", (ev,),
                          (Fix("launch command", "the generated launch.sh unmodified: it keeps torchrun's exit "
                               "status and waits for the log"),), worker=w.index)
            return
        wanted = f"iter_{facts.train_iters:07d}/"
        if not any(p.startswith(wanted) for p in files.checkpoint_files):
            yield Finding("checkpoint-missing", f"training finished, but ckpt/{wanted} is not in the run root: the "
                          "checkpoint did not persist where verify.sh reads it",
                          (Evidence("ckpt/", 0, f"(no {wanted})"),),
                          (Fix("storage.mount_path", "shared storage mounted writable on every worker (not the "
                               "image's own filesystem)"),
                           Fix("storage.run_root", "one directory per run under the mount path")))


# --- the diagnosis -----------------------------------------------------------------------------

# The order findings are reported in: what stops a run earliest (and explains the rest) first.
ORDER = ("worker-never-started", "megatron-missing", "megatron-commit-unset", "storage-not-writable",
         "worker-count-mismatch", "gpu-count-mismatch", "no-gpu", "run-root-reused", "helper-build-no-compiler",
         "helper-build-no-pybind11", "helper-build-no-python-headers", "helper-build-no-make",
         "helper-build-failed", "megatron-not-importable", "rendezvous-timeout", "cuda-device-error",
         "cuda-out-of-memory", "nccl-error", "nan-loss", "killed-sigterm", "killed-signal", "killed-sigkill",
         "rank-crashed", "weights-not-loaded", "wrong-megatron-commit", "runtime-gpu-count", "logs-incomplete",
         "checkpoint-missing")

ERRORISH = re.compile(r"Error|Exception|Traceback|FAILED|fatal|Killed|No such file|not found|refused|"
                      r"launch\.sh: (?!started|torchrun)", re.I)
NOT_ERROR = re.compile(r"Warning|warnings\.warn|UserWarning|FutureWarning|DeprecationWarning")


def first_error_lines(files: RunFiles) -> list[Line]:
    """For an unknown failure: the first error-looking line of each worker's logs."""
    out = []
    for w in files.workers:
        for lines in (launch_lines(w), train_lines(w)):
            line = next((x for x in lines if ERRORISH.search(x.text) and not NOT_ERROR.search(x.text)), None)
            if line:
                out.append(line)
                break
    return out


def diagnose(files: RunFiles, facts: Facts) -> list[Finding]:
    """Every finding, most fundamental first; an unknown failure when the run failed and none explains it."""
    found = [f for detect in DETECTORS for f in detect(files, facts) if f is not None]
    found.sort(key=lambda f: (ORDER.index(f.cause) if f.cause in ORDER else len(ORDER),
                              f.worker if f.worker is not None else -1))
    unique: list[Finding] = []
    for f in found:
        if not any(u.cause == f.cause and u.worker == f.worker for u in unique):
            unique.append(f)
    failed = any(exit_code(w) != 0 for w in files.workers)
    if failed and not unique:
        lines = first_error_lines(files)
        unique.append(Finding(
            "unknown", "the run failed and no known failure explains it; the first error-looking line of each "
            "worker's logs follows", tuple(x.evidence() for x in lines),
            (Fix("(none known)", "read the quoted lines and the logs around them"),)))
    return unique
