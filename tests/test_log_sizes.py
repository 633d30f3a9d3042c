"""The storage estimate's log terms against the committed H200 logs (issue 29, audit): the figures
docs/memory-model.md states are what these logs hold, and the estimate bounds each log from above."""

from __future__ import annotations

import re
from pathlib import Path

from compiler.megatron.memory import LOG_LINE_BYTES, LOG_START_BYTES
from helpers import FIXTURES, REPO

ITERATION = re.compile(rb" iteration +\d+/ *\d+ \|")
LOGS = sorted(FIXTURES.glob("measurements/*/train.log")) + [FIXTURES / "h200-pretrain-tp1-run" / "train.log"]


def _measure(path: Path) -> tuple[int, int, list[int]]:
    """(file bytes, bytes before the first iteration line, each iteration line's bytes)."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    first = next(i for i, line in enumerate(lines) if ITERATION.search(line))
    return len(data), sum(len(line) + 1 for line in lines[:first]), [len(l) + 1 for l in lines if ITERATION.search(l)]


def test_the_documented_log_figures_are_what_the_committed_logs_hold():
    measured = [_measure(path) for path in LOGS]
    whole = (min(m[0] for m in measured), max(m[0] for m in measured))
    start = (min(m[1] for m in measured), max(m[1] for m in measured))
    line = (min(min(m[2]) for m in measured), max(max(m[2]) for m in measured))
    stated = (f"{start[0] / 1000:.1f}-{start[1] / 1000:.1f} kB before the first iteration line, whole files of "
              f"{whole[0] / 1000:.1f}-{whole[1] / 1000:.1f} kB, and\n{line[0]}-{line[1]} B per iteration line")
    doc = (REPO / "docs" / "memory-model.md").read_text()
    assert stated in doc, stated


def test_the_log_estimate_bounds_every_committed_log():
    for path in LOGS:
        size, _, lines = _measure(path)
        assert LOG_START_BYTES + LOG_LINE_BYTES * len(lines) >= size, path
