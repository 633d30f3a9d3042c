"""Megatron-LM's entry points, and the values pretrain_gpt.py derives from its flags.

Shared by the facts (derived once per spec), the rules and the estimator. Defaults and derivations follow megatron/training/arguments.py at the pinned
commit 571370c829ca768fe37244f4e2e7f28d8accc4ab; each is cited where it is computed.
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

PRETRAIN_SCRIPT = "pretrain_gpt.py"
# Megatron Core's official example, which hard-codes TP=2 and takes no arguments (the seed's scenario).
BOUNDED_EXAMPLE = "examples/run_simple_mcore_train_loop.py"
BOUNDED_EXAMPLE_ITERATIONS = 5  # its `for iteration in range(5)`
PRETRAIN_SECTIONS = ("model", "batch", "train_iters", "train_samples", "optimizer", "data", "checkpoint",
                     "recompute", "virtual_pipeline")
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


def virtual_pipeline_size(num_layers: int, pipeline: int, layers_per_virtual_stage: int | None) -> int | None:
    # arguments.py:947-956; a size of 1 means no interleaving
    if layers_per_virtual_stage is None:
        return None
    size = (num_layers // pipeline) // layers_per_virtual_stage
    return None if size == 1 else size


def train_iterations(train_iters: int | None, train_samples: int | None, global_batch: int) -> int:
    """The iterations a run trains: train_iters, or for sample-based training train_samples //
    global batch (megatron/training/training.py:1504, constant batch size)."""
    if train_iters is not None:
        return train_iters
    assert train_samples is not None, "the rules require one of train_iters and train_samples"
    return train_samples // global_batch
