"""Megatron's checkpoint layout at the pinned commit: which files a save writes, and which ranks write them."""

from __future__ import annotations

from .parallel import ParallelLayout, RankLayout

NO_FULLY_PARALLEL_SAVE = "--no-ckpt-fully-parallel-save"
# torch_dist's files beside the shards (megatron/core/dist_checkpointing at 571370c8)
TORCH_DIST_FILES = (".metadata", "metadata.json", "common.pt")
LEGACY_FILE = "model_optim_rng.pt"


SHARD_PREFIX, SHARD_SUFFIX = "__", "_0.distcp"  # the torch_dist shard of rank R: __R_0.distcp


def shard_file(rank: int) -> str:
    """The torch_dist shard a rank writes: __<rank>_0.distcp."""
    return f"{SHARD_PREFIX}{rank}{SHARD_SUFFIX}"


def shard_ranks(groups: RankLayout, fully_parallel_save: bool = False) -> tuple[int, ...]:
    """The ranks whose torch_dist shard files (`__<rank>_0.distcp`) verify.sh requires.

    Without fully parallel save (the bounded example's dist_checkpointing.save), data-parallel
    replica 0 writes them: it holds the replica_id-0 copy of every tensor and the others are
    deduplicated. Seen in real runs: TP=2 (ranks 0 and 1, tests/fixtures/h200-tp2-run), TP=1
    (rank 0). pretrain_gpt.py saves fully in parallel by default (--no-ckpt-fully-parallel-save
    turns it off; megatron/training/config/training_config.py:491 at 571370c8): the data-parallel
    group shares the writing, each shard going greedily to the least-loaded rank that holds it
    (dist_checkpointing/exchange_utils.py:117), so every rank writes a file as long as the group
    has at least as many shards as ranks (a GPT layer alone has a dozen; a rank with nothing to
    write writes no file, strategies/filesystem_async.py:183). Seen in a real run with DP=2 across
    two workers (tests/fixtures/h200-pretrain-2workers-run)."""
    if fully_parallel_save:
        return tuple(sorted(rank for group in groups.data for rank in group))
    return tuple(sorted(group[0] for group in groups.data))


def legacy_checkpoint_dirs(layout: ParallelLayout) -> tuple[str, ...]:
    """The per-rank directories of a `torch` (legacy) checkpoint, as Megatron's
    get_checkpoint_name names them: mp_rank_TT, with _PPP when pipeline-parallel and _EEE when
    expert-parallel (megatron/training/checkpointing.py at 571370c8); data-parallel rank 0 writes."""
    names = []
    for tp in range(layout.tensor):
        for pp in range(layout.pipeline):
            for ep in range(layout.expert):
                name = f"mp_rank_{tp:02d}"
                if layout.pipeline > 1:
                    name += f"_{pp:03d}"
                if layout.expert > 1:
                    name += f"_{ep:03d}"
                names.append(name)
    return tuple(names)


def complete_save_files(checkpoint_format: str, layout: ParallelLayout) -> tuple[str, ...]:
    """The files every complete save holds, relative to its iter_NNNNNNN/ directory, whatever the
    layout that wrote it: torch_dist's common.pt, .metadata and metadata.json, which a save writes
    in that order around the shards, metadata.json last (dist_checkpointing/serialization.py:399-416
    at 571370c8); a legacy save's file in each model-parallel rank's directory."""
    if checkpoint_format == "torch":
        return tuple(f"{name}/{LEGACY_FILE}" for name in legacy_checkpoint_dirs(layout))
    return TORCH_DIST_FILES


# What launch.sh runs (python - DIR) on a torch_dist save before resuming from it: .metadata, the
# pickled torch.distributed.checkpoint Metadata, gives each item's shard file, offset and length
# (storage_data: MetadataIndex -> _StorageInfo); a shard shorter than what was written into it is a
# save cut short. Prints why and exits 1, or exits 0.
SAVE_PROBE = '''import os, pickle, sys
import torch.distributed.checkpoint  # the classes .metadata names
d = sys.argv[1]
try:
    with open(os.path.join(d, ".metadata"), "rb") as f:
        meta = pickle.load(f)
    ends = {}
    for info in meta.storage_data.values():
        ends[info.relative_path] = max(ends.get(info.relative_path, 0), info.offset + info.length)
except Exception as e:
    print(f"{d}/.metadata cannot be read: {type(e).__name__}: {e}")
    sys.exit(1)
for name, end in sorted(ends.items()):
    path = os.path.join(d, name)
    size = os.path.getsize(path) if os.path.isfile(path) else -1
    if size < end:
        print(f"{path} is missing" if size < 0 else f"{path} holds {size} bytes of the {end} its save wrote")
        sys.exit(1)'''
