"""HF -> Megatron torch_dist through Megatron Bridge v0.5.1, the steps of AutoBridge.import_ckpt.

Same calls as auto_bridge.py import_ckpt (from_hf_pretrained, to_megatron_model with CPU init,
save_megatron_model with the tokenizer and low_memory_save), with one switch: where Transformer
Engine is absent the provider gets Bridge's own local (non-TE) layer spec, since its default
(gpt_provider.py default_layer_spec) is TE-only. Sharded keys are TE-named either way (the local
spec's sharded_state_dict_keys_map), so the checkpoint loads into TE and local training alike.

Usage: python convert.py HF_DIR OUT_DIR [--gloo]   (--gloo: single-process CPU group, no GPU)
"""
import argparse
import os
import sys

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("hf")
    ap.add_argument("out")
    ap.add_argument("--gloo", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    if a.gloo:  # Bridge only initialises NCCL itself when no group exists (model_provider.py:214)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        torch.distributed.init_process_group("gloo", rank=0, world_size=1)
        from megatron.core import parallel_state  # as Bridge's temporary_distributed_context does:
        parallel_state.initialize_model_parallel()  # no CUDA RNG seeding (model_load_save.py:141)
        if not torch.cuda.is_available():  # CPU debugging only: the saved RNG state is never used
            torch.cuda.get_rng_state = torch.get_rng_state  # (training loads it with --finetune off)
            torch.cuda.synchronize = lambda *a, **k: None  # dist_checkpointing syncs before writing
            torch.cuda.current_device = lambda: "cpu"  # and all-reduces its failure flag there
            torch.cuda.Stream = type("Stream", (), {"__new__": lambda cls, *a, **k: None})  # MoE alltoall makes one
    if os.environ.get("MLA_CPU_SHIM") == "1":  # CPU debugging of MLA without TE (mla_cpu_shim.py)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import mla_cpu_shim  # noqa: F401
    from megatron.bridge import AutoBridge
    from megatron.bridge.models.gpt_provider import default_layer_spec, local_layer_spec

    try:
        import transformer_engine  # noqa: F401
        have_te = True
    except ImportError:
        have_te = False
    bridge = AutoBridge.from_hf_pretrained(a.hf, torch_dtype=getattr(torch, a.dtype))
    provider = bridge.to_megatron_provider(load_weights=True)
    if not have_te:  # the same adjustments as the generated convert.sh (templates/convert.sh.j2 without_te)
        if provider.transformer_layer_spec is default_layer_spec:
            provider.transformer_layer_spec = local_layer_spec
        for kernel in ("apply_rope_fusion", "persist_layer_norm", "moe_grouped_gemm", "moe_permute_fusion",
                       "moe_shared_expert_overlap", "gradient_accumulation_fusion", "masked_softmax_fusion",
                       "bias_activation_fusion", "bias_dropout_fusion", "cross_entropy_loss_fusion"):
            if getattr(provider, kernel, False):
                setattr(provider, kernel, False)
    provider.finalize()
    print(f"provider: vocab_size={provider.vocab_size} should_pad_vocab="
          f"{getattr(provider, 'should_pad_vocab', None)} make_vocab_size_divisible_by="
          f"{provider.make_vocab_size_divisible_by} rope_scaling={getattr(provider, 'rope_scaling', None)} "
          f"factor={getattr(provider, 'rope_scaling_factor', None)} rotary_base={provider.rotary_base} "
          f"share_emb={provider.share_embeddings_and_output_weights} te={have_te}", flush=True)
    model = provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)
    kwargs = {}
    if hasattr(bridge._model_bridge, "get_hf_tokenizer_kwargs"):
        kwargs = bridge._model_bridge.get_hf_tokenizer_kwargs() or {}
    bridge.save_megatron_model(model, a.out, hf_tokenizer_path=a.hf, hf_tokenizer_kwargs=kwargs,
                               low_memory_save=True)
    print("converted", a.hf, "->", a.out, flush=True)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
