"""Megatron-LM architecture of a Hugging Face model, derived from its config.json alone.

A job that continues training from Hugging Face weights converts them with Megatron Bridge
v0.5.1 (`AutoBridge.import_ckpt`) into a torch_dist checkpoint that carries no training
arguments (its latest_checkpointed_iteration.txt is 0 and --use-checkpoint-args has nothing to
read), so every architecture flag of pretrain_gpt.py must be given and must agree with the
shapes Bridge wrote. This module computes those flags from the parsed config.json for the families
of hf/families.py: the dense Llama (2, 3, 3.x with llama3 RoPE scaling), Qwen2/2.5, Qwen3 and
Mistral, and the mixture-of-experts Qwen3-MoE, DeepSeek-V2/V3 (multi-latent attention; Kimi K2 and
Moonlight publish the V3 class) and GLM-4.5 (hf/moe.py, hf/mla.py). Anything else is refused with
the reason.

Sources (pinned Megatron-LM 571370c8, Bridge v0.5.1):
- Bridge's common HF->provider mapping: src/megatron/bridge/models/conversion/model_bridge.py:413
  (CONFIG_MAPPING) and :515 (hf_config_to_provider_kwargs); the per-family overrides in
  models/llama/llama_bridge.py, models/qwen/qwen2_bridge.py, models/qwen/qwen3_bridge.py,
  models/qwen/qwen3_moe_bridge.py, models/mistral/mistral_bridge.py, models/deepseek/*.py,
  models/glm/glm45_bridge.py. tests/fixtures/bridge-providers/ holds Bridge's own providers for
  the committed configs (tools/bridge/provider_fields.py), compared field by field in the tests.
- Megatron-LM flag names: megatron/training/arguments.py (hand-written flags, cited per line) and
  the dataclass-generated ones (ArgumentGroupFactory, arguments.py:2098 for TransformerConfig,
  :2861 for TokenizerConfig); every flag emitted here was checked against the parser of that commit.

Pure functions over plain data: no import of the rest of the compiler, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..load.limits import MAX_LAYERS
from ..tuples import NamedTuple
from .hf.common import HFConfigError, UnsupportedArchitecture, boolean, number, pos_int, rope, rope_kind, rotary_base
from .hf.common import num as _num
from .hf.families import (MLA_FAMILIES, MOE_FAMILIES, REFUSED_ARCHITECTURES, SUPPORTED_ARCHITECTURES,
                          supported_list, unsupported_reason)
from .hf.keys import CLASS_DEFAULTS, PARTIAL_ROTARY_DEFAULT, check_foreign, check_types
from .hf.layers import biases, head_dim, untied, window
from .hf.mla import MLA, derive_mla, mla_flags
from .hf.moe import MoE, derive_moe, moe_flags, te_flags

__all__ = ["HFConfigError", "UnsupportedArchitecture", "SUPPORTED_ARCHITECTURES", "supported_list", "derive",
           "HFArchitecture", "MoE", "MLA"]

# Megatron's Llama-3 RoPE scaling has these fixed; only the factor is a flag
# (megatron/core/models/common/embeddings/rotary_pos_embedding.py:92-98 _apply_scaling defaults;
# arguments.py:2138 --use-rope-scaling, :2140 --rope-scaling-factor).
_MEGATRON_LLAMA3_FIXED = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}

# The only Llama-3 factor pretrain_gpt.py honours (see _rope_scaling_factor).
PRETRAIN_GPT_ROPE_SCALING_FACTOR = 8.0

# rms_norm_eps when config.json omits it: the transformers 5.8.1 class defaults
_EPS_DEFAULT = {"llama": 1e-6, "mistral": 1e-6, "qwen2": 1e-6, "qwen3": 1e-6, "qwen3_moe": 1e-6,
                "deepseek_v2": 1e-6, "deepseek_v3": 1e-6, "glm4_moe": 1e-5}


class HFArchitecture(NamedTuple):
    """The Megatron-LM architecture of one HF model: typed values and the exact flags."""

    architecture: str  # config.json architectures[0]
    family: str  # hf/families.py SUPPORTED_ARCHITECTURES values
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int  # the dense layers' MLP (all layers of a dense model)
    num_attention_heads: int
    num_query_groups: int  # == num_attention_heads when the model has no GQA (and with MLA)
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
    moe: MoE | None = None  # the mixture of experts; None: dense
    mla: MLA | None = None  # multi-latent attention; None: standard attention
    te_flags: tuple[str, ...] = ()  # Bridge's kernel choices that need Transformer Engine


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


def _architecture(config: Mapping[str, Any]) -> tuple[str, str]:
    """(architectures[0], family), or UnsupportedArchitecture naming why and what is accepted."""
    archs = config.get("architectures")
    if not isinstance(archs, list) or len(archs) != 1 or not isinstance(archs[0], str):
        raise UnsupportedArchitecture(
            f"config.json architectures must list exactly one class, got {archs!r}; "
            f"supported: {supported_list()}", "architectures")
    if archs[0] in REFUSED_ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"config.json architectures {archs[0]!r} is refused: {REFUSED_ARCHITECTURES[archs[0]]}; "
            f"supported: {supported_list()}", "architectures")
    if archs[0] not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"config.json architectures {archs[0]!r} is not supported: {unsupported_reason(archs[0])}; "
            f"supported: {supported_list()}", "architectures")
    return archs[0], SUPPORTED_ARCHITECTURES[archs[0]]


def _rope_scaling_factor(family: str, scaling: dict[str, Any] | None, max_positions: int) -> float | None:
    """The Llama-3 factor, or None; refuses every scaling Megatron-LM's flags cannot express."""
    if scaling is None or family in MLA_FAMILIES:  # MLA's YaRN: hf/mla.py
        return None
    kind = rope_kind(scaling)
    if kind == "yarn":
        raise HFConfigError(
            f"config.json rope_scaling type 'yarn' for {family}: Bridge builds it with position_embedding_type "
            "'yarn' and yarn_* provider fields (model_bridge.py:569-578), but pretrain_gpt.py has no flag for "
            "the YaRN factor or original_max_position_embeddings outside multi-latent attention; refused",
            "rope_scaling")
    if family != "llama" or kind != "llama3":
        raise HFConfigError(
            f"config.json rope scaling {kind!r} is not supported for {family}: only Llama's "
            "'llama3' scaling maps to --use-rope-scaling (llama/llama_bridge.py provider_bridge)", "rope_scaling")
    for key in ("factor", "low_freq_factor", "high_freq_factor"):
        if scaling.get(key) is None:
            # transformers' _validate_llama3_rope_parameters requires them: AutoConfig (Bridge's first
            # step) refuses the file
            raise HFConfigError(f"config.json rope_scaling (llama3) has no {key}: transformers refuses to load "
                                "a llama3 RoPE without it, so Bridge cannot convert the model; give it as published",
                                "rope_scaling")
    # left out, transformers takes max_position_embeddings for it (modeling_rope_utils.py standardize_rope_params)
    scaling = dict(scaling)
    scaling.setdefault("original_max_position_embeddings", max_positions)
    for key, fixed in _MEGATRON_LLAMA3_FIXED.items():
        if number(scaling, key, fixed) != fixed:
            raise HFConfigError(
                f"config.json rope scaling {key} = {scaling[key]} but Megatron-LM fixes it at "
                f"{fixed} (rotary_pos_embedding.py:96-98); only the factor is a flag", f"rope_scaling.{key}")
    # Bridge's default when the key is missing (llama_bridge.py: rope_scaling_factor = get("factor", 8.0))
    factor = number(scaling, "factor", 8.0)
    if factor != PRETRAIN_GPT_ROPE_SCALING_FACTOR:
        # pretrain_gpt.py builds GPTModel(rope_scaling=args.use_rope_scaling, ...) without
        # rope_scaling_factor (gpt_builders.py:94), so GPTModel's default 8.0 applies
        # (megatron/core/models/gpt/gpt_model.py:107) whatever --rope-scaling-factor says.
        raise HFConfigError(
            f"config.json llama3 rope scaling factor {factor}: pretrain_gpt.py at the pinned "
            "Megatron-LM ignores --rope-scaling-factor and always uses 8.0 (gpt_builders.py:94, "
            "gpt_model.py:107); training would silently use the wrong RoPE", "rope_scaling.factor")
    return factor


