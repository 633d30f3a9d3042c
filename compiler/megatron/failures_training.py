"""Detectors of what goes wrong once training runs: out of memory, bad iterations, weights not loaded,
NCCL and CUDA errors, runs killed or crashed, a runtime record or log that is not the spec's, and
logs or checkpoints that are incomplete.

Every pattern here was seen in a real run of a generated launch command (tests/fixtures/failed-runs);
each names the fixture that shows it.
"""

from __future__ import annotations

import math
import re
from typing import Iterator

from .failures_logs import (
    BAD, LOSS, Detector, Evidence, DoctorFacts, Finding, Fix, Line, RunFiles, exit_code, find, first_match,
    first_possible, iteration_lines, iteration_of, last_rank_worker, launch_lines, registry, runtime_value, to_float,
    to_int, train_lines,
)
from . import failures_causes
from .runfiles import RUN_CHECKPOINT_DIR

DETECTORS: list[Detector] = []
detector = registry(DETECTORS)


# torch's caching allocator message (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. Tried to
# allocate 62.50 GiB. GPU 0 has a total capacity of 139.81 GiB of which … is free. Including non-PyTorch
# memory, this process has 70.02 GiB memory in use. Of the allocated memory … is allocated by PyTorch, …"
# (`^(?>.*?A).*?B` is `A.*?B` in linear time: failures_causes.SHAPE says why.)
OOM = re.compile(r"^(?>.*?(?:CUDA out of memory|OutOfMemoryError)).*?Tried to allocate ([0-9.]+) ([GMK]iB)"
                 r"(?:.*?total capacity of ([0-9.]+) GiB)?")
IN_USE = re.compile(r"this process has ([0-9.]+) ([GMK]iB) memory in use")


def _mib(value: str, unit: str) -> float | None:
    number = to_float(value)
    return None if number is None else number * {"GiB": 1024.0, "MiB": 1.0, "KiB": 1 / 1024}[unit]


