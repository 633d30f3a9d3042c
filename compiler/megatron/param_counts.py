"""Parameter counts of a pretrain_gpt.py model as Megatron's memory formula splits them: tensor-parallel
sharded, replicated, and the routed experts that expert parallelism splits (memory.py), and what one
pipeline stage holds of each (stage_memory.py)."""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from .flops import flops_args, moe_pattern, query_groups
from .parallel import ParallelLayout as Layout


class Layer(NamedTuple):
    """One transformer layer's parameters, split as Megatron's formula splits them."""

    tp: float  # attention, the dense MLP or the shared experts: split by tensor parallel
    replicated: float  # norms, the router, the shared-expert gate
    expert: float  # the routed experts: split by expert-tensor x expert parallel


class Parts(NamedTuple):
    dense: Layer
    moe: Layer
    pattern: list[int]  # 1 for an MoE layer, per layer (moe_layer_freq)
    mtp: int  # MTP layers, each a layer like the last plus its own weights below
    mtp_own_tp: float  # per MTP layer: eh_proj (2h x h)
    mtp_own_replicated: float  # per MTP layer: enorm, hnorm, its final norm
    embedding: float
    final_norm: float


def parts(t: Any, padded_vocab: int) -> Parts:
    """compute_weight_and_optimizer_memory's per-layer counts (theoretical_memory_usage.py:13-247):
    multi-latent attention (:61-80), the MoE layer pattern (first dense layers, :29-45), shared
    experts (:104, :114-118), the shared-expert gate (:119-123: h per MoE layer; Megatron counts it
    when --moe-shared-expert-gate is given with shared experts; no family hf/ supports turns it on,
    a spec can in training.args) and MTP layers (:47-54), read through flops_args (init_from's
    derived model: kv_channels, MLA, the MoE layout). Beyond Megatron's formula, each MTP layer's
    eh_proj (2h x h) and its three norms (multi_token_prediction.py), which are weights."""
    m = t.model
    a = flops_args(m, padded_vocab)
    h, heads = a.hidden_size, a.num_attention_heads
    groups = query_groups(a)
    num_experts = 1 if a.num_experts is None else a.num_experts
    gated = 3 / 2 if a.swiglu else 1
    norm_size = 1 if m.normalization == "RMSNorm" else 2
    pattern = moe_pattern(a)
    moe_ffn = (a.moe_ffn_hidden_size or a.ffn_hidden_size) if a.num_experts is not None else 0  # arguments.py:1481-1483
    attention: float
    if a.multi_latent_attention:
        qk = a.qk_head_dim + a.qk_pos_emb_head_dim
        q_term = (h * heads * qk if a.q_lora_rank is None
                  else a.q_lora_rank * (h + heads * qk + norm_size))  # q lora + rope + q norm
        attention = (q_term + a.kv_lora_rank * (h + heads * (a.qk_head_dim + a.v_head_dim) + norm_size)
                     + h * a.qk_pos_emb_head_dim + heads * a.v_head_dim * h)
    else:
        attention = 2 * h * h * ((1 + groups / heads) * (a.kv_channels * heads / h))
    shared_ffn = a.moe_shared_expert_intermediate_size or 0
    shared = 2 * h * shared_ffn * gated
    norms = 2 * h * norm_size
    router = (h * num_experts + (num_experts if not m.disable_bias_linear else 0)) if a.num_experts is not None else 0
    gate = h if shared_ffn > 0 and "--moe-shared-expert-gate" in t.args else 0
    mtp = a.mtp_num_layers or 0
    return Parts(
        dense=Layer(attention + 2 * h * a.ffn_hidden_size * gated, norms, 0.0),
        moe=Layer(attention + shared, norms + router + gate, 2 * h * moe_ffn * num_experts * gated),
        pattern=pattern, mtp=mtp, mtp_own_tp=2 * h * h, mtp_own_replicated=3 * norm_size * h,
        embedding=h * padded_vocab, final_norm=norm_size * h)


