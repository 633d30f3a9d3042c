"""Megatron's FLOPs per iteration: a port of `num_floating_point_operations`
(megatron/training/training.py:411-917 at the pinned commit 571370c8), the figure Megatron divides
by the iteration time to log "throughput per GPU (TFLOP/s/GPU)" (training.py:2608-2614). The port
covers the standard Transformer branch (training.py:570-867): dense and MoE MLPs (moe_layer_freq,
top-k routing, shared experts, latent MoE), GQA/MHA, multi-latent attention (:640-699), the
attention output gate, multi-token prediction and the logits. It leaves out linear attention
variants (gated delta net, :733-792) and hybrid Mamba models (:870-915): those raise
NotImplementedError rather than return a wrong figure. tests/test_timing.py holds it to Megatron's
own function.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from ..schema.records import Model
from .hf.model import HFModel
from .pretrain import ffn_hidden_size


class FlopsArgs(NamedTuple):
    """The Megatron args num_floating_point_operations reads, under Megatron's own names (after
    arguments.py's derivations: kv_channels, ffn_hidden_size and padded_vocab_size filled in)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    kv_channels: int
    ffn_hidden_size: int
    seq_length: int
    padded_vocab_size: int
    group_query_attention: bool = False
    num_query_groups: int | None = None
    swiglu: bool = False
    num_experts: int | None = None
    moe_layer_freq: int | list[int] = 1
    moe_router_topk: int = 2
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_latent_size: int | None = None
    mtp_num_layers: int | None = None
    attention_output_gate: bool = False
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32  # arguments.py:3160-3168 defaults
    qk_head_dim: int = 128
    qk_pos_emb_head_dim: int = 64
    v_head_dim: int = 128
    experimental_attention_variant: str | None = None
    hybrid_layer_pattern: str | None = None


# Raw flags (training.args) that change a FlopsArgs field only init_from's config sets (flops_args): the memory,
# parameter and step-time figures are for the model without them
UNREAD_SHAPE_FLAGS = {
    "--kv-channels": "the head size (the estimates take hidden_size / num_attention_heads)",
    "--multi-latent-attention": "multi-latent attention",
    "--q-lora-rank": "multi-latent attention's query low rank",
    "--kv-lora-rank": "multi-latent attention's key-value low rank",
    "--qk-head-dim": "multi-latent attention's head sizes",
    "--qk-pos-emb-head-dim": "multi-latent attention's head sizes",
    "--v-head-dim": "multi-latent attention's head sizes",
    "--moe-layer-freq": "the MoE layer pattern (the estimates take every layer as MoE)",
    "--moe-shared-expert-intermediate-size": "the shared experts",
    "--mtp-num-layers": "the multi-token prediction layers",
}


def query_groups(args: Any) -> int:
    """The key/value heads (Megatron's num_query_groups; arguments.py sets it to the heads without GQA)."""
    return int(args.num_query_groups if args.group_query_attention and args.num_query_groups
               else args.num_attention_heads)


class FlopsSplit(NamedTuple):
    total: float  # what Megatron's function returns for the global batch
    logits: float  # the output layer (and MTP logits): all on the last pipeline stage
    core_attention: float  # QK^T and (QK^T)V of all layers, forward and backward
    per_layer: float  # (total - logits) / num_layers (MTP layers folded in)


def num_floating_point_operations(args: Any, batch_size: int) -> float:
    """Megatron's FLOPs for one global batch of `batch_size` sequences (training.py:411-917, BSHD
    defaults of :444-447; the standard Transformer branch only)."""
    if args.hybrid_layer_pattern is not None:
        raise NotImplementedError("hybrid Mamba models (training.py:870-915) are not ported")
    if args.experimental_attention_variant == "gated_delta_net":
        raise NotImplementedError("linear attention variants (training.py:733-792) are not ported")
    seqlen_squared_sum = batch_size * args.seq_length * args.seq_length  # :444-445
    total_tokens = batch_size * args.seq_length  # :446-447
    # :574-575 sets args.num_query_groups = heads without GQA; a local keeps args unchanged
    num_query_groups = args.num_query_groups if args.group_query_attention else args.num_attention_heads
    if args.num_experts is None:  # :577-582
        num_dense_layers, num_moe_layers, num_experts_routed_to, last_layer_is_moe = args.num_layers, 0, 0, 0
    else:  # :583-601
        pattern = moe_pattern(args)
        num_moe_layers = sum(pattern)
        num_dense_layers = args.num_layers - num_moe_layers
        num_experts_routed_to = args.moe_router_topk
        last_layer_is_moe = pattern[-1]
    if args.mtp_num_layers is not None:  # :603-610
        mtp_num_layers = args.mtp_num_layers
        num_moe_layers += last_layer_is_moe * mtp_num_layers
        num_dense_layers += (1 - last_layer_is_moe) * mtp_num_layers
        num_layers = args.num_layers + mtp_num_layers
    else:
        mtp_num_layers = 0
        num_layers = args.num_layers
    moe_ffn = args.moe_ffn_hidden_size if args.moe_ffn_hidden_size is not None else args.ffn_hidden_size  # :612-616
    latent = args.moe_latent_size
    shared = 0 if args.moe_shared_expert_intermediate_size is None else args.moe_shared_expert_intermediate_size
    fwd_bwd, fma = 3, 2  # :626, :628
    ffn_expansion = 3 if args.swiglu else 2  # :631
    h = args.hidden_size
    query = args.kv_channels * args.num_attention_heads  # :702-706
    key = value = args.kv_channels * num_query_groups
    if args.multi_latent_attention:
        self_attn_term, core_term = mla_terms(args)
    else:
        gate = query if args.attention_output_gate else 0
        self_attn_term = fwd_bwd * fma * (h * (query + key + value + gate) + query * h)  # :707-722
        core_term = fwd_bwd * fma * query / 2 * 2  # :724-730
    self_attn_term *= num_layers  # :794-804: every layer is a standard attention layer here
    core_term *= num_layers
    if latent is None:
        routed = moe_ffn * num_experts_routed_to * ffn_expansion
    else:
        routed = moe_ffn * num_experts_routed_to * ffn_expansion * latent / h + 2 * latent
    return (  # :808-866
        total_tokens * (
            fwd_bwd * fma * h * (
                (args.ffn_hidden_size * ffn_expansion) * num_dense_layers
                + routed * num_moe_layers
                + (shared * ffn_expansion) * num_moe_layers
            )
            + self_attn_term
            + fwd_bwd * fma * mtp_num_layers * (3 * h + 2 * h * h)
            + fwd_bwd * fma * h * args.padded_vocab_size * (mtp_num_layers + 1)
        )
        + seqlen_squared_sum * core_term
    )


