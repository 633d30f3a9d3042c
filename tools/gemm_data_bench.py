#!/usr/bin/env python3
"""Does a GEMM's time on the H200 depend on the values it multiplies? (issue 26, device call 28)

Device calls 26 and 27 ran ranks of multi-GPU layouts alone with --fake-process-group: a pipeline stage
after the first receives nothing (the fake receive leaves its torch.empty buffer as it was), and the last
stages whose data went NaN (`grad norm: nan`) or zero (`grad norm: 0.000`, the loss ln(vocabulary shard))
ran 5-15 % under the model where the last stages with finite data matched it. A GPU under its power limit
clocks up where the multipliers toggle less, so a GEMM on zeros (or NaN) can run faster than on data.
This times bf16 torch.matmul at a few of those ranks' shapes on random normal data, zeros and NaN.

    python3 tools/gemm_data_bench.py OUT.json   # on the GPU machine

Each: 5 warm-up rounds, then the median of 30 timed between CUDA events, the fills interleaved 3 times
(`*_s`); and sustained, as a training rank runs them: 400 back to back between two events, after 100
(`*_sustained_s`, a GEMM's mean), where the GPU has reached the clock its power limit allows.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

SHAPES = [(8192, 8192, 8192), (8192, 7168, 4096), (8192, 14336, 4096), (16384, 12608, 6144)]
FILLS = ("normal", "zeros", "nan")


def fill(t: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "normal":
        return t.normal_()
    return t.zero_() if kind == "zeros" else t.fill_(float("nan"))


def timed(a: torch.Tensor, b: torch.Tensor, rounds: int = 30, warm: int = 5) -> float:
    for _ in range(warm):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / 1e3)
    return statistics.median(out)


def sustained(a: torch.Tensor, b: torch.Tensor, n: int = 400, warm: int = 100) -> float:
    for _ in range(warm):
        torch.matmul(a, b)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        torch.matmul(a, b)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / n


def main(out_path: str) -> int:
    rows = []
    for m, n, k in SHAPES:
        a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(k, n, device="cuda", dtype=torch.bfloat16)
        times: dict[str, list[float]] = {f: [] for f in FILLS}
        long: dict[str, list[float]] = {f: [] for f in FILLS}
        for _ in range(3):
            for f in FILLS:
                fill(a, f), fill(b, f)
                times[f].append(timed(a, b))
                long[f].append(sustained(a, b))
        row = {"m": m, "n": n, "k": k, **{f"{f}_s": statistics.median(v) for f, v in times.items()},
               **{f"{f}_sustained_s": statistics.median(v) for f, v in long.items()}}
        row["tflops_normal"] = 2 * m * n * k / row["normal_s"] / 1e12
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
