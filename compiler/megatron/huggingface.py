"""Megatron-LM architecture of a Hugging Face model, derived from its config.json alone.

A job that continues training from Hugging Face weights converts them with Megatron Bridge
v0.5.1 (`AutoBridge.import_ckpt`) into a torch_dist checkpoint that carries no training
arguments (its latest_checkpointed_iteration.txt is 0 and --use-checkpoint-args has nothing to
read), so every architecture flag of pretrain_gpt.py must be given and must agree with the
shapes Bridge wrote. This module computes those flags from the parsed config.json, for the dense
families Bridge maps with the same provider settings: Llama (2, 3, 3.x with llama3 RoPE scaling),
Qwen2/2.5, Qwen3 and Mistral. Anything else is refused with the list of supported architectures.

Sources (pinned Megatron-LM 571370c8, Bridge v0.5.1):
- Bridge's common HF->provider mapping: src/megatron/bridge/models/conversion/model_bridge.py:412
  (CONFIG_MAPPING) and :504 (hf_config_to_provider_kwargs); the per-family overrides in
  models/llama/llama_bridge.py, models/qwen/qwen2_bridge.py, models/qwen/qwen3_bridge.py,
  models/mistral/mistral_bridge.py.
- Megatron-LM flag names: megatron/training/arguments.py (hand-written flags, cited per line) and
  the dataclass-generated ones (ArgumentGroupFactory, arguments.py:2098 for TransformerConfig,
  :2861 for TokenizerConfig); every flag emitted here was checked against the parser of that commit.

Pure functions over plain data: no import of the rest of the compiler, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

# architectures[0] -> Bridge family (the @register_bridge source class of each bridge file)
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",  # llama/llama_bridge.py:34
    "MistralForCausalLM": "mistral",  # mistral/mistral_bridge.py (register_bridge)
    "Qwen2ForCausalLM": "qwen2",  # qwen/qwen2_bridge.py (register_bridge, model_type="qwen2")
    "Qwen3ForCausalLM": "qwen3",  # qwen/qwen3_bridge.py (register_bridge, model_type="qwen3")
}

# Megatron's Llama-3 RoPE scaling has these fixed; only the factor is a flag
# (megatron/core/models/common/embeddings/rotary_pos_embedding.py:92-98 _apply_scaling defaults;
# arguments.py:2138 --use-rope-scaling, :2140 --rope-scaling-factor).
_MEGATRON_LLAMA3_FIXED = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}

# The only Llama-3 factor pretrain_gpt.py honours (see _rope_scaling_factor).
PRETRAIN_GPT_ROPE_SCALING_FACTOR = 8.0

# Each class's tie_word_embeddings default when config.json omits the key (transformers'
# LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config all default to untied).
_TIE_DEFAULT = False


class HFConfigError(ValueError):
    """config.json describes something this derivation cannot express as Megatron-LM flags."""


class UnsupportedArchitecture(HFConfigError):
    """config.json's architectures names a model outside the supported dense families."""


class HFArchitecture(NamedTuple):
    """The Megatron-LM architecture of one HF model: typed values and the exact flags."""

    architecture: str  # config.json architectures[0]
    family: str  # llama | mistral | qwen2 | qwen3
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int  # == num_attention_heads when the model has no GQA
    kv_channels: int
    vocab_size: int  # rows of the embedding Bridge writes: config.json vocab_size, unpadded
    max_position_embeddings: int
    rotary_base: int
    rotary_percent: float
    rope_scaling_factor: float | None  # Llama-3 style scaling; None: no scaling
    norm_epsilon: float
    add_qkv_bias: bool
    qk_layernorm: bool
    untie_embeddings: bool
    window_size: tuple[int, int] | None  # Mistral's sliding window, Bridge's (window - 1, 0)
    attention_dropout: float
    flags: tuple[str, ...]  # pretrain_gpt.py architecture flags, in a stable order


class Contradiction(NamedTuple):
    """A typed training.model field that disagrees with the committed config.json."""

    field: str  # training.model.<field>
    spec_value: Any
    hf_key: str  # the config.json key it derives from
    hf_value: Any
    why: str

    def message(self, config_path: str = "config.json") -> str:
        """One line naming both locations."""
        return (f"training.model.{self.field} = {self.spec_value!r} contradicts {config_path} "
                f"{self.hf_key} = {self.hf_value!r}: {self.why}")


