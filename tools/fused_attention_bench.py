#!/usr/bin/env python3
"""Transformer Engine's fused attention (cuDNN) alone on the GPU this runs on (issue 26).

    python tools/fused_attention_bench.py OUT.json

The attention core Megatron's TE layers run (transformer_engine.pytorch.DotProductAttention, causal, sbhd,
bf16; Megatron's default attention dropout 0.1, and 0.0 beside it) at the shapes of the kept TE runs
(tests/e2e/te): forward, and forward + backward, timed with CUDA events (the median of 5 loops after
warm-up). Writes one JSON object: device, versions, and a row per shape with its causal FLOPs
(4 b h s^2 d / 2 forward, 2.5 times that forward + backward) and seconds. Run by the lead on the lent
H200 with TE installed as tools/te_measure_device.sh installs it; not part of CI.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

SHAPES = (  # (b, heads, kv groups, s, d): the TE runs' attention
    (4, 16, 16, 2048, 64), (2, 16, 16, 4096, 64), (1, 16, 16, 8192, 64), (1, 16, 16, 16384, 64),
    (1, 16, 16, 2048, 64), (4, 16, 4, 2048, 128), (2, 32, 8, 2048, 128), (4, 24, 24, 2048, 128),
)


def timed(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / reps)
    return statistics.median(out)


def main() -> None:
    import transformer_engine
    from transformer_engine.pytorch import DotProductAttention

    rows = []
    for b, h, g, s, d in SHAPES:
        for dropout in (0.1, 0.0):
            attn = DotProductAttention(h, d, num_gqa_groups=g, attention_dropout=dropout, qkv_format="sbhd",
                                       attn_mask_type="causal").cuda()
            q = torch.randn(s, b, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(s, b, g, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(s, b, g, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            grad = torch.randn(s, b, h * d, device="cuda", dtype=torch.bfloat16)
            reps = max(2, int(2e12 / (4 * b * h * s * s * d)))

            def fwd():
                with torch.no_grad():
                    attn(q, k, v)

            def fwd_bwd():
                attn(q, k, v).backward(grad)

            t = time.time()
            f, fb = timed(fwd, reps), timed(fwd_bwd, reps)
            flops = 4 * b * h * s * s * d / 2  # the causal half of QK^T and PV
            rows.append({"b": b, "heads": h, "groups": g, "s": s, "d": d, "dropout": dropout,
                         "forward_s": f, "forward_backward_s": fb, "causal_forward_flops": flops,
                         "forward_tflops": flops / f / 1e12, "fwd_bwd_tflops": 3.5 * flops / fb / 1e12})
            print(json.dumps(rows[-1]), f"{time.time() - t:.1f} s", flush=True)
            del attn, q, k, v, grad
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "transformer_engine": transformer_engine.__version__, "rows": rows,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