def _rotary_percent(config: Mapping[str, Any], family: str, scaling: dict[str, Any] | None) -> float:
    """--rotary-percent: partial_rotary_factor where the family's transformers model reads it (GLM-4.5);
    Llama's and Mistral's ignore it and so do their bridges (llama_bridge.py:70 sets 1.0, mistral_bridge.py
    never reads it); Qwen's ignore it but Bridge maps it (CONFIG_MAPPING), and MLA rotates its own head
    part: refused there."""
    params = config.get("rope_parameters")
    partial = params.get("partial_rotary_factor") if isinstance(params, Mapping) else None
    value = number({"partial_rotary_factor": config.get("partial_rotary_factor", partial)},
                   "partial_rotary_factor", PARTIAL_ROTARY_DEFAULT.get(family, 1.0))
    if not 0.0 < value <= 1.0:
        raise HFConfigError(f"config.json partial_rotary_factor {value} out of (0, 1]")
    if value == 1.0 or family == "glm4_moe":
        return value
    if family in MLA_FAMILIES:
        raise HFConfigError(f"config.json partial_rotary_factor {value}: multi-latent attention "
                            "rotates qk_rope_head_dim; refused")
    if family in ("llama", "mistral") and scaling is None:
        return 1.0  # neither transformers' default RoPE nor the bridge reads it
    raise HFConfigError(f"config.json partial_rotary_factor {value} in a {family} config: transformers' {family} "
                        "RoPE here rotates the whole head, but Bridge v0.5.1 maps the factor onto rotary_percent "
                        "(CONFIG_MAPPING) or the scaled RoPE reads it; refused: remove partial_rotary_factor")


