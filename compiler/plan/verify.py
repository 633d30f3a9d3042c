"""verify.sh's checklist: what a finished run root must hold, from the run-files contract."""

from __future__ import annotations

import math
from typing import Any

from ..megatron.checkpoint import (
    LEGACY_FILE, NO_FULLY_PARALLEL_SAVE, SHARD_PREFIX, SHARD_SUFFIX, TORCH_DIST_FILES, legacy_checkpoint_dirs,
    shard_file, shard_ranks,
)
from ..megatron.flags import arg_flag_name
from ..megatron.parallel import ParallelLayout, RankLayout
from ..megatron.pretrain import BOUNDED_EXAMPLE_ITERATIONS
from ..megatron.runfiles import (
    RUN_CHECKPOINT_DIR, EXIT_RECORD, LATEST_CHECKPOINT, NODES_DIR, RUNTIME_RECORD, TRAIN_LOG, checkpoint_iteration_dir,
    worker_log_dir,
)
from ..megatron.data import MANIFEST_SUFFIX, Prefix, tokenizer_record
from ..schema.records import JobSpec
from .shell import Word, under

# Up to these, verify.sh lists a check per worker and per shard; above, one line loops at run time.
LISTED_WORKERS = 8
LISTED_SHARDS = 64
# A random start's first loss is about ln(vocab); trained weights are far below it.
RANDOM_START_FRACTION = 0.8
# A batch-size ramp-up changes the samples per step (arguments.py --rampup-batch-size).
RAMPUP_FLAG = "--rampup-batch-size"
from .types import Check, PretrainPlan, VerifyPlan


def _in_run_root(relative: str) -> Word:
    return under("RUN_ROOT", relative)


def _check(function: str, label: str, *args: Word | str | int) -> Check:
    words = tuple(a if isinstance(a, Word) else Word.lit(str(a)) for a in args)
    return Check(function, (Word.lit(label),) + words)


