"""Altered copies of a real config.json, generated systematically (issue 30, acceptance 4).

Used twice: tests/test_hf_config_corpus.py derives flags from every copy (each must compile or be
refused with a named reason, never crash), and tools/bridge/altered_fields.py runs Bridge v0.5.1's
provider and Megatron-LM's parser on the copies that compile, recording every field where the model
Bridge builds and the model the flags build differ (tests/fixtures/bridge-altered.json).

Pure Python, no imports beyond the standard library: `alterations(name, config)` yields
(case id, altered config) pairs.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

# one value of each JSON kind a field may wrongly hold, and the edges of the numbers
HOSTILE: tuple[Any, ...] = ("x", -1, 0, 1.5, True, False, [], {}, [1], None, 10 ** 17, 3)

_YARN = {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
         "beta_fast": 32, "beta_slow": 1}

# rope_scaling as it may be written: (id, value); applied to every config
ROPE_VARIANTS: tuple[tuple[str, Any], ...] = (
    ("none", None),
    ("empty", {}),
    ("default", {"rope_type": "default"}),
    ("linear", {"type": "linear", "factor": 2.0}),
    ("dynamic", {"type": "dynamic", "factor": 2.0}),
    ("llama3-8", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}),
    ("llama3-32", {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192}),
    ("llama3-orig-4096", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 4096}),
    ("yarn-40", dict(_YARN)),
    ("yarn-4", dict(_YARN, factor=4)),
    ("yarn-1", dict(_YARN, factor=1)),
    ("yarn-0.5", dict(_YARN, factor=0.5)),
    ("yarn-no-factor", {k: v for k, v in _YARN.items() if k != "factor"}),
    ("yarn-orig-8192", dict(_YARN, original_max_position_embeddings=8192)),
    ("yarn-orig-32768", dict(_YARN, original_max_position_embeddings=32768)),
    ("yarn-no-orig", {k: v for k, v in _YARN.items() if k != "original_max_position_embeddings"}),
    ("yarn-beta-fast-1", dict(_YARN, beta_fast=1)),
    ("yarn-beta-fast-64", dict(_YARN, beta_fast=64)),
    ("yarn-beta-slow-2", dict(_YARN, beta_slow=2)),
    ("yarn-no-mscale", {k: v for k, v in _YARN.items() if k not in ("mscale", "mscale_all_dim")}),
    ("yarn-mscale-0.707", dict(_YARN, mscale=0.707, mscale_all_dim=0.707)),
    ("yarn-rope-type", dict({k: v for k, v in _YARN.items() if k != "type"}, rope_type="yarn")),
    ("yarn-attention-factor", dict(_YARN, attention_factor=1.2)),
    ("longrope", {"type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}),
    ("type-number", {"type": 3, "factor": 2.0}),
    ("not-an-object", "yarn"),
)

# values of one field that change the model's meaning: (field, value); a field the config lacks is added
SEMANTIC: tuple[tuple[str, Any], ...] = (
    ("tie_word_embeddings", True), ("tie_word_embeddings", False),
    ("norm_topk_prob", True), ("norm_topk_prob", False),
    ("q_lora_rank", None), ("q_lora_rank", 768),
    ("n_group", 1), ("n_group", 3), ("n_group", 8), ("n_group", 16), ("n_group", None),
    ("topk_group", 1), ("topk_group", 2), ("topk_group", 4), ("topk_group", 9), ("topk_group", None),
    ("num_experts_per_tok", 1), ("num_experts_per_tok", 2), ("num_experts_per_tok", 100000),
    ("first_k_dense_replace", 0), ("first_k_dense_replace", 1), ("first_k_dense_replace", 4096),
    ("n_shared_experts", 0), ("n_shared_experts", 2),
    ("num_nextn_predict_layers", 0), ("num_nextn_predict_layers", 2), ("num_nextn_predict_layers", 10 ** 17),
    ("attention_bias", True), ("attention_bias", False), ("mlp_bias", True),
    ("use_qk_norm", True), ("use_qk_norm", False),
    ("partial_rotary_factor", 0.5), ("partial_rotary_factor", 0.0), ("partial_rotary_factor", 1.0),
    ("hidden_act", "gelu"), ("hidden_act", "silu"),
    ("scoring_func", "softmax"), ("scoring_func", "sigmoid"),
    ("topk_method", "greedy"), ("topk_method", "group_limited_greedy"), ("topk_method", "noaux_tc"),
    ("routed_scaling_factor", 1.0), ("routed_scaling_factor", 0),
    ("use_sliding_window", True), ("sliding_window", 4096),
    ("num_key_value_heads", 1), ("num_key_value_heads", 7),
    ("head_dim", None), ("head_dim", 64),
    ("rope_theta", 1000000.5), ("rope_theta", 500000),
    ("rms_norm_eps", 1e-5), ("rms_norm_eps", 0),
    ("vocab_size", 151937),
    ("num_hidden_layers", 10 ** 12),
    ("decoder_sparse_step", 2), ("mlp_only_layers", [0]),
    ("moe_layer_freq", 2), ("rope_interleave", False),
    ("num_experts", 64), ("num_local_experts", 64), ("n_routed_experts", 6),
    # every other key Bridge's CONFIG_MAPPING copies onto the provider (model_bridge.py:413-459), present
    # in a config whose transformers class may ignore it
    ("kv_lora_rank", 256), ("qk_nope_head_dim", 64), ("qk_rope_head_dim", 32), ("v_head_dim", 64),
    ("moe_intermediate_size", 512), ("mtp_num_hidden_layers", 1), ("aux_loss_alpha", 0.01),
    ("router_aux_loss_coef", 0.01), ("hidden_dropout", 0.1), ("attention_dropout", 0.1),
    ("initializer_range", 0.5), ("max_position_embeddings", 2048),
    ("architectures", ["LlamaForCausalLM", "Qwen2ForCausalLM"]), ("architectures", "LlamaForCausalLM"),
    ("architectures", []),
)


def _set(config: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _remove(config: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _paths(config: dict[str, Any]) -> Iterator[tuple[str, ...]]:
    for key, value in config.items():
        yield (key,)
        if isinstance(value, dict):
            for inner in value:
                yield (key, inner)


def alterations(name: str, config: dict[str, Any], *, hostile: bool = True) -> Iterator[tuple[str, Any]]:
    """(case id, altered config): each key removed, each key set to each HOSTILE value, each rope_scaling
    variant, each SEMANTIC change; the id names the config and the change."""
    for path in _paths(config):
        dotted = ".".join(path)
        yield f"{name}: -{dotted}", _remove(config, path)
        if hostile:
            for value in HOSTILE:
                yield f"{name}: {dotted}={value!r}", _set(config, path, value)
    for rid, value in ROPE_VARIANTS:
        yield f"{name}: rope_scaling={rid}", _set(config, ("rope_scaling",), value)
    for key, value in SEMANTIC:
        yield f"{name}: {key}={value!r}", _set(config, (key,), value)
    if "head_dim" in config:
        yield f"{name}: head_dim absent", _remove(config, ("head_dim",))
    # transformers >= 5 writes the rope settings as one rope_parameters object
    if isinstance(config.get("rope_scaling"), dict) or "rope_theta" in config:
        moved = {k: v for k, v in config.items() if k not in ("rope_scaling", "rope_theta")}
        moved["rope_parameters"] = dict(config.get("rope_scaling") or {"rope_type": "default"},
                                        rope_theta=config.get("rope_theta", 10000.0))
        yield f"{name}: rope_parameters layout", moved
