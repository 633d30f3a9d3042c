"""What a config.json key means for each family, beyond the flags it sets.

Two tables, both found by running Bridge v0.5.1's provider on altered copies of real config.json files
and comparing it with Megatron-LM's config from the compiled flags (tools/bridge/altered_fields.py,
tests/fixtures/bridge-providers/altered.json):

- CLASS_DEFAULTS: the value transformers 5.8.1's config class gives a key config.json leaves out.
  Bridge reads the config object, so it builds the model with these, not with hidden / heads.
- Foreign keys: Bridge's CONFIG_MAPPING (model_bridge.py:413-459) copies every key the config object
  has onto the provider, the first present one winning where two keys name one field, whether or not
  the family's transformers model reads it. A key the published model ignores but Bridge maps would
  convert the weights into a different model than the one they were trained as; refused, naming the
  key and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .class_fields import MODEL_TYPE, field_kinds
from .common import HFConfigError

# family -> (num_key_value_heads, intermediate_size) when config.json leaves the key out; None: the
# class copies num_attention_heads (transformers 5.8.1: LlamaConfig, DeepseekV2Config default it to None)
CLASS_DEFAULTS: dict[str, tuple[int | None, int]] = {
    "llama": (None, 11008), "mistral": (8, 14336), "qwen2": (32, 22016), "qwen3": (32, 22016),
    "qwen3_moe": (4, 6144), "deepseek_v2": (None, 11008), "deepseek_v3": (128, 18432), "glm4_moe": (8, 10944),
}
# partial_rotary_factor when left out: Glm4MoeConfig's 0.5; every other class rotates the whole head
PARTIAL_ROTARY_DEFAULT = {"glm4_moe": 0.5}

_DENSE = ("llama", "mistral", "qwen2", "qwen3")
_NO_MTP = _DENSE + ("qwen3_moe", "deepseek_v2")


def _present(config: Mapping[str, Any], key: str) -> bool:
    return config.get(key) is not None


def _refuse(key: str, value: Any, family: str, field: str, why: str) -> HFConfigError:
    return HFConfigError(
        f"config.json {key} = {value!r} in a {family} config: {why}, but Bridge v0.5.1 copies it onto the "
        f"provider's {field} (model_bridge.py CONFIG_MAPPING), so the converted model would not be the published "
        f"one; remove {key} from config.json", key)


def check_foreign(config: Mapping[str, Any], family: str) -> None:
    """Refuse a key Bridge maps that the family's transformers model does not read (see the module doc)."""
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if family in _DENSE and _present(config, key) and config[key] != 0:
            raise _refuse(key, config[key], family, "num_moe_experts", "a dense model has no experts")
    if family in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        for key in ("num_experts", "num_local_experts"):
            if _present(config, key):
                raise _refuse(key, config[key], family, "num_moe_experts (read before n_routed_experts)",
                              "this family's experts are n_routed_experts")
    if family in _NO_MTP and _present(config, "num_nextn_predict_layers") and config["num_nextn_predict_layers"] != 0:
        raise _refuse("num_nextn_predict_layers", config["num_nextn_predict_layers"], family, "mtp_num_layers",
                      "the model has no multi-token-prediction layers")
    if _present(config, "mtp_num_hidden_layers") and config["mtp_num_hidden_layers"] != 0:
        raise _refuse("mtp_num_hidden_layers", config["mtp_num_hidden_layers"], family, "mtp_num_layers",
                      "this family's transformers model has no such layers")
    if family in ("llama", "qwen2") and config.get("use_qk_norm") is True:
        raise _refuse("use_qk_norm", True, family, "qk_layernorm", "the model has no q/k normalisation")
    if family == "qwen3_moe":
        for key in ("n_group", "topk_group"):
            if _present(config, key):
                raise _refuse(key, config[key], family, f"moe_router_{'num_groups' if key == 'n_group' else 'group_topk'}",
                              "transformers' Qwen3-MoE router does not limit experts to groups")
        if config.get("scoring_func", "softmax") not in (None, "softmax"):
            raise _refuse("scoring_func", config["scoring_func"], family, "moe_router_score_function",
                          "transformers' Qwen3-MoE router is a softmax")
        if config.get("routed_scaling_factor") not in (None, 1, 1.0):
            raise _refuse("routed_scaling_factor", config["routed_scaling_factor"], family,
                          "moe_router_topk_scaling_factor", "transformers' Qwen3-MoE router does not scale")


def _matches(value: Any, kinds: str) -> bool:
    """A JSON value is one of kinds ("int|null", "float|int", "list[int]", ...), as transformers' strict
    config dataclasses check it: an int is no float there, and a bool is neither."""
    for k in kinds.split("|"):
        if (k == "null" and value is None) or (k == "bool" and isinstance(value, bool)) or (
                k == "str" and isinstance(value, str)) or (k == "dict" and isinstance(value, dict)):
            return True
        if isinstance(value, bool):
            continue
        if (k == "int" and isinstance(value, int)) or (k == "float" and isinstance(value, float)):
            return True
        if k.startswith("list[") and isinstance(value, list):
            inner = k[5:-1]
            if all(_matches(v, inner) for v in value):
                return True
    return False


_KIND_WORDS = {"int": "an integer", "float": "a number with a decimal point", "bool": "true or false",
               "str": "a string", "dict": "an object", "null": "null", "list[int]": "a list of integers",
               "list[str]": "a list of strings"}


def check_types(config: Mapping[str, Any], family: str) -> None:
    """Refuse a config.json that transformers 5.8.1 itself refuses to load (the first step of Bridge's
    conversion, AutoConfig.from_pretrained): a model_type other than the class's, or a field of the class
    holding another JSON type (class_fields.py, generated from the classes)."""
    want = MODEL_TYPE[family]
    if config.get("model_type") != want:
        raise HFConfigError(
            f"config.json model_type = {config.get('model_type', '(left out)')!r}, but this architecture's "
            f"transformers class registers {want!r}: AutoConfig, which Bridge v0.5.1's conversion calls first, "
            "picks the config class by model_type (and runs no repository code), so it would fail or build "
            f"another model; write model_type: {want!r} as the model's own config.json has it", "model_type")
    for key, value in config.items():
        kinds = field_kinds(family, key)
        if kinds is not None and not _matches(value, kinds):
            words = " or ".join(_KIND_WORDS.get(k, k) for k in kinds.split("|"))
            raise HFConfigError(
                f"config.json {key} = {value!r:.60} is not {words}: transformers 5.8.1's config class for "
                f"{family}, which Bridge v0.5.1's conversion loads, refuses it; write {key} as the published "
                "model has it", key)