def _flags(a: dict[str, Any]) -> tuple[str, ...]:
    """The pretrain_gpt.py flags of the typed values, in a fixed order."""
    f = ["--num-layers", str(a["num_layers"]),  # transformer_config.py:64
         "--hidden-size", str(a["hidden_size"]),  # transformer_config.py:132
         "--ffn-hidden-size", str(a["ffn_hidden_size"]),  # transformer_config.py:157
         "--num-attention-heads", str(a["num_attention_heads"])]  # transformer_config.py:135
    if a["num_query_groups"] != a["num_attention_heads"] and a["mla"] is None:
        # without --group-query-attention num_query_groups is dropped (argument_utils.py:325-328);
        # MLA refuses it (arguments.py:1760-1761)
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
    if a["mla"] is not None:
        f += mla_flags(a["mla"])
    if a["moe"] is not None:
        f += moe_flags(a["moe"])
    # Megatron defaults both dropouts to 0.1 (transformer_config.py:165,168); the HF models and
    # Bridge's providers (hidden_dropout = 0.0 in each family's provider_bridge) use none.
    f += ["--attention-dropout", _num(a["attention_dropout"]),
          "--hidden-dropout", "0.0",
          # Bridge writes the embedding with config.json's vocab_size rows, unpadded: the provider's
          # should_pad_vocab is False (gpt_provider.py:179, :260-265), whatever
          # make_vocab_size_divisible_by says (model_bridge.py:589, 1280 for DeepSeek-V3); Megatron
          # would pad len(tokenizer) to a multiple of 128 × TP unless told (training_config.py:630,
          # build_tokenizer.py:140 _set_padded_vocab_size).
          "--padded-vocab-size", str(a["vocab_size"])]
    return tuple(f)


def derive(config: Mapping[str, Any], *, tensor_parallel: int = 1) -> HFArchitecture:
    """The Megatron-LM architecture of a parsed config.json; HFConfigError when not expressible."""
    if not isinstance(config, Mapping):
        raise HFConfigError(f"config.json must hold an object, got {type(config).__name__}")
    arch, family = _architecture(config)
    check_types(config, family)
    check_foreign(config, family)
    act = config.get("hidden_act", config.get("hidden_activation", "silu"))
    if act != "silu":
        raise HFConfigError(f"config.json hidden_act {act!r}: only silu maps to --swiglu")
    heads = pos_int(config, "num_attention_heads")
    hidden = pos_int(config, "hidden_size")
    layers = pos_int(config, "num_hidden_layers", high=MAX_LAYERS)
    # left out: the class default Bridge sees (older Llama configs omit it: num_attention_heads)
    groups = pos_int(config, "num_key_value_heads", CLASS_DEFAULTS[family][0] or heads)
    if heads % groups:
        raise HFConfigError(f"config.json num_key_value_heads {groups} must divide "
                            f"num_attention_heads {heads}")
    kv_channels = head_dim(config, family, hidden, heads)
    theta, scaling = rope(config)
    qkv_bias, qk_norm = biases(config, family)
    vocab = pos_int(config, "vocab_size")
    if vocab % tensor_parallel:
        raise HFConfigError(f"config.json vocab_size {vocab} is not divisible by tensor parallel "
                            f"{tensor_parallel}: --padded-vocab-size keeps it as is")
    eps = number(config, "rms_norm_eps", _EPS_DEFAULT[family], positive=True)
    rotary_percent = _rotary_percent(config, family, scaling)
    rotated = int(kv_channels * rotary_percent) if rotary_percent < 1.0 else kv_channels
    if family not in MLA_FAMILIES and rotated % 2:
        # RotaryEmbedding makes ceil(dim / 2) frequencies and doubles them (rotary_pos_embedding.py:73-80),
        # _rotate_half splits the rotated part in two halves (rope_utils.py:83): an odd count cannot pair
        raise HFConfigError(f"config.json head_dim {kv_channels} (x rotary fraction {rotary_percent:g}) rotates "
                            f"{rotated} dimensions: Megatron's RoPE rotates pairs and fails on an odd count",
                            "head_dim" if "head_dim" in config else "hidden_size")
    max_positions = pos_int(config, "max_position_embeddings")
    mla = derive_mla(config, family, scaling, max_positions) if family in MLA_FAMILIES else None
    if mla is not None and mla.qk_pos_emb_head_dim % 2:
        raise HFConfigError(f"config.json qk_rope_head_dim {mla.qk_pos_emb_head_dim} is odd: Megatron's RoPE "
                            "rotates pairs of dimensions (rope_utils.py:83) and fails on an odd count")
    moe = derive_moe(config, family, layers) if family in MOE_FAMILIES else None
    ffn = pos_int(config, "intermediate_size", CLASS_DEFAULTS[family][1])
    typed: dict[str, Any] = {
        "architecture": arch, "family": family,
        "num_layers": layers, "hidden_size": hidden,
        "ffn_hidden_size": ffn, "num_attention_heads": heads,
        "num_query_groups": heads if mla is not None else groups, "kv_channels": kv_channels, "vocab_size": vocab,
        "max_position_embeddings": max_positions,
        "rotary_base": rotary_base(theta), "rotary_percent": rotary_percent,
        "rope_scaling_factor": _rope_scaling_factor(family, scaling, max_positions),
        "norm_epsilon": eps, "add_qkv_bias": qkv_bias, "qk_layernorm": qk_norm,
        "untie_embeddings": untied(config, family),
        "window_size": window(config, family),
        # Bridge's Mistral provider is built without it (mistral_bridge.py:60-79: the provider's 0.0)
        "attention_dropout": 0.0 if family == "mistral" else number(config, "attention_dropout", 0.0, low=0.0,
                                                                       high=1.0),
        "moe": moe, "mla": mla,
    }
    return HFArchitecture(**typed, flags=_flags(typed), te_flags=te_flags(moe) if moe is not None else ())


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


