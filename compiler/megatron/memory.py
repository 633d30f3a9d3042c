"""Memory, checkpoint and storage estimates for pretrain_gpt.py, shown before a GPU is spent.

`megatron_weight_and_optimizer_bytes` and `megatron_activation_bytes` reproduce
megatron/training/theoretical_memory_usage.py at the pinned commit (dense and MoE GPT with
multi-latent attention, first dense layers, shared experts and MTP; no hybrid models), so the figures
equal the "Theoretical memory footprints" line Megatron prints (MTP models: plus each MTP layer's own
projection and norms, which Megatron's formula leaves out). The peak estimate is built separately, tensor by tensor (activations.py), plus what
Megatron's weight formula leaves out (learned position embeddings) and the unfused attention's
persistent score buffer; docs/memory-model.md compares it with measured runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..tuples import NamedTuple
from . import activations as act
from .flops import flops_args
from . import performance
from .fp8 import fp8_memory
from .gpus import gpu_of_flavor
from .param_counts import counts as _counts
from .divisibility import model_shapes_ok
from .parallel import ParallelLayout as Layout
from .pretrain import (
    ffn_hidden_size, num_microbatches, padded_vocab_size, train_iterations, virtual_pipeline_size, vocab_size,
)

if TYPE_CHECKING:  # the spec as the estimator reads it
    from ..schema.records import JobSpec
    from .flags import SpecView

MB = 1024 * 1024
GB = 1000**3
# The run's logs on shared storage: Megatron's start-up (the argument dump, warnings) and one line
# per logged iteration, both upper bounds of what the committed H200 logs hold (tests/test_log_sizes.py
# measures them): 61.3-85.2 kB before the first iteration line (whole files 69.8-92.7 kB) and
# 323-397 B per iteration line; the first two logged iterations add ~0.7 kB each (the parameter
# counts, the memory report) and the end ~1-4 kB (the checkpoint saves), within the start-up's margin.
LOG_START_BYTES = 100_000
LOG_LINE_BYTES = 400
# TensorBoard: training.py:2462-2535 writes about 10 scalars per iteration at the default
# --tensorboard-log-interval 1, each an event record of roughly 60-80 B. Not measured.
TENSORBOARD_BYTES_PER_ITERATION = 1000
# The estimate's stated uncertainty: every measured configuration is within it (docs/memory-model.md).
# The capacity rule refuses a spec only when the estimate less this margin is still over the GPU.
MEASURED_ERROR = 0.10


class Estimate(NamedTuple):
    parameters_total: int
    parameters_most_loaded_rank: int
    weights_and_optimizer_mb: float  # Megatron's formula
    activations_mb: float  # Megatron's formula
    megatron_theoretical_total_mb: float
    position_embeddings_mb: float  # learned position embeddings' weights, gradients and optimizer state
    attention_buffer_mb: float  # the unfused attention's persistent score buffer
    layer_activations_mb: float  # the layers' activations held at the peak
    loss_mb: float  # the head and the logits at the loss, when the peak is there
    peak_mb: float
    peak_at: str
    attention: str  # which attention path the estimate assumes
    not_measured: tuple[str, ...]  # the terms or layouts no measured run covers
    num_microbatches: int
    tokens_per_step: int
    checkpoint_bytes_per_save: int
    checkpoint_saves: int
    checkpoint_bytes_retained: int
    log_bytes: int
    tensorboard_bytes: int
    storage_bytes: int  # checkpoints retained + logs + TensorBoard
    gpu_memory_gb: float | None
    peak_fraction_of_gpu: float | None
    workspace_mb: float = round(act.CUBLAS_WORKSPACE_BYTES / MB, 2)  # cuBLAS (and TE's) workspaces, measured
    held_weights_mb: float | None = None  # weights + grads + optimizer as held (fp16: 2-byte grads), in the peak


def bytes_per_parameter(distributed_optimizer: bool, data_parallel: int, precision: str = "bf16") -> float:
    """theoretical_memory_usage.py:264-270: 16-bit params, fp32 grads, fp32 main params and Adam. fp16
    keeps main_grad in fp16 (arguments.py:1163-1184 turns fp32 accumulation on for bf16 only; an H200
    fp16 run logs param.main_grad.dtype=torch.float16): 2 bytes of gradient, not 4."""
    grad = 2 if precision == "fp16" else 4
    return 14 + grad if not distributed_optimizer else 2 + grad + (12 / data_parallel)


def megatron_weight_and_optimizer_bytes(t: Any, layout: Layout, padded_vocab: int, precision: str = "bf16",
                                        counts: dict[str, float] | None = None) -> float:
    """theoretical_memory_usage.py:264-274 (which counts 18 bytes whatever the precision); with the
    run's precision, what the rank holds (fp16 keeps 2-byte gradients). `counts`: the layout's parameter counts
    (param_counts.counts) where the caller has them, derived once."""
    c = _counts(t, layout, padded_vocab) if counts is None else counts
    return ((c["tp"] + c["replicated"]) * bytes_per_parameter(t.distributed_optimizer, layout.data, precision)
            + c["expert"] * bytes_per_parameter(t.distributed_optimizer, layout.expert_data, precision))


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


def checkpoint_bytes_per_save(t: Any, parameters_total: float) -> int:
    """torch_dist stores the model weights in their dtype and the optimizer's fp32 state (main
    params for 16-bit training, Adam's two moments) for every parameter once, across all ranks.
    Megatron's memory formula leaves out learned position embeddings; a checkpoint holds them."""
    weight = 4 if t.precision == "fp32" else 2
    optimizer = 8 if t.precision == "fp32" else 12
    parameters_total += position_parameters(t)
    return int(parameters_total * (weight + optimizer))