def moe_pattern(args: Any) -> list[int]:
    """1 for an MoE layer, per layer (training.py:583-601; arguments.py's --moe-layer-freq: an int N makes
    every Nth layer one, a list is the pattern); all 0 without experts."""
    if args.num_experts is None:
        return [0] * args.num_layers
    if isinstance(args.moe_layer_freq, int):
        pattern = [1 if i % args.moe_layer_freq == 0 else 0 for i in range(args.num_layers)]
    elif isinstance(args.moe_layer_freq, list):
        pattern = list(args.moe_layer_freq)
    else:
        raise RuntimeError("Illegal --moe-layer-freq argument provided!")
    assert len(pattern) == args.num_layers, (len(pattern), args.num_layers)
    return pattern


def mla_terms(args: Any) -> tuple[float, float]:
    """(token-linear, core) per-layer FLOPs factors of multi-latent attention (training.py:640-699)."""
    h, heads, fwd_bwd, fma = args.hidden_size, args.num_attention_heads, 3, 2
    qk = args.qk_head_dim + args.qk_pos_emb_head_dim
    if args.q_lora_rank is None:  # :656-661
        q_term = h * heads * qk
    else:  # :662-667
        q_term = args.q_lora_rank * (h + heads * qk + 1)
    linear = fwd_bwd * fma * (  # :669-686
        q_term + args.kv_lora_rank * (h + heads * (args.qk_head_dim + args.v_head_dim) + 1)
        + h * args.qk_pos_emb_head_dim + heads * args.v_head_dim * h)
    core = fwd_bwd * fma * (heads * qk / 2 + heads * args.v_head_dim / 2)  # :689-698
    return linear, core


def flops_split(args: Any, batch_size: int) -> FlopsSplit:
    """Megatron's total, and the parts the step model places: logits, core attention, per layer."""
    total = num_floating_point_operations(args, batch_size)
    mtp = args.mtp_num_layers or 0
    tokens = batch_size * args.seq_length
    logits = 3 * 2 * args.hidden_size * args.padded_vocab_size * (mtp + 1) * tokens  # training.py:853-859
    per_token = mla_terms(args)[1] if args.multi_latent_attention else 3 * 2 * args.kv_channels * args.num_attention_heads
    core = per_token * (args.num_layers + mtp) * batch_size * args.seq_length ** 2
    return FlopsSplit(total, logits, core, (total - logits) / (args.num_layers + mtp))


def flops_args(model: Model, padded_vocab: int) -> FlopsArgs:
    """FlopsArgs from a spec's training.model, with Megatron's derived values; init_from's model
    (check/facts.py effective_training, an HFModel) adds kv_channels and the MoE/MLA fields of the HF config."""
    hf = model if isinstance(model, HFModel) else None
    mla = None if hf is None else hf.mla
    assert model.num_layers is not None and model.hidden_size is not None and model.num_attention_heads is not None
    args = FlopsArgs(
        num_layers=model.num_layers, hidden_size=model.hidden_size, num_attention_heads=model.num_attention_heads,
        kv_channels=(hf.kv_channels if hf is not None else None) or model.hidden_size // model.num_attention_heads,  # :1283
        moe_layer_freq=list((hf.moe_layer_freq if hf is not None else None) or ()) or 1,
        moe_shared_expert_intermediate_size=None if hf is None else hf.moe_shared_expert_intermediate_size,
        mtp_num_layers=None if hf is None else hf.mtp_num_layers,
        multi_latent_attention=mla is not None,
        ffn_hidden_size=ffn_hidden_size(model), seq_length=model.seq_length,
        padded_vocab_size=padded_vocab, group_query_attention=model.num_query_groups is not None,
        num_query_groups=model.num_query_groups, swiglu=model.swiglu, num_experts=model.num_experts,
        moe_router_topk=model.moe_router_topk, moe_ffn_hidden_size=model.moe_ffn_hidden_size,
    )
    if mla is None:
        return args
    return args._replace(q_lora_rank=mla.q_lora_rank, kv_lora_rank=mla.kv_lora_rank, qk_head_dim=mla.qk_head_dim,
                         qk_pos_emb_head_dim=mla.qk_pos_emb_head_dim, v_head_dim=mla.v_head_dim)
