#!/usr/bin/env python3
"""A local expert's activation path, forward and backward, on the H200 over a grid (issue 26, device call 37).

Call 36's torch-profiler traces of three local-expert jobs (tests/fixtures/h200-hosts/call36/experiments) put
the GPU busy 2-8 % above the model's GPU time, the gap growing with the tokens. Their kernels, grouped by the op
that launched them, put most of it in the experts' activation: the model priced it as one large GeLU and one
scale pass per element (7.6 ps), where the traces' kernels between the two expert GEMMs took 33-39 ps an
element. Megatron's MLP without the bias-activation fusion (mlp.py:313-335 at the pinned commit; the fusion
refuses a local expert's per-token scale with a plain GeLU, and the compiled launches without TE or Apex
turn it off) runs, for each expert on its own tokens:

    x_glu, x_linear = torch.chunk(fc1_out, 2, dim=-1)        # --swiglu: two strided views
    y = F.silu(x_glu) * (x_linear + 0.0)                      # glu_linear_offset 0.0: still an add kernel
    (plain: y = F.gelu(fc1_out))
    y = (y * probs.unsqueeze(-1)).to(y.dtype)                 # the router's probability, broadcast a row

and the backward of each, autograd's SplitBackward0 a cat of the two halves' gradients. Strided views and a
broadcast take torch's generic element-wise kernel, not the vectorized one the model's per-element rates were
measured with, and each expert's tensors are small. This bench times that path alone (no GEMM), bf16, at
tokens an expert 256-16384 x the expert's FFN 512-14336 (after expert-tensor parallelism), SwiGLU and GeLU:
`gpu_seconds`, captured in a CUDA graph and replayed (the GPU's time alone; head_bench.timed's median of 10
after 3), and `seconds` between CUDA events with the host issuing (what the GPU waits for where the kernels are
small). A few `whole` rows run a local MoE block's expert part as SequentialMLP does it (split the routed tokens
by expert, per expert fc1, the path above, fc2, cat; backward), for the model's GEMM table plus this path to be
checked against.

    python3 tools/expert_act_bench.py OUT.json   # on the GPU machine; torch only
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedding_bench import replayed  # noqa: E402
from head_bench import record, timed, write_rows  # noqa: E402

TOKENS = (256, 1024, 4096, 16384)  # tokens an expert receives in a micro batch
FFN = (512, 1536, 4096, 14336)  # the expert's FFN on the rank
GLU = (True, False)
WHOLE = ((8, 4096, 2048, 1536), (32, 1024, 2048, 1536), (32, 2048, 2048, 1536), (64, 1024, 2048, 512))


def activation(x: torch.Tensor, probs: torch.Tensor, glu: bool) -> torch.Tensor:
    """mlp.py's activation with a per-token scale, without the bias-activation fusion (glu_linear_offset 0.0,
    no clamp)."""
    if glu:
        x_glu, x_linear = torch.chunk(x, 2, dim=-1)
        y = F.silu(x_glu) * (x_linear + 0.0)
    else:
        y = F.gelu(x)
    dtype = y.dtype
    return (y * probs.unsqueeze(-1)).to(dtype)


def main(out_path: str) -> int:
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    rows: list[dict] = []
    for n, f, glu in itertools.product(TOKENS, FFN, GLU):
        x = torch.randn(n, 2 * f if glu else f, device=dev, dtype=bf16).requires_grad_(True)
        probs = torch.rand(n, device=dev, dtype=bf16).requires_grad_(True)
        grad = torch.randn(n, f, device=dev, dtype=bf16)

        def step() -> None:
            x.grad = probs.grad = None
            activation(x, probs, glu).backward(grad)

        record(rows, {"kind": "activation", "tokens": n, "ffn": f, "glu": glu, "seconds": timed(step),
                      "gpu_seconds": replayed(step)})
        del x, probs, grad
        torch.cuda.empty_cache()
    for experts, n, h, f in WHOLE:
        tokens = torch.randn(experts * n, h, device=dev, dtype=bf16).requires_grad_(True)
        probs = torch.rand(experts * n, device=dev, dtype=bf16).requires_grad_(True)
        fc1 = [torch.randn(2 * f, h, device=dev, dtype=bf16).requires_grad_(True) for _ in range(experts)]
        fc2 = [torch.randn(h, f, device=dev, dtype=bf16).requires_grad_(True) for _ in range(experts)]
        grad = torch.randn(experts * n, h, device=dev, dtype=bf16)
        sizes = [n] * experts

        def block() -> None:
            tokens.grad = probs.grad = None
            for w in fc1 + fc2:
                w.grad = None
            outs = [F.linear(activation(F.linear(t, w1), p, True), w2)
                    for t, p, w1, w2 in zip(torch.split(tokens, sizes), torch.split(probs, sizes), fc1, fc2)]
            torch.cat(outs, dim=0).backward(grad)

        record(rows, {"kind": "whole", "experts": experts, "tokens": n, "hidden": h, "ffn": f, "glu": True,
                      "seconds": timed(block), "gpu_seconds": replayed(block)})
        del tokens, probs, fc1, fc2, grad
        torch.cuda.empty_cache()
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
