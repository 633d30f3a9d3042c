"""Detectors of failures that other lines only echo: a checkpoint of another model, data never
prepared, token ids beyond the vocabulary, a dataset index that never finishes, a run killed after
training completed, a worker that vanished, a collective that timed out, a run that never started.

Each names the cause in the spec's terms. The NCCL watchdog's errors that follow a rank's crash or a
worker's death are consequences: failures.py orders these causes before `nccl-error`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice
from typing import Any, Iterator

from .failures_logs import (
    Detector, Evidence, DoctorFacts, Finding, Fix, Line, RunFiles, WorkerFiles, exit_code, exit_field, find,
    first_possible, iteration_lines, iteration_of, joined_text, last_rank_worker, launch_lines, registry, to_int,
    train_lines,
)
from .kernels import NEEDS
from .runfiles import RUN_CHECKPOINT_DIR
from .validate import dests_read, refusal_statements

DETECTORS: list[Detector] = []
detector = registry(DETECTORS)


@detector
def never_started(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """A run root with nothing a launch writes: the job never started (or not with this run root)."""
    if files.checkpoint_files or any(
            x is not None for w in files.workers for x in (w.launch_log, w.train_log, w.exit_status, w.runtime)):
        return
    yield Finding(
        "never-started", f"the run root holds nothing a launch writes: the job never started with run root "
        f"{files.root}", (Evidence("launch.log", 0, "(absent, as is every other file of the run)"),),
        (Fix("storage.run_root", "the run root the job writes (the launch command's RUN_ROOT), if this is not it"),
         Fix("platform: the job's status and events", "whether it was scheduled and its container started "
             "(image pull, quota, queue)")))


# megatron/core/dist_checkpointing/strategies/torch.py:510-515 (CheckpointingException), and the
# missing/unexpected keys of a checkpoint of another architecture.
# `^(?>.*?A).*B` is `A.*B` searched in linear time: it looks for B after the line's first A only (B after a
# later A is after the first too), where `A.*B` tries again from every A, quadratic in a hostile line.
SHAPE = re.compile(r"^(?>.*?Global shape mismatch for loaded \()(?>(.*?)\) and expected \()(.*?)\) tensor for key (\S+)")
CKPT_MISMATCH = re.compile(r"Global shape mismatch for loaded|^(?>.*?CheckpointingException: ).*(?:mismatch|not in "
                           r"state dict|[Mm]issing key)|from model not in state dict|size mismatch for ")
# which model field a tensor's shape depends on (Megatron's GPT parameter names)
KEY_FIELDS = (
    (r"word_embeddings|output_layer", ("hidden_size", "vocab_size", "make_vocab_size_divisible_by")),
    (r"position_embeddings", ("max_position_embeddings", "hidden_size")),
    (r"linear_qkv|linear_proj|self_attention", ("hidden_size", "num_attention_heads", "num_query_groups")),
    (r"linear_fc1|linear_fc2|mlp|experts", ("ffn_hidden_size", "hidden_size", "swiglu", "num_experts")),
    (r"layernorm|norm", ("hidden_size", "normalization")),
)


def _dims(text: str) -> list[int] | None:
    """torch.Size([4096, 256]) or (4096, 512) -> [4096, 256]; None when a dimension is not a number read as one."""
    dims = [to_int(x) for x in re.findall(r"[0-9]+", text)]
    return None if None in dims else [d for d in dims if d is not None]


@detector
def checkpoint_mismatch(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    for w in files.workers:
        line = find(train_lines(w), CKPT_MISMATCH.pattern)
        if not line:
            continue
        m = SHAPE.search(line.text)
        fields: tuple[str, ...] = ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size")
        detail = ""
        loaded, expected = (_dims(m.group(1)), _dims(m.group(2))) if m else (None, None)
        if m and loaded is not None and expected is not None:
            key = m.group(3)
            fields = next((f for pattern, f in KEY_FIELDS if re.search(pattern, key)), fields)
            detail = f": {key} is {tuple(loaded)} in the checkpoint, {tuple(expected)} in the spec's model"
            # the spec's fields whose value is a dimension that differs: what changed since the save
            changed = [(name, value, old) for new, old in zip(expected, loaded) if new != old
                       for name, value in facts.model if value == new]
            if changed:
                fields = tuple(dict.fromkeys(name for name, _, _ in changed))
                detail += "; " + ", ".join(f"training.model.{n} is {v} in the spec, {o} in the checkpoint"
                                           for n, v, o in changed)
        yield Finding(
            "checkpoint-model-mismatch",
            "the checkpoint being loaded is of another model than the spec's" + detail,
            (line.evidence(),),
            (Fix(f"training.model.{fields[0]}" if len(fields) == 1 else "training.model",
                 "the checkpoint's architecture: " + ", ".join(f"training.model.{f}" for f in fields)
                 + " as in the run that saved it (its train.log's arguments dump lists them)"),
             Fix("storage.run_root", "a new run root, to train this model from scratch instead of resuming"),
             Fix("training.resume", "false, with its own storage.run_root, if this run is not meant to continue "
                 "the checkpoint there")),
            worker=w.index, rank=line.rank)
        return


# launch.sh's data check before torchrun (templates/launch.sh.j2), and Megatron's own refusal
# (megatron/core/datasets/indexed_dataset.py:712-715).
NOT_PREPARED = re.compile(r"^(?>.*?launch\.sh: the data prefix ).* (?:has no|is missing)|One or both of the \.idx "
                          r"and \.bin files cannot be found at the path prefix")
MANIFEST = re.compile(r"^(?>.*?launch\.sh: the data prefix ).* was prepared with ")


@detector
def data_not_prepared(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    for w in files.workers:
        line = find(launch_lines(w), NOT_PREPARED.pattern) or find(train_lines(w), NOT_PREPARED.pattern)
        if line:
            prefix = re.search(r"prefix (\S+)", line.text)
            yield Finding(
                "data-not-prepared", "the training data was never prepared: "
                + (f"{prefix.group(1).rstrip(':,')} has no .bin/.idx" if prefix else "a data prefix has no .bin/.idx"),
                (line.evidence(),),
                (Fix("training.data.prepare", "run the preparation job first (prepare.sh, job-prepare.json), "
                     "then this one"),
                 Fix("training.data.paths", "prefixes whose .bin and .idx exist on the storage (a prefix, not "
                     "the file name)")),
                worker=w.index, rank=line.rank)
            return
        wrong = find(launch_lines(w), MANIFEST.pattern)
        if wrong:
            yield Finding(
                "data-manifest-mismatch", "the data was prepared with another tokenizer or vocabulary than the "
                "spec's", (wrong.evidence(),),
                (Fix("training.data.tokenizer", "the tokenizer the data was prepared with (the prefix's "
                     ".manifest names it), or prepare the data again with this one"),
                 Fix("training.model.vocab_size", "at least the vocabulary the data's token ids need")),
                worker=w.index)
            return


# A token id at or beyond the embedding's rows: CUDA's index assert in the embedding gather
# (aten/src/ATen/native/cuda/Indexing.cu), "device-side assert triggered", then the NCCL watchdog.
INDEX_ASSERT = re.compile(r"indexSelect\w{0,256}Index|Assertion `srcIndex < srcSelectDimSize` failed|"
                          r"index out of bounds|vectorized_gather_kernel|^(?>.*?Indexing\.cu).*Assertion|"
                          r"^(?>.*?IndexKernel\.cu).*Assertion|index \d+ is out of bounds")
DEVICE_ASSERT = re.compile(r"device-side assert triggered|CUDA error: device-side assert")


@detector
def token_beyond_vocab(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    for w in files.workers:
        lines = train_lines(w)
        index = find(lines, INDEX_ASSERT.pattern)
        device = find(lines, DEVICE_ASSERT.pattern)
        if not index and not device:
            continue
        if index:
            vocab = f" {facts.vocab_size}" if facts.vocab_size else " unset"
            yield Finding(
                "token-beyond-vocab", "a token id of the data is beyond the model's vocabulary: the embedding's "
                "index assert fired on the GPU (the NCCL errors after it are its consequence)",
                tuple(x.evidence() for x in (index, device) if x is not None),
                (Fix("training.model.vocab_size", f"the vocabulary of the tokenizer that prepared the data: above its "
                     f"largest token id (now{vocab})"),
                 Fix("training.data.tokenizer", "the tokenizer the data was prepared with (or prepare the data "
                     "again with the spec's)")),
                worker=w.index, rank=(index.rank if index.rank is not None else (device.rank if device else None)))
        else:
            assert device is not None
            yield Finding(
                "cuda-device-assert", "a CUDA kernel's assert fired on the GPU (the NCCL errors after it are its "
                "consequence)", (device.evidence(),),
                (Fix("training.env", "CUDA_LAUNCH_BLOCKING: '1', to see the kernel and the call that fired it"),),
                worker=w.index, rank=device.rank)
        return


# megatron/core/datasets/gpt_dataset.py:449 logs "Build and save the GPTDataset <split> indices";
# a split part with no document loops forever in _get_num_epochs (gpt_dataset.py:634-636).
BUILD = re.compile(r"Build and save the (\w+) (train|valid|test|validation) indices")
DATASETS_DONE = re.compile(r"^(?>.*?> finished creating ).*datasets")
SPLIT_PART = {"train": 0, "valid": 1, "validation": 1, "test": 2}


def dataset_hang(files: RunFiles, facts: DoctorFacts) -> Finding | None:
    """The run stopped (killed) while building a dataset's indices: the part of the split it built."""
    w = files.workers[0]
    lines = train_lines(w)
    builds = [x for x in islice(lines, first_possible(lines, BUILD), None) if BUILD.search(x.text)]
    if not builds or find(lines, DATASETS_DONE.pattern) or any(iteration_lines(x) for x in files.workers):
        return None
    last = builds[-1]
    part = BUILD.search(last.text).group(2)  # type: ignore[union-attr]
    split = facts.split or "969,30,1 (Megatron's default)"
    shares = (facts.split or "969,30,1").split(",")
    share = shares[SPLIT_PART[part]] if SPLIT_PART[part] < len(shares) else "0"
    fixes = [Fix("training.data.split", f"shares that give the {part} part at least one document of the data "
                 f"(now {split}; its {part} share is {share}), or 0 for a part the run does not need")]
    if part != "train":
        fixes.append(Fix("training.eval.iters", "0, if the run needs no evaluation (no valid/test samples are "
                         "asked for)"))
    fixes.append(Fix("training.data.paths", "more documents, if the corpus is too small to split"))
    return Finding(
        "dataset-index-hang", f"the run never left Megatron's dataset build: it stopped while building the {part} "
        f"part's indices, which loop forever when the split leaves that part with no document but samples are "
        "asked of it (gpt_dataset.py:634-636 at 571370c8)", (last.evidence(),), tuple(fixes), worker=w.index)


