"""Tiny Qwen3-MoE and DeepSeek-V3-shaped Hugging Face models for the device round trip (issue 30).

    python tools/bridge/make_tiny_moe.py OUT_DIR [--minutes 1.5]

Uses tools/make_tiny_hf_model.py's corpus and byte-level BPE (vocab_size 1000), then builds each
model with transformers at random initialisation (norm weights, biases and DeepSeek's expert-score
correction bias randomised too, so a dropped or swapped tensor shows), trains it briefly on the CPU
so its loss sits well below ln(1000), and saves OUT_DIR/{qwen3-moe,deepseek-v3}/ (config.json,
model.safetensors, tokenizer) with OUT_DIR/corpus.jsonl, OUT_DIR/eval_tokens.json and summary.json.
The DeepSeek model has MLA with q_lora, YaRN (factor 4, mscale 1.0/1.0), one dense layer then MoE,
a shared expert, group-limited sigmoid routing (2 groups, 1 chosen) and no MTP layer
(transformers builds none, so there are no MTP weights to convert).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from make_tiny_hf_model import VOCAB_SIZE, corpus, mean_loss, pack, train, train_tokenizer  # noqa: E402


def qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    return Qwen3MoeForCausalLM(Qwen3MoeConfig(
        vocab_size=VOCAB_SIZE, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=8,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False, router_aux_loss_coef=0.001,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=0, eos_token_id=0))


def deepseek_v3():
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    return DeepseekV3ForCausalLM(DeepseekV3Config(
        vocab_size=VOCAB_SIZE, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, max_position_embeddings=16384, rms_norm_eps=1e-6,
        tie_word_embeddings=False, rope_interleave=True,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                         "beta_slow": 1.0},
        bos_token_id=0, eos_token_id=0))


@torch.no_grad()
def randomise(model) -> None:
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or "layernorm" in name:
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.05 * torch.randn_like(b))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--minutes", type=float, default=1.5)
    a = ap.parse_args()
    import transformers

    rng = random.Random(0)
    train_docs, eval_docs = corpus(rng, 3000), corpus(rng, 64)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "corpus.jsonl", "w") as f:
        for d in train_docs:
            f.write(json.dumps({"text": d}) + "\n")
    tok = train_tokenizer(train_docs, a.out / "tokenizer")
    eod = tok.eos_token_id
    data = pack([tok(d)["input_ids"] for d in train_docs], eod)
    eval_rows = pack([tok(d)["input_ids"] for d in eval_docs], eod)[:8]
    (a.out / "eval_tokens.json").write_text(json.dumps(eval_rows.tolist()))
    summary: dict = {"transformers": transformers.__version__, "torch": torch.__version__,
                     "ln_vocab": math.log(VOCAB_SIZE), "tokenizer_len": len(tok)}
    for name, build in (("qwen3-moe", qwen3_moe), ("deepseek-v3", deepseek_v3)):
        torch.manual_seed(0)
        model = build()
        randomise(model)
        log = train(model, data, a.minutes, 0)
        model = model.to(torch.bfloat16)
        model.save_pretrained(a.out / name)
        tok.save_pretrained(a.out / name)
        model = model.float()
        summary[name] = {"params": sum(p.numel() for p in model.parameters()), "train_log": log[-3:],
                         "eval_loss_fp32_of_bf16_weights": mean_loss(model, eval_rows)}
        print(name, summary[name], flush=True)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
