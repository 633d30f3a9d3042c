#!/usr/bin/env python3
"""Fit prepare.sh's time model to the H200 runs of tests/fixtures/prepare-throughput, and hold each run
out: the error of each run predicted by the model fitted to the OTHER runs (leave-one-out).

Model (compiler/megatron/data.py estimate_prefix): wall = fixed + tokens / min(rate x workers, cap),
`fixed` being preprocess_data.py's start and finish plus publish's read-back. The fit minimises the
largest relative error over the runs it is given, on a grid (fixed 0-80 s by a ternary search, the
largest error being convex in it; rate and cap on logarithmic grids), so a fit of three runs is as determined as the data allow and no more.

    python tools/fit_prepare_time.py        # prints the fit on all runs and the leave-one-out table
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "prepare-throughput"
WORKERS = {"prep-w1": 1, "prep-w4": 4, "prep-w8": 8, "tiny-w4": 4}


class Run(NamedTuple):
    name: str
    tokens: int
    workers: int
    wall: float


class Fit(NamedTuple):
    fixed: float  # seconds
    rate: float  # tokens/s a worker
    cap: float  # tokens/s in all

    def predict(self, run: Run) -> float:
        return self.fixed + run.tokens / min(self.rate * run.workers, self.cap)


def runs() -> list[Run]:
    """The committed runs: tokens from each manifest, wall seconds from timing.txt."""
    timing = {}
    for line in (FIXTURES / "timing.txt").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if rest.startswith("wall_seconds: "):
            timing[name] = float(rest.split(": ", 1)[1])
    out = []
    for name, workers in WORKERS.items():
        manifest = dict(line.split(": ", 1) for line in (FIXTURES / f"{name}.manifest").read_text().splitlines())
        out.append(Run(name, int(manifest["tokens"]), workers, timing[name]))
    return out


def _grid(low: float, high: float, steps: int) -> list[float]:
    return [low * (high / low) ** (i / (steps - 1)) for i in range(steps)]


def fit(data: list[Run]) -> Fit:
    """The (fixed, rate, cap) with the smallest largest relative error over `data`."""
    best: tuple[float, Fit] | None = None
    rates = _grid(5e4, 5e6, 93)
    for rate in rates:
        for cap in [c for c in rates if c >= rate] + [math.inf]:
            # for a rate and cap the largest error is convex in the fixed cost: a ternary search
            def worst(fixed: float) -> float:
                return max(abs(Fit(fixed, rate, cap).predict(r) - r.wall) / r.wall for r in data)

            low, high = 0.0, 80.0
            for _ in range(60):
                a, b = low + (high - low) / 3, high - (high - low) / 3
                low, high = (low, b) if worst(a) <= worst(b) else (a, high)
            candidate = Fit(round((low + high) / 2, 2), rate, cap)
            error = worst(candidate.fixed)
            if best is None or error < best[0]:
                best = (error, candidate)
    assert best is not None
    return best[1]


def leave_one_out(data: list[Run]) -> list[tuple[Run, Fit, float]]:
    """Each run predicted by the fit to the others: (run, that fit, relative error)."""
    out = []
    for held in data:
        model = fit([r for r in data if r is not held])
        out.append((held, model, (model.predict(held) - held.wall) / held.wall))
    return out


def main() -> int:
    data = runs()
    print("fit on all runs:", fit(data))
    for held, model, error in leave_one_out(data):
        print(f"{held.name}: wall {held.wall:.1f} s, predicted {model.predict(held):.1f} s ({error:+.1%}) "
              f"by {model}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
