"""Build pretrain_gpt.py's own model from the derived flags, load a torch_dist checkpoint, score tokens.

Checks, without running training, that the flags and the Bridge checkpoint agree: the model is
Megatron-LM's gpt_builder (pretrain_gpt.py:402) from its own parser, the weights are loaded with
dist_checkpointing, and the loss on fixed token rows is compared with the HF loss.

Usage: python mlm_check.py CKPT_DIR TOKENS_JSON FLAGS_FILE [extra pretrain_gpt flags...]
Prints one JSON line {"mlm_loss": ..., "rows": ...}. Runs on CPU (gloo) or one GPU.
"""
import contextlib
import json
import os
import sys

import torch


def main() -> None:
    ckpt, tokens_json, flags_file, *extra = sys.argv[1:]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29544"),
                      RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    cuda = torch.cuda.is_available()
    sys.argv = ["pretrain_gpt.py", *open(flags_file).read().split(), *extra]
    if os.environ.get("MLA_CPU_SHIM") == "1":  # CPU debugging of MLA without TE (mla_cpu_shim.py)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import mla_cpu_shim  # noqa: F401
    from megatron.core import dist_checkpointing, parallel_state, tensor_parallel
    from megatron.training.arguments import core_transformer_config_from_args, parse_args, validate_args
    from megatron.training.global_vars import set_global_variables

    args = parse_args()
    args.rank, args.world_size = 0, 1
    validate_args(args, {})
    set_global_variables(args, build_tokenizer=True)  # sets padded_vocab_size unless given
    torch.distributed.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel()
    if cuda:
        torch.cuda.set_device(0)
        tensor_parallel.model_parallel_cuda_manual_seed(1234)
    else:  # CPU: the tracker only guards dropout RNG, and dropout is 0 here
        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
        args.use_cpu_initialization = True
        torch.cuda.current_device = lambda: "cpu"  # RoPE moves inv_freq to the "current" device
        # MoE's alltoall dispatcher moves its split sizes to the host on a side stream and waits for it
        noop = type("NoOp", (), {"__getattr__": lambda self, name: lambda *a, **k: noop})()
        torch.cuda.Stream = lambda *a, **k: noop
        torch.cuda.current_stream = lambda *a, **k: noop
        torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    from gpt_builders import gpt_builder

    config = core_transformer_config_from_args(args)
    model = gpt_builder(args, True, True, config=config)
    if cuda:
        model = model.cuda()
    if args.bf16:
        model = model.bfloat16()
    print("padded_vocab_size", args.padded_vocab_size, "embedding",
          tuple(model.embedding.word_embeddings.weight.shape), flush=True)
    it_dir = ckpt
    tracker = os.path.join(ckpt, "latest_checkpointed_iteration.txt")
    if os.path.exists(tracker):
        it = open(tracker).read().strip()
        it_dir = os.path.join(ckpt, "release" if it == "release" else f"iter_{int(it):07d}")
    loaded = dist_checkpointing.load({"model": model.sharded_state_dict()}, it_dir,
                                     strict="assume_ok_unexpected")
    missing, unexpected = model.load_state_dict(loaded["model"], strict=False)
    missing = [k for k in missing if not k.endswith("_extra_state")]
    print("missing", missing, "unexpected", unexpected, flush=True)
    rows = torch.tensor(json.load(open(tokens_json)))
    if cuda:
        rows = rows.cuda()
    model.eval()
    tokens, labels = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
    pos = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0).expand_as(tokens)
    with torch.no_grad():
        # labels given: GPTModel returns per-token loss [b, s] (vocab-parallel cross entropy)
        s = tokens.shape[1]  # True = masked; given, so no default mask is built on "cuda"
        mask = torch.triu(torch.ones(s, s, device=tokens.device), diagonal=1).bool()[None, None]
        loss = model(tokens, pos, mask, labels=labels)
    print(json.dumps({"mlm_loss": loss.float().mean().item(), "rows": int(rows.shape[0]),
                      "missing": missing}), flush=True)
    if os.environ.get("MLM_SAVE"):  # write a Megatron-LM-format checkpoint (args inside) to test export
        from megatron.training.checkpointing import save_checkpoint

        if not cuda:
            torch.cuda.get_rng_state = torch.get_rng_state
            torch.cuda.synchronize = lambda *a, **k: None
        args.save = os.environ["MLM_SAVE"]
        args.no_save_optim = args.no_save_rng = True
        save_checkpoint(1, [model], None, None, 0)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
