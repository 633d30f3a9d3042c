"""The exact tokens of pretrain_gpt.py's global batches, and the HF loss on them.

Builds the training dataset the way pretrain_gpt.py does (same parser and flags, its
train_valid_test_datasets_provider, Megatron's own sample counts), takes samples
(K-1)*GBS..K*GBS-1 for iteration K (the pretraining sampler on one data-parallel rank; iteration 1
is consumed_samples = 0) and scores them with transformers: mean next-token loss over the tokens
whose loss_mask is 1. HF_DIR "-" skips the scoring (the batches only, for tools/bridge/score.py).

Usage: python first_batch.py HF_DIR OUT_JSON [ITERATION...] -- <the pretrain_gpt.py flags of the run>
(default iteration 1; OUT_JSON keeps iteration 1 at the top level and every iteration under "batches")
"""
import json
import os
import sys

import torch


def main() -> None:
    hf, out = sys.argv[1], sys.argv[2]
    sep = sys.argv.index("--")
    iterations = [int(k) for k in sys.argv[3:sep]] or [1]
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    sys.argv = ["pretrain_gpt.py", *sys.argv[sep + 1:]]
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import set_global_variables

    args = parse_args()
    args.rank, args.world_size = 0, 1
    validate_args(args, {})
    set_global_variables(args, build_tokenizer=True)
    import pretrain_gpt
    from megatron.training.training import get_train_valid_test_num_samples

    sizes = get_train_valid_test_num_samples()
    train_ds, _, _ = pretrain_gpt.train_valid_test_datasets_provider(sizes)
    gbs = args.global_batch_size
    res: dict = {"num_samples": list(map(int, sizes)), "gbs": gbs, "batches": {}}
    m = None
    if hf != "-":
        from transformers import AutoModelForCausalLM

        m = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    for k in iterations:
        samples = [train_ds[i] for i in range((k - 1) * gbs, k * gbs)]
        tokens = torch.stack([torch.as_tensor(s["tokens"]) for s in samples]).long()
        labels = torch.stack([torch.as_tensor(s["labels"]) for s in samples]).long()
        mask = torch.stack([torch.as_tensor(s["loss_mask"]) for s in samples]).float()
        batch = {"iteration": k, "seq": int(tokens.shape[1]), "tokens": tokens.tolist(),
                 "labels": labels.tolist(), "loss_mask": mask.tolist()}
        if m is not None:
            batch.update(hf_losses(m, tokens, labels, mask))
        res["batches"][str(k)] = batch
    res.update({key: v for key, v in res["batches"][str(iterations[0])].items()})
    json.dump(res, open(out, "w"))
    print(json.dumps({k: {key: v for key, v in b.items() if key.startswith("hf_")}
                      for k, b in res["batches"].items()}), flush=True)


def hf_losses(m, tokens, labels, mask) -> dict:
    res = {}
    for dtype in ("float32", "bfloat16"):
        mm = m.to(getattr(torch, dtype))
        with torch.no_grad():
            logits = mm(input_ids=tokens).logits.float()
        per_tok = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        res[f"hf_loss_{dtype}"] = (per_tok * mask.reshape(-1)).sum().item() / mask.sum().item()
    m.to(torch.float32)
    return res

if __name__ == "__main__":
    main()