def gpu_memory_gb(resources: Any) -> float | None:
    """resources.gpu_memory_gb, else the memory of the GPU the worker flavor names in gpus.py's
    table (the one table memory, timing and the capacity rule read)."""
    if resources.gpu_memory_gb is not None:
        return resources.gpu_memory_gb
    gpu = gpu_of_flavor(resources.worker_flavor)
    return None if gpu is None else gpu.memory_gb




def recompute_modules(args: list[str]) -> tuple[str, ...] | None:
    """--recompute-modules from training.args (the spec has no typed field for it), else None."""
    for i, arg in enumerate(args):
        if arg == "--recompute-modules":
            values = []
            for value in args[i + 1:]:
                if value.startswith("--"):
                    break
                values.append(value)
            return tuple(values)
        if arg.startswith("--recompute-modules="):
            return tuple(arg.split("=", 1)[1].split())
    return None


def shape_of(t: Any, layout: Layout, padded_vocab: int, microbatches: int) -> act.Shape:
    """The activation model's inputs for a spec's training section and layout."""
    m, r = t.model, t.recompute
    modules = recompute_modules(list(t.args)) if r is not None and r.granularity == "selective" else None
    a = flops_args(m, padded_vocab)  # init_from's kv_channels, MLA and MoE layout (flops.py)
    mla = (a.q_lora_rank, a.kv_lora_rank, a.qk_head_dim, a.qk_pos_emb_head_dim, a.v_head_dim)
    options = performance.resolve(t, layout.data)  # the performance options as the launch passes them
    return act.Shape(
        layers=m.num_layers, hidden=m.hidden_size, heads=m.num_attention_heads,
        groups=m.num_query_groups or m.num_attention_heads, kv_channels=a.kv_channels,
        ffn=ffn_hidden_size(m), seq=m.seq_length, micro=t.batch.micro, vocab=padded_vocab, swiglu=m.swiglu,
        rmsnorm=m.normalization == "RMSNorm", rope=m.position_embedding == "rope", bias=not m.disable_bias_linear,
        fused=t.fused_kernels, local_attention=m.transformer_impl == "local", num_experts=m.num_experts,
        topk=m.moe_router_topk, moe_ffn=m.moe_ffn_hidden_size or ffn_hidden_size(m),
        elem=4 if t.precision == "fp32" else 2, tp=layout.tensor, pp=layout.pipeline, cp=layout.context,
        ep=layout.expert, etp=layout.expert_tensor, sp=t.sequence_parallel and layout.tensor > 1,
        microbatches=microbatches, vpp=virtual_pipeline_size(m.num_layers, layout.pipeline, t.virtual_pipeline),
        recompute=None if r is None else r.granularity,
        modules=("core_attn",) if modules is None else modules,  # transformer_config.py:1583-1584
        method=None if r is None else r.method, recompute_layers=None if r is None else r.num_layers,
        moe_layers=tuple(a.moe_layer_freq) if isinstance(a.moe_layer_freq, list) else None,
        shared_ffn=a.moe_shared_expert_intermediate_size or 0, mla=mla if a.multi_latent_attention else None,
        mtp_layers=a.mtp_num_layers or 0,
        ce_fusion=options.cross_entropy_fusion,
        grouped_gemm=performance.grouped_gemm(t),
        attention_mask=options.attention_mask,
    )


@dataclass(frozen=True)
class Peak:
    """The peak's terms in bytes."""

    position_embeddings: float
    attention_buffer: float
    layers: float
    loss: float
    at: str