def verify_plan(spec: JobSpec, layout: ParallelLayout, groups: RankLayout, pretrain: PretrainPlan | None,
                bounded: bool, run_root: str, prepared: tuple[Prefix, ...] = (),
                converted: str | None = None) -> VerifyPlan:
    """The checks of a training step, worker by worker, then the prepared data it reads, then the
    checkpoint's files."""
    workers, gpus = layout.workers, layout.gpus_per_worker
    log_dirs = [worker_log_dir(w, workers) for w in range(workers)]
    checks: list[Check] = []
    if workers > LISTED_WORKERS and not bounded:
        # one line that loops over the workers at run time (each still reported): a 1024-worker job
        # would otherwise list 5120 checks in verify.sh
        checks.append(_check("check_workers", "workers", 0, workers - 1, _in_run_root(f"{NODES_DIR}/node-"),
                             EXIT_RECORD, RUNTIME_RECORD, gpus, spec.megatron.commit, workers))
        log_dirs_checked: list[str] = []
    else:
        log_dirs_checked = log_dirs
    for w, d in enumerate(log_dirs_checked):
        who = "" if workers == 1 else f" (worker {w})"
        runtime = _in_run_root(d + RUNTIME_RECORD)
        checks.append(_check("check_exit", f"torchrun exit status{who}", _in_run_root(d + EXIT_RECORD)))
        checks.append(_check("check_value", f"runtime gpu_count{who}", runtime, "gpu_count", gpus))
        checks.append(_check("check_value", f"runtime megatron_commit{who}", runtime, "megatron_commit",
                             spec.megatron.commit))
        if workers > 1:
            checks.append(_check("check_value", f"runtime node_rank{who}", runtime, "node_rank", w))
            checks.append(_check("check_value", f"runtime nnodes{who}", runtime, "nnodes", workers))
        if bounded:
            log = _in_run_root(d + TRAIN_LOG)
            checks.append(_check("check_iterations", f"iterations 0-{BOUNDED_EXAMPLE_ITERATIONS - 1} on every rank{who}",
                                 log, BOUNDED_EXAMPLE_ITERATIONS, gpus))
            checks.append(_check("check_count", f"'Successfully loaded the model' on every rank{who}",
                                 log, "Successfully loaded the model", gpus))
    ckpt = RUN_CHECKPOINT_DIR + "/"
    if bounded:
        legacy = False
        ranks = shard_ranks(groups)
    elif pretrain is not None:
        first, last = _in_run_root(log_dirs[0] + TRAIN_LOG), _in_run_root(log_dirs[-1] + TRAIN_LOG)
        sizes = (("world_size", layout.world), ("tensor_model_parallel_size", layout.tensor),
                 ("pipeline_model_parallel_size", layout.pipeline),
                 ("context_parallel_size", layout.context),
                 ("expert_model_parallel_size", layout.expert),
                 ("data_parallel_size", layout.data))
        for name, value in sizes:
            checks.append(_check("check_argument", f"Megatron argument {name}", first, name, value))
        # Megatron prints its iteration lines on the last rank alone (print_rank_last(log_string),
        # megatron/training/training.py:2692 at 571370c8), which torchrun's node ranks place on the
        # last worker: the label names the log they are read from.
        where = "" if workers == 1 else f" (worker {workers - 1}, the last rank's)"
        checks.append(_check("check_last_iteration", f"last logged iteration{where}", last, pretrain.train_iters))
        # a restarted run (a stop that saved, a time limit, a requeue) appends to train.log: each
        # restart must continue from its save (iteration, consumed samples, loss), never start over
        raw = {arg_flag_name(arg) for arg in spec.training.args}
        t = spec.training
        # a pretrain plan is made for a complete pretrain spec alone (check/facts.py pretrain_complete)
        assert t.batch is not None and t.model is not None and t.data is not None and t.checkpoint is not None
        batch = 0 if RAMPUP_FLAG in raw else t.batch.global_
        checks.append(_check("check_restarts", f"restarts continue from their save{where}", last, batch,
                             spec.training.logging.interval))
        if spec.training.precision == "fp16":
            # fp16's loss scaler skips iterations while it lowers the scale from 2^32 (Megatron's
            # DynamicGradScaler): skipped iterations are its search, NaN iterations and a run that
            # never took a step are failures
            checks.append(_check("check_no_bad_iterations", f"no NaN iterations, a step taken{where}", last, "fp16"))
        else:
            checks.append(_check("check_no_bad_iterations", f"no skipped or NaN iterations{where}", last))
        if converted is not None:
            # init_from: the converted weights were there, training loaded them (the first start) or
            # its own checkpoint (a restart), and its first loss shows trained weights, not a random start
            checks.append(_check("check_file", "converted checkpoint", converted + "/" + LATEST_CHECKPOINT))
            checks.append(_check("check_contains", "the converted weights were loaded", first,
                                 f"successfully loaded checkpoint from {converted}"))
            vocab = t.model.vocab_size
            if vocab:
                limit = f"{RANDOM_START_FRACTION * math.log(vocab):.3f}"
                checks.append(_check("check_first_loss_below",
                                     f"first loss below {RANDOM_START_FRACTION} x ln(vocab {vocab}) (no random start)",
                                     last, limit))
        for prefix in prepared:
            for key, wanted in tokenizer_record(t.data.tokenizer):
                checks.append(_check("check_value", f"prepared {prefix.stem}_{prefix.key} {key} (the training tokenizer)",
                                     prefix.prefix + MANIFEST_SUFFIX, key, wanted))
        checks.append(_check("check_content", "latest checkpointed iteration",
                             _in_run_root(ckpt + LATEST_CHECKPOINT), pretrain.train_iters))
        ckpt += checkpoint_iteration_dir(pretrain.train_iters) + "/"
        legacy = t.checkpoint.format == "torch"
        raw = {arg_flag_name(arg) for arg in spec.training.args}
        ranks = shard_ranks(groups, fully_parallel_save=NO_FULLY_PARALLEL_SAVE not in raw)
    else:
        return VerifyPlan(checks=tuple(checks), root=run_root)
    if legacy:
        for name in legacy_checkpoint_dirs(layout):
            checks.append(_check("check_file", f"checkpoint {ckpt}{name}/{LEGACY_FILE}",
                                 _in_run_root(f"{ckpt}{name}/{LEGACY_FILE}")))
        return VerifyPlan(checks=tuple(checks), root=run_root)
    for name in TORCH_DIST_FILES:
        checks.append(_check("check_file", f"checkpoint {ckpt}{name}", _in_run_root(ckpt + name)))
    if len(ranks) <= LISTED_SHARDS:
        for rank in ranks:
            checks.append(_check("check_file", f"checkpoint shard of rank {rank}", _in_run_root(ckpt + shard_file(rank))))
    else:
        for low, high in _runs(ranks):  # one check a run of consecutive ranks, looped at run time
            checks.append(_check("check_shards", f"checkpoint shards of ranks {low}-{high}",
                                 _in_run_root(ckpt + SHARD_PREFIX), SHARD_SUFFIX, low, high))
    return VerifyPlan(checks=tuple(checks), root=run_root)


def _runs(ranks: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted ranks as (first, last) runs of consecutive ones."""
    out: list[tuple[int, int]] = []
    for rank in sorted(ranks):
        if out and rank == out[-1][1] + 1:
            out[-1] = (out[-1][0], rank)
        else:
            out.append((rank, rank))
    return out


def prepare_verify_plan(prefixes: tuple[Prefix, ...], tokenizer: Any, output_dir: str) -> VerifyPlan:
    """The checks of a preparation step: each prefix's two files, and its manifest: the input and the
    tokenizer of the spec, and more than 0 documents."""
    checks: list[Check] = []
    for p in prefixes:
        name = f"{p.stem}_{p.key}"
        manifest = p.prefix + MANIFEST_SUFFIX
        checks.append(_check("check_file", f"{name} .bin", p.prefix + ".bin"))
        checks.append(_check("check_file", f"{name} .idx", p.prefix + ".idx"))
        checks.append(_check("check_value", f"{name} manifest input", manifest, "input", p.input))
        checks.append(_check("check_value", f"{name} manifest json_key", manifest, "json_key", p.key))
        for key, value in tokenizer_record(tokenizer):
            checks.append(_check("check_value", f"{name} manifest {key}", manifest, key, value))
        checks.append(_check("check_positive", f"{name} documents", manifest, "documents"))
        checks.append(_check("check_positive", f"{name} tokens", manifest, "tokens"))
    return VerifyPlan(checks=tuple(checks), root=output_dir)
