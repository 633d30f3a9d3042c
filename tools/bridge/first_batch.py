"""The exact tokens of pretrain_gpt.py's first global batch, and the HF loss on them.

Builds the training dataset the way pretrain_gpt.py does (same parser and flags, its
train_valid_test_datasets_provider, Megatron's own sample counts), takes samples 0..GBS-1 (the
pretraining sampler's first batch with consumed_samples = 0, one data-parallel rank) and scores
them with transformers: mean next-token loss over the tokens whose loss_mask is 1.

Usage: python first_batch.py HF_DIR OUT_JSON -- <the pretrain_gpt.py flags of the run>
"""
import json
import os
import sys

import torch


def main() -> None:
    hf, out = sys.argv[1], sys.argv[2]
    assert sys.argv[3] == "--"
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    sys.argv = ["pretrain_gpt.py", *sys.argv[4:]]
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
    samples = [train_ds[i] for i in range(gbs)]
    tokens = torch.stack([torch.as_tensor(s["tokens"]) for s in samples]).long()
    labels = torch.stack([torch.as_tensor(s["labels"]) for s in samples]).long()
    mask = torch.stack([torch.as_tensor(s["loss_mask"]) for s in samples]).float()
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    res = {"num_samples": list(map(int, sizes)), "gbs": gbs, "seq": int(tokens.shape[1])}
    for dtype in ("float32", "bfloat16"):
        mm = m.to(getattr(torch, dtype))
        with torch.no_grad():
            logits = mm(input_ids=tokens).logits.float()
        per_tok = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        res[f"hf_loss_{dtype}"] = (per_tok * mask.reshape(-1)).sum().item() / mask.sum().item()
    res["tokens"] = tokens.tolist()
    res["labels_last"] = labels[:, -1].tolist()
    json.dump(res, open(out, "w"))
    print(json.dumps({k: v for k, v in res.items() if k not in ("tokens", "labels_last")}), flush=True)


if __name__ == "__main__":
    main()