def completed(files: RunFiles, facts: DoctorFacts) -> Evidence | None:
    """Training reached train_iters and the last checkpoint is complete: evidence of it, else None."""
    if not facts.train_iters:
        return None
    its = iteration_lines(last_rank_worker(files))
    last = iteration_of(its[-1]) if its else None
    saved = (files.latest_checkpointed_iteration or "").strip()
    wanted = f"iter_{facts.train_iters:07d}/"
    if last == facts.train_iters and saved == str(facts.train_iters) and \
            any(p.startswith(wanted) for p in files.checkpoint_files):
        return Evidence(f"{RUN_CHECKPOINT_DIR}/latest_checkpointed_iteration.txt", 1, saved)
    return None


def killed_after_training(files: RunFiles, facts: DoctorFacts, worker: int) -> Finding | None:
    """The launch was killed, but training had completed and rank 0 finished the last checkpoint."""
    ev = completed(files, facts)
    if ev is None:
        return None
    its = iteration_lines(last_rank_worker(files))
    return Finding(
        "killed-after-training", f"the launch command was killed after training completed: iteration "
        f"{facts.train_iters} of {facts.train_iters} is logged and its checkpoint is complete, so the run's "
        "result is usable (training.resume from this run root continues from it)",
        (ev, its[-1].evidence()),
        (Fix("platform: job time limit", "a margin after the last iteration for the final checkpoint save"),
         Fix("training.resume", "true with this storage.run_root, to train further from the checkpoint")),
        worker=worker)