def hf_model_fields(a: HFArchitecture) -> dict[str, Any]:
    """The typed training.model fields as the architecture has them: what the estimates and the
    rules read in place of fields the spec leaves out (a padded vocabulary of exactly vocab_size:
    --padded-vocab-size, so a divisor of 1). Beyond the typed fields, the estimators read
    kv_channels, mla and the MoE layout (flops.py flops_args)."""
    moe = a.moe
    return {
        "num_layers": a.num_layers, "hidden_size": a.hidden_size, "num_attention_heads": a.num_attention_heads,
        "num_query_groups": None if a.num_query_groups == a.num_attention_heads else a.num_query_groups,
        "ffn_hidden_size": a.ffn_hidden_size, "max_position_embeddings": a.max_position_embeddings,
        "vocab_size": a.vocab_size, "make_vocab_size_divisible_by": 1, "swiglu": True, "normalization": "RMSNorm",
        "position_embedding": "rope", "rotary_base": a.rotary_base, "untie_embeddings": a.untie_embeddings,
        "disable_bias_linear": True, "kv_channels": a.kv_channels, "mla": a.mla,
        "num_experts": None if moe is None else moe.num_experts,
        "moe_router_topk": 2 if moe is None else moe.topk,
        "moe_ffn_hidden_size": None if moe is None else moe.ffn_hidden_size,
        "moe_layer_freq": None if moe is None else moe.layer_freq,
        "moe_shared_expert_intermediate_size": None if moe is None else moe.shared_expert_size,
        "mtp_num_layers": None if moe is None else moe.mtp_layers, "qk_layernorm": a.qk_layernorm,
    }


# What the image installs for a Bridge release, with pip --no-deps: exactly the wheels the H200 run
# installed (docs/bridge.md, "Wheels the device lacks"). With dependencies resolved, pip would pull
# an unpinned megatron-core (0.19, with its dev extras) that was never validated beside the pinned
# Megatron-LM source; the rest (tensorboard, accelerate, einops, safetensors, …) is the base image's.
BRIDGE_REQUIREMENTS = {
    "0.5.1": ("megatron-bridge==0.5.1", "transformers==5.8.1", "tokenizers==0.22.2", "nvidia-modelopt==0.44.0",
              "PuLP==3.3.2", "pydantic==2.14.4", "pydantic_core==2.50.5", "annotated-types==0.8.0",
              "typing-inspection==0.4.5", "omegaconf==2.4.0", "datasets==5.2.0", "dill==0.4.1",
              "multiprocess==0.70.19"),
}
# download.sh's `modelscope download`: the command is modelscope-hub's (its console script), also
# --no-deps; its dependencies (requests, tqdm, filelock, urllib3, cryptography) are the base image's.
# Not run on the device (it has no network): the pins are the releases of 2026-10.
MODELSCOPE_REQUIREMENTS = ("modelscope==1.40.2", "modelscope-hub==0.5.1")
