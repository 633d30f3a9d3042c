"""Megatron-LM's entry points, and the values pretrain_gpt.py derives from its flags.

Shared by the facts (derived once per spec), the rules and the estimator. Defaults and derivations follow megatron/training/arguments.py at the pinned
commit 571370c829ca768fe37244f4e2e7f28d8accc4ab; each is cited where it is computed.
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

from ..tuples import NamedTuple

PRETRAIN_SCRIPT = "pretrain_gpt.py"
# Megatron Core's official example, which hard-codes TP=2 and takes no arguments (the seed's scenario).
BOUNDED_EXAMPLE = "examples/run_simple_mcore_train_loop.py"
BOUNDED_EXAMPLE_ITERATIONS = 5  # its `for iteration in range(5)`
PRETRAIN_SECTIONS = ("model", "batch", "train_iters", "train_samples", "optimizer", "data", "checkpoint",
                     "recompute", "virtual_pipeline", "fp8", "performance")
REQUIRED_SECTIONS = ("model", "batch", "optimizer", "data", "checkpoint")
# The model's fields without a default: the spec gives them, or init_from derives them.
MODEL_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings")
# Vocabulary sizes Megatron's tokenizers report before padding, where the type alone fixes it.
KNOWN_VOCAB = {"GPT2BPETokenizer": 50257}


def is_pretrain(script: str) -> bool:
    """True when the training script is Megatron-LM's pretrain_gpt.py (relative or absolute)."""
    return posixpath.basename(posixpath.normpath(script)) == PRETRAIN_SCRIPT


def is_bounded_example(script: str, megatron_root: str) -> bool:
    """True when the script is the official example, spelt relative to megatron.root or absolute."""
    norm = posixpath.normpath(script)
    if script.startswith("/"):
        return norm == posixpath.normpath(f"{megatron_root}/{BOUNDED_EXAMPLE}")
    return norm == BOUNDED_EXAMPLE


def ffn_hidden_size(model: Any) -> int:
    # arguments.py:1276-1281: 4 × hidden, or with swiglu int((4 × hidden × 2/3) / 64) × 64
    if model.ffn_hidden_size is not None:
        return model.ffn_hidden_size
    if model.swiglu:
        return int((4 * model.hidden_size * 2 / 3) / 64) * 64
    return 4 * model.hidden_size


def vocab_size(training: Any) -> int | None:
    """The tokenizer's vocabulary before padding, when the spec determines it."""
    if training.model.vocab_size is not None:
        return training.model.vocab_size
    if training.data is not None:
        return KNOWN_VOCAB.get(training.data.tokenizer.type)
    return None


def padded_vocab_size(vocab: int, divisible_by: int, tensor: int) -> int:
    # megatron/core/tokenizers/utils/build_tokenizer.py:124 vocab_size_with_padding
    multiple = divisible_by * tensor
    return int(math.ceil(vocab / multiple) * multiple)


def num_microbatches(global_batch: int, micro: int, data_parallel: int) -> int:
    # megatron/core/num_microbatches_calculator.py:381: global % (micro × DP) == 0
    return global_batch // (micro * data_parallel)


