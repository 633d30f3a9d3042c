"""tools/comm_bench.py: the collective bandwidth harness for multi-GPU machines (issue 33).

Its arithmetic (NCCL's bus-bandwidth factors, the latency + bytes/bandwidth fit) is checked here,
and the harness itself runs for real on CPUs with gloo under torchrun, two ranks: the figures of
that run are not checked (CPUs say nothing about GPU links), only that every collective ran and
was reported with the shape the device summary reads.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import comm_bench  # noqa: E402
from helpers import gloo_tool_lines  # noqa: E402


def test_bus_factors_follow_nccl_tests() -> None:
    assert comm_bench.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert comm_bench.bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert comm_bench.bus_factor("reduce_scatter", 2) == pytest.approx(1 / 2)
    assert comm_bench.bus_factor("all_to_all", 8) == pytest.approx(7 / 8)
    assert comm_bench.bus_factor("send_recv", 2) == 1.0
    assert comm_bench.bus_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError):
        comm_bench.bus_factor("broadcast", 2)


def test_sizes() -> None:
    assert comm_bench.size_range("1K..8K") == [1024, 2048, 4096, 8192]
    assert comm_bench.size_range("4K,1M") == [4096, 1 << 20]
    assert comm_bench.parse_size("1G") == 1 << 30


def test_fit_recovers_latency_and_bandwidth() -> None:
    latency, bandwidth = 25e-6, 350e9  # 25 us, 350 GB/s
    points = [(x, latency + x / bandwidth) for x in (2.0**k for k in range(13, 31))]
    got_latency_us, got_gb_s = comm_bench.fit(points)
    assert got_latency_us == pytest.approx(25.0, rel=1e-6)
    assert got_gb_s == pytest.approx(350.0, rel=1e-6)
    # Sizes that never leave the latency floor measure no bandwidth.
    assert comm_bench.fit([(1.0, 1e-5), (2.0, 1e-5)])[1] == 0.0


def test_gloo_run_reports_every_collective(tmp_path: Path) -> None:
    lines = gloo_tool_lines("comm_bench.py", 29631, tmp_path / "comm.jsonl", "--sizes", "4K,64K", "--warmup", "1",
                            "--iters", "2")
    rows, last = lines[:-1], lines[-1]
    assert {(r["op"], r["bytes"]) for r in rows} == {(op, s) for op in comm_bench.OPS for s in (4096, 65536)}
    for row in rows:
        assert row["world"] == 2 and row["time_us"] > 0 and math.isfinite(row["busbw_gb_s"])
    assert set(last["fit"]) == set(comm_bench.OPS)
