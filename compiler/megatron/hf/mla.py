"""Multi-latent attention (DeepSeek-V2/V3, Kimi K2, Moonlight) as Bridge v0.5.1 maps it.

Bridge: CONFIG_MAPPING's MLA rows (model_bridge.py:446-451: q_lora_rank, kv_lora_rank,
qk_nope_head_dim -> qk_head_dim, qk_rope_head_dim -> qk_pos_emb_head_dim, v_head_dim), the MLA rope
mapping (model_bridge.py:474-481 and :558-584: a yarn rope_scaling's factor, mscale, mscale_all_dim,
original_max_position_embeddings, beta_fast, beta_slow become MLATransformerConfig fields; without
yarn Bridge sets rotary_scaling_factor 1.0 and mscale_all_dim 1.0), and the DeepSeek providers
(deepseek_v3_bridge.py:58-60: qk_layernorm, multi_latent_attention, untied embeddings).

Megatron-LM at the pinned commit: MLA takes rope_type "yarn" by default (arguments.py:2560,
argument_utils.py:331-333); only --rotary-scaling-factor, --mscale and --mscale-all-dim are flags
(arguments.py:3169-3174, CLI defaults 1.0, 1.0, 0.0), while original_max_position_embeddings (4096),
beta_fast (32) and beta_slow (1) stay MLATransformerConfig's constants (transformer_config.py:2610-2616).
The rotary half of q/k is de-interleaved for MLA (rope_utils.py:115), as transformers' DeepSeek
models do with rope_interleave true.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...tuples import NamedTuple
from .common import HFConfigError, boolean, num, opt_int, pos_int, rope_kind, scaling_number

# MLATransformerConfig's fixed YaRN constants (transformer_config.py:2610-2616), no flag for them.
MEGATRON_MLA_YARN_FIXED = {"original_max_position_embeddings": 4096.0, "beta_fast": 32.0, "beta_slow": 1.0}


class MLA(NamedTuple):
    q_lora_rank: int | None  # None: q is one projection (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_head_dim: int  # qk_nope_head_dim
    qk_pos_emb_head_dim: int  # qk_rope_head_dim
    v_head_dim: int
    rotary_scaling_factor: float
    mscale: float
    mscale_all_dim: float


def derive_mla(config: Mapping[str, Any], family: str, scaling: dict[str, Any] | None, max_positions: int) -> MLA:
    """The MLA of a DeepSeek config.json and its rope scaling; HFConfigError when inexpressible."""
    if family == "deepseek_v3" and not boolean(config, "rope_interleave", True):
        raise HFConfigError("config.json rope_interleave = false: Megatron's MLA always de-interleaves the "
                            "rotary half of q and k (rope_utils.py:115); refused")
    if scaling is None:
        # model_bridge.py:578-584: no scaling is YaRN with factor 1 (and mscale_all_dim 1)
        factor, mscale, mscale_all = 1.0, 1.0, 1.0
    else:
        kind = rope_kind(scaling)
        if kind != "yarn":
            raise HFConfigError(f"config.json rope_scaling type {kind!r}: multi-latent attention in Megatron-LM "
                                "takes YaRN or none (Bridge maps only 'yarn', model_bridge.py:562)")
        if "factor" not in scaling:
            raise HFConfigError("config.json rope_scaling has no factor: Bridge would leave Megatron's "
                                "MLATransformerConfig default 40 in place; refused")
        factor = scaling_number(scaling, "factor", 1.0)
        if factor < 1.0:
            raise HFConfigError(f"config.json rope_scaling.factor {factor} is below 1")
        mscale = scaling_number(scaling, "mscale", 1.0)  # Megatron's default, as Bridge leaves it
        mscale_all = scaling_number(scaling, "mscale_all_dim", 0.0)
        _check_mscale(factor, mscale, mscale_all)
        for key, fixed in MEGATRON_MLA_YARN_FIXED.items():
            if key in scaling and scaling_number(scaling, key, fixed) != fixed:
                raise HFConfigError(
                    f"config.json rope_scaling.{key} = {scaling[key]!r}: Megatron-LM fixes it at {fixed:g} for "
                    "multi-latent attention (MLATransformerConfig, transformer_config.py:2610-2616) and has no "
                    "flag for it; refused", f"rope_scaling.{key}")
        for key in ("attention_factor", "truncate"):
            if key in scaling and not (key == "truncate" and scaling[key] is True):
                raise HFConfigError(f"config.json rope_scaling.{key} = {scaling[key]!r} has no Megatron-LM flag "
                                    "(its YaRN computes the attention factor from mscale / mscale_all_dim and "
                                    "rounds the correction range); refused")
        # left out, transformers and Bridge take max_position_embeddings for it (modeling_rope_utils.py
        # RotaryEmbeddingConfigMixin; Bridge's provider showed it on an altered DeepSeek-V3 copy)
        if "original_max_position_embeddings" not in scaling and max_positions != 4096:
            raise HFConfigError(
                f"config.json rope_scaling has no original_max_position_embeddings, so transformers and Bridge take "
                f"max_position_embeddings {max_positions} for it; Megatron-LM fixes it at 4096 for multi-latent "
                "attention (transformer_config.py:2610-2616) and has no flag for it; refused")
    return MLA(
        # absent: the config classes' 1536; null: one q projection (V2-Lite, Moonlight)
        q_lora_rank=pos_int(config, "q_lora_rank", 1536) if "q_lora_rank" not in config else opt_int(config, "q_lora_rank"),
        kv_lora_rank=pos_int(config, "kv_lora_rank", 512),
        qk_head_dim=pos_int(config, "qk_nope_head_dim", 128),
        qk_pos_emb_head_dim=pos_int(config, "qk_rope_head_dim", 64),
        v_head_dim=pos_int(config, "v_head_dim", 128),
        rotary_scaling_factor=factor, mscale=mscale, mscale_all_dim=mscale_all,
    )


def _check_mscale(factor: float, mscale: float, mscale_all: float) -> None:
    """Megatron's YaRN scales cos/sin by get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    (yarn_rotary_pos_embedding.py:150, :259-271); transformers' does the same only when
    both are non-zero, else get_mscale(factor) (modeling_rope_utils.py _compute_yarn_parameters). They agree
    when factor <= 1, or both are positive, or mscale_all_dim is 0 and mscale 1."""
    if factor <= 1.0:
        return
    if mscale <= 0 or mscale_all < 0:
        raise HFConfigError(f"config.json rope_scaling.mscale = {mscale:g}, mscale_all_dim = {mscale_all:g}: "
                            "YaRN's magnitude scales must be positive (mscale_all_dim 0: unset); refused")
    if mscale_all == 0 and mscale != 1.0:
        raise HFConfigError(f"config.json rope_scaling.mscale = {mscale:g} without mscale_all_dim: transformers' "
                            "YaRN then ignores mscale while Megatron-LM's applies it; refused (give mscale_all_dim "
                            "as the model was trained, or mscale 1)")


def mla_flags(m: MLA) -> list[str]:
    """pretrain_gpt.py's MLA flags (arguments.py:3158-3174 _add_mla_args; --multi-latent-attention is the TransformerConfig field, transformer_config.py:265).

    --rotary-scaling-factor, --mscale and --mscale-all-dim are always written: the CLI defaults
    (1.0, 1.0, 0.0) are not DeepSeek's no-scaling values (1.0, 1.0, 1.0)."""
    f = ["--multi-latent-attention"]
    if m.q_lora_rank is not None:
        f += ["--q-lora-rank", str(m.q_lora_rank)]
    f += ["--kv-lora-rank", str(m.kv_lora_rank), "--qk-head-dim", str(m.qk_head_dim),
          "--qk-pos-emb-head-dim", str(m.qk_pos_emb_head_dim), "--v-head-dim", str(m.v_head_dim),
          "--rotary-scaling-factor", num(m.rotary_scaling_factor), "--mscale", num(m.mscale),
          "--mscale-all-dim", num(m.mscale_all_dim)]
    return f
