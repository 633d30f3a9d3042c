"""Parameters of a Hugging Face model from its derived architecture, and the conversion and export
jobs sized from them (issue 29 item 6).

Convert (Bridge's import on GPUs, the pattern of Bridge's examples/conversion/
convert_checkpoints_multi_gpu.py:102-160): the bf16 model is built on the GPUs of one worker, its
experts split over them by expert parallelism (MoE) or the whole model by tensor parallelism (dense),
and saved as torch_dist (layout-free: training reshards on load). Export (export.sh: the whole model
on a CPU under gloo, then Bridge's save_hf_pretrained streaming it out): CPU memory for the bf16
model and the fp32 tensors Bridge gathers per parameter.
"""

from __future__ import annotations

from typing import Any

from ...tuples import NamedTuple

BF16 = 2  # bytes per parameter of the converted weights
HEADROOM = 1.25  # CUDA context, allocator slack and save buffers on top of the weights
# export: two bf16 copies (the model and the checkpoint tensors loaded into it) with the same headroom;
# an estimate from the code path, not a measurement
EXPORT_BYTES_PER_PARAM = 2 * BF16 * HEADROOM
GIB = 1024 ** 3


class ParamCount(NamedTuple):
    total: int
    experts: int  # routed experts only: what expert parallelism splits

    @property
    def dense(self) -> int:
        return self.total - self.experts


def _attention(a: Any) -> int:
    h = a.hidden_size
    if a.mla is not None:
        m = a.mla
        qk = m.qk_head_dim + m.qk_pos_emb_head_dim
        heads = a.num_attention_heads
        q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk) if m.q_lora_rank else h * heads * qk
        kv = h * (m.kv_lora_rank + m.qk_pos_emb_head_dim) + m.kv_lora_rank + m.kv_lora_rank * heads * (
            m.qk_head_dim + m.v_head_dim)
        return int(q + kv + heads * m.v_head_dim * h)
    q = a.num_attention_heads * a.kv_channels
    kv = 2 * a.num_query_groups * a.kv_channels
    bias = (q + kv) if a.add_qkv_bias else 0
    norms = 2 * a.kv_channels if a.qk_layernorm else 0
    return int(h * (q + kv) + q * h + bias + norms)


def parameter_count(a: Any) -> ParamCount:
    """Every parameter of the model Bridge builds (embeddings, layers, MTP layers, final norm)."""
    h = a.hidden_size
    embeddings = a.vocab_size * h * (2 if a.untie_embeddings else 1)
    dense_mlp = 3 * h * a.ffn_hidden_size
    layer_base = _attention(a) + 2 * h
    moe = a.moe
    if moe is None:
        total = embeddings + a.num_layers * (layer_base + dense_mlp) + h
        return ParamCount(total, 0)
    experts_per_layer = moe.num_experts * 3 * h * moe.ffn_hidden_size
    moe_layer = layer_base + experts_per_layer + moe.num_experts * h + (
        moe.num_experts if moe.expert_bias else 0) + (3 * h * moe.shared_expert_size if moe.shared_expert_size else 0)
    moe_layers = sum(moe.layer_freq)
    layers = moe_layers * moe_layer + (a.num_layers - moe_layers) * (layer_base + dense_mlp)
    mtp = moe.mtp_layers or 0
    last_moe = bool(moe.layer_freq[-1])
    mtp_params = mtp * ((moe_layer if last_moe else layer_base + dense_mlp) + 2 * h * h + 3 * h)
    experts = experts_per_layer * (moe_layers + (mtp if last_moe else 0))
    return ParamCount(embeddings + layers + mtp_params + h, experts)


class ConvertSize(NamedTuple):
    """The conversion job: GPUs of one worker and how the model is split over them."""

    gpus: int  # 0: it does not fit one worker
    tensor: int
    expert: int
    gib_per_gpu: float  # what one GPU holds (with HEADROOM)
    gib_total: float  # the bf16 weights alone


def convert_size(a: Any, gpu_gib: float, max_gpus: int) -> ConvertSize:
    """The fewest GPUs (1, 2, 4, 8 up to max_gpus) whose memory holds the model for conversion."""
    count = parameter_count(a)
    total_gib = count.total * BF16 / GIB
    need = 0.0
    g = 1
    while g <= max_gpus:
        if a.moe is not None:
            if a.moe.num_experts % g == 0:
                need = (count.dense + count.experts / g) * BF16 * HEADROOM / GIB
                if need <= gpu_gib:
                    return ConvertSize(g, 1, g, need, total_gib)
        elif a.num_attention_heads % g == 0 and a.num_query_groups % g == 0 and a.vocab_size % g == 0:
            need = count.total / g * BF16 * HEADROOM / GIB
            if need <= gpu_gib:
                return ConvertSize(g, g, 1, need, total_gib)
        g *= 2
    return ConvertSize(0, 1, 1, need, total_gib)


def export_gib(a: Any) -> float:
    """CPU memory of the export job."""
    return parameter_count(a).total * EXPORT_BYTES_PER_PARAM / GIB