@detector
def vanished_worker(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """In a multi-worker job, a worker whose torchrun started but which left no exit record while its
    peers recorded theirs: it died (machine lost, killed); its peers' NCCL errors follow from it."""
    if len(files.workers) < 2:
        return
    ended = [w for w in files.workers if exit_code(w) is not None]
    if not ended:
        return
    for w in files.workers:
        started = find(launch_lines(w), r"^launch\.sh: torchrun starts")
        if exit_code(w) is None and started is not None:
            lines = train_lines(w)
            last = next((x for x in reversed(lines) if x.text.strip()), None)
            g = facts.gpus_per_worker
            ranks = f"rank {w.index}" if g == 1 else f"ranks {w.index * g}-{(w.index + 1) * g - 1}"
            yield Finding(
                "worker-vanished", f"worker {w.index} ({ranks}) vanished while training: no exit record and its "
                "log stops, while its peers recorded theirs; the NCCL errors on its peers follow from it",
                (Evidence(w.path("exit_status"), 0, "(absent)"),) + ((last.evidence(),) if last else ()),
                (Fix("platform: worker events", f"why worker {w.index}'s container stopped (node failure, host "
                     "out-of-memory kill, eviction)"),
                 Fix("training.checkpoint.save_interval", "small enough to lose little when a worker is lost")),
                worker=w.index)


# torch's ProcessGroupNCCL watchdog: "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5,
# OpType=ALLREDUCE, ...) ran for 600012 milliseconds before timing out."
TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|collective operation timeout|"
                     r"ran for [0-9]+ milliseconds before timing out")


