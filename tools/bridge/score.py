"""Score a Hugging Face model directory with transformers on batches first_batch.py wrote.

    python score.py MODEL_DIR BATCHES_JSON [ITERATION...]

Loads MODEL_DIR with AutoModelForCausalLM.from_pretrained (float32 arithmetic on its stored
weights), computes the mean next-token loss over the loss_mask tokens of each iteration's batch
(default: every batch in the file) and prints one JSON line: the losses (float32 and bfloat16
arithmetic), the model class, the parameter count, and config.json's routing keys as the directory
holds them (norm_topk_prob, decoder_sparse_step, n_group, topk_group, routed_scaling_factor).
"""
import json
import os
import sys

import torch

CONFIG_KEYS = ("architectures", "norm_topk_prob", "decoder_sparse_step", "n_group", "topk_group",
               "routed_scaling_factor", "first_k_dense_replace", "vocab_size")


def main() -> None:
    model_dir, batches_json, *which = sys.argv[1:]
    from transformers import AutoModelForCausalLM

    batches = json.load(open(batches_json))["batches"]
    which = which or sorted(batches, key=int)
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    config = json.load(open(os.path.join(model_dir, "config.json")))
    res: dict = {"model": model_dir, "class": type(m).__name__,
                 "params": sum(p.numel() for p in m.parameters()),
                 "config": {k: config[k] for k in CONFIG_KEYS if k in config}, "losses": {}}
    for k in which:
        b = batches[str(k)]
        tokens, labels = torch.tensor(b["tokens"]), torch.tensor(b["labels"])
        mask = torch.tensor(b["loss_mask"]).reshape(-1)
        out = {}
        for dtype in ("float32", "bfloat16"):
            with torch.no_grad():
                logits = m.to(getattr(torch, dtype))(input_ids=tokens).logits.float()
            per_tok = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
            out[f"hf_loss_{dtype}"] = (per_tok * mask).sum().item() / mask.sum().item()
        m.to(torch.float32)
        res["losses"][str(k)] = out
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
