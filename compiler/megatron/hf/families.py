"""Which config.json architectures compile, to which Bridge v0.5.1 family, and why the others do not.

Sources (Bridge v0.5.1, src/megatron/bridge/models/): each family's @register_bridge source class.
"""

from __future__ import annotations

# architectures[0] -> family (the bridge file that registers it)
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",  # llama/llama_bridge.py:34
    "MistralForCausalLM": "mistral",  # mistral/mistral_bridge.py (register_bridge)
    "Qwen2ForCausalLM": "qwen2",  # qwen/qwen2_bridge.py (register_bridge, model_type="qwen2")
    "Qwen3ForCausalLM": "qwen3",  # qwen/qwen3_bridge.py (register_bridge, model_type="qwen3")
    "Qwen3MoeForCausalLM": "qwen3_moe",  # qwen/qwen3_moe_bridge.py:28
    "DeepseekV2ForCausalLM": "deepseek_v2",  # deepseek/deepseek_v2_bridge.py:36 (MLAModelProvider)
    # deepseek/deepseek_v3_bridge.py:46; Kimi K2 and Moonlight publish this class too
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "Glm4MoeForCausalLM": "glm4_moe",  # glm/glm45_bridge.py:45 (GLM-4.5, GLM-4.5-Air, GLM-4.6)
}

# Families whose conversion and training need Transformer Engine at the pinned commits, and why
# (each seen failing on a CPU without TE; docs/bridge.md).
NEEDS_TE: dict[str, str] = {
    "deepseek_v2": ("multi-latent attention needs Transformer Engine at the pinned Megatron-LM: the local "
                    "layer spec hands DotProductAttention a k_channels argument it does not take "
                    "(multi_latent_attention.py:214)"),
    "glm4_moe": ("Bridge v0.5.1 maps GLM-4.5's experts only as Transformer Engine's grouped experts "
                 "(glm45_bridge.py:166-190 name experts.linear_fc1.weight*, no local_experts), so the local "
                 "SequentialMLP cannot be loaded"),
}
NEEDS_TE["deepseek_v3"] = NEEDS_TE["deepseek_v2"]

MOE_FAMILIES = frozenset({"qwen3_moe", "deepseek_v2", "deepseek_v3", "glm4_moe"})
MLA_FAMILIES = frozenset({"deepseek_v2", "deepseek_v3"})

# Architectures refused with the reason (the list of supported ones follows in the message).
_GEMMA = ("attention logit soft-capping and a sliding-window pattern over alternating layers have no "
          "Megatron-LM flag at the pinned commit (Bridge's gemma providers set them as provider fields), "
          "and Gemma's (1 + weight) RMSNorm and scaled embeddings have none either")
REFUSED_ARCHITECTURES: dict[str, str] = {
    "MixtralForCausalLM": (
        "Bridge v0.5.1 has no Mixtral bridge (no register_bridge for MixtralForCausalLM); Megatron-LM's own "
        "tools/checkpoint/loader_mixtral_hf.py converts it, but through the legacy loader/saver pipeline "
        "with its own flags and no way back to Hugging Face weights, so this compiler's convert/export "
        "steps cannot use it. Convert Mixtral outside the compiler and start from that checkpoint"),
    "Gemma2ForCausalLM": _GEMMA,
    "Gemma3ForCausalLM": _GEMMA,
    "Gemma3ForConditionalGeneration": _GEMMA,
    "GptOssForCausalLM": (
        "GPT-OSS's constants (YaRN factor 32 over 4096 positions, the clamped quick-GELU GLU with offset 1, "
        "learnable softmax sinks, sliding windows on every other layer) are reachable only through "
        "--enable-gpt-oss of Megatron-LM's post-training scripts (megatron/post_training/arguments.py:125, "
        "model_builder.py:198), not through pretrain_gpt.py's flags"),
}


def supported_list() -> str:
    """The accepted architectures values, for error messages."""
    return ", ".join(sorted(SUPPORTED_ARCHITECTURES))
