"""Megatron-LM torch_dist checkpoint -> HF safetensors through Megatron Bridge v0.5.1, on CPU (gloo).

Two ways, both tried unless --method picks one:
- export_ckpt: AutoBridge.from_hf_pretrained(HF_DIR).export_ckpt(CKPT, OUT) as documented;
- provider: the architecture from HF_DIR's config.json (the one the training flags were derived
  from), Megatron weights read with Bridge's _load_model_weights_from_checkpoint, written with
  save_hf_pretrained. Needs no training args and no run_config.yaml in the checkpoint.
Then scores TOKENS_JSON with transformers on the export (if given) and prints one JSON line.

Usage: python export.py HF_DIR CKPT_DIR OUT_DIR [--tokens T.json] [--method export_ckpt|provider]
"""
import argparse
import json
import os
import traceback

import torch


def latest_iter_dir(ckpt: str) -> str:
    """CKPT/iter_NNNNNNN named by latest_checkpointed_iteration.txt (or CKPT itself)."""
    tracker = os.path.join(ckpt, "latest_checkpointed_iteration.txt")
    if not os.path.exists(tracker):
        return ckpt
    it = open(tracker).read().strip()
    return os.path.join(ckpt, "release" if it == "release" else f"iter_{int(it):07d}")


def via_export_ckpt(hf: str, ckpt: str, out: str) -> None:
    """The documented API path."""
    from megatron.bridge import AutoBridge

    AutoBridge.from_hf_pretrained(hf).export_ckpt(ckpt, out)


def via_provider(hf: str, ckpt: str, out: str) -> None:
    """Build from the HF config, load the Megatron weights, save HF."""
    from megatron.bridge import AutoBridge
    from megatron.bridge.models.gpt_provider import local_layer_spec
    from megatron.bridge.training.checkpointing import _load_model_weights_from_checkpoint
    from megatron.bridge.training.model_load_save import temporary_distributed_context

    try:
        import transformer_engine  # noqa: F401
        have_te = True
    except ImportError:
        have_te = False
    bridge = AutoBridge.from_hf_pretrained(hf)
    provider = bridge.to_megatron_provider(load_weights=False)
    if not have_te:  # see convert.py: Bridge's default spec is TE-only
        provider.transformer_layer_spec = local_layer_spec
        provider.apply_rope_fusion = False
        provider.persist_layer_norm = False
    provider.perform_initialization = False
    provider.finalize()
    with temporary_distributed_context(backend="gloo"):
        model = provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)
        _load_model_weights_from_checkpoint(latest_iter_dir(ckpt), model)
        bridge.save_hf_pretrained(model, out)


def hf_loss(path: str, tokens_json: str) -> float:
    """Token-mean next-token loss of the exported model (fp32 arithmetic) on the fixed rows."""
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rows = torch.tensor(json.load(open(tokens_json)))
    with torch.no_grad():
        logits = m(input_ids=rows[:, :-1]).logits.float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             rows[:, 1:].reshape(-1)).item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("hf")
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--tokens")
    ap.add_argument("--method", choices=["export_ckpt", "provider"])
    a = ap.parse_args()
    if not torch.cuda.is_available():  # CPU-only machine: Bridge's save reads the CUDA RNG
        torch.cuda.get_rng_state = torch.get_rng_state
    result = {}
    for name, fn in (("export_ckpt", via_export_ckpt), ("provider", via_provider)):
        if a.method and a.method != name:
            continue
        out = os.path.join(a.out, name)
        try:
            fn(a.hf, a.ckpt, out)
            result[name] = {"ok": True}
            if a.tokens:
                result[name]["hf_loss"] = hf_loss(out, a.tokens)
        except Exception as e:  # report and try the next way
            traceback.print_exc()
            result[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
        print(json.dumps({"export": name, **result[name]}), flush=True)
    print(json.dumps({"export_result": result}), flush=True)


if __name__ == "__main__":
    main()
