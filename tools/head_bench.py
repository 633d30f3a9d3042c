#!/usr/bin/env python3
"""The last stage's head and the first stage's embedding on the H200, each alone (issue 26, device call 27).

Device call 26 ran ranks of multi-GPU layouts alone (--fake-process-group): the last stage's rank over the
first's came out below the model's head (the output layer's GEMMs and the vocabulary-parallel cross entropy)
by 0 to 19 ms a micro batch, growing with the tokens a micro batch (h200-hosts/README.md, call26). This bench
times those pieces at the shapes of those ranks, with Megatron's own functions at the pinned commit, one
process (tensor-parallel world 1: a rank's vocabulary shard is a whole vocabulary to the function):

- gemm: the output layer's forward, data gradient and weight gradient (F.linear, autograd; what
  ColumnParallelLinear runs without gradient-accumulation fusion), [tokens, h] x [vocab shard, h];
- ce: megatron.core.tensor_parallel.vocab_parallel_cross_entropy on bf16 logits [s, b, vocab shard] (it takes
  .float() itself), forward and backward (the loss summed);
- embedding: megatron.core.tensor_parallel.VocabParallelEmbedding's work at a shard (the TP>1 path: the
  input mask, the masked lookup, the zeroed rows), forward and backward; F.embedding alone at TP 1.

    python3 tools/head_bench.py OUT.json   # on the GPU machine, MEGATRON on PYTHONPATH

Each case: 3 warm-up rounds, then the median of 10 timed between CUDA events.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

# (name, tokens a micro batch, vocabulary shard, hidden): the call-26 ranks' last stages, and TP 1 at their tokens
CASES = [
    ("pp2-dp4 (TP1 b1)", 4096, 128256, 4096),
    ("tp2-pp4 (TP2 b1)", 4096, 64128, 4096),
    ("qwen-tp2-pp2 (TP2 b2)", 8192, 76032, 3584),
    ("tp4-pp2 (TP4 b4)", 16384, 32064, 4096),
    ("tp2-pp2-sel (TP2 b4)", 16384, 64128, 4096),
    ("TP1 b2", 8192, 128256, 4096),
    ("TP1 b4", 16384, 128256, 4096),
    ("TP4 b1", 4096, 32064, 4096),
]


def timed(fn, rounds: int = 10, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)


def record(rows: list[dict], row: dict) -> None:
    """One case's row, kept and printed as it comes (a cut-short call still shows it)."""
    rows.append(row)
    print(json.dumps(row), flush=True)


def quartiles(row: dict, label: str, times: list[float]) -> None:
    """`label`_median_s, _q1_s and _q3_s of host times into `row` (the GEMM-call benches' rows)."""
    q = statistics.quantiles(times, n=4)
    row[f"{label}_median_s"], row[f"{label}_q1_s"], row[f"{label}_q3_s"] = statistics.median(times), q[0], q[2]


def write_rows(out_path: str, rows: list[dict]) -> None:
    """A bench's rows with the device and torch they ran on, as the device benches write them."""
    with open(out_path, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows},
                           indent=1) + "\n")


def vocab_parallel_lookup(ids: torch.Tensor, emb: torch.Tensor, vocab: int) -> torch.Tensor:
    """VocabParallelEmbedding.forward at TP > 1 (megatron/core/tensor_parallel/layers.py) on the rank holding rows
    [0, vocab): the ids outside its shard masked to row 0, looked up, their rows zeroed."""
    mask = (ids < 0) | (ids >= vocab)
    masked = ids.clone()
    masked[mask] = 0
    out = F.embedding(masked, emb)
    out[mask, :] = 0.0
    return out


def main(out_path: str) -> int:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.distributed.init_process_group("nccl", world_size=1, rank=0)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    parallel_state.initialize_model_parallel(1, 1)
    dev = torch.device("cuda")
    rows = []
    for name, tokens, vocab, h in CASES:
        s, b = 4096, tokens // 4096
        x = torch.randn(s, b, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(vocab, h, device=dev, dtype=torch.bfloat16, requires_grad=True) * 0.02
        w = w.detach().requires_grad_(True)
        labels = torch.randint(0, vocab, (s, b), device=dev)
        grad = torch.randn(s, b, vocab, device=dev, dtype=torch.bfloat16)

        def fresh() -> None:  # no round adds into the last one's gradients
            x.grad = w.grad = logits.grad = emb.grad = None

        def gemm() -> None:
            fresh()
            F.linear(x, w).backward(grad)

        logits = torch.randn(s, b, vocab, device=dev, dtype=torch.bfloat16, requires_grad=True)

        def ce() -> None:
            fresh()
            vocab_parallel_cross_entropy(logits, labels).sum().backward()

        def head() -> None:
            fresh()
            vocab_parallel_cross_entropy(F.linear(x, w), labels).sum().backward()

        emb = torch.randn(vocab, h, device=dev, dtype=torch.bfloat16).requires_grad_(True)
        ids = torch.randint(0, vocab * 2, (b, s), device=dev)  # a shard sees ids outside its range too
        out_grad = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16)

        def embedding() -> None:  # VocabParallelEmbedding.forward at TP > 1, then its backward
            fresh()
            vocab_parallel_lookup(ids, emb, vocab).backward(out_grad)

        def embedding_tp1() -> None:
            fresh()
            F.embedding(ids % vocab, emb).backward(out_grad)

        row = {"name": name, "tokens": tokens, "vocab": vocab, "hidden": h}
        for key, fn in (("gemm_s", gemm), ("ce_s", ce), ("head_s", head), ("embedding_s", embedding),
                        ("embedding_tp1_s", embedding_tp1)):
            row[key] = timed(fn)
        record(rows, row)
        del x, w, logits, emb, out_grad, grad
        torch.cuda.empty_cache()
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