def _sum(p: Parts, layers: list[int]) -> Layer:
    """The parameters of these layers (0-based; an index past the last is an MTP layer, like the last)."""
    kinds = [p.pattern[min(i, len(p.pattern) - 1)] for i in layers]
    moe = sum(kinds)
    dense = len(kinds) - moe
    return Layer(*(d * dense + e * moe for d, e in zip(p.dense, p.moe)))


def _mtp(p: Parts) -> Layer:
    """The MTP block: its layers and each one's own eh_proj and norms."""
    layers = _sum(p, list(range(len(p.pattern), len(p.pattern) + p.mtp)))
    return Layer(layers.tp + p.mtp * p.mtp_own_tp, layers.replicated + p.mtp * p.mtp_own_replicated, layers.expert)


def counts(t: Any, layout: Layout, padded_vocab: int) -> dict[str, float]:
    """The total and Megatron's most loaded shard (theoretical_memory_usage.py:209-222): 1/pp of the
    layers, the whole MTP block and the embedding — Megatron's own figure, which memory.py compares;
    no rank holds exactly that under pipeline parallelism (stage_counts says what each stage holds)."""
    p = parts(t, padded_vocab)
    block, mtp = _sum(p, list(range(len(p.pattern)))), _mtp(p)
    embeddings_total = 2 * p.embedding if t.model.untie_embeddings else p.embedding
    total = sum(block) + p.final_norm + sum(mtp) + embeddings_total
    pp, tp = layout.pipeline, layout.tensor
    tp_on_most_loaded = (block.tp / pp + mtp.tp + p.embedding) / tp
    replicated_on_most_loaded = (block.replicated + p.final_norm) / pp + mtp.replicated
    expert_on_most_loaded = (block.expert / pp + mtp.expert) / (layout.expert_tensor * layout.expert)
    if t.model.untie_embeddings and pp == 1:
        tp_on_most_loaded += p.embedding / tp
    return {"total": total, "tp": tp_on_most_loaded, "replicated": replicated_on_most_loaded,
            "expert": expert_on_most_loaded}


def stage_layers(num_layers: int, pp: int, vpp: int | None, rank: int) -> list[int]:
    """The layers pipeline rank `rank` builds, an even split: its virtual stages v·pp + rank, each of
    num_layers / (pp·vpp) consecutive layers (transformer_block.py get_transformer_layer_offset)."""
    chunks = vpp or 1
    per = num_layers // (pp * chunks)
    return [(v * pp + rank) * per + i for v in range(chunks) for i in range(per)]


def stage_counts(t: Any, layout: Layout, padded_vocab: int, rank: int, vpp: int | None) -> tuple[float, float]:
    """(tensor-parallel sharded and replicated, routed experts) parameters on pipeline rank `rank`'s
    tensor- and expert-parallel rank 0: its own layers; on the first the embedding; on the last the
    final norm, the output layer (a copy of the embedding when tied and pp > 1) and, without a custom
    pipeline layout, the whole MTP block (multi_token_prediction.py mtp_on_this_rank: the last stage),
    with its own copy of the embedding when pp > 1 (gpt_model.py:156, language_module.py:333-341)."""
    p = parts(t, padded_vocab)
    pp, tp = layout.pipeline, layout.tensor
    own = _sum(p, stage_layers(len(p.pattern), pp, vpp, rank))
    tp_sharded, replicated, expert = own
    first, last = rank == 0, rank == pp - 1
    if first:
        tp_sharded += p.embedding
    if last:
        mtp = _mtp(p)
        replicated += p.final_norm + mtp.replicated
        expert += mtp.expert
        tp_sharded += mtp.tp + (p.embedding if p.mtp and pp > 1 else 0)
        if pp > 1 or t.model.untie_embeddings:
            tp_sharded += p.embedding
    return tp_sharded / tp + replicated, expert / (layout.expert_tensor * layout.expert)
