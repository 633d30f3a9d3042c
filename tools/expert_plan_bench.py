#!/usr/bin/env python3
"""The host's time of local experts' GEMM calls at new and at seen token counts, in a training-like loop (issue 26,
device call 39).

Call 38's profiled steps put the GPU within 1-5 % of the model's GPU time in three local-expert jobs and the rest of
their gap on the host; in all six profiled local-expert steps (calls 36 and 38) the host's aten::mm calls are two
kinds, about 15-50 us and 250-330 us (profiled), and the slow kind's share grows with the tokens an expert receives:
10 % of the calls at 341 tokens, 64 % at 2048-4096, 82 % at 8192. Call 33's bench (tools/expert_gemm_bench.py) timed
a GEMM call at a token count new to cuBLAS at 77-138 us and at a seen one at 13-18 us, one shape at a time, counts in
sequence, the GPU mostly idle. This bench times the calls as SequentialMLP makes them, without a profiler: per step,
for each of L layers and E experts, a token count drawn around n (n + a normal of variance n, as balanced routing of
T x k tokens over E experts gives), and the expert's six GEMMs at its shapes (fc1 forward x W1^T, fc2 forward,
then fc2's and fc1's data and weight gradients), bf16 torch.matmul, the GPU working through them as it does in a
run; time.perf_counter around each call. Each call is `new` when its (GEMM, token count) has not been called before in
the process, else `seen`. Per configuration: the median and quartiles of each kind's host time a call, the share of
new calls by step, and the steps' host time.

    python3 tools/expert_plan_bench.py OUT.json   # on the GPU machine; torch only
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_bench import quartiles, record, write_rows  # noqa: E402

# (hidden, expert FFN, tokens an expert n, experts E, layers L): calls 35-37's local-expert jobs' shapes
CONFIGS = ((1536, 1024, 341, 48, 8), (2048, 1536, 1024, 32, 4), (2048, 1536, 2048, 32, 4), (2048, 4096, 4096, 8, 4),
           (1024, 1024, 8192, 16, 4))
STEPS = 20  # micro batches: 10 iterations of 2
# A call's host time above which it counts as slow (call 39: 169-183 us at a new count, 22-24 at a seen one): what
# tells a plan cuBLAS had to make from one it had, where `new` (never called in the process) cannot (an evicted one)
SLOW_S = 80e-6


def draw(rng: random.Random, n: int, spread: str) -> int:
    """A token count around n: `normal` (n + a normal of variance n: balanced routing) or `wide` (uniform over n/2 to
    3n/2: a router that sends some experts half and others one and a half times their share)."""
    if spread == "wide":
        return rng.randint(n // 2, 3 * n // 2)
    return round(rng.gauss(n, n ** 0.5))


def measure(h: int, f: int, n: int, experts: int, layers: int, rng: random.Random, spread: str = "normal",
            steps: int = STEPS) -> dict:
    """One configuration's row: `steps` micro batches of `layers` x `experts` experts' six GEMM calls, each timed."""
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    top = (3 * n // 2 if spread == "wide" else int(n + 6 * n ** 0.5)) + 8
    x = torch.randn(top, h, device=dev, dtype=bf16)
    a = torch.randn(top, 2 * f, device=dev, dtype=bf16)  # fc1's output (SwiGLU: 2f)
    y = torch.randn(top, f, device=dev, dtype=bf16)  # the activation's output
    dz = torch.randn(top, h, device=dev, dtype=bf16)  # fc2's output gradient
    w1 = torch.randn(2 * f, h, device=dev, dtype=bf16)
    w2 = torch.randn(h, f, device=dev, dtype=bf16)
    gemms = (("fc1", lambda m: torch.matmul(x[:m], w1.t())), ("fc2", lambda m: torch.matmul(y[:m], w2.t())),
             ("fc2-dgrad", lambda m: torch.matmul(dz[:m], w2)), ("fc2-wgrad", lambda m: torch.matmul(dz[:m].t(), y[:m])),
             ("fc1-dgrad", lambda m: torch.matmul(a[:m], w1)), ("fc1-wgrad", lambda m: torch.matmul(a[:m].t(), x[:m])))
    seen: set[tuple[str, int]] = set()
    times: dict[bool, list[float]] = {True: [], False: []}  # new, seen
    new_share: list[float] = []
    slow_share: list[float] = []  # of the calls at a count seen before, those over SLOW_S
    step_s: list[float] = []
    torch.cuda.synchronize()
    for _ in range(steps):
        t0 = time.perf_counter()
        fresh = slow = 0
        for _call in range(layers * experts):
            m = max(1, min(top, draw(rng, n, spread)))
            for name, gemm in gemms:
                s = time.perf_counter()
                gemm(m)
                took = time.perf_counter() - s
                new = (name, m) not in seen
                times[new].append(took)
                seen.add((name, m))
                fresh += new
                slow += not new and took > SLOW_S
        torch.cuda.synchronize()  # the loss's sync: each micro batch starts with the GPU's queue empty
        step_s.append(time.perf_counter() - t0)
        calls = layers * experts * len(gemms)
        new_share.append(fresh / calls)
        slow_share.append(slow / max(1, calls - fresh))
    row = {"hidden": h, "ffn": f, "tokens": n, "experts": experts, "layers": layers, "steps": steps, "spread": spread,
           "new_calls": len(times[True]), "seen_calls": len(times[False]), "new_share_by_step": new_share,
           "seen_slow_share_by_step": slow_share, "step_s": step_s}
    for label, new in (("new", True), ("seen", False)):
        if len(times[new]) >= 4:
            quartiles(row, label, times[new])
    return row


def main(out_path: str) -> int:
    rng = random.Random(39)
    rows: list[dict] = []
    for config in CONFIGS:
        record(rows, measure(*config, rng))
        torch.cuda.empty_cache()  # the configuration's tensors went with measure's frame
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