def virtual_pipeline_size(num_layers: int, pipeline: int, layers_per_virtual_stage: int | None,
                          extra_layers: int = 0) -> int | None:
    # arguments.py:947-956; a size of 1 means no interleaving. extra_layers: the embedding and the loss
    # when --account-for-{embedding,loss}-in-pipeline-split count them as layers (arguments.py:940-944)
    if layers_per_virtual_stage is None:
        return None
    size = ((num_layers + extra_layers) // pipeline) // layers_per_virtual_stage
    return None if size == 1 else size


class PipelineSplit(NamedTuple):
    """How Megatron splits the layers over the pipeline: the typed fields and the raw flags that change it."""

    num_layers: int
    pipeline: int
    layers_per_virtual_stage: int | None = None  # training.virtual_pipeline
    account_for_embedding: bool = False  # --account-for-embedding-in-pipeline-split
    account_for_loss: bool = False  # --account-for-loss-in-pipeline-split
    first_stage_layers: int | None = None  # --decoder-first-pipeline-num-layers
    last_stage_layers: int | None = None  # --decoder-last-pipeline-num-layers
    overlap_p2p_comm: bool = True  # Megatron's default; --no-overlap-p2p-communication turns it off


# The lines of megatron/training/arguments.py that pipeline_split_refusal reproduces (the generic
# validate_args check leaves them to it).
SPLIT_SOURCE_LINES = (934, 947, 951, 976, 981, 985)
# The lines of TransformerConfig.__post_init__ (transformer_config.py) pipeline_split_refusal words in
# the spec's terms: the ranges its SplitRefusal sources below cite.
SPLIT_CONFIG_SOURCE_LINES = (*range(1699, 1710), *range(1773, 1794), *range(1811, 1816), *range(1819, 1824))


class SplitRefusal(NamedTuple):
    field: str  # "num_layers" | "virtual_pipeline" | "pipeline" | "args": what to change
    message: str
    source: str  # Megatron's file:line at the pinned commit


def pipeline_split_refusal(s: PipelineSplit) -> SplitRefusal | None:
    """What Megatron refuses about this split (validate_args, then TransformerConfig), or None.
    Exactly Megatron's checks: uneven first/last stages and layers counted for the embedding and the
    loss are accepted where Megatron accepts them."""
    extra = int(s.account_for_embedding) + int(s.account_for_loss)
    counted = s.num_layers + extra
    what = f"{s.num_layers} layers" + (f" + {extra} (embedding/loss counted as layers)" if extra else "")
    uneven = s.first_stage_layers is not None or s.last_stage_layers is not None
    vpp = None
    if s.layers_per_virtual_stage is not None:
        if uneven:
            return SplitRefusal("virtual_pipeline", "uneven first/last pipeline stages need "
                                "--num-virtual-stages-per-pipeline-rank, not training.virtual_pipeline",
                                "megatron/training/arguments.py:934")
        if counted % s.pipeline:
            return SplitRefusal("num_layers", f"{what} do not divide into parallelism.pipeline ({s.pipeline}) "
                                "stages", "megatron/training/arguments.py:947")
        per_stage = counted // s.pipeline
        if per_stage % s.layers_per_virtual_stage:
            return SplitRefusal("virtual_pipeline", f"training.virtual_pipeline ({s.layers_per_virtual_stage} "
                                f"layers per virtual stage) must divide the {per_stage} layers of each pipeline "
                                "stage", "megatron/training/arguments.py:951")
        vpp = virtual_pipeline_size(s.num_layers, s.pipeline, s.layers_per_virtual_stage, extra)
    elif not uneven and counted % s.pipeline:
        return SplitRefusal("num_layers", f"{what} do not divide into parallelism.pipeline ({s.pipeline}) stages",
                            "megatron/training/arguments.py:976")
    if vpp is not None and s.pipeline <= (1 if s.overlap_p2p_comm else 2):
        why = ("" if s.overlap_p2p_comm else " with --no-overlap-p2p-communication")
        return SplitRefusal("pipeline", f"the interleaved schedule (training.virtual_pipeline) needs "
                            f"parallelism.pipeline > {1 if s.overlap_p2p_comm else 2}{why} (got {s.pipeline})",
                            "megatron/training/arguments.py:980-989")
    if uneven and extra:
        return SplitRefusal("args", "uneven first/last pipeline stages cannot be combined with "
                            "--account-for-embedding/loss-in-pipeline-split",
                            "megatron/core/transformer/transformer_config.py:1699-1709")
    if uneven:
        middle_layers, middle_stages = s.num_layers, s.pipeline
        for n in (s.first_stage_layers, s.last_stage_layers):
            if n is not None:
                if n <= 0:
                    return SplitRefusal("args", "a first or last pipeline stage needs at least one layer",
                                        "megatron/core/transformer/transformer_config.py:1773-1793")
                middle_layers, middle_stages = middle_layers - n, middle_stages - 1
        if bool(middle_layers > 0) != bool(middle_stages > 0) or middle_layers < 0:
            return SplitRefusal("args", f"{middle_layers} layers remain for {middle_stages} middle pipeline stages",
                                "megatron/core/transformer/transformer_config.py:1811-1815")
        if middle_stages and middle_layers % middle_stages:
            return SplitRefusal("args", f"the {middle_layers} middle layers do not divide into {middle_stages} "
                                "middle pipeline stages", "megatron/core/transformer/transformer_config.py:1819-1823")
    return None


def train_iterations(train_iters: int | None, train_samples: int | None, global_batch: int) -> int:
    """The iterations a run trains: train_iters, or for sample-based training train_samples //
    global batch (megatron/training/training.py:1504, constant batch size)."""
    if train_iters is not None:
        return train_iters
    assert train_samples is not None, "the rules require one of train_iters and train_samples"
    return train_samples // global_batch


class TrainingTime(NamedTuple):
    iterations: int
    seconds: float
    gpu_hours: float


def training_time(step_s: float, world: int, global_batch: int, train_iters: int | None = None,
                  train_samples: int | None = None) -> TrainingTime | None:
    """Time to train_iters, or to train_samples // global batch (training.py:1504, constant batch), at step_s
    seconds an iteration."""
    if train_iters is None and train_samples is None:
        return None
    iterations = train_iterations(train_iters, train_samples, global_batch)
    seconds = iterations * step_s
    return TrainingTime(iterations, seconds, seconds * world / 3600)