def peak_terms(shape: act.Shape, position_embedding_parameters: int, bytes_per_param: float) -> Peak:
    """Everything beyond Megatron's weight formula held at the peak (activations.py for the layers).
    Learned position embeddings sit whole on every TP rank of the first stage."""
    layers, loss, at = act.activation_peak(shape)
    return Peak(position_embedding_parameters * bytes_per_param, act.attention_buffer_bytes(shape), layers, loss, at)


def not_measured(shape: act.Shape, t: Any) -> tuple[str, ...]:
    """The parts of the estimate that no committed measurement covers. Measured on the H200: one GPU
    through the local layers (bf16, fp16; unfused and fused kernels) and through Transformer Engine
    (fused attention, TE's layers, the fused cross entropy, TE's grouped experts, FP8 delayed
    scaling); TP (with sequence parallel through TE), PP, VPP and DP layouts rank by rank with
    --fake-process-group (docs/memory-model.md, docs/transformer-engine.md)."""
    out = []
    for name, size in (("context", shape.cp), ("expert", shape.ep)):
        if size > 1:
            out.append(f"{name} parallel {size}: derived from the source, not measured")
    if shape.num_experts is not None and (shape.tp > 1 or shape.pp > 1):
        out.append("MoE on more than one GPU: derived from the source (one GPU measured; a fake process group "
                   "routes garbage tokens)")
    if shape.shared_ffn:
        out.append("shared experts: derived from the source, not measured")
    if shape.mla is not None or shape.mtp_layers:
        out.append("multi-latent attention and MTP activations: derived from the source, not measured")
    if shape.recompute == "selective" and set(shape.modules) != {"core_attn"}:
        out.append(f"selective recompute of {', '.join(shape.modules)}: only core_attn was measured")
    if shape.elem != 2:
        out.append(f"{t.precision}: only bf16 and fp16 were measured")
    return tuple(out)


def storage_bytes(t: Any, per_save: int, iterations: int) -> tuple[int, int, int]:
    """(checkpoints retained, logs, TensorBoard) on the shared storage. Megatron keeps every save
    (no --ckpt retention at the pinned commit) and saves once more after training unless the last
    iteration saved (training.py:1401)."""
    interval = t.checkpoint.save_interval
    saves = iterations // interval + (1 if iterations % interval else 0)
    logs = LOG_START_BYTES + LOG_LINE_BYTES * (iterations // t.logging.interval)
    tensorboard = TENSORBOARD_BYTES_PER_ITERATION * iterations if t.logging.tensorboard else 0
    return saves, logs, tensorboard


def estimate(spec: SpecView | JobSpec, layout: Layout) -> Estimate | None:
    """Every estimate for a pretrain spec; None when the vocabulary size is unknown, the layer has no shape
    (divisibility.model_shapes_ok), or the layout
    has no data-parallel replica, expert data-parallel replica or virtual stage to estimate for (the
    rules report those layouts as errors of their own)."""
    t = spec.training
    vocab = vocab_size(t)
    if vocab is None:
        return None
    # a complete pretrain spec (check/facts.py pretrain_complete; `size` checks its own)
    assert t.model is not None and t.model.num_layers is not None and t.batch is not None
    assert spec.resources is not None
    if not model_shapes_ok(t.model):  # the rules report the shape (check/rules/megatron.py)
        return None
    if layout.data < 1 or layout.expert_data < 1 or virtual_pipeline_size(
            t.model.num_layers, layout.pipeline, t.virtual_pipeline) == 0:
        return None
    padded = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, layout.tensor)
    micro = num_microbatches(t.batch.global_, t.batch.micro, layout.data)
    counts = _counts(t, layout, padded)
    weights = megatron_weight_and_optimizer_bytes(t, layout, padded, counts=counts)
    activations = megatron_activation_bytes(t, layout, padded, micro)
    shape = shape_of(t, layout, padded, micro)
    peak = peak_terms(shape, position_parameters(t), bytes_per_parameter(t.distributed_optimizer, layout.data,
                                                                         t.precision))
    held = megatron_weight_and_optimizer_bytes(t, layout, padded, t.precision, counts)
    peak_bytes = (held + peak.position_embeddings + peak.attention_buffer + peak.layers + peak.loss
                  + act.workspace_bytes(shape))
    fp8 = fp8_memory(t, layout)  # FP8's weight copies and amax history (megatron/fp8.py), else None
    if fp8 is not None:
        peak_bytes += fp8.weight_copies + fp8.amax_history
    per_save = checkpoint_bytes_per_save(t, counts["total"])
    iterations = train_iterations(t.train_iters, t.train_samples, t.batch.global_)
    saves, logs, tensorboard = storage_bytes(t, per_save, iterations)
    total_storage = per_save * saves + logs + tensorboard
    gpu = gpu_memory_gb(spec.resources)
    return Estimate(
        parameters_total=int(counts["total"]),
        parameters_most_loaded_rank=int(math.ceil(counts["tp"] + counts["replicated"] + counts["expert"])),
        weights_and_optimizer_mb=round(weights / MB, 2),
        held_weights_mb=round(held / MB, 2),
        activations_mb=round(activations / MB, 2),
        megatron_theoretical_total_mb=round((weights + activations) / MB, 2),
        position_embeddings_mb=round(peak.position_embeddings / MB, 2),
        attention_buffer_mb=round(peak.attention_buffer / MB, 2),
        layer_activations_mb=round(peak.layers / MB, 2),
        loss_mb=round(peak.loss / MB, 2),
        peak_mb=round(peak_bytes / MB, 2),
        peak_at=peak.at,
        attention=("unfused (transformer_impl: local): the scores are stored, measured" if shape.local_attention
                   else "fused (transformer_impl: transformer_engine): no scores stored, measured"),
        not_measured=not_measured(shape, t) + ((fp8.note,) if fp8 is not None else ()),
        num_microbatches=micro,
        tokens_per_step=t.batch.global_ * t.model.seq_length,
        checkpoint_bytes_per_save=per_save,
        checkpoint_saves=saves,
        checkpoint_bytes_retained=per_save * saves,
        log_bytes=logs,
        tensorboard_bytes=tensorboard,
        storage_bytes=total_storage,
        gpu_memory_gb=gpu,
        peak_fraction_of_gpu=None if gpu is None else round(peak_bytes / (gpu * GB), 4),
        workspace_mb=round(act.workspace_bytes(shape) / MB, 2),
    )


