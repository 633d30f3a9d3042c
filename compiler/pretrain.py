"""pretrain_gpt.py: the values Megatron-LM derives from its flags, and the flags a spec compiles to.

Shared by the rules (which check what Megatron would assert), the plan (which passes the flags)
and the estimator. Defaults and derivations follow megatron/training/arguments.py at the pinned
commit 571370c829ca768fe37244f4e2e7f28d8accc4ab; each is cited where it is computed.
"""

from __future__ import annotations

import math
import posixpath
from typing import NamedTuple
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
# What fused_kernels: false passes besides --no-persist-layer-norm (kernels that need Apex or TE).
UNFUSED_FLAGS = ("--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
                 "--no-bias-dropout-fusion")


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


class Flag(NamedTuple):
    """One Megatron-LM flag and its values (none for a switch). A value may reference the run root."""

    name: str
    values: tuple[str, ...] = ()
    run_root_relative: bool = False  # the single value is a path under $RUN_ROOT


def _num(value: float) -> str:
    """A float as Python (and so Megatron's argparse) round-trips it: 0.0001, 1e-05, 1.0."""
    return repr(float(value))


def _given(section: Any, *names: str) -> bool:
    """True when the spec wrote any of these fields (after extends and --set), not just defaulted."""
    return section is not None and any(name in section.model_fields_set for name in names)


def flags(spec: Any) -> list[Flag]:
    """Every flag the typed sections set, in a fixed, reviewable order. An optional field becomes a
    flag only when the spec sets it; its default is Megatron's own, so leaving it out is the same."""
    t, par = spec.training, spec.parallelism
    m = t.model
    out: list[Flag] = []

    def opt(section: Any, field: str, flag: str, value: str | None = None) -> None:
        if _given(section, field):
            out.append(Flag(flag, (value if value is not None else str(getattr(section, field)),)))

    def switch(section: Any, field: str, flag: str) -> None:
        if getattr(section, field):
            out.append(Flag(flag))

    for field, flag in (("tensor", "--tensor-model-parallel-size"), ("pipeline", "--pipeline-model-parallel-size"),
                        ("context", "--context-parallel-size"), ("expert", "--expert-model-parallel-size")):
        if getattr(par, field) != 1 or _given(par, field):
            out.append(Flag(flag, (str(getattr(par, field)),)))
    if par.expert_tensor is not None:
        out.append(Flag("--expert-tensor-parallel-size", (str(par.expert_tensor),)))
    if t.virtual_pipeline is not None:
        out.append(Flag("--num-layers-per-virtual-pipeline-stage", (str(t.virtual_pipeline),)))
    switch(t, "sequence_parallel", "--sequence-parallel")
    switch(t, "distributed_optimizer", "--use-distributed-optimizer")
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
    opt(m, "make_vocab_size_divisible_by", "--make-vocab-size-divisible-by")
    switch(m, "swiglu", "--swiglu")
    opt(m, "normalization", "--normalization")
    opt(m, "position_embedding", "--position-embedding-type")
    switch(m, "untie_embeddings", "--untie-embeddings-and-output-weights")
    switch(m, "disable_bias_linear", "--disable-bias-linear")
    if m.num_experts is not None:
        out.append(Flag("--num-experts", (str(m.num_experts),)))
        opt(m, "moe_router_topk", "--moe-router-topk")
        if m.moe_ffn_hidden_size is not None:
            out.append(Flag("--moe-ffn-hidden-size", (str(m.moe_ffn_hidden_size),)))
    opt(m, "transformer_impl", "--transformer-impl")
    if m.transformer_impl == "local" or not t.fused_kernels:
        # Megatron asserts persist_layer_norm is off with torch's LayerNorm (no Apex, no TE)
        out.append(Flag("--no-persist-layer-norm"))
    if not t.fused_kernels:
        out += [Flag(f) for f in UNFUSED_FLAGS]
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
    ]
    o = t.optimizer
    opt(o, "min_lr", "--min-lr", _num(o.min_lr))
    opt(o, "decay_style", "--lr-decay-style")
    opt(o, "warmup_iters", "--lr-warmup-iters")
    if o.decay_iters is not None:
        out.append(Flag("--lr-decay-iters", (str(o.decay_iters),)))
    opt(o, "weight_decay", "--weight-decay", _num(o.weight_decay))
    opt(o, "clip_grad", "--clip-grad", _num(o.clip_grad))
    opt(o, "adam_beta1", "--adam-beta1", _num(o.adam_beta1))
    opt(o, "adam_beta2", "--adam-beta2", _num(o.adam_beta2))
    if t.precision != "fp32":
        out.append(Flag(f"--{t.precision}"))
    data = t.data
    if data.mock:
        out.append(Flag("--mock-data"))
    elif data.weights is not None:
        out.append(Flag("--data-path", tuple(v for w, p in zip(data.weights, data.paths) for v in (_num(w), p))))
    else:
        out.append(Flag("--data-path", tuple(data.paths)))
    if data.split is not None:
        out.append(Flag("--split", (data.split,)))
    opt(data.tokenizer, "type", "--tokenizer-type")
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
    ]
    opt(ckpt, "format", "--ckpt-format")
    if ckpt.resume:
        out.append(Flag("--load", ("ckpt",), run_root_relative=True))
        if ckpt.scheduler == "spec":
            out.append(Flag("--override-opt_param-scheduler"))
        elif ckpt.scheduler == "checkpoint":
            out.append(Flag("--use-checkpoint-opt_param-scheduler"))
    opt(t.logging, "interval", "--log-interval")
    opt(t.eval, "interval", "--eval-interval")
    opt(t.eval, "iters", "--eval-iters")
    switch(t.logging, "throughput", "--log-throughput")
    if t.logging.tensorboard:
        out.append(Flag("--tensorboard-dir", ("tensorboard",), run_root_relative=True))
    return out


# Flags the typed sections own whether or not this spec sets them: raw args must not repeat them.
OWNED_FLAGS = frozenset({
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-layers-per-virtual-pipeline-stage",
    "--sequence-parallel", "--use-distributed-optimizer", "--num-layers", "--hidden-size", "--num-attention-heads",
    "--ffn-hidden-size", "--group-query-attention", "--num-query-groups", "--seq-length",
    "--max-position-embeddings", "--vocab-size", "--make-vocab-size-divisible-by", "--swiglu", "--normalization",
    "--position-embedding-type", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
    "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--transformer-impl", "--recompute-granularity",
    "--recompute-method", "--recompute-num-layers", "--micro-batch-size", "--global-batch-size", "--train-iters",
    "--lr", "--min-lr", "--lr-decay-style", "--lr-warmup-iters", "--lr-decay-iters", "--weight-decay",
    "--clip-grad", "--adam-beta1", "--adam-beta2", "--bf16", "--fp16", "--mock-data", "--data-path", "--split",
    "--tokenizer-type", "--vocab-file", "--merge-file", "--tokenizer-model", "--save", "--load",
    "--save-interval", "--ckpt-format", "--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler",
    "--log-interval", "--eval-interval", "--eval-iters", "--log-throughput", "--tensorboard-dir",
})


def arg_flag_name(arg: str) -> str:
    """The flag a raw training.args entry names: `--flag` or `--flag=value` -> `--flag`."""
    return arg.split("=", 1)[0]


def flag_names(spec: Any) -> set[str]:
    """The flags raw args may not repeat: every flag a typed field owns, and those this spec sets."""
    return set(OWNED_FLAGS) | {f.name for f in flags(spec)}
