"""Memory, checkpoint and throughput estimates for pretrain_gpt.py, shown before a GPU is spent.

`megatron_weight_and_optimizer_bytes` and `megatron_activation_bytes` reproduce
megatron/training/theoretical_memory_usage.py at the pinned commit (dense and MoE GPT; no MLA, no
MTP, no hybrid models), so the figures equal the "Theoretical memory footprints" line Megatron
prints. `peak_bytes` goes further: that formula assumes a fused (flash) attention and counts the
logits once in bf16, while the measured peak also holds the attention scores of an unfused
attention and the fp32 logits of the cross-entropy; docs/memory-model.md compares both with runs.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple
from typing import Any

from .parallel import ParallelLayout as Layout
from .pretrain import (
    ffn_hidden_size, num_microbatches, padded_vocab_size, train_iterations, virtual_pipeline_size, vocab_size,
)

MB = 1024 * 1024
# What a worker flavor name says about its GPU's memory (GB as the vendors state it).
GPU_MEMORY_GB = (("H200", 141.0), ("H100", 80.0), ("A100", 80.0))


class Estimate(NamedTuple):
    parameters_total: int
    parameters_most_loaded_rank: int
    weights_and_optimizer_mb: float
    activations_mb: float
    megatron_theoretical_total_mb: float
    attention_scores_mb: float  # unfused attention's stored scores, softmax and dropout mask
    logits_fp32_mb: float  # the cross-entropy's fp32 copy of the logits and their gradient
    peak_mb: float
    num_microbatches: int
    tokens_per_step: int
    checkpoint_bytes_per_save: int
    checkpoint_saves: int
    checkpoint_bytes_retained: int
    gpu_memory_gb: float | None
    peak_fraction_of_gpu: float | None


def _counts(t: Any, layout: Layout, padded_vocab: int) -> dict[str, float]:
    """compute_weight_and_optimizer_memory's parameter counts (theoretical_memory_usage.py:13-247)."""
    m = t.model
    h, heads = m.hidden_size, m.num_attention_heads
    kv_channels = h // heads  # arguments.py:1283-1284
    query_projection_to_hidden = kv_channels * heads / h
    groups = m.num_query_groups if m.num_query_groups is not None else heads
    num_experts = 1 if m.num_experts is None else m.num_experts
    gated = 3 / 2 if m.swiglu else 1
    ffn = ffn_hidden_size(m)
    moe_ffn = (m.moe_ffn_hidden_size or ffn) if m.num_experts is not None else 0  # arguments.py:1481-1483
    num_moe_layers = m.num_layers if m.num_experts is not None else 0  # moe_layer_freq defaults to 1
    num_dense_layers = m.num_layers - num_moe_layers
    norm_size = 1 if m.normalization == "RMSNorm" else 2
    attention = 2 * h * h * ((1 + groups / heads) * query_projection_to_hidden)
    embedding = h * padded_vocab
    final_norm = norm_size * h
    embeddings_total = 2 * embedding if m.untie_embeddings else embedding
    dense_mlp = 2 * h * ffn * gated
    routed = 2 * h * moe_ffn * num_experts * gated
    norms = 2 * h * norm_size
    add_bias_linear = not m.disable_bias_linear
    router = (h * num_experts + (num_experts if add_bias_linear else 0)) if m.num_experts is not None else 0
    block = ((attention + dense_mlp + norms) * num_dense_layers
             + (attention + routed + norms + router) * num_moe_layers + final_norm)
    total = block + embeddings_total
    tp_sharded = (attention + dense_mlp) * num_dense_layers + attention * num_moe_layers
    replicated = norms * num_dense_layers + (norms + router) * num_moe_layers + final_norm
    expert_sharded = routed * num_moe_layers
    pp, tp = layout.pipeline, layout.tensor
    etp, ep = layout.expert_tensor, layout.expert
    tp_on_most_loaded = (tp_sharded / pp + embedding) / tp
    replicated_on_most_loaded = replicated / pp
    expert_on_most_loaded = (expert_sharded / pp) / (etp * ep)
    if m.untie_embeddings and pp == 1:
        tp_on_most_loaded += embedding / tp
    return {
        "total": total, "tp": tp_on_most_loaded, "replicated": replicated_on_most_loaded,
        "expert": expert_on_most_loaded,
    }


def megatron_weight_and_optimizer_bytes(t: Any, layout: Layout, padded_vocab: int) -> float:
    """theoretical_memory_usage.py:264-274: bf16 params, fp32 grads, fp32 main params and Adam."""
    c = _counts(t, layout, padded_vocab)

    def per_param(data_parallel: int) -> float:
        return 18 if not t.distributed_optimizer else 6 + (12 / data_parallel)

    return (c["tp"] + c["replicated"]) * per_param(layout.data) + c["expert"] * per_param(layout.expert_data)


