#!/usr/bin/env python3
"""TE's grouped experts' host cost (compiler/megatron/layer_time.py GROUPED_MOE_LAYER_HOST_S and
GROUPED_EXPERT_GEMM_HOST_S), measured on the runs designated for it before device call 16 (its commit
0985284): the top-8 sweep of Qwen3-30B-A3B's MoE block at 8, 16, 32, 64 and 128 experts through TE's grouped
GEMM (tests/fixtures/h200-hosts/call15 and call16). Least squares on the relative error of the step model
(timing.step_time with the committed fit's other constants), over a grid.

    python tools/grouped_experts_fit.py

Left out of the fit, named before the call: call16/te-moe32-top2 (never seen before), call15/te-ds-mla-moe and
te-moe8-top2 (te-h200), whose errors with call 15's slope alone had been seen when the per-layer term was added.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import validate_timing as vt  # noqa: E402
from compiler.megatron import layer_time, timing  # noqa: E402
from compiler.megatron.gpus import GPUS, MEASURED_GPU  # noqa: E402

DESIGNATED = ("call15/te-moe32-top8", "call15/te-moe128-top8", "call16/te-moe8-top8", "call16/te-moe16-top8",
              "call16/te-moe32-top8", "call16/te-moe64-top8", "call16/te-moe128-top8")
HELD_OUT = ("call16/te-moe32-top2", "call15/te-ds-mla-moe", "te-moe8-top2")
# the grid (seconds): 0 to 30 ms a MoE layer and micro batch by 1 ms and 10 to 150 us an expert GEMM by 2 us,
# then by 0.5 ms and 1 us around the best
LAYER_GRID = tuple(k * 1e-3 for k in range(31))
GEMM_GRID = tuple(k * 2e-6 for k in range(5, 76))


def predictions(runs: dict[str, vt.Run], names: tuple[str, ...], layer_s: float, gemm_s: float) -> dict[str, float]:
    """The model's seconds an iteration (timing.step_time with the committed constants) for these runs, at these
    two (set on layer_time for the call)."""
    saved = layer_time.GROUPED_MOE_LAYER_HOST_S, layer_time.GROUPED_EXPERT_GEMM_HOST_S
    layer_time.GROUPED_MOE_LAYER_HOST_S, layer_time.GROUPED_EXPERT_GEMM_HOST_S = layer_s, gemm_s
    try:
        return {n: timing.step_time(*vt.inputs(runs[n]), GPUS[MEASURED_GPU], runs[n].params).seconds for n in names}
    finally:
        layer_time.GROUPED_MOE_LAYER_HOST_S, layer_time.GROUPED_EXPERT_GEMM_HOST_S = saved


def _sse(runs: dict[str, vt.Run], a: float, b: float) -> float:
    return sum((p / runs[n].measured_s - 1) ** 2 for n, p in predictions(runs, DESIGNATED, a, b).items())


def fit() -> tuple[float, float, dict[str, float]]:
    """(layer s, GEMM s, each designated and held-out run's relative error at them)."""
    runs = {r.name: r for r in vt.load_runs() if r.name in DESIGNATED + HELD_OUT}
    _, a, b = min((_sse(runs, a, b), a, b) for a in LAYER_GRID for b in GEMM_GRID)
    fine = [(max(0.0, a + i * 5e-4), b + j * 1e-6) for i in range(-2, 3) for j in range(-2, 3)]
    _, a, b = min((_sse(runs, x, y), x, y) for x, y in fine)
    errors = {n: p / runs[n].measured_s - 1 for n, p in predictions(runs, DESIGNATED + HELD_OUT, a, b).items()}
    return a, b, errors


def main() -> int:
    a, b, errors = fit()
    print(f"GROUPED_MOE_LAYER_HOST_S {a * 1e3:.1f} ms, GROUPED_EXPERT_GEMM_HOST_S {b * 1e6:.0f} us")
    for n, e in errors.items():
        print(f"{'held out' if n in HELD_OUT else 'fitted  '} {n:<28} {e * 100:+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
