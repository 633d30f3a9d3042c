#!/usr/bin/env python3
"""FP8 / BF16 step-time ratios of published runs: the source of megatron/fp8.py PUBLISHED_STEP_RATIO.

    python tools/fp8_ratio.py [DISCLOSED_CSV] [--write tests/fixtures/published/fp8_bf16_pairs.csv]

Pairs every FP8 row of ../shared/published/disclosed.csv with the BF16 row of the same source
family, GPU, model shape, vocabulary, sequence, batch and layout (TP, PP, CP, VP, EP, DP, GPUs,
recompute, sequence parallel, experts) and prints the median and range of fp8 step / bf16 step.
--write keeps the pairs (ids, both step times, ratio) as the test fixture that tests/test_fp8.py
recomputes the constants from. Whole-step ratios of published H100 runs (NeMo with Transformer
Engine): they include everything FP8 does not speed up, and no H200 run backs them.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

KEY = ("gpu", "num_layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq", "micro", "global", "tp", "pp", "cp",
       "vp", "ep", "dp", "gpus", "recompute", "sequence_parallel", "experts")


def pairs(rows: list[dict[str, str]]) -> list[tuple[str, str, float, float]]:
    """(fp8 id, bf16 id, fp8 step s, bf16 step s) for every FP8 row with a BF16 twin."""
    def key(r: dict[str, str]) -> tuple[str, ...]:
        return (r["source"].split("(")[0].strip(),) + tuple(r[k] for k in KEY)

    bf16 = {key(r): r for r in rows if r["precision"] == "bf16"}
    out = []
    for r in rows:
        twin = bf16.get(key(r)) if r["precision"] == "fp8" else None
        if twin is not None:
            out.append((r["id"], twin["id"], float(r["measured_step_s"]), float(twin["measured_step_s"])))
    return out


def summary(ratios: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest), rounded to 3 places."""
    return round(statistics.median(ratios), 3), round(min(ratios), 3), round(max(ratios), 3)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "published"
                                                        / "disclosed.csv"))
    parser.add_argument("--write", help="keep the pairs here (CSV)")
    args = parser.parse_args(argv)
    with open(args.csv, newline="") as f:
        found = pairs(list(csv.DictReader(f)))
    if not found:
        print("no FP8 row has a BF16 twin", file=sys.stderr)
        return 1
    if args.write:
        with open(args.write, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(("fp8_id", "bf16_id", "fp8_step_s", "bf16_step_s", "ratio"))
            for a, b, x, y in found:
                w.writerow((a, b, x, y, round(x / y, 4)))
    median, low, high = summary([x / y for _, _, x, y in found])
    print(f"{len(found)} pairs: fp8 step / bf16 step median {median}, range {low}-{high}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