@detector
def collective_timeout(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    reported: dict[int, Line] = {}
    for w in files.workers:
        lines = train_lines(w)
        for x in islice(lines, first_possible(lines, TIMEOUT), None):
            if TIMEOUT.search(x.text) and x.rank is not None and x.rank not in reported:
                reported[x.rank] = x
    if not reported:
        return
    missing = [r for r in range(facts.world_size) if r not in reported]
    first = min(reported.values(), key=lambda x: (x.file, x.number))
    op = re.search(r"OpType=(\w+)", first.text)
    ms = re.search(r"ran for ([0-9]+) milliseconds", first.text) or re.search(r"Timeout\(ms\)=([0-9]+)", first.text)
    waited = to_int(ms.group(1)) if ms else None
    minutes = f" after {waited / 60000:.0f} minutes" if waited is not None else ""
    who = (f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing[:8]))} never arrived"
           if missing else "every rank reported the timeout: the slowest never arrived at the same collective")
    worker = (missing[0] // facts.gpus_per_worker) if missing and facts.gpus_per_worker else None
    # where the rank that never arrived was: the last line its worker logged
    last = None
    if worker is not None and worker < len(files.workers):
        last = next((x for x in reversed(train_lines(files.workers[worker])) if x.text.strip()), None)
    yield Finding(
        "collective-timeout", f"a collective{' (' + op.group(1) + ')' if op else ''} timed out{minutes}: {who}",
        (first.evidence(),) + ((last.evidence(),) if last is not None else ()),
        (Fix("training.args", "--distributed-timeout-minutes N: longer than the slowest step between collectives "
             "(a checkpoint save, the dataset build), if the missing rank was only slow"),
         Fix("(the missing rank)", "its log's last lines say what it was doing: a crash, a hang, or a slow save")),
        worker=worker, rank=missing[0] if missing else None)


@detector
def unreadable(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """Files of the run the doctor could not read (a FIFO, a device, a symlink loop, binary, no permission):
    what they hold is not known, so the run is not reported healthy."""
    if files.unreadable:
        yield Finding(
            "unreadable-file", f"{len(files.unreadable)} file(s) of the run could not be read; what they hold was "
            "not checked", files.unreadable,
            (Fix("storage.run_root", "the run root as the launch command wrote it: regular text files (logs, "
                 "exit_status, runtime.txt) readable by this user"),))


def stopped_saved(w: WorkerFiles, code: int | None, last: tuple[Evidence, ...]) -> Finding | None:
    """A worker stopped by a signal that saved on the way out (the exit record's `saved_iteration:`,
    docs/stop-resume.md): no failure of the run, which a restart continues."""
    saved = exit_field(w, "saved_iteration")
    if code not in (143, 129, 130) or saved is None:
        return None
    sig = exit_field(w, "stopped") or "a signal"
    return Finding(
        "stopped-saved",
        f"worker {w.index} was stopped by {sig} (a job stop, a time limit, a preemption) and saved a "
        f"checkpoint at iteration {saved} on the way out: nothing is lost, the run is not finished",
        (Evidence(w.path("exit_status"), 1, str(code)), Evidence(w.path("exit_status"), 3, f"saved_iteration: {saved}"))
        + last,
        (Fix("(restart)", f"start the job again: it loads the save of iteration {saved} and continues "
             "(training.checkpoint.resume)"),
         Fix("stop.time_limit_minutes / the engine's time limit", "longer, if the stop was the time limit")),
        worker=w.index,
    )


@detector
def known_crash(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    """A crash the compiler knows the configuration of (megatron/kernels.py): named with the spec's field,
    and whether an image with Transformer Engine or Apex would have run it."""
    for w in files.workers:
        lines = train_lines(w)
        for need in NEEDS:
            line = find(lines, need.signature) if need.signature else None
            if line is None:
                continue
            where = " (an image with " + need.needs + " runs it)" if need.needs else " (whatever the image holds)"
            field = ".".join(str(x) for x in need.field)
            yield Finding(need.code, f"Megatron crashed on a configuration it does not support here{where}: "
                          + need.cause, (line.evidence(),), (Fix(field, need.fix),), worker=w.index, rank=line.rank)
            return


# validate_args refusing the arguments at start: its assert's frame, or the message it printed or raised
VALIDATE_FRAME = re.compile(r'megatron/training/arguments\.py", line ([0-9]+), in validate_args')
FRAME_MARK = "in validate_args"  # in every line VALIDATE_FRAME matches


@lru_cache(maxsize=1)
def _refusals() -> tuple[dict[int, dict[str, Any]], tuple[tuple[str, dict[str, Any]], ...]]:
    """validate_args's statements, once: the first of each line number, each message's literal text (24+ characters)."""
    by_line: dict[int, dict[str, Any]] = {}
    literals: list[tuple[str, dict[str, Any]]] = []
    for s in refusal_statements():
        by_line.setdefault(s["line"], s)
        literal = _literal(s["message"]) if s.get("message") else ""
        if len(literal) >= 24:
            literals.append((literal, s))
    return by_line, tuple(literals)


@detector
def validate_refused(files: RunFiles, facts: DoctorFacts) -> Iterator[Finding]:
    by_line, literals = _refusals()
    for w in files.workers:
        lines = train_lines(w)
        # linear: only the messages somewhere in the log (a scan each) can be in a line; none and no frame, no lines
        whole = joined_text(lines)
        present, framed = tuple((lit, s) for lit, s in literals if lit in whole), FRAME_MARK in whole
        if not present and not framed:
            continue
        hit: tuple[Line, dict[str, Any]] | None = None
        for x in lines:
            m = VALIDATE_FRAME.search(x.text) if framed and FRAME_MARK in x.text else None
            st = by_line.get(to_int(m.group(1)) or -1) if m else None
            st = st or next((s for lit, s in present if lit in x.text), None)
            if st is not None:
                hit = (x, st)
                break
        if hit is None:
            continue
        line, st = hit
        flags = [f"--{d.replace('_', '-')}" for d in dests_read(*st.get("guard", ()), *(
            [st["test"]] if st["kind"] == "assert" else []))]
        yield Finding(
            "megatron-validate-args", f"Megatron's validate_args refused the arguments at start "
            f"(megatron/training/arguments.py:{st['line']} at 571370c8): "
            f"{st.get('message') or 'assert ' + str(st.get('test'))}", (line.evidence(),),
            (Fix("training.args", "the flags it reads: " + ", ".join(flags[:6]) + " (a raw flag, or the typed field "
                 "that passes it); `megatron-compile` reports this before the job (megatron-validate-args)"),),
            worker=w.index, rank=line.rank)
        return


def _literal(message: str) -> str:
    """A message's text up to its first formatted value: what a log holds verbatim."""
    return message.split("{", 1)[0].strip()