def position_parameters(t: Any) -> int:
    """Learned absolute position embeddings (language_model_embedding.py), which Megatron's weight
    formula leaves out: max_position_embeddings × hidden."""
    m = t.model
    return m.max_position_embeddings * m.hidden_size if m.position_embedding == "learned_absolute" else 0


def _peak_bytes(t: Any, layout: Layout, shape: act.Shape, distributed: bool) -> float:
    """The peak estimate for a shape and optimizer choice (the hints re-run it on changed inputs)."""
    c = _counts(t, layout, shape.vocab)
    weights = ((c["tp"] + c["replicated"]) * bytes_per_parameter(distributed, layout.data, t.precision)
               + c["expert"] * bytes_per_parameter(distributed, layout.expert_data, t.precision))
    p = peak_terms(shape, position_parameters(t), bytes_per_parameter(distributed, layout.data, t.precision))
    return weights + p.position_embeddings + p.attention_buffer + p.layers + p.loss + act.workspace_bytes(shape)


def alternatives(t: Any, layout: Layout) -> list[tuple[str, float]]:
    """Changes the training section has not made yet, each with the peak estimate's change in bytes
    (negative: less memory), re-estimated on the changed inputs; the largest saving first."""
    vocab = vocab_size(t)
    if vocab is None:
        return []
    padded = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, layout.tensor)
    micro = num_microbatches(t.batch.global_, t.batch.micro, layout.data)
    shape = shape_of(t, layout, padded, micro)
    now = _peak_bytes(t, layout, shape, t.distributed_optimizer)
    options: list[tuple[str, act.Shape, bool]] = []
    if shape.recompute is None:
        options.append(("training.recompute.granularity: selective", replace(shape, recompute="selective",
                                                                    modules=("core_attn",)), t.distributed_optimizer))
    if shape.recompute != "full":
        options.append(("training.recompute: full, uniform, 1 layer", replace(
            shape, recompute="full", method="uniform", recompute_layers=1), t.distributed_optimizer))
    if t.batch.micro > 1:
        half = t.batch.micro // 2
        options.append((f"training.batch.micro: {half}", replace(shape, micro=half,
                                                                       microbatches=num_microbatches(t.batch.global_, half, layout.data)),
                        t.distributed_optimizer))
    if shape.local_attention:
        options.append(("training.model.transformer_impl: transformer_engine (fused attention)",
                        replace(shape, local_attention=False), t.distributed_optimizer))
    if not t.distributed_optimizer and layout.data > 1:
        options.append(("training.distributed_optimizer: true", shape, True))
    if layout.tensor > 1 and not t.sequence_parallel:
        options.append(("training.sequence_parallel: true", replace(shape, sp=True), t.distributed_optimizer))
    out = [(label, _peak_bytes(t, layout, changed, distributed) - now) for label, changed, distributed in options]
    return sorted((o for o in out if o[1] < 0), key=lambda o: o[1])
