#!/usr/bin/env python3
"""Whether cuBLASLt's heuristics cache is what makes a local expert's GEMM call slow at a token count (issue 26,
device call 41).

Calls 38-39 found the host's GEMM calls in local-expert steps of two kinds, 169-183 us at a token count cuBLAS has
not met and 22-24 us at one it has, and the slow kind's share rising with the tokens an expert receives (10 % at 341,
82 % at 8192) and still high at iteration 10, where balanced draws plan every count within 20 micro batches. A
hypothesis that fits both: the plan for a GEMM shape is cuBLASLt's heuristics cache entry, the cache holds a fixed
number of entries (cublasLtHeuristicsCacheGetCapacity; CUBLASLT_HEURISTICS_CACHE_CAPACITY sets it), and six GEMM
shapes a count over the counts a router spreads its tokens across can outgrow it: the least recently used plans go,
and the counts keep coming back new.

This runs tools/expert_plan_bench.py's loop (six GEMM calls an expert, each timed on the host) at fpg-moe-e16-f1024-mb16's
shape (h1024, FFN 1024, 8192 tokens an expert, 16 experts, 4 layers), with balanced (`normal`) and spread (`wide`)
counts, in one process per cache setting: the library's default, CUBLASLT_HEURISTICS_CACHE_CAPACITY=0 and 1048576.
Each process prints the capacity cuBLASLt reports. Rows: the calls' host time at new and seen counts and, step by
step, the share of new calls and of seen calls over expert_plan_bench.SLOW_S.

    python3 tools/cublas_cache_bench.py OUT.json   # on the GPU machine; torch only
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import subprocess
import sys
from pathlib import Path

CONFIG = (1024, 1024, 8192, 16, 4)  # hidden, expert FFN, tokens an expert, experts, layers
STEPS = 40
SETTINGS = (None, "0", "1048576")  # CUBLASLT_HEURISTICS_CACHE_CAPACITY: unset (the library's default), off, large


def capacity() -> int | None:
    """cuBLASLt's heuristics cache capacity in this process (the library torch loaded), or None if it cannot say."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    libs = sorted({line.split()[-1] for line in maps if "libcublasLt" in line})
    if not libs:
        return None
    value = ctypes.c_size_t()
    status = ctypes.CDLL(libs[0]).cublasLtHeuristicsCacheGetCapacity(ctypes.byref(value))
    return int(value.value) if status == 0 else None


def child() -> None:
    """One cache setting's rows, printed as JSON lines."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from expert_plan_bench import measure

    torch.matmul(torch.ones(8, 8, device="cuda", dtype=torch.bfloat16), torch.ones(8, 8, device="cuda",
                                                                                   dtype=torch.bfloat16))
    setting = os.environ.get("CUBLASLT_HEURISTICS_CACHE_CAPACITY")
    for spread in ("normal", "wide"):
        row = measure(*CONFIG, random.Random(41), spread=spread, steps=STEPS)
        row.update(setting=setting, capacity=capacity())
        print("ROW " + json.dumps(row), flush=True)
        torch.cuda.empty_cache()


def main(out_path: str) -> int:
    rows: list[dict] = []
    for setting in SETTINGS:
        env = dict(os.environ)
        env.pop("CUBLASLT_HEURISTICS_CACHE_CAPACITY", None)
        if setting is not None:
            env["CUBLASLT_HEURISTICS_CACHE_CAPACITY"] = setting
        done = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                              timeout=300)
        print(done.stderr[-2000:], file=sys.stderr)
        for line in done.stdout.splitlines():
            if line.startswith("ROW "):
                row = json.loads(line[4:])
                rows.append(row)
                summary = {k: row.get(k) for k in ("setting", "capacity", "spread", "new_calls", "seen_calls",
                                                   "new_median_s", "seen_median_s", "seen_q3_s")}
                summary["last10_seen_slow"] = sum(row["seen_slow_share_by_step"][-10:]) / 10
                summary["last10_new"] = sum(row["new_share_by_step"][-10:]) / 10
                print(json.dumps(summary), flush=True)
    Path(out_path).write_text(json.dumps({"config": CONFIG, "steps": STEPS, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
