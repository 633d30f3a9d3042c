"""Build, train on the CPU and save a tiny Hugging Face Llama model, its tokenizer and corpus.

The model exists to check the Megatron Bridge round trip (HF -> torch_dist -> Megatron-LM training
-> HF) on a machine without internet: its loss on its own corpus is far below ln(vocab), so a
conversion that scrambles weights shows as a first Megatron loss near ln(vocab) instead.

Usage: python tools/make_tiny_hf_model.py OUT_DIR [--minutes 4] [--seed 0]
Writes OUT_DIR/model/ (save_pretrained + tokenizer files), OUT_DIR/corpus.jsonl (one {"text"}
per line, the training corpus), OUT_DIR/eval_tokens.json (a fixed batch of token ids) and
OUT_DIR/summary.json (losses, sizes, versions).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch

VOCAB_SIZE = 1000  # config.vocab_size; the BPE may learn fewer tokens: unpadded rows, as in Qwen
SEQ = 128

WORDS = {
    "det": ["the", "a", "every", "some", "this", "that", "one", "no"],
    "adj": ["red", "quiet", "old", "bright", "small", "heavy", "green", "cold", "swift", "pale",
            "round", "broken", "silver", "warm", "tall", "narrow"],
    "noun": ["cat", "river", "engine", "garden", "teacher", "window", "mountain", "letter",
             "village", "bridge", "candle", "sailor", "market", "forest", "machine", "tower",
             "kettle", "lantern", "harbor", "violin"],
    "verb": ["sees", "finds", "builds", "follows", "carries", "paints", "watches", "opens",
             "remembers", "crosses", "repairs", "answers"],
    "prep": ["near", "under", "behind", "beside", "above", "inside"],
}


def sentence(rng: random.Random) -> str:
    """One sentence of a small grammar: learnable structure, some entropy in the content words."""
    w = {k: rng.choice(v) for k, v in WORDS.items()}
    if rng.random() < 0.15:
        start = rng.randint(1, 40)
        return " ".join(str(i) for i in range(start, start + rng.randint(4, 9))) + " ."
    obj_adj, obj_noun = rng.choice(WORDS["adj"]), rng.choice(WORDS["noun"])
    return f"{w['det']} {w['adj']} {w['noun']} {w['verb']} {w['prep']} the {obj_adj} {obj_noun} ."


def corpus(rng: random.Random, docs: int) -> list[str]:
    """Documents of 3 to 12 sentences."""
    return [" ".join(sentence(rng) for _ in range(rng.randint(3, 12))) for _ in range(docs)]


def train_tokenizer(texts: list[str], out: Path):
    """Byte-level BPE trained with `tokenizers`, wrapped and saved as a fast HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - 24, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.save_pretrained(out)
    return fast


def build_model(seed: int):
    """A 2-layer Llama with GQA, tied embeddings and Llama-3 RoPE scaling (the flags under test)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=768, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=16384,
        rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
        mlp_bias=False, bos_token_id=0, eos_token_id=0,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
    )
    return LlamaForCausalLM(cfg)


def pack(ids: list[list[int]], eod: int) -> torch.Tensor:
    """Concatenate documents with EOD between them and cut into rows of SEQ + 1 tokens."""
    flat = [t for doc in ids for t in doc + [eod]]
    rows = len(flat) // (SEQ + 1)
    return torch.tensor(flat[: rows * (SEQ + 1)]).view(rows, SEQ + 1)


@torch.no_grad()
def mean_loss(model, rows: torch.Tensor) -> float:
    """Token-mean next-token cross entropy over rows (inputs rows[:, :-1], labels rows[:, 1:])."""
    logits = model(input_ids=rows[:, :-1]).logits.float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             rows[:, 1:].reshape(-1)).item()


def train(model, data: torch.Tensor, minutes: float, seed: int) -> list[tuple[int, float]]:
    """AdamW on random batches of 16 rows until the time is up; returns (step, loss) every 50."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.95))
    log, step, t0 = [], 0, time.time()
    model.train()
    while time.time() - t0 < minutes * 60:
        rows = data[torch.randint(0, data.shape[0], (16,), generator=gen)]
        loss = model(input_ids=rows[:, :-1], labels=rows[:, :-1]).loss  # HF shifts labels itself
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            log.append((step, loss.item()))
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.0f}s)", flush=True)
        step += 1
    model.eval()
    return log


def main() -> None:
    """Build everything under OUT_DIR."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import transformers

    torch.set_num_threads(max(1, torch.get_num_threads()))
    rng = random.Random(a.seed)
    train_docs, eval_docs = corpus(rng, 6000), corpus(rng, 64)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "corpus.jsonl", "w") as f:
        for d in train_docs:
            f.write(json.dumps({"text": d}) + "\n")
    tok = train_tokenizer(train_docs, a.out / "model")
    eod = tok.eos_token_id
    data = pack([tok(d)["input_ids"] for d in train_docs], eod)
    eval_rows = pack([tok(d)["input_ids"] for d in eval_docs], eod)[:8]
    model = build_model(a.seed)
    log = train(model, data, a.minutes, a.seed)
    model = model.to(torch.bfloat16)  # stored as bf16, as Hub checkpoints are
    model.save_pretrained(a.out / "model")
    model = model.float()  # bf16 weights, fp32 arithmetic: the reference the Megatron run is held to
    summary = {
        "transformers": transformers.__version__, "torch": torch.__version__,
        "vocab_size": VOCAB_SIZE, "tokenizer_len": len(tok), "eod": eod, "seq": SEQ,
        "ln_vocab": math.log(VOCAB_SIZE), "train_log": log,
        "eval_loss": mean_loss(model, eval_rows), "train_rows": int(data.shape[0]),
        "params": sum(p.numel() for p in model.parameters()),
    }
    (a.out / "eval_tokens.json").write_text(json.dumps(eval_rows.tolist()))
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "train_log"}, indent=1))


if __name__ == "__main__":
    main()
