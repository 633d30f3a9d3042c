#!/usr/bin/env python3
"""The first stage's word embedding, forward and backward, on the H200 over a grid (issue 26, device call 30).

Call 27's head bench (tools/head_bench.py) timed the embedding at five shapes and found 0.6-1.9 ms a micro
batch where the model's passes over the stage's activations priced 0.1-0.45 ms. This bench gives the term
its own measurement over the shapes users train:

- tokens a micro batch (b x s): 2048, 8192, 32768;
- hidden: 1024, 4096, 8192;
- the rank's vocabulary shard: 32768, 131072, 262144 rows;
- the tensor-parallel path: TP 1 (F.embedding on ids all in the shard) and VocabParallelEmbedding's at TP 2
  and TP 8 (megatron/core/tensor_parallel/layers.py: ids outside the rank's shard masked to row 0, looked up,
  their rows zeroed; ids drawn over tp shards, so (tp-1)/tp of them fall outside, as on a real rank).

Each case runs the forward and the backward (autograd's embedding_dense_backward: a zeroed gradient of the
whole shard, the tokens' rows added into it), bf16, a fresh gradient each round as each micro batch's
backward makes one. 3 warm-up rounds, then the median of 10 timed between CUDA events (head_bench.timed):
`seconds`, the host's issuing included where the GPU waits for it (the small shapes). Device call 31 adds
`gpu_seconds`: the same work captured in a CUDA graph and replayed, the GPU's time alone (at TP > 1 the
boolean-mask assignments, which sync the host, as the masked_fill kernels that do the same work).

    python3 tools/embedding_bench.py OUT.json   # on the GPU machine; torch only
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_bench import record, timed, vocab_parallel_lookup, write_rows  # noqa: E402

TOKENS = (2048, 8192, 32768)
HIDDEN = (1024, 4096, 8192)
SHARD = (32768, 131072, 262144)
TP = (1, 2, 8)


def replayed(fn, rounds: int = 10, warm: int = 3) -> float | None:
    """Median seconds of one replay of fn captured in a CUDA graph: the GPU's time without the host's; None where
    the capture fails."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as exc:
        print(f"# capture failed: {exc}", flush=True)
        return None
    return timed(graph.replay, rounds, warm)


def main(out_path: str) -> int:
    dev = torch.device("cuda")
    rows = []
    for tokens, h, vocab, tp in itertools.product(TOKENS, HIDDEN, SHARD, TP):
        emb = torch.randn(vocab, h, device=dev, dtype=torch.bfloat16).requires_grad_(True)
        ids = torch.randint(0, vocab * tp, (1, tokens), device=dev)
        out_grad = torch.randn(1, tokens, h, device=dev, dtype=torch.bfloat16)

        def step() -> None:
            emb.grad = None
            (F.embedding(ids, emb) if tp == 1 else vocab_parallel_lookup(ids, emb, vocab)).backward(out_grad)

        def captured() -> None:  # step's work without its host syncs, for the graph
            emb.grad = None
            if tp == 1:
                out = F.embedding(ids, emb)
            else:
                mask = (ids < 0) | (ids >= vocab)
                out = F.embedding(ids.masked_fill(mask, 0), emb).masked_fill(mask.unsqueeze(-1), 0.0)
            out.backward(out_grad)

        row = {"tokens": tokens, "hidden": h, "vocab_shard": vocab, "tp": tp, "seconds": timed(step),
               "gpu_seconds": replayed(captured)}
        record(rows, row)
        del emb, ids, out_grad
        torch.cuda.empty_cache()
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
