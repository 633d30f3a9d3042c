"""The host's pure-Python speed, printed beside every device micro-benchmark (the lent hosts run Python up to 2.2x
apart: tests/fixtures/h200-hosts/README.md)."""

from __future__ import annotations

import time


def python_loop_line() -> str:
    """A loop of 3 M additions, timed: the line each benchmark ends with."""
    t0 = time.perf_counter()
    s = 0
    for i in range(3_000_000):
        s += i
    return f"python loop 3M adds: {(time.perf_counter() - t0) * 1e3:.1f} ms"
