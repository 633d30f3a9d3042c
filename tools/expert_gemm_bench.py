#!/usr/bin/env python3
"""The host's time of one expert GEMM call, without a profiler (issue 26, device call 33).

layer_time.EXPERT_GEMM_HOST_S (0.354 ms a call) came from a torch-profiler trace of moe8-top2, whose own cost per
op is in it; device calls 31 and 32 found Megatron's local experts (SequentialMLP) costing about half of what it
makes them. This bench times, on the host (time.perf_counter around the call, nothing synchronised: the GPU runs
these small GEMMs faster than the host issues them), the three GEMMs a local expert's Linear issues (forward
x·Wᵀ, data gradient dy·W, weight gradient dyᵀ·x; bf16 torch.matmul as F.linear and autograd run them) at
expert-sized shapes:

- `new`: a token count no call of that shape has used before in the process (cuBLAS plans the shape);
- `seen`: a token count used before (a shape cuBLAS has planned).

Shapes (hidden, expert FFN in and out): call 32's (2048; 3072 in for SwiGLU, 1536 out), call 31's Mixtral-shaped
(4096; 14336, 7168), moe8-top2's (1024; 4096, 4096); token counts around 2048 and 4096. 200 calls of each kind
and GEMM after 20 warm-up calls; the median and quartiles of the host's time a call.

    python3 tools/expert_gemm_bench.py OUT.json   # on the GPU machine; torch only
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_bench import quartiles, record, write_rows  # noqa: E402

SHAPES = [("call32 h2048", 2048, 3072, 1536), ("call31 h4096", 4096, 14336, 7168), ("moe8-top2 h1024", 1024, 4096, 4096)]
CENTRES = (2048, 4096)
CALLS = 200


def host_seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(out_path: str) -> int:
    dev = torch.device("cuda")
    rows = []
    for name, h, f_in, f_out in SHAPES:
        for centre in CENTRES:
            top = centre + 4 * CALLS + 64
            x = torch.randn(top, h, device=dev, dtype=torch.bfloat16)
            w1 = torch.randn(f_in, h, device=dev, dtype=torch.bfloat16)
            dy = torch.randn(top, f_in, device=dev, dtype=torch.bfloat16)
            gemms = {
                "fwd": lambda m: torch.matmul(x[:m], w1.t()),
                "dgrad": lambda m: torch.matmul(dy[:m], w1),
                "wgrad": lambda m: torch.matmul(dy[:m].t(), x[:m]),
            }
            for kind, gemm in gemms.items():
                for m in range(centre - 20, centre):  # warm-up: these counts become `seen`
                    gemm(m)
                torch.cuda.synchronize()
                new = [host_seconds(lambda m=m: gemm(m)) for m in range(centre + 1, centre + 1 + CALLS)]
                torch.cuda.synchronize()
                seen = [host_seconds(lambda m=m: gemm(m)) for m in list(range(centre - 20, centre)) * (CALLS // 20)]
                torch.cuda.synchronize()
                row = {"shape": name, "hidden": h, "ffn_in": f_in, "ffn_out": f_out, "tokens": centre, "gemm": kind}
                quartiles(row, "new", new)
                quartiles(row, "seen", seen)
                record(rows, row)
            del x, w1, dy
            torch.cuda.empty_cache()
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
