"""tools/hostbound_collective_bench.py: a host-bound loop with a collective a segment, by group size (issue 26's
vTrain TP 8 rows; docs/performance-model.md). It runs for real on CPUs with gloo under torchrun, two ranks, where
torch is installed; its figures there say nothing about GPUs and are never folded into the model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_gloo_run_reports_every_group_and_size(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)")
    out = tmp_path / "hostbound.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29633",
         str(ROOT / "tools" / "hostbound_collective_bench.py"), "--backend", "gloo", "--sizes", "4096,65536",
         "--ops", "3", "--layers", "2", "--microbatches", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["group"], r["bytes"]) for r in rows} == {(n, s) for n in (1, 2) for s in (4096, 65536)}
    assert all(r["ms_per_layer"] > 0 and r["allreduce_gpu_ms"] is None for r in rows)

