"""Parameter counts of a pretrain_gpt.py model as Megatron's memory formula splits them: tensor-parallel
sharded, replicated, and the routed experts that expert parallelism splits (memory.py, stage_memory.py)."""

from __future__ import annotations

from typing import Any

from .flops import flops_args
from .parallel import ParallelLayout as Layout


def counts(t: Any, layout: Layout, padded_vocab: int) -> dict[str, float]:
    """compute_weight_and_optimizer_memory's parameter counts (theoretical_memory_usage.py:13-247):
    multi-latent attention (:61-80), the MoE layer pattern (first dense layers, :29-45), shared
    experts (:104, :114-118) and MTP layers (:47-54, :147-150, :198-206), read through flops_args
    (init_from's derived model: kv_channels, MLA, the MoE layout). Beyond Megatron's formula, each
    MTP layer's eh_proj (2h x h) and its three norms (multi_token_prediction.py), which are weights."""
    m = t.model
    a = flops_args(m, padded_vocab)
    h, heads = a.hidden_size, a.num_attention_heads
    groups = a.num_query_groups if a.group_query_attention and a.num_query_groups is not None else heads
    num_experts = 1 if a.num_experts is None else a.num_experts
    gated = 3 / 2 if a.swiglu else 1
    norm_size = 1 if m.normalization == "RMSNorm" else 2
    if a.num_experts is not None:
        freq = a.moe_layer_freq
        pattern = [1 if i % freq == 0 else 0 for i in range(a.num_layers)] if isinstance(freq, int) else list(freq)
        moe_ffn = a.moe_ffn_hidden_size or a.ffn_hidden_size  # arguments.py:1481-1483
    else:
        pattern, moe_ffn = [0] * a.num_layers, 0
    num_moe_layers = sum(pattern)
    num_dense_layers = a.num_layers - num_moe_layers
    mtp = a.mtp_num_layers or 0
    mtp_moe = mtp * pattern[-1]
    mtp_dense = mtp - mtp_moe
    attention: float
    if a.multi_latent_attention:
        qk = a.qk_head_dim + a.qk_pos_emb_head_dim
        q_term = (h * heads * qk if a.q_lora_rank is None
                  else a.q_lora_rank * (h + heads * qk + norm_size))  # q lora + rope + q norm
        attention = (q_term + a.kv_lora_rank * (h + heads * (a.qk_head_dim + a.v_head_dim) + norm_size)
                     + h * a.qk_pos_emb_head_dim + heads * a.v_head_dim * h)
    else:
        attention = 2 * h * h * ((1 + groups / heads) * (a.kv_channels * heads / h))
    embedding = h * padded_vocab
    final_norm = norm_size * h
    embeddings_total = 2 * embedding if m.untie_embeddings else embedding
    dense_mlp = 2 * h * a.ffn_hidden_size * gated
    shared = 2 * h * (a.moe_shared_expert_intermediate_size or 0) * gated
    routed = 2 * h * moe_ffn * num_experts * gated
    norms = 2 * h * norm_size
    add_bias_linear = not m.disable_bias_linear
    router = (h * num_experts + (num_experts if add_bias_linear else 0)) if a.num_experts is not None else 0
    mtp_own_tp, mtp_own_replicated = mtp * 2 * h * h, mtp * 3 * norm_size * h  # eh_proj; enorm, hnorm, final
    tp_sharded = (attention + dense_mlp) * num_dense_layers + (attention + shared) * num_moe_layers
    replicated = norms * num_dense_layers + (norms + router) * num_moe_layers + final_norm
    expert_sharded = routed * num_moe_layers
    mtp_tp = (attention + dense_mlp) * mtp_dense + (attention + shared) * mtp_moe + mtp_own_tp
    mtp_replicated = norms * mtp_dense + (norms + router) * mtp_moe + mtp_own_replicated
    mtp_expert = routed * mtp_moe
    total = tp_sharded + replicated + expert_sharded + mtp_tp + mtp_replicated + mtp_expert + embeddings_total
    pp, tp = layout.pipeline, layout.tensor
    etp, ep = layout.expert_tensor, layout.expert
    # the most loaded shard: 1/pp of the layers, the MTP block and the embedding (:209-222)
    tp_on_most_loaded = (tp_sharded / pp + mtp_tp + embedding) / tp
    replicated_on_most_loaded = replicated / pp + mtp_replicated
    expert_on_most_loaded = (expert_sharded / pp + mtp_expert) / (etp * ep)
    if m.untie_embeddings and pp == 1:
        tp_on_most_loaded += embedding / tp
    return {
        "total": total, "tp": tp_on_most_loaded, "replicated": replicated_on_most_loaded,
        "expert": expert_on_most_loaded,
        # one pipeline stage's share, for the per-stage figures (stage_memory.py)
        "stage_layers_tp": tp_sharded / pp / tp, "stage_layers_replicated": (replicated - final_norm) / pp,
        "embedding_tp": embedding / tp, "final_norm": final_norm,
    }