# training.model.<field> -> (HFArchitecture attribute it must agree with, config.json key).
MODEL_FIELDS: dict[str, tuple[str, str]] = {
    "num_layers": ("num_layers", "num_hidden_layers"),
    "hidden_size": ("hidden_size", "hidden_size"),
    "num_attention_heads": ("num_attention_heads", "num_attention_heads"),
    "num_query_groups": ("num_query_groups", "num_key_value_heads"),
    "ffn_hidden_size": ("ffn_hidden_size", "intermediate_size"),
    "seq_length": ("max_position_embeddings", "max_position_embeddings"),  # an upper bound
    "max_position_embeddings": ("max_position_embeddings", "max_position_embeddings"),
    "vocab_size": ("vocab_size", "vocab_size"),
    "swiglu": ("family", "hidden_act"),  # always True for these families
    "normalization": ("family", "rms_norm_eps"),  # always RMSNorm
    "position_embedding": ("family", "rope_theta"),  # always rope
    "untie_embeddings": ("untie_embeddings", "tie_word_embeddings"),
    "disable_bias_linear": ("family", "mlp_bias"),  # always True
}


def supported_list() -> str:
    """The accepted architectures values, for error messages."""
    return ", ".join(sorted(SUPPORTED_ARCHITECTURES))


def _architecture(config: Mapping[str, Any]) -> tuple[str, str]:
    """(architectures[0], family), or UnsupportedArchitecture naming what is accepted."""
    archs = config.get("architectures")
    if not isinstance(archs, list) or len(archs) != 1 or not isinstance(archs[0], str):
        raise UnsupportedArchitecture(
            f"config.json architectures must list exactly one class, got {archs!r}; "
            f"supported: {supported_list()}")
    if archs[0] not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"config.json architectures {archs[0]!r} is not supported by this Bridge v0.5.1 "
            f"mapping; supported: {supported_list()}")
    return archs[0], SUPPORTED_ARCHITECTURES[archs[0]]


def _int(config: Mapping[str, Any], key: str) -> int:
    """A required positive integer field."""
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise HFConfigError(f"config.json {key} must be a positive integer, got {v!r}")
    return v


