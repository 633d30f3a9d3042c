"""Per-layer choices of a Hugging Face model as Bridge v0.5.1 builds them: linear and q/k/v biases,
qk-layernorm, sliding windows, the attention head width and tied embeddings; each refusal names the
field and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import HFConfigError, boolean, pos_int
from .families import MLA_FAMILIES

# Each class's tie_word_embeddings default when config.json omits the key (transformers'
# LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig, DeepseekV2/V3Config and
# Glm4MoeConfig all default to untied).
_TIE_DEFAULT = False


def biases(config: Mapping[str, Any], family: str) -> tuple[bool, bool]:
    """(add_qkv_bias, qk_layernorm); refuses biases Megatron's flags cannot place."""
    if boolean(config, "mlp_bias", False):
        raise HFConfigError("config.json mlp_bias = true: these bridges map models without "
                            "linear biases (--disable-bias-linear); refused")
    if family in ("llama", "mistral", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3") and \
            boolean(config, "attention_bias", False):
        # HF puts that bias on q, k, v AND o_proj; --add-qkv-bias covers q, k, v only, and the
        # qwen3 bridges force add_qkv_bias = False.
        raise HFConfigError(f"config.json attention_bias = true for {family}: the o_proj bias has "
                            "no Megatron-LM flag (--add-qkv-bias covers q, k, v); refused")
    if family == "glm4_moe":
        # GLM-4.5: q/k/v biases only (o_proj has none); CONFIG_MAPPING attention_bias -> add_qkv_bias,
        # use_qk_norm -> qk_layernorm (model_bridge.py:430-432)
        return boolean(config, "attention_bias", False), boolean(config, "use_qk_norm", False)
    # Qwen2 always has q/k/v biases (qwen2_bridge.py: add_qkv_bias = True, QKV bias mapping);
    # qwen3_bridge.py, qwen3_moe_bridge.py:57 and the DeepSeek bridges set qk_layernorm = True
    return family == "qwen2", family in ("qwen3", "qwen3_moe") or family in MLA_FAMILIES


# Families whose bridge builds untied output weights whatever tie_word_embeddings says
# (deepseek_v2_bridge.py:52, deepseek_v3_bridge.py:63, glm45_bridge.py:67); the others take
# CONFIG_MAPPING's tie_word_embeddings -> share_embeddings_and_output_weights (model_bridge.py:427).
ALWAYS_UNTIED = {"deepseek_v2": "deepseek/deepseek_v2_bridge.py:52", "deepseek_v3": "deepseek/deepseek_v3_bridge.py:63",
                 "glm4_moe": "glm/glm45_bridge.py:67"}


def untied(config: Mapping[str, Any], family: str) -> bool:
    """--untie-embeddings-and-output-weights as Bridge builds the model; a tied config.json of a family
    Bridge always unties is refused (its conversion would train two copies the export cannot tie again)."""
    tied = boolean(config, "tie_word_embeddings", _TIE_DEFAULT)
    if tied and family in ALWAYS_UNTIED:
        raise HFConfigError(
            f"config.json tie_word_embeddings = true for {family}: Bridge v0.5.1 builds this family with separate "
            f"input and output embeddings whatever the config says ({ALWAYS_UNTIED[family]}), so the converted model "
            "would not be the tied model the weights were trained as; refused (the published models are untied)",
            "tie_word_embeddings")
    return not tied


def window(config: Mapping[str, Any], family: str) -> tuple[int, int] | None:
    """Mistral's sliding window as Bridge sets it; Qwen's enabled window is refused."""
    if family in ("qwen2", "qwen3", "qwen3_moe"):
        if boolean(config, "use_sliding_window", False):
            raise HFConfigError("config.json use_sliding_window = true: Qwen's per-layer sliding "
                                "window (max_window_layers) has no Megatron-LM flag; refused")
        return None
    if family == "mistral" and "sliding_window" not in config:
        return (4096 - 1, 0)  # MistralConfig's default sliding_window, which Bridge reads
    if family == "mistral" and config.get("sliding_window") is not None:
        # mistral/mistral_bridge.py provider_bridge: window_size = [sliding_window - 1, 0]
        return (pos_int(config, "sliding_window") - 1, 0)
    return None


def head_dim(config: Mapping[str, Any], family: str, hidden: int, heads: int) -> int:
    """kv_channels: CONFIG_MAPPING head_dim -> kv_channels (model_bridge.py:419), else hidden / heads.
    transformers' Qwen3Config defaults head_dim to 128 (Bridge reads the config object, so it sees
    that default); Qwen3-MoE and GLM-4.5 fall back to hidden / heads; the DeepSeek classes set head_dim
    to qk_rope_head_dim."""
    if config.get("head_dim") is not None:
        return pos_int(config, "head_dim")
    if family == "qwen3":
        return 128
    if family == "deepseek_v2" or (family == "deepseek_v3" and "head_dim" not in config):
        return pos_int(config, "qk_rope_head_dim", 64)
    # written as null, DeepseekV3Config keeps None (DeepseekV2Config replaces it) and Bridge leaves
    # kv_channels to TransformerConfig: hidden / heads (kv_channels shapes no MLA weight)
    if hidden % heads:
        raise HFConfigError(f"config.json gives no head_dim and hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {heads}")
    return hidden // heads
