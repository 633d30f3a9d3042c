"""Bridge v0.5.1's own provider for each config.json, next to the TransformerConfig that Megatron-LM
builds from the compiler's flags: the fixture tests/test_bridge_mapping.py compares field by field.

    PYTHONPATH=BRIDGE/src:MEGATRON_LM:REPO python tools/bridge/provider_fields.py OUT_DIR CONFIG_DIR...

Runs on a CPU (no weights are read): `AutoBridge.from_hf_config(AutoConfig.from_pretrained(dir))
.to_megatron_provider(load_weights=False)` is exactly the provider `import_ckpt` builds
(auto_bridge.py:299, :1420); Megatron's side is pretrain_gpt.py's own parser, validate_args and
core_transformer_config_from_args (argument_utils.py:272) on `derive(config).flags`; the switches
of a TE build (te_flags: --moe-grouped-gemm, --moe-permute-fusion) are set as their fields, since
Megatron refuses them without TE. Writes OUT_DIR/<name>.json: the config's name, the flags, and both
field dictionaries (values as JSON: lists, numbers, strings, null; a function as its name).
Made with transformers 5.8.1, torch 2.13 CPU, Bridge v0.5.1 (TE imports patched: no_te.py) and
Megatron-LM 571370c8 (docs/bridge.md).
"""
import json
import os
import sys
from pathlib import Path

FIELDS = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
    "normalization", "layernorm_epsilon", "gated_linear_unit", "activation_func", "add_bias_linear", "add_qkv_bias",
    "qk_layernorm", "attention_dropout", "hidden_dropout", "rotary_base", "rotary_percent", "position_embedding_type",
    "share_embeddings_and_output_weights", "window_size", "vocab_size",
    "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_layer_freq", "moe_shared_expert_intermediate_size",
    "moe_router_score_function", "moe_router_pre_softmax", "moe_router_enable_expert_bias",
    "moe_router_bias_update_rate", "moe_router_num_groups", "moe_router_group_topk", "moe_router_topk_scaling_factor",
    "moe_router_dtype", "moe_router_load_balancing_type", "moe_aux_loss_coeff", "moe_token_dispatcher_type",
    "moe_grouped_gemm", "moe_permute_fusion", "moe_shared_expert_overlap", "mtp_num_layers", "mtp_loss_scaling_factor",
    "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "rope_type", "rotary_scaling_factor", "mscale", "mscale_all_dim", "original_max_position_embeddings",
    "beta_fast", "beta_slow",
)
# Megatron-side values that live on args, not on the TransformerConfig
ARGS_FIELDS = {"rotary_base": "rotary_base", "rotary_percent": "rotary_percent",
               "position_embedding_type": "position_embedding_type", "vocab_size": "padded_vocab_size"}


def plain(v):
    if callable(v):
        return getattr(v, "__name__", repr(v))
    if isinstance(v, tuple):
        return [plain(x) for x in v]
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


def bridge_fields(model_dir):
    from transformers import AutoConfig

    from megatron.bridge import AutoBridge

    provider = AutoBridge.from_hf_config(AutoConfig.from_pretrained(model_dir)).to_megatron_provider(
        load_weights=False)
    out = {f: plain(getattr(provider, f, "<absent>")) for f in FIELDS}
    out["share_embeddings_and_output_weights"] = bool(provider.share_embeddings_and_output_weights)
    return out


def megatron_fields(flags):
    from megatron.training.arguments import core_transformer_config_from_args, parse_args, validate_args

    sys.argv = ["pretrain_gpt.py", *flags, "--micro-batch-size", "1", "--seq-length", "128",
                "--tokenizer-type", "NullTokenizer", "--vocab-size", "128", "--train-iters", "1", "--lr", "1e-4",
                "--mock-data", "--bf16", "--no-rope-fusion"]  # TE is absent on the CPU
    args = parse_args()
    args.rank, args.world_size = 0, 1
    import torch

    torch.cuda.get_device_capability = lambda *a: (9, 0)  # --moe-grouped-gemm asks for an sm_80+ GPU
    validate_args(args, {})
    config = core_transformer_config_from_args(args)
    out = {}
    for f in FIELDS:
        if f in ARGS_FIELDS:
            out[f] = plain(getattr(args, ARGS_FIELDS[f]))
        else:
            out[f] = plain(getattr(config, f, "<absent>"))
    out["share_embeddings_and_output_weights"] = not args.untie_embeddings_and_output_weights
    return out


def main():
    from compiler.megatron.huggingface import derive

    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    for model_dir in sys.argv[2:]:
        config = json.loads((Path(model_dir) / "config.json").read_text())
        arch = derive(config)
        megatron = megatron_fields(list(arch.flags))
        for flag in arch.te_flags:  # switches that need TE to validate: set as the parser would set them
            megatron[flag[2:].replace("-", "_")] = True
        record = {"config": Path(model_dir).name, "flags": list(arch.flags), "te_flags": list(arch.te_flags),
                  "bridge": bridge_fields(model_dir), "megatron": megatron}
        (out_dir / f"{Path(model_dir).name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print("wrote", Path(model_dir).name, flush=True)


if __name__ == "__main__":
    main()