def megatron_activation_bytes(t: Any, layout: Layout, padded_vocab: int, microbatches: int) -> float:
    """theoretical_memory_usage.py:277-425: with SP and selective recompute the Korthikanti formula,
    otherwise compute_activation_memory_without_sp."""
    m, b = t.model, t.batch.micro
    s, h, L = m.seq_length, m.hidden_size, m.num_layers
    tp, pp = layout.tensor, layout.pipeline
    vpp = virtual_pipeline_size(L, pp, t.virtual_pipeline)
    selective_sp = t.sequence_parallel and tp > 1 and t.recompute is not None and t.recompute.granularity == "selective"
    if selective_sp:
        memory = s * b * h * (18 + 4 * (ffn_hidden_size(m) / h)) * L
    else:
        memory = s * b * h * (10 + 24 / tp) * L
    memory += 8 * s * b * pp + s * b * h * pp
    if vpp is not None:
        memory *= 1 + (pp - 1) / (pp * vpp)
    elif pp > 1:
        memory *= min(1, microbatches / pp)
    if pp == 1:
        if selective_sp:
            memory += s * b * h * 4 * (1 + padded_vocab / h)
        else:
            memory += (s * b * padded_vocab / tp + s * b * h) * 2
    if selective_sp:
        return memory / tp
    return memory * 1.05


def attention_scores_bytes(t: Any, layout: Layout, microbatches: int) -> float:
    """An unfused (local) attention stores, per layer, the [b, heads/tp, s, s] scores and softmax in
    16-bit and the dropout mask in bytes: 5 × heads × s² × b / tp (Korthikanti et al., table 2).
    Transformer Engine's fused attention stores none of it. Full recompute keeps one layer's worth."""
    m = t.model
    if m.transformer_impl != "local":
        return 0.0
    per_layer = 5 * (m.num_attention_heads / layout.tensor) * (m.seq_length / layout.context) ** 2 * t.batch.micro
    if t.recompute is not None and t.recompute.granularity == "full":
        layers = 1
    else:
        layers = m.num_layers // layout.pipeline
    in_flight = min(layout.pipeline, microbatches) if layout.pipeline > 1 else 1
    return per_layer * layers * in_flight


def logits_fp32_bytes(t: Any, layout: Layout, padded_vocab: int) -> float:
    """The vocab-parallel cross-entropy casts the logits to fp32 (4 bytes) and their gradient comes
    back in 16 bits (2 bytes): 6 × s × b × vocab / tp beyond Megatron's 2-byte logits."""
    m = t.model
    return 6 * m.seq_length * t.batch.micro * padded_vocab / layout.tensor


def checkpoint_bytes_per_save(t: Any, parameters_total: float) -> int:
    """torch_dist stores the model weights in their dtype and the optimizer's fp32 state (main
    params for 16-bit training, Adam's two moments) for every parameter once, across all ranks.
    Megatron's memory formula leaves out learned position embeddings; a checkpoint holds them."""
    weight = 4 if t.precision == "fp32" else 2
    optimizer = 8 if t.precision == "fp32" else 12
    if t.model.position_embedding == "learned_absolute":
        parameters_total += t.model.max_position_embeddings * t.model.hidden_size
    return int(parameters_total * (weight + optimizer))


def gpu_memory_gb(resources: Any) -> float | None:
    """resources.gpu_memory_gb, else what the worker flavor's name says (H200, H100, A100)."""
    if resources.gpu_memory_gb is not None:
        return resources.gpu_memory_gb
    flavor = (resources.worker_flavor or "").upper()
    for name, gb in GPU_MEMORY_GB:
        if re.search(rf"\b{name}\b|{name}", flavor):
            return gb
    return None


def estimate(spec: Any, layout: Layout) -> Estimate | None:
    """Every estimate for a pretrain spec; None when the vocabulary size is unknown, or the layout
    has no data-parallel replica, expert data-parallel replica or virtual stage to estimate for (the
    rules report those layouts as errors of their own)."""
    t = spec.training
    vocab = vocab_size(t)
    if vocab is None:
        return None
    if layout.data < 1 or layout.expert_data < 1 or virtual_pipeline_size(
            t.model.num_layers, layout.pipeline, t.virtual_pipeline) == 0:
        return None
    padded = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, layout.tensor)
    micro = num_microbatches(t.batch.global_, t.batch.micro, layout.data)
    counts = _counts(t, layout, padded)
    weights = megatron_weight_and_optimizer_bytes(t, layout, padded)
    activations = megatron_activation_bytes(t, layout, padded, micro)
    attention = attention_scores_bytes(t, layout, micro)
    # the last pipeline stage holds the logits; counting them with the first stage's activations
    # makes the figure an upper bound when pipeline > 1
    logits = logits_fp32_bytes(t, layout, padded)
    peak = weights + activations + attention + logits
    per_save = checkpoint_bytes_per_save(t, counts["total"])
    iterations = train_iterations(t.train_iters, t.train_samples, t.batch.global_)
    saves = iterations // t.checkpoint.save_interval + (1 if iterations % t.checkpoint.save_interval else 0)
    gpu = gpu_memory_gb(spec.resources)
    peak_mb = peak / MB
    return Estimate(
        parameters_total=int(counts["total"]),
        parameters_most_loaded_rank=int(math.ceil(counts["tp"] + counts["replicated"] + counts["expert"])),
        weights_and_optimizer_mb=round(weights / MB, 2),
        activations_mb=round(activations / MB, 2),
        megatron_theoretical_total_mb=round((weights + activations) / MB, 2),
        attention_scores_mb=round(attention / MB, 2),
        logits_fp32_mb=round(logits / MB, 2),
        peak_mb=round(peak_mb, 2),
        num_microbatches=micro,
        tokens_per_step=t.batch.global_ * t.model.seq_length,
        checkpoint_bytes_per_save=per_save,
        checkpoint_saves=saves,
        checkpoint_bytes_retained=per_save * saves,
        gpu_memory_gb=gpu,
        peak_fraction_of_gpu=None if gpu is None else round(peak_mb / (gpu * 1000**3 / MB), 4),
    )