def cheapest_micro(facts: DoctorFacts, capacity_mb: float) -> int | None:
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
def out_of_memory(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    for w in files.workers:
        lines = train_lines(w)
        line = find(lines, r"CUDA out of memory|OutOfMemoryError")
        if not line:
            continue
        full = next((x for x in lines if x.number >= line.number and OOM.search(x.text)), line)
        m = OOM.search(full.text)
        capacity_gb = to_float(m.group(3)) if m and m.group(3) else None
        if capacity_gb is None:  # not logged, or not a number read as one
            capacity_gb = facts.gpu_memory_gb
        parts = []
        if facts.estimate_peak_mb is not None:
            parts.append(f"the compiler's peak estimate is {facts.estimate_peak_mb / 1024:,.1f} GiB per GPU")
        if capacity_gb:
            parts.append(f"the GPU has {capacity_gb:,.1f} GiB")
        in_use = IN_USE.search(full.text)
        asked, held = (_mib(m.group(1), m.group(2)), _mib(in_use.group(1), in_use.group(2))) if m and in_use \
            else (None, None)
        if m and in_use and asked is not None and held is not None:
            needed = asked + held
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
def bad_iterations(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """NaN/Inf losses, NaN iterations and skipped iterations in Megatron's iteration lines, and Megatron's
    NaN checks (rerun_state_machine: 'Unexpected result nan'). Under fp16 a skipped iteration is the
    loss scaler lowering its scale from 2^32 (DynamicGradScaler), not a failure; a run in which it
    skipped every iteration never updated the weights, which is (`fp16-no-step`)."""
    w = last_rank_worker(files)
    fp16 = facts.precision == "fp16"
    first_bad = None
    logged, stepped, previous = None, False, 0
    for line in iteration_lines(w):
        loss = LOSS.search(line.text)
        bad = BAD.search(line.text)
        if bad and (to_int(bad.group(1)) is None or to_int(bad.group(2)) is None):
            bad = None  # counts that are not numbers read as such: not Megatron's line
        iteration = iteration_of(line) or 0  # an iteration line's: read (iteration_lines)
        nan_loss = bool(loss and loss.group(1).lower() in ("nan", "inf", "-inf"))
        if bad:
            logged = line
            stepped = stepped or (to_int(bad.group(1)) or 0) < iteration - previous
        previous = iteration
        skipped = bool(bad and bad.group(1) != "0")
        if nan_loss or (bad and bad.group(2) != "0") or (skipped and not fp16):
            first_bad = line
            break
    raised = None
    for x in files.workers:
        raised = find(train_lines(x), r"Unexpected result (nan|inf)|found NaN in|is NaN|loss is nan", re.I)
        if raised:
            break
    if fp16 and not first_bad and not raised and logged is not None and not stepped:
        scale = re.search(r"loss scale: ([0-9.]+)", logged.text)
        value = to_float(scale.group(1)) if scale else None
        yield Finding("fp16-no-step", "fp16's loss scaler skipped every logged iteration" +
                      (f" (the scale is down to {value:.0f})" if value is not None else "") +
                      ": no step updated the weights",
                      (logged.evidence(),),
                      (Fix("training.train_iters", "more iterations: the scaler halves its scale from 2^32 at each "
                           "overflow before steps are taken"),
                       Fix("training.precision", "bf16 (no loss scaling)")),
                      worker=w.index)
        return
    if not first_bad and not raised:
        return
    ev = tuple(e.evidence() for e in (first_bad, raised) if e is not None)
    lr = f" (now {facts.lr:g})" if facts.lr is not None else ""
    fixes = [Fix("training.optimizer.lr", f"a smaller learning rate{lr}: 1e-4 to 3e-4 is usual for GPT pretraining"),
             Fix("training.optimizer.clip_grad", "1.0 (clip the gradient norm)")]
    if fp16:
        fixes.append(Fix("training.precision", "bf16 (fp16's range overflows)"))
    yield Finding("nan-loss", "the loss became NaN/Inf or iterations were skipped" +
                  (f" from iteration {iteration_of(first_bad)}" if first_bad else ""),
                  ev, tuple(fixes), worker=w.index, rank=raised.rank if raised else None)


@detector
def weights_not_loaded(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
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
    value = to_float(loss.group(1)) if loss else None
    if value is not None and facts.vocab_size and facts.vocab_size > 0:
        expected = math.log(facts.vocab_size)
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
                  r"^(?>.*?ProcessGroupNCCL).*(?:timeout|Timeout|timed out)")


COLLECTIVE_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|ran for [0-9]+ milliseconds before timing out")
DUPLICATE_GPU = re.compile(r"Duplicate GPU detected : rank \d+ and rank \d+ both on CUDA device \w+")


@detector
def nccl(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    hits = []
    for w in files.workers:
        line = first_match(train_lines(w), NCCL, unless=COLLECTIVE_TIMEOUT)
        if line:
            hits.append((w, line))
    if not hits:
        return
    w, line = hits[0]
    after = [x for x in train_lines(w) if x.number >= line.number]
    # NCCL's own reason follows its "Last error:" line; a duplicate GPU is named there outright
    duplicate = next((x for x in after if DUPLICATE_GPU.search(x.text)), None)
    detail = duplicate or next((x for x in after if re.search(r"Last error|timeout|Timeout", x.text)), line)
    rank = line.rank if line.rank is not None else detail.rank
    where = f"worker {w.index}" + (f", rank {rank}" if rank is not None else "")
    if duplicate is not None:
        # two ranks on one GPU: not the network, and NCCL already said why
        shared = DUPLICATE_GPU.search(duplicate.text)
        assert shared is not None
        if facts.gpus_per_worker and facts.gpus_per_worker > 1:  # ranks of one worker on one GPU
            fixes: tuple[Fix, ...] = (Fix("resources.gpus_per_worker", f"{facts.gpus_per_worker}: the GPUs each "
                                          "worker really has, one per rank (check CUDA_VISIBLE_DEVICES)"),)
        else:  # one GPU per worker: two workers were given the same GPU
            fixes = (Fix("resources.worker_flavor", "a flavor whose workers each get a GPU of their own: two "
                         "workers' ranks were given one device (check CUDA_VISIBLE_DEVICES on the workers)"),)
        message = f"two ranks share one GPU ({shared.group(0)}): NCCL failed on {where}"
    else:
        fixes = (Fix("training.env", "NCCL_DEBUG: INFO (NCCL says which transport and peer failed)"),
                 Fix("resources.rdma", "the inter-worker network (RDMA) the workers need"))
        message = f"NCCL failed first on {where}"
    quoted = (detail, line) if duplicate is not None else (line, detail)  # what names the cause first
    yield Finding("nccl-error", message, tuple(dict.fromkeys(x.evidence() for x in quoted)), fixes,
                  worker=w.index, rank=rank)


@detector
def cuda_device(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
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
    begin = first_possible(lines, ROOT_CAUSE)
    start = next((i for i, x in enumerate(lines[begin:], begin) if ROOT_CAUSE.search(x.text)), None)
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
def killed_or_crashed(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """Exit records and torchrun's failure report: killed from outside (SIGTERM/SIGKILL) or a crash."""
    for w in files.workers:
        code = exit_code(w)
        lines = train_lines(w)
        started = find(launch_lines(w), r"^launch\.sh: torchrun starts")
        saved = failures_causes.stopped_saved(w, code, _last_line(lines))
        if saved is not None:
            yield saved
            continue
        if code not in (0, None) or (code is None and started):
            hang = failures_causes.dataset_hang(files, facts)  # stopped (killed, timed out) in the index build
            if hang is not None:
                yield hang
        if code in (143, 129, 130, 137) or (code is None and started):
            done = failures_causes.killed_after_training(files, facts, w.index)
            if done is not None:
                yield done
                continue
        if code in (143, 129, 130):
            sig = {143: "SIGTERM", 129: "SIGHUP", 130: "SIGINT"}[code]
            last = iteration_lines(last_rank_worker(files))
            where = f"; the last logged iteration was {iteration_of(last[-1])}" if last else ""
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
                (Evidence(w.path("exit_status"), 0, (w.exit_status or "").strip() or "(absent)"), started.evidence()) + _last_line(lines),
                (Fix("platform: job time limit / memory", "the job's time limit and host memory (SIGKILL comes "
                     "from outside: the platform, or the host's out-of-memory killer)"),
                 Fix("training.checkpoint.save_interval", "small enough that a checkpoint lands before the limit")),
                worker=w.index,
            )
            continue
        root = _root_cause(lines)
        if code not in (None, 0) and root:
            rank_line = root.get("rank")
            m = re.match(r"\s*rank\s*: ([0-9]+)", rank_line.text) if rank_line else None
            rank = to_int(m.group(1)) if m else None
            exc = None
            if rank is not None:
                raised = [x for x in lines if x.rank == rank and
                          re.search(r"^\[rank\d+\]: \w[\w.]*(Error|Exception|Interrupt)\b", x.text)]
                own = [x for x in raised if not re.search(r"DistBackendError|NCCL|Watchdog", x.text)]
                exc = own[0] if own else (raised[-1] if raised else None)
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
def runtime_record(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """runtime.txt against the spec: the Megatron commit the image carries, the GPUs torch saw."""
    for w in files.workers:
        commit = runtime_value(w, "megatron_commit")
        if commit and facts.megatron_commit and (found := commit.text.split(": ", 1)[1]) != facts.megatron_commit:
            yield Finding("wrong-megatron-commit", f"the image carries Megatron-LM {found[:12]}, the spec pins "
                          f"{facts.megatron_commit[:12]}", (commit.evidence(),),
                          (Fix("image.tag", f"an image built from this spec at megatron.commit {facts.megatron_commit} "
                               "(rebuild and push it: buildx.sh or regctl.sh), or"),
                           Fix("megatron.commit", f"{found}, if that commit is the one meant")), worker=w.index)
        gpus = runtime_value(w, "gpu_count")
        if gpus and (seen := to_int(gpus.text.split(": ", 1)[1])) is not None and seen != facts.gpus_per_worker:
            yield Finding("runtime-gpu-count", f"torch saw {seen} GPU(s) on worker {w.index}, the spec asks for "
                          f"{facts.gpus_per_worker}", (gpus.evidence(),),
                          (Fix("resources.gpus_per_worker", "the GPUs the worker has"),), worker=w.index)


@detector
def arguments_dump(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """Megatron's arguments dump (rank 0) against the spec: another run's log in this run root."""
    if not facts.is_pretrain:
        return
    w = files.workers[0]
    line = find(train_lines(w), r"^  world_size \.+ ([0-9]+)$")
    size = to_int(line.text.rsplit(" ", 1)[1]) if line else None
    if line and size is not None and size != facts.world_size:
        yield Finding("run-root-reused", f"the log in this run root is of a run with another world size "
                      f"({line.text.rsplit(' ', 1)[1]}, the spec: {facts.world_size}): another run used this run root",
                      (line.evidence(),), (Fix("storage.run_root", "a directory of its own for this run"),),
                      worker=w.index)


@detector
def incomplete(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """The job looks successful but the logs are not complete, or the checkpoint did not persist."""
    codes = [exit_code(w) for w in files.workers]
    if any(c != 0 for c in codes):
        return
    if facts.is_pretrain and facts.train_iters:
        w = last_rank_worker(files)
        its = iteration_lines(w)
        last = iteration_of(its[-1]) if its else None
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
                          (Evidence(RUN_CHECKPOINT_DIR + "/", 0, f"(no {wanted})"),),
                          (Fix("storage.mount_path", "shared storage mounted writable on every worker (not the "
                               "image's own filesystem)"),
                           Fix("storage.run_root", "one directory per run under the mount path")))
