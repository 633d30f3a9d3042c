"""The mixture-of-experts flags of Qwen3-MoE, DeepSeek-V2/V3 and GLM-4.5, as Bridge v0.5.1 maps them.

Bridge's common mapping (models/conversion/model_bridge.py:413-459 CONFIG_MAPPING: num_experts /
n_routed_experts -> num_moe_experts, num_experts_per_tok -> moe_router_topk, moe_intermediate_size ->
moe_ffn_hidden_size, aux_loss_alpha / router_aux_loss_coef -> moe_aux_loss_coeff, scoring_func ->
moe_router_score_function, n_group -> moe_router_num_groups, topk_group -> moe_router_group_topk,
routed_scaling_factor -> moe_router_topk_scaling_factor, num_nextn_predict_layers -> mtp_num_layers),
then each family's provider_bridge constants:
- qwen/qwen3_moe_bridge.py:50-69 (softmax after top-k, aux_loss 1e-3, every layer MoE);
- deepseek/deepseek_v2_bridge.py:42-74 (softmax before top-k, seq_aux_loss, first_k_dense_replace,
  shared experts moe_intermediate_size x n_shared_experts);
- deepseek/deepseek_v3_bridge.py:61-99 (sigmoid with expert bias, seq_aux_loss 1e-4, MTP);
- glm/glm45_bridge.py:56-84 (sigmoid with expert bias, bias update rate 0, seq_aux_loss 1e-3, one
  shared expert of moe_intermediate_size, MTP with loss scale 0.3).
Routing is checked against transformers 5.8.1's own modeling code (the model being converted),
and what Megatron's router (megatron/core/transformer/moe/moe_utils.py:747-817
topk_routing_with_score_function, :579 group_limited_topk) cannot reproduce is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...load.limits import MAX_LAYERS
from ...tuples import NamedTuple
from .common import HFConfigError, boolean, num, number, pos_int, text


# What transformers 5.8.1's config classes take for a key config.json leaves out (Bridge reads the
# config object, so it sees these): routed experts, experts per token, expert FFN, n_group, topk_group.
_DEFAULTS: dict[str, tuple[int, int | None, int, int | None, int | None]] = {
    "qwen3_moe": (128, 8, 768, None, None),
    "deepseek_v2": (64, None, 1407, None, None),
    "deepseek_v3": (256, 8, 2048, 8, 4),
    "glm4_moe": (128, 8, 1408, 1, 1),
}


def _group_key(config: Mapping[str, Any], key: str, default: int | None) -> int | None:
    """n_group / topk_group: the class default when absent, None when written as null."""
    if key not in config:
        return default
    return None if config[key] is None else pos_int(config, key)


class MoE(NamedTuple):
    num_experts: int
    topk: int
    ffn_hidden_size: int  # per routed expert (--moe-ffn-hidden-size)
    layer_freq: tuple[int, ...]  # 1: an MoE layer, 0: dense, one per layer
    shared_expert_size: int | None  # --moe-shared-expert-intermediate-size
    score_function: str  # softmax | sigmoid
    pre_softmax: bool
    expert_bias: bool
    num_groups: int | None
    group_topk: int | None
    scaling_factor: float | None
    load_balancing: str
    aux_loss_coeff: float
    router_fp32: bool
    bias_update_rate: float | None  # None: Megatron's default (1e-3)
    mtp_layers: int | None
    mtp_loss_scale: float | None  # None: Megatron's default (0.1)


def _check_groups(config: Mapping[str, Any], family: str, experts: int, topk: int) -> tuple[int | None, int | None]:
    """n_group / topk_group as Bridge maps them, refused where Megatron's group score differs."""
    groups = _group_key(config, "n_group", _DEFAULTS[family][3])
    chosen = _group_key(config, "topk_group", _DEFAULTS[family][4])
    if (groups is None) != (chosen is None):
        # Bridge maps the one that is set (CONFIG_MAPPING) and Megatron's router would limit groups it
        # cannot count; transformers' grouped routers need both
        given, value = ("n_group", groups) if chosen is None else ("topk_group", chosen)
        missing = "topk_group" if given == "n_group" else "n_group"
        raise HFConfigError(f"config.json {given} = {value} with {missing} null or left out: group-limited routing "
                            f"needs both (transformers' {family} router reads both, Bridge maps {given} alone); "
                            f"give {missing}, or null both")
    if groups is None or chosen is None:
        return groups, chosen
    if experts % groups:
        raise HFConfigError(f"config.json n_group {groups} does not divide the {experts} routed experts")
    if chosen > groups:
        raise HFConfigError(f"config.json topk_group {chosen} exceeds n_group {groups}")
    per_group = experts // groups
    # Megatron scores a group by the sum of its top (topk // group_topk) scores (moe_utils.py:617);
    # transformers' DeepSeek-V3/GLM routers use the top 2 (modeling_deepseek_v3.py:217-220), V2's
    # group_limited_greedy the maximum (modeling_deepseek_v2.py:107)
    want = 1 if family == "deepseek_v2" else 2
    if groups > 1 and chosen < groups and (chosen * per_group < topk or per_group < max(topk // chosen, want)):
        # the routers take the top scores within each group and then topk experts from the chosen groups'
        raise HFConfigError(f"config.json n_group {groups} leaves {per_group} of the {experts} routed experts in a "
                            f"group: too few to score a group by its top {max(topk // chosen, want)} or to choose "
                            f"num_experts_per_tok {topk} from topk_group {chosen} groups; refused")
    if groups > 1 and chosen < groups:
        if topk // chosen != want:
            raise HFConfigError(
                f"config.json n_group {groups}, topk_group {chosen}: num_experts_per_tok {topk} // topk_group {chosen} "
                f"= {topk // chosen}: Megatron "
                f"ranks expert groups by the sum of their top {topk // chosen} scores (moe_utils.py:617), "
                f"transformers' {family} router by the top {want}; routing would differ")
    return groups, chosen


def _mtp(config: Mapping[str, Any]) -> int | None:
    layers = pos_int(config, "num_nextn_predict_layers", 0, zero=True, high=MAX_LAYERS)
    return layers or None


def _layer_freq(config: Mapping[str, Any], layers: int, family: str) -> tuple[int, ...]:
    """first_k_dense_replace dense layers, then MoE (Bridge: provider.moe_layer_freq)."""
    if family == "qwen3_moe":
        step = pos_int(config, "decoder_sparse_step", 1)
        dense = config.get("mlp_only_layers") or []
        if step != 1 or dense:
            key, value = ("decoder_sparse_step", step) if step != 1 else ("mlp_only_layers", dense)
            raise HFConfigError(f"config.json {key} = {value!r}: Bridge v0.5.1 builds every Qwen3-MoE layer as "
                                "an MoE layer (qwen3_moe_bridge.py:47 writes decoder_sparse_step 1); refused")
        return (1,) * layers
    first = pos_int(config, "first_k_dense_replace", 3 if family == "deepseek_v3" else
                    (0 if family == "deepseek_v2" else 1), zero=True)
    if first > layers:
        raise HFConfigError(f"config.json first_k_dense_replace {first} exceeds num_hidden_layers {layers}")
    if family.startswith("deepseek") and pos_int(config, "moe_layer_freq", 1) != 1:
        raise HFConfigError(f"config.json moe_layer_freq = {config.get('moe_layer_freq')!r}: Bridge v0.5.1 makes "
                            "every layer after first_k_dense_replace an MoE layer (deepseek_v3_bridge.py:93); refused")
    return (0,) * first + (1,) * (layers - first)


def derive_moe(config: Mapping[str, Any], family: str, layers: int) -> MoE:
    """The MoE of a Qwen3-MoE, DeepSeek-V2/V3 or GLM-4.5 config.json; HFConfigError when inexpressible."""
    key = "n_routed_experts"
    if family == "qwen3_moe":
        # transformers >= 5 writes num_local_experts (Qwen3MoeConfig maps num_experts onto it); Bridge's
        # CONFIG_MAPPING reads either (model_bridge.py:437-438)
        key = "num_experts" if config.get("num_experts") is not None else "num_local_experts"
        other = config.get("num_local_experts")
        if key == "num_experts" and other is not None and other != config["num_experts"]:
            raise HFConfigError(f"config.json num_experts {config['num_experts']!r} and num_local_experts "
                                f"{other!r} disagree")
    default_experts, default_topk, default_ffn = _DEFAULTS[family][:3]
    experts = pos_int(config, key, default_experts)
    topk = pos_int(config, "num_experts_per_tok", default_topk)
    if topk > experts:
        raise HFConfigError(f"config.json num_experts_per_tok {topk} exceeds {key} {experts}")
    ffn = pos_int(config, "moe_intermediate_size", default_ffn)
    freq = _layer_freq(config, layers, family)
    if family == "qwen3_moe":
        # transformers' Qwen3-MoE: softmax over all experts, top-k, renormalised when norm_topk_prob.
        # Bridge always builds the renormalised router (pre_softmax False, qwen3_moe_bridge.py:63); with
        # norm_topk_prob false the flags follow the model (--moe-router-pre-softmax: softmax, top-k, no
        # renormalisation, moe_utils.py:795-797) so training computes what the weights were trained with.
        norm = boolean(config, "norm_topk_prob", False)
        if topk == 1 and norm:
            # softmax over the one chosen expert: Megatron refuses it (a zero gradient,
            # transformer_config.py:2104-2112), and Bridge's renormalised provider fails the same check
            raise HFConfigError("config.json num_experts_per_tok 1 with norm_topk_prob true: every token's one "
                                "expert gets weight 1, which Megatron's router refuses to build (softmax over one "
                                "expert has no gradient, transformer_config.py:2104-2112); refused")
        coeff = 1e-3  # qwen3_moe_bridge.py:62 overrides router_aux_loss_coef
        return MoE(experts, topk, ffn, freq, None, "softmax", not norm, False, None, None, None, "aux_loss",
                   coeff, False, None, None, None)
    groups, chosen = _check_groups(config, family, experts, topk)
    shared_count = pos_int(config, "n_shared_experts", 2 if family == "deepseek_v2" else 1)
    scaling = number(config, "routed_scaling_factor", 2.5 if family == "deepseek_v3" else 1.0, positive=True)
    mtp = _mtp(config)
    if family == "deepseek_v2":
        method = text(config, "topk_method", "greedy")
        if method not in ("greedy", "group_limited_greedy"):
            raise HFConfigError(f"config.json topk_method {method!r}: transformers' DeepSeek-V2 routes with "
                                "'greedy' or 'group_limited_greedy' only")
        if method == "greedy" and (groups or 1) > 1 and (chosen or groups) != groups:
            raise HFConfigError(f"config.json topk_method 'greedy' with n_group {groups}: Bridge still maps "
                                "n_group/topk_group to group-limited routing, transformers does not use them")
        if (func := text(config, "scoring_func", "softmax")) != "softmax":
            raise HFConfigError(f"config.json scoring_func {func!r}: transformers' DeepSeek-V2 router is softmax")
        # CONFIG_MAPPING, not overridden, the first present key winning; DeepseekV2Config has neither
        # attribute, so a config.json without both leaves the provider's 0.0
        key = "aux_loss_alpha" if config.get("aux_loss_alpha") is not None else "router_aux_loss_coef"
        coeff = number(config, key, 0.0, low=0.0)
        # transformers' V2 router: softmax, top-k, never renormalised, times routed_scaling_factor
        return MoE(experts, topk, ffn, freq, ffn * shared_count, "softmax", True, False, groups, chosen, scaling,
                   "seq_aux_loss", coeff, True, None, mtp, None)
    func = text(config, "scoring_func", "sigmoid")
    if func != "sigmoid":
        raise HFConfigError(f"config.json scoring_func {func!r}: Bridge builds {family} with a sigmoid router "
                            "(deepseek_v3_bridge.py:70, glm45_bridge.py:63); refused")
    if family == "deepseek_v3" and text(config, "topk_method", "noaux_tc") != "noaux_tc":
        raise HFConfigError(f"config.json topk_method {config.get('topk_method')!r}: DeepSeek-V3 routes with "
                            "'noaux_tc' (sigmoid plus e_score_correction_bias)")
    if topk > 1 and not boolean(config, "norm_topk_prob", True):
        raise HFConfigError("config.json norm_topk_prob = false: Megatron's sigmoid router always renormalises "
                            "the top-k weights (moe_utils.py:810); refused")
    if family == "glm4_moe":
        if shared_count != 1:
            raise HFConfigError(f"config.json n_shared_experts {shared_count}: Bridge v0.5.1 builds GLM-4.5 with "
                                "one shared expert of moe_intermediate_size (glm45_bridge.py:79); refused")
        return MoE(experts, topk, ffn, freq, ffn, "sigmoid", False, True, groups, chosen, scaling, "seq_aux_loss",
                   1e-3, True, 0.0, mtp, 0.3 if mtp else None)
    return MoE(experts, topk, ffn, freq, ffn * shared_count, "sigmoid", True, True, groups, chosen, scaling,
               "seq_aux_loss", 1e-4, True, None, mtp, None)


def layer_freq_flag(freq: tuple[int, ...]) -> str:
    """--moe-layer-freq as Megatron's moe_freq_type parses it (arguments.py:337): "([0]*3+[1]*58)"."""
    parts: list[str] = []
    i = 0
    while i < len(freq):
        j = i
        while j < len(freq) and freq[j] == freq[i]:
            j += 1
        parts.append(f"[{freq[i]}]*{j - i}")
        i = j
    return "(" + "+".join(parts) + ")"


def moe_flags(m: MoE) -> list[str]:
    """pretrain_gpt.py's MoE flags (arguments.py _add_moe_args / TransformerConfig fields)."""
    f = ["--num-experts", str(m.num_experts), "--moe-router-topk", str(m.topk),
         "--moe-ffn-hidden-size", str(m.ffn_hidden_size)]
    if any(v == 0 for v in m.layer_freq):
        f += ["--moe-layer-freq", layer_freq_flag(m.layer_freq)]
    if m.shared_expert_size is not None:
        f += ["--moe-shared-expert-intermediate-size", str(m.shared_expert_size)]
    f += ["--moe-router-score-function", m.score_function]
    if m.pre_softmax:
        f.append("--moe-router-pre-softmax")
    if m.expert_bias:
        f.append("--moe-router-enable-expert-bias")
    if m.bias_update_rate is not None:
        f += ["--moe-router-bias-update-rate", num(m.bias_update_rate)]
    if m.num_groups is not None and m.group_topk is not None:
        f += ["--moe-router-num-groups", str(m.num_groups), "--moe-router-group-topk", str(m.group_topk)]
    if m.scaling_factor is not None:
        f += ["--moe-router-topk-scaling-factor", num(m.scaling_factor)]
    if m.router_fp32:
        f += ["--moe-router-dtype", "fp32"]
    f += ["--moe-router-load-balancing-type", m.load_balancing, "--moe-aux-loss-coeff", num(m.aux_loss_coeff),
          "--moe-token-dispatcher-type", "alltoall"]
    if m.mtp_layers is not None:
        f += ["--mtp-num-layers", str(m.mtp_layers)]
        if m.mtp_loss_scale is not None:
            f += ["--mtp-loss-scaling-factor", num(m.mtp_loss_scale)]
    return f


# Kernel choices Bridge's providers make (qwen3_moe_bridge.py:60,65, deepseek_v3_bridge.py:66,68,73,
# glm45_bridge.py:56,60,62): TEGroupedMLP and the fused permutation need Transformer Engine, and the
# shared-expert overlap is a scheduling choice; passed only when the spec trains with TE and fused kernels.
TE_MOE_FLAGS = ("--moe-grouped-gemm", "--moe-permute-fusion")


def te_flags(m: MoE) -> tuple[str, ...]:
    """The kernel choices of an MoE model trained with TE (no weights depend on them)."""
    return TE_MOE_FLAGS + (("--moe-shared-expert-overlap",) if m.shared_expert_size is not None else ())