def _rope(config: Mapping[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, scaling dict or None) from either config.json layout.

    transformers < 5 writes rope_theta + rope_scaling; transformers >= 5 writes one
    rope_parameters dict holding rope_theta and rope_type (Bridge reads both:
    models/conversion/transformers_compat.py:27 rope_theta_from_hf).
    """
    params = config.get("rope_parameters")
    theta = config.get("rope_theta")
    scaling = config.get("rope_scaling")
    if isinstance(params, Mapping):
        theta = params.get("rope_theta", theta)
        if scaling is None and params.get("rope_type", "default") != "default":
            scaling = dict(params)
    if theta is None:
        theta = 10000.0  # the transformers default of all four config classes
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0:
        raise HFConfigError(f"config.json rope_theta must be a positive number, got {theta!r}")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise HFConfigError(f"config.json rope_scaling must be an object or null, got {scaling!r}")
    if scaling is not None and (scaling.get("rope_type") or scaling.get("type")) in (None, "default"):
        scaling = None
    return float(theta), (dict(scaling) if scaling is not None else None)


def _rotary_base(theta: float) -> int:
    """--rotary-base is type=int (arguments.py:2132): refuse a base that would be truncated."""
    if theta != math.floor(theta):
        raise HFConfigError(f"config.json rope_theta {theta} is not an integer; "
                            "Megatron-LM's --rotary-base takes integers only (arguments.py:2132)")
    return int(theta)


def _rope_scaling_factor(family: str, scaling: dict[str, Any] | None) -> float | None:
    """The Llama-3 factor, or None; refuses every scaling Megatron-LM's flags cannot express."""
    if scaling is None:
        return None
    kind = scaling.get("rope_type") or scaling.get("type")
    if family != "llama" or kind != "llama3":
        raise HFConfigError(
            f"config.json rope scaling {kind!r} is not supported for {family}: only Llama's "
            "'llama3' scaling maps to --use-rope-scaling (llama/llama_bridge.py provider_bridge)")
    for key, fixed in _MEGATRON_LLAMA3_FIXED.items():
        if float(scaling.get(key, fixed)) != fixed:
            raise HFConfigError(
                f"config.json rope scaling {key} = {scaling[key]} but Megatron-LM fixes it at "
                f"{fixed} (rotary_pos_embedding.py:96-98); only the factor is a flag")
    # Bridge's default when the key is missing (llama_bridge.py: rope_scaling_factor = get("factor", 8.0))
    factor = float(scaling.get("factor", 8.0))
    if factor != PRETRAIN_GPT_ROPE_SCALING_FACTOR:
        # pretrain_gpt.py builds GPTModel(rope_scaling=args.use_rope_scaling, ...) without
        # rope_scaling_factor (gpt_builders.py:94), so GPTModel's default 8.0 applies
        # (megatron/core/models/gpt/gpt_model.py:107) whatever --rope-scaling-factor says.
        raise HFConfigError(
            f"config.json llama3 rope scaling factor {factor}: pretrain_gpt.py at the pinned "
            "Megatron-LM ignores --rope-scaling-factor and always uses 8.0 (gpt_builders.py:94, "
            "gpt_model.py:107); training would silently use the wrong RoPE")
    return factor


def _biases(config: Mapping[str, Any], family: str) -> tuple[bool, bool]:
    """(add_qkv_bias, qk_layernorm); refuses biases Megatron's flags cannot place."""
    if config.get("mlp_bias"):
        raise HFConfigError("config.json mlp_bias = true: these bridges map dense models without "
                            "linear biases (--disable-bias-linear); refused")
    if family in ("llama", "mistral", "qwen3") and config.get("attention_bias"):
        # HF puts that bias on q, k, v AND o_proj; --add-qkv-bias covers q, k, v only, and
        # qwen3_bridge.py forces add_qkv_bias = False.
        raise HFConfigError(f"config.json attention_bias = true for {family}: the o_proj bias has "
                            "no Megatron-LM flag (--add-qkv-bias covers q, k, v); refused")
    # Qwen2 always has q/k/v biases (qwen2_bridge.py: add_qkv_bias = True, QKV bias mapping).
    return family == "qwen2", family == "qwen3"  # qwen3_bridge.py: qk_layernorm = True


def _window(config: Mapping[str, Any], family: str) -> tuple[int, int] | None:
    """Mistral's sliding window as Bridge sets it; Qwen's enabled window is refused."""
    if family in ("qwen2", "qwen3"):
        if config.get("use_sliding_window"):
            raise HFConfigError("config.json use_sliding_window = true: Qwen's per-layer sliding "
                                "window (max_window_layers) has no Megatron-LM flag; refused")
        return None
    if family == "mistral" and config.get("sliding_window") is not None:
        # mistral/mistral_bridge.py provider_bridge: window_size = [sliding_window - 1, 0]
        return (_int(config, "sliding_window") - 1, 0)
    return None


def _num(v: float) -> str:
    """A float as Python writes it, which argparse's float() reads back exactly."""
    return repr(float(v))


def _flags(a: dict[str, Any]) -> tuple[str, ...]:
    """The pretrain_gpt.py flags of the typed values, in a fixed order."""
    f = ["--num-layers", str(a["num_layers"]),  # transformer_config.py:64
         "--hidden-size", str(a["hidden_size"]),  # transformer_config.py:132
         "--ffn-hidden-size", str(a["ffn_hidden_size"]),  # transformer_config.py:157
         "--num-attention-heads", str(a["num_attention_heads"])]  # transformer_config.py:135
    if a["num_query_groups"] != a["num_attention_heads"]:
        # without --group-query-attention num_query_groups is dropped (argument_utils.py:325-328)
        f += ["--group-query-attention",  # arguments.py:2107
              "--num-query-groups", str(a["num_query_groups"])]  # transformer_config.py:152
    f += ["--kv-channels", str(a["kv_channels"]),  # transformer_config.py:161
          "--max-position-embeddings", str(a["max_position_embeddings"]),  # arguments.py:2119
          "--position-embedding-type", "rope",  # arguments.py:2122
          "--rotary-base", str(a["rotary_base"]),  # arguments.py:2132
          "--rotary-percent", _num(a["rotary_percent"])]  # arguments.py:2134
    if a["rope_scaling_factor"] is not None:
        f += ["--use-rope-scaling",  # arguments.py:2138
              "--rope-scaling-factor", _num(a["rope_scaling_factor"])]  # arguments.py:2140
    f += ["--normalization", "RMSNorm",  # transformer_config.py:233
          "--norm-epsilon", _num(a["norm_epsilon"]),  # transformer_config.py:178 (arg_names)
          "--swiglu",  # arguments.py:2164
          "--disable-bias-linear"]  # transformer_config.py:189 (arg_names)
    if a["add_qkv_bias"]:
        f.append("--add-qkv-bias")  # transformer_config.py:195
    if a["qk_layernorm"]:
        f.append("--qk-layernorm")  # transformer_config.py:236
    if a["untie_embeddings"]:
        f.append("--untie-embeddings-and-output-weights")  # arguments.py:2174
    if a["window_size"] is not None:
        f += ["--window-size", "%d,%d" % a["window_size"]]  # arguments.py:2110, tuple_type :387
    # Megatron defaults both dropouts to 0.1 (transformer_config.py:165,168); the HF models and
    # Bridge's providers (hidden_dropout = 0.0 in each family's provider_bridge) use none.
    f += ["--attention-dropout", _num(a["attention_dropout"]),
          "--hidden-dropout", "0.0",
          # Bridge writes the embedding with config.json's vocab_size rows, unpadded
          # (model_bridge.py make_vocab_size_divisible_by picks a divisor of it); Megatron would
          # pad len(tokenizer) to a multiple of 128 × TP unless told (training_config.py:630,
          # build_tokenizer.py:140 _set_padded_vocab_size).
          "--padded-vocab-size", str(a["vocab_size"])]
    return tuple(f)


def derive(config: Mapping[str, Any], *, tensor_parallel: int = 1) -> HFArchitecture:
    """The Megatron-LM architecture of a parsed config.json; HFConfigError when not expressible."""
    arch, family = _architecture(config)
    if (act := config.get("hidden_act", "silu")) != "silu":
        raise HFConfigError(f"config.json hidden_act {act!r}: only silu maps to --swiglu")
    heads = _int(config, "num_attention_heads")
    hidden = _int(config, "hidden_size")
    groups = config.get("num_key_value_heads") or heads  # older Llama configs omit it
    if not isinstance(groups, int) or heads % groups:
        raise HFConfigError(f"config.json num_key_value_heads {groups!r} must divide "
                            f"num_attention_heads {heads}")
    head_dim = config.get("head_dim") or hidden // heads  # CONFIG_MAPPING head_dim -> kv_channels
    if not isinstance(head_dim, int) or (config.get("head_dim") is None and hidden % heads):
        raise HFConfigError(f"config.json gives no usable head_dim (hidden {hidden}, heads {heads})")
    theta, scaling = _rope(config)
    qkv_bias, qk_norm = _biases(config, family)
    vocab = _int(config, "vocab_size")
    if vocab % tensor_parallel:
        raise HFConfigError(f"config.json vocab_size {vocab} is not divisible by tensor parallel "
                            f"{tensor_parallel}: --padded-vocab-size keeps it as is")
    eps = config.get("rms_norm_eps", 1e-6 if family.startswith("qwen") else 1e-5)
    rotary_percent = float(config.get("partial_rotary_factor", 1.0))
    if not 0.0 < rotary_percent <= 1.0:
        raise HFConfigError(f"config.json partial_rotary_factor {rotary_percent} out of (0, 1]")
    typed: dict[str, Any] = {
        "architecture": arch, "family": family,
        "num_layers": _int(config, "num_hidden_layers"), "hidden_size": hidden,
        "ffn_hidden_size": _int(config, "intermediate_size"), "num_attention_heads": heads,
        "num_query_groups": groups, "kv_channels": head_dim, "vocab_size": vocab,
        "max_position_embeddings": _int(config, "max_position_embeddings"),
        "rotary_base": _rotary_base(theta), "rotary_percent": rotary_percent,
        "rope_scaling_factor": _rope_scaling_factor(family, scaling),
        "norm_epsilon": float(eps), "add_qkv_bias": qkv_bias, "qk_layernorm": qk_norm,
        "untie_embeddings": not config.get("tie_word_embeddings", _TIE_DEFAULT),
        "window_size": _window(config, family),
        "attention_dropout": float(config.get("attention_dropout", 0.0)),
    }
    return HFArchitecture(**typed, flags=_flags(typed))


def tokenizer_flags(tokenizer_path: str) -> tuple[str, ...]:
    """The HF tokenizer of the model directory (arguments.py:2861 TokenizerConfig flags)."""
    return ("--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer_path)


def expected_model_fields(a: HFArchitecture) -> dict[str, Any]:
    """What each typed training.model field must be (seq_length: at most this)."""
    return {
        "num_layers": a.num_layers, "hidden_size": a.hidden_size,
        "num_attention_heads": a.num_attention_heads, "num_query_groups": a.num_query_groups,
        "ffn_hidden_size": a.ffn_hidden_size, "seq_length": a.max_position_embeddings,
        "max_position_embeddings": a.max_position_embeddings, "vocab_size": a.vocab_size,
        "swiglu": True, "normalization": "RMSNorm", "position_embedding": "rope",
        "untie_embeddings": a.untie_embeddings, "disable_bias_linear": True,
    }


def contradictions(a: HFArchitecture, spec_model: Mapping[str, Any],
                   config: Mapping[str, Any]) -> list[Contradiction]:
    """The fields the spec sets explicitly (pass only those) that disagree with config.json."""
    expected = expected_model_fields(a)
    out = []
    for field, value in spec_model.items():
        if field not in MODEL_FIELDS or value is None:
            continue
        hf_key = MODEL_FIELDS[field][1]
        want = expected[field]
        if field == "seq_length":
            if value > want:
                out.append(Contradiction(field, value, hf_key, want,
                                         "the sequence is longer than the model's positions"))
            continue
        if field == "num_query_groups" and value == a.num_attention_heads == want:
            continue
        if value != want:
            out.append(Contradiction(field, value, hf_key, config.get(hf_key, "(absent)"),
                                     f"the converted checkpoint needs {want!r}"))
    return out
