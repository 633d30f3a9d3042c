#!/usr/bin/env python3
"""The host's split between a layer pass, a micro batch and an iteration, from an unprofiled grid on one host
(issue 26, device call 42).

compiler/megatron/host_time.py took the split from torch-profiler traces of two runs: a dense layer pass 5.76 ms, a
micro batch beyond its layers 5.64 ms (0.98 of a pass), an iteration 4.94 ms + 0.184 ms a parameter tensor. The
profiler adds its own cost to every op, and a layer pass is most of a step's ops: the runs at 1 to 8 micro batches and
2 and 8 layers on one host (calls 6 and 11) say a micro batch beyond its layers is 2-2.5 passes, not 1. Call 42 ran
the tiny host-bound GPT (h256, 4 heads, s256, micro batch 2, as the profile's tiny-l2-h256) at L = 1, 2, 4, 8 layers x
m = 1, 4, 8 micro batches a step, in a shuffled order on one lent host without a profiler, with the L2 m4 job at the
start, a third of the way and the end (the host's drift). Each run's median after the warm-up (the kept runs' rule,
host_calibration.steady_iterations) is fitted, least squares on the relative error, by

    step(L, m) = a + b L + m (B + P L)

(a + b L: the iteration, b the parameter tensors' part, 12 tensors a layer; B: a micro batch beyond its layers; P: a
layer pass). The profile's units are kept by P: the grid's split is B/P, a/P and b/P passes. A bootstrap over the
twelve grid runs gives each ratio's 90 % interval.

    python3 tools/host_split_fit.py [CALLDIR]   # default tests/fixtures/h200-hosts/call42
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.megatron import host_time  # noqa: E402
from compiler.megatron.host_calibration import steady_iterations  # noqa: E402

CALL = REPO / "tests" / "fixtures" / "h200-hosts" / "call42"
TENSORS_PER_LAYER = 12  # two LayerNorms (weight, bias), QKV, projection, FC1, FC2 (weight, bias): host_time.param_tensors
TENSORS_OUTSIDE = 4  # the word and position embeddings, the final LayerNorm (tied output layer)
_NAME = re.compile(r"tiny-l(\d+)-m(\d+)(-ref-[a-z]|-r\d+)?$")
# call 43's references: the L2 m4 job after every third grid run, in the plan's order (call42 named its three
# `tiny-l2-m4-ref-X` and was fitted without them)
_REFERENCE = re.compile(r"tiny-ref-\d+$")
REFERENCE_SHAPE = (2, 4)


def _median(log: Path) -> float | None:
    its = steady_iterations(log.read_text(errors="replace"))
    return statistics.median(its) if len(its) >= 10 else None


def runs(call: Path = CALL) -> dict[str, tuple[int, int, float]]:
    """name -> (layers, micro batches, median ms after the warm-up) of each run of the grid and its references; with
    interleaved references (call 43) each grid run's median over the host's speed then (drift_factors)."""
    out = {}
    for log in sorted((call / "fakepg").glob("tiny-*/first-rank0.log")):
        m, ms = _NAME.match(log.parent.name), _median(log)
        if m and ms is not None:
            out[log.parent.name] = (int(m.group(1)), int(m.group(2)), ms)
    factors = drift_factors(call)
    return {k: (layers, micro, ms / factors.get(k, 1.0)) for k, (layers, micro, ms) in out.items()}


def references(call: Path = CALL) -> list[tuple[int, float]]:
    """(position in the plan, median ms) of each interleaved reference run (none before call 43)."""
    order = [r["name"] for r in json.loads((call / "plan.json").read_text())]
    out = []
    for i, name in enumerate(order):
        log = call / "fakepg" / name / "first-rank0.log"
        ms = _median(log) if _REFERENCE.match(name) and log.exists() else None
        if ms is not None:
            out.append((i, ms))
    return out


def drift_factors(call: Path = CALL) -> dict[str, float]:
    """Each grid run's host speed against the call's mean, from the references: the mean of the reference just before
    it and the one just after (the nearer alone at an end) over the mean of every reference. {} without references."""
    refs = references(call)
    if not refs:
        return {}
    mean = statistics.mean(ms for _, ms in refs)
    order = [r["name"] for r in json.loads((call / "plan.json").read_text())]
    out = {}
    for i, name in enumerate(order):
        if _REFERENCE.match(name):
            continue
        before = [ms for j, ms in refs if j < i][-1:]
        after = [ms for j, ms in refs if j > i][:1]
        out[name] = statistics.mean(before + after) / mean
    return out


def _solve(rows: list[tuple[int, int, float]]) -> tuple[float, float, float, float]:
    """(a, b, B, P) minimising sum(((a + b L + m B + m L P) / y - 1)^2): weighted least squares, normal equations."""
    n = 4
    ata = [[0.0] * n for _ in range(n)]
    aty = [0.0] * n
    for layers, micro, y in rows:
        x = (1.0, layers, micro, micro * layers)
        w = 1 / y ** 2
        for i in range(n):
            aty[i] += w * x[i] * y
            for j in range(n):
                ata[i][j] += w * x[i] * x[j]
    for col in range(n):  # Gauss-Jordan with partial pivoting
        piv = max(range(col, n), key=lambda r: abs(ata[r][col]))
        ata[col], ata[piv], aty[col], aty[piv] = ata[piv], ata[col], aty[piv], aty[col]
        for r in range(n):
            if r != col:
                f = ata[r][col] / ata[col][col]
                ata[r] = [u - f * v for u, v in zip(ata[r], ata[col])]
                aty[r] -= f * aty[col]
    a, b, big_b, p = (aty[i] / ata[i][i] for i in range(n))
    return a, b, big_b, p


def ratios(rows: list[tuple[int, int, float]]) -> dict[str, float]:
    a, b, big_b, p = _solve(rows)
    return {"P_ms": p, "B/P": big_b / p, "a/P": a / p, "b/P": b / p}


def fit(call: Path = CALL, draws: int = 2000) -> dict:
    """The grid's fit, its bootstrap intervals, and the split in host_time's units (LAYER_PASS_S kept)."""
    found = runs(call)
    grid = [v for k, v in found.items() if "-ref" not in k]
    point = ratios(grid)
    rng = random.Random(42)
    boot: dict[str, list[float]] = {k: [] for k in point}
    for _ in range(draws):
        sample = [rng.choice(grid) for _ in grid]
        if len({(layers, m) for layers, m, _ in sample}) < 6:  # too few distinct points to separate four terms
            continue
        a, b, big_b, p = _solve(sample)
        if not abs(p) > 1e-9:  # a draw whose points do not separate a layer pass (singular, or P exactly 0)
            continue
        for k, v in ratios(sample).items():
            boot[k].append(v)
    interval = {k: (statistics.quantiles(v, n=20)[0], statistics.quantiles(v, n=20)[-1]) for k, v in boot.items()}
    pass_s = host_time.LAYER_PASS_S
    per_tensor = pass_s * point["b/P"] / TENSORS_PER_LAYER
    refs = [ms for _, ms in references(call)] or [v[2] for k, v in found.items() if k.startswith("tiny-l2-m4")]
    return {"grid": len(grid), "point": point, "interval": interval, "references_ms": refs,
            "split": {"MICROBATCH_S": pass_s * point["B/P"], "PER_TENSOR_S": per_tensor,
                      "ITERATION_S": pass_s * point["a/P"] - per_tensor * TENSORS_OUTSIDE},
            "profile": {"B/P": host_time.PROFILED_MICROBATCH_S / pass_s,
                        "a/P": (host_time.ITERATION_S + host_time.PER_TENSOR_S * TENSORS_OUTSIDE) / pass_s,
                        "b/P": host_time.PER_TENSOR_S * TENSORS_PER_LAYER / pass_s}}


def main(argv: list[str]) -> int:
    result = fit(Path(argv[0]) if argv else CALL)
    for name, (layers, micro, ms) in runs(Path(argv[0]) if argv else CALL).items():
        print(f"{name}: L{layers} m{micro} {ms:.1f} ms")
    print(f"grid runs {result['grid']}; the L2 m4 job {', '.join(f'{x:.1f}' for x in result['references_ms'])} ms")
    for k, v in result["point"].items():
        lo, hi = result["interval"][k]
        prof = result["profile"].get(k)
        print(f"{k}: {v:.3f} (90 % {lo:.3f} to {hi:.3f})" + (f"; the profile's {prof:.3f}" if prof is not None else ""))
    print("split: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in result["split"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
