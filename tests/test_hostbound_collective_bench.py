"""tools/hostbound_collective_bench.py: a host-bound loop with a collective a segment, by group size (issue 26's
vTrain TP 8 rows; docs/performance-model.md). It runs for real on CPUs with gloo under torchrun, two ranks, where
torch is installed; its figures there say nothing about GPUs and are never folded into the model."""

from __future__ import annotations

from pathlib import Path

from helpers import gloo_tool_lines


def test_gloo_run_reports_every_group_and_size(tmp_path: Path) -> None:
    rows = gloo_tool_lines("hostbound_collective_bench.py", 29633, tmp_path / "hostbound.jsonl", "--sizes", "4096,65536",
                           "--ops", "3", "--layers", "2", "--microbatches", "2")
    assert {(r["group"], r["bytes"]) for r in rows} == {(n, s) for n in (1, 2) for s in (4096, 65536)}
    assert all(r["ms_per_layer"] > 0 and r["allreduce_gpu_ms"] is None for r in rows)

