"""pretrain_gpt.py: the values Megatron-LM derives from its flags, and the flags a spec compiles to.

Shared by the rules (which check what Megatron would assert), the plan (which passes the flags)
and the estimator. Defaults and derivations follow megatron/training/arguments.py at the pinned
commit 571370c829ca768fe37244f4e2e7f28d8accc4ab; each is cited where it is computed.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass
from typing import Any

PRETRAIN_SCRIPT = "pretrain_gpt.py"
# Megatron Core's official example, which hard-codes TP=2 and takes no arguments (the seed's scenario).
BOUNDED_EXAMPLE = "examples/run_simple_mcore_train_loop.py"
BOUNDED_EXAMPLE_ITERATIONS = 5  # its `for iteration in range(5)`
PRETRAIN_SECTIONS = ("model", "batch", "train_iters", "optimizer", "data", "checkpoint", "recompute",
                     "virtual_pipeline")
REQUIRED_SECTIONS = ("model", "batch", "train_iters", "optimizer", "data", "checkpoint")
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


@dataclass(frozen=True)
class Flag:
    """One Megatron-LM flag and its values (none for a switch). A value may reference the run root."""

    name: str
    values: tuple[str, ...] = ()
    run_root_relative: bool = False  # the single value is a path under $RUN_ROOT


def _num(value: float) -> str:
    """A float as Python (and so Megatron's argparse) round-trips it: 0.0001, 1e-05, 1.0."""
    return repr(float(value))


def flags(spec: Any) -> list[Flag]:
    """Every flag the typed sections set, in a fixed, reviewable order."""
    t, par = spec.training, spec.parallelism
    m = t.model
    out: list[Flag] = [
        Flag("--tensor-model-parallel-size", (str(par.tensor),)),
        Flag("--pipeline-model-parallel-size", (str(par.pipeline),)),
        Flag("--context-parallel-size", (str(par.context),)),
    ]
    if par.expert > 1:
        out.append(Flag("--expert-model-parallel-size", (str(par.expert),)))
    if par.expert_tensor is not None:
        out.append(Flag("--expert-tensor-parallel-size", (str(par.expert_tensor),)))
    if t.virtual_pipeline is not None:
        out.append(Flag("--num-layers-per-virtual-pipeline-stage", (str(t.virtual_pipeline),)))
    if t.sequence_parallel:
        out.append(Flag("--sequence-parallel"))
    if t.distributed_optimizer:
        out.append(Flag("--use-distributed-optimizer"))
    out += [
        Flag("--num-layers", (str(m.num_layers),)),
        Flag("--hidden-size", (str(m.hidden_size),)),
        Flag("--num-attention-heads", (str(m.num_attention_heads),)),
    ]
    if m.ffn_hidden_size is not None:
        out.append(Flag("--ffn-hidden-size", (str(m.ffn_hidden_size),)))
    if m.num_query_groups is not None:
        out += [Flag("--group-query-attention"), Flag("--num-query-groups", (str(m.num_query_groups),))]
    out += [
        Flag("--seq-length", (str(m.seq_length),)),
        Flag("--max-position-embeddings", (str(m.max_position_embeddings),)),
    ]
    if m.vocab_size is not None:
        out.append(Flag("--vocab-size", (str(m.vocab_size),)))
    if m.make_vocab_size_divisible_by != 128:
        out.append(Flag("--make-vocab-size-divisible-by", (str(m.make_vocab_size_divisible_by),)))
    if m.swiglu:
        out.append(Flag("--swiglu"))
    if m.normalization != "LayerNorm":
        out.append(Flag("--normalization", (m.normalization,)))
    if m.position_embedding != "learned_absolute":
        out.append(Flag("--position-embedding-type", (m.position_embedding,)))
    if m.untie_embeddings:
        out.append(Flag("--untie-embeddings-and-output-weights"))
    if m.disable_bias_linear:
        out.append(Flag("--disable-bias-linear"))
    if m.num_experts is not None:
        out += [Flag("--num-experts", (str(m.num_experts),)), Flag("--moe-router-topk", (str(m.moe_router_topk),))]
        if m.moe_ffn_hidden_size is not None:
            out.append(Flag("--moe-ffn-hidden-size", (str(m.moe_ffn_hidden_size),)))
    out.append(Flag("--transformer-impl", (m.transformer_impl,)))
    if m.transformer_impl == "local" or not t.fused_kernels:
        # Megatron asserts persist_layer_norm is off with torch's LayerNorm (no Apex, no TE)
        out.append(Flag("--no-persist-layer-norm"))
    if not t.fused_kernels:
        out += [Flag("--no-gradient-accumulation-fusion"), Flag("--no-masked-softmax-fusion"),
                Flag("--no-bias-gelu-fusion"), Flag("--no-bias-dropout-fusion")]
        if m.swiglu:
            out.append(Flag("--no-bias-swiglu-fusion"))
        if m.position_embedding == "rope":
            # TransformerConfig (transformer_config.py:1961) refuses rope fusion without TE >= 1.4
            out.append(Flag("--no-rope-fusion"))
    if t.recompute is not None:
        out.append(Flag("--recompute-granularity", (t.recompute.granularity,)))
        if t.recompute.method is not None:
            out.append(Flag("--recompute-method", (t.recompute.method,)))
        if t.recompute.num_layers is not None:
            out.append(Flag("--recompute-num-layers", (str(t.recompute.num_layers),)))
    out += [
        Flag("--micro-batch-size", (str(t.batch.micro),)),
        Flag("--global-batch-size", (str(t.batch.global_),)),
        Flag("--train-iters", (str(t.train_iters),)),
        Flag("--lr", (_num(t.optimizer.lr),)),
        Flag("--min-lr", (_num(t.optimizer.min_lr),)),
        Flag("--lr-decay-style", (t.optimizer.decay_style,)),
        Flag("--lr-warmup-iters", (str(t.optimizer.warmup_iters),)),
    ]
    if t.optimizer.decay_iters is not None:
        out.append(Flag("--lr-decay-iters", (str(t.optimizer.decay_iters),)))
    out += [
        Flag("--weight-decay", (_num(t.optimizer.weight_decay),)),
        Flag("--clip-grad", (_num(t.optimizer.clip_grad),)),
        Flag("--adam-beta1", (_num(t.optimizer.adam_beta1),)),
        Flag("--adam-beta2", (_num(t.optimizer.adam_beta2),)),
    ]
    if t.precision != "fp32":
        out.append(Flag(f"--{t.precision}"))
    data = t.data
    if data.mock:
        out.append(Flag("--mock-data"))
    else:
        out += [Flag("--data-path", tuple(data.paths)), Flag("--split", (data.split,))]
    out.append(Flag("--tokenizer-type", (data.tokenizer.type,)))
    if data.tokenizer.vocab_file is not None:
        out.append(Flag("--vocab-file", (data.tokenizer.vocab_file,)))
    if data.tokenizer.merge_file is not None:
        out.append(Flag("--merge-file", (data.tokenizer.merge_file,)))
    if data.tokenizer.model is not None:
        out.append(Flag("--tokenizer-model", (data.tokenizer.model,)))
    ckpt = t.checkpoint
    out += [
        Flag("--save", ("ckpt",), run_root_relative=True),
        Flag("--save-interval", (str(ckpt.save_interval),)),
        Flag("--ckpt-format", (ckpt.format,)),
    ]
    if ckpt.resume:
        out.append(Flag("--load", ("ckpt",), run_root_relative=True))
        if ckpt.scheduler == "spec":
            out.append(Flag("--override-opt_param-scheduler"))
        elif ckpt.scheduler == "checkpoint":
            out.append(Flag("--use-checkpoint-opt_param-scheduler"))
    out += [
        Flag("--log-interval", (str(t.logging.interval),)),
        Flag("--eval-interval", (str(t.eval.interval),)),
        Flag("--eval-iters", (str(t.eval.iters),)),
    ]
    if t.logging.throughput:
        out.append(Flag("--log-throughput"))
    if t.logging.tensorboard:
        out.append(Flag("--tensorboard-dir", ("tensorboard",), run_root_relative=True))
    return out


def flag_names(spec: Any) -> set[str]:
    """The names of every flag the typed sections set (for the duplicate-flag rule)."""
    names = {f.name for f in flags(spec)}
    # a precision flag is owned by the spec even when fp32 sets none
    names |= {"--bf16", "--fp16"}
    return names
