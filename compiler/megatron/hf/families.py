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
_GEMMA_NORM = ("and Gemma's (1 + weight) RMSNorm, its embeddings scaled by sqrt(hidden_size) and its tanh-GELU GLU "
               "have none either")
_GEMMA2 = ("Gemma 2's attention-logit and final-logit soft-capping and its sliding window on every other layer have "
           "no Megatron-LM flag at the pinned commit (Bridge's gemma2 provider sets them as provider fields, "
           "gemma/gemma2_bridge.py), " + _GEMMA_NORM)
_GEMMA3 = ("Gemma 3's sliding window on five of every six layers, with its own RoPE base for those layers "
           "(rope_local_base_freq), has no Megatron-LM flag at the pinned commit (Bridge's gemma3 provider sets it "
           "as provider fields, gemma/gemma3_bridge.py), " + _GEMMA_NORM)
REFUSED_ARCHITECTURES: dict[str, str] = {
    "MixtralForCausalLM": (
        "Bridge v0.5.1 has no Mixtral bridge (no register_bridge for MixtralForCausalLM); Megatron-LM's own "
        "tools/checkpoint/loader_mixtral_hf.py converts it, but through the legacy loader/saver pipeline "
        "with its own flags and no way back to Hugging Face weights, so this compiler's convert/export "
        "steps cannot use it. Convert Mixtral outside the compiler and start from that checkpoint"),
    "Gemma2ForCausalLM": _GEMMA2,
    "Gemma3ForCausalLM": _GEMMA3,
    "Gemma3ForConditionalGeneration": _GEMMA3,
    "GptOssForCausalLM": (
        "GPT-OSS's constants (YaRN factor 32 over 4096 positions, the clamped quick-GELU GLU with offset 1, "
        "learnable softmax sinks, sliding windows on every other layer) are reachable only through "
        "--enable-gpt-oss of Megatron-LM's post-training scripts (megatron/post_training/arguments.py:125, "
        "model_builder.py:198), not through pretrain_gpt.py's flags"),
}


# Architectures Bridge v0.5.1 registers a bridge for (src/megatron/bridge/models/, each file's
# register_bridge) whose flags this compiler does not derive: refused as not derived here, not as
# unknown to Bridge. Any other class is one Bridge v0.5.1 has no bridge for.
BRIDGE_ONLY_ARCHITECTURES: dict[str, str] = {
    "Qwen3NextForCausalLM": "qwen/qwen3_next_bridge.py: gated DeltaNet linear-attention layers and gated attention",
    "Qwen3_5ForCausalLM": "qwen/qwen35_bridge.py", "Qwen3_5MoeForCausalLM": "qwen/qwen35_bridge.py",
    "GemmaForCausalLM": "gemma/gemma_bridge.py: (1 + weight) RMSNorm and scaled embeddings",
    "Gemma4ForCausalLM": "gemma/gemma4_bridge.py",
    "OlmoeForCausalLM": "olmoe/olmoe_bridge.py", "NemotronForCausalLM": "nemotron/nemotron_bridge.py",
    "NemotronHForCausalLM": "nemotronh/nemotron_h_bridge.py: Mamba layers",
    "DeepseekV4ForCausalLM": "deepseek/deepseek_v4_bridge.py", "KimiK2ForCausalLM": "kimi/kimi_bridge.py",
    "Glm4MoeLiteForCausalLM": "glm/glm47_flash_bridge.py", "GlmMoeDsaForCausalLM": "glm_moe_dsa/glm5_bridge.py",
    "MiniMaxM2ForCausalLM": "minimax_m2/minimax_m2_bridge.py", "MiMoForCausalLM": "mimo/mimo_bridge.py",
    "MiMoV2FlashForCausalLM": "mimo_v2_flash/mimo_v2_flash_bridge.py",
    "BailingMoeV2ForCausalLM": "bailing/bailing_moe2_bridge.py", "FalconH1ForCausalLM": "falcon_h1/falconh1_bridge.py",
    "DeciLMForCausalLM": "llama_nemotron/llama_nemotron_bridge.py", "Step3p5ForCausalLM": "stepfun/step35_bridge.py",
    "SarvamMLAForCausalLM": "sarvam/sarvam_mla_bridge.py", "SarvamMoEForCausalLM": "sarvam/sarvam_moe_bridge.py",
}


def unsupported_reason(architecture: str) -> str:
    """Why a class outside SUPPORTED_ARCHITECTURES and REFUSED_ARCHITECTURES does not compile."""
    if architecture in BRIDGE_ONLY_ARCHITECTURES:
        return (f"Bridge v0.5.1 converts it ({BRIDGE_ONLY_ARCHITECTURES[architecture]}), but this compiler does not "
                "derive its Megatron-LM flags")
    return "Bridge v0.5.1 has no bridge for it (no register_bridge names this class), so there is no conversion to train from"


def supported_list() -> str:
    """The accepted architectures values, for error messages."""
    return ", ".join(sorted(SUPPORTED_ARCHITECTURES))
