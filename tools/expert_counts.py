#!/usr/bin/env python3
"""The local experts' token counts a run logged (tools/fakepg.py record_counts), replayed through cuBLASLt's
heuristics cache as a least-recently-used cache of plans (device calls 50 and 51).

    python tools/expert_counts.py FORWARDS_PER_ITERATION COUNTS.jsonl... [--windows 4-40,41-100,301-]

Each line of COUNTS.jsonl is one SequentialMLP forward's token count of each expert. A count is planned once for
each of the six GEMM shapes an expert issues at it (FC1 and FC2: forward, data gradient, weight gradient): a call
misses when its (count, shape) is not in the cache, and a miss enters it, evicting the least recently used plan
past the capacity. Prints, for the default capacity (8192, what cuBLASLt reports, call 41) and 1048576, the share of
calls that miss in each window of iterations, and the distinct counts met.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from pathlib import Path

SHAPES = 6  # FC1 and FC2: forward, data gradient, weight gradient
CAPACITIES = (8192, 1048576)


def miss_shares(lines: list[list[int]], per_iteration: int, capacity: int) -> list[float]:
    """The share of the expert GEMM calls that miss the cache, iteration by iteration (the first is iteration 1)."""
    cache: OrderedDict[tuple[int, int], None] = OrderedDict()
    shares, miss, calls = [], 0, 0
    for k, counts in enumerate(lines, 1):
        for c in counts:
            for s in range(SHAPES):
                calls += 1
                if (c, s) in cache:
                    cache.move_to_end((c, s))
                else:
                    miss += 1
                    cache[(c, s)] = None
                    if len(cache) > capacity:
                        cache.popitem(last=False)
        if k % per_iteration == 0:
            shares.append(miss / calls)
            miss = calls = 0
    return shares


def window(shares: list[float], spec: str) -> float | None:
    first, _, last = spec.partition("-")
    part = shares[int(first) - 1:int(last) if last else None]
    return sum(part) / len(part) if part else None


def main(argv: list[str]) -> int:
    if len(argv) < 2 or "-h" in argv or "--help" in argv:
        print(__doc__)
        return 2
    windows = "4-40,41-100,101-200,301-400,301-"
    if "--windows" in argv:
        i = argv.index("--windows")
        windows = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    per_iteration = int(argv[0])
    for path in argv[1:]:
        lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        distinct = len({c for counts in lines for c in counts})
        for capacity in CAPACITIES:
            shares = miss_shares(lines, per_iteration, capacity)
            cells = []
            for spec in windows.split(","):
                share = window(shares, spec)
                cells.append(f"{spec}:{'-' if share is None else f'{share:.2f}'}")
            print(f"{path} capacity {capacity}: {len(shares)} iterations, {distinct} distinct counts; miss share "
                  + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
