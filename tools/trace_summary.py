#!/usr/bin/env python3
"""Summarise a torch profiler chrome trace of Megatron training steps (issue 26's host and MoE terms).

    python tools/trace_summary.py TRACE.json[.gz] [--top 30]

Megatron writes the trace with `--profile --use-pytorch-profiler --profile-step-start A
--profile-step-end B --tensorboard-dir D` to D/../torch_profile/rank-0.json.gz
(megatron/training/training.py:3352). Per profiled step (`ProfilerStep#N`): its wall time, the time
the GPU was busy (the union of kernel, memcpy and memset intervals), the kernels and host launches it
issued, the host time spent waiting in synchronising calls, and the GPU's idle time split by what the
host was doing (waiting on a sync, or launching: the host-bound share). Then the kernels and CPU ops
with the most time. The profiler slows the host (a few microseconds an op): kernel counts and GPU
times are exact, host times are upper bounds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaMemcpyAsync",
          "cudaMemsetAsync")
SYNC = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
        "cudaStreamWaitEvent")


def load(path: Path) -> list[dict[str, Any]]:
    """The trace's complete ('X') events."""
    raw = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    data = json.loads(raw)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged [start, end) intervals."""
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def summarise(events: list[dict[str, Any]], top: int = 30) -> str:
    steps = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    lines = ["| step | wall ms | GPU busy ms | GPU idle ms | idle while host syncs ms | kernels | launches | sync calls | host in sync ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    busy_all = union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    sync_all = union([(e["ts"], e["ts"] + e["dur"]) for e in runtime if e["name"] in SYNC])
    for st in steps:
        lo, hi = st["ts"], st["ts"] + st["dur"]
        busy = clip(busy_all, lo, hi)
        busy_s = sum(e - s for s, e in busy)
        idle = union([(lo, hi)])
        idle_iv: list[tuple[float, float]] = []
        cur = lo
        for s, e in busy:
            if s > cur:
                idle_iv.append((cur, s))
            cur = max(cur, e)
        if cur < hi:
            idle_iv.append((cur, hi))
        del idle
        sync = clip(sync_all, lo, hi)
        kernels = sum(1 for e in gpu if lo <= e["ts"] < hi and e.get("cat") == "kernel")
        launches = sum(1 for e in runtime if lo <= e["ts"] < hi and e["name"] in LAUNCH)
        syncs = sum(1 for e in runtime if lo <= e["ts"] < hi and e["name"] in SYNC)
        lines.append(f"| {st['name']} | {st['dur'] / 1e3:.2f} | {busy_s / 1e3:.2f} | {(st['dur'] - busy_s) / 1e3:.2f} | "
                     f"{overlap(idle_iv, sync) / 1e3:.2f} | {kernels} | {launches} | {syncs} | "
                     f"{sum(e - s for s, e in sync) / 1e3:.2f} |")
    lo = steps[0]["ts"] if steps else min(e["ts"] for e in events)
    hi = (steps[-1]["ts"] + steps[-1]["dur"]) if steps else max(e["ts"] + e["dur"] for e in events)
    n = max(1, len(steps))
    by_kernel: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in gpu:
        if lo <= e["ts"] < hi:
            k = by_kernel[str(e["name"])[:110]]
            k[0] += 1
            k[1] += e["dur"]
    lines += ["", f"GPU work per step (mean over {n}), most time first:", "", "| kernel | count | ms |", "|---|---:|---:|"]
    for name, (c, d) in sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"| {name.replace('|', '/')} | {c / n:g} | {d / n / 1e3:.3f} |")
    by_op: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("cat") in ("cpu_op", "cuda_runtime") and lo <= e["ts"] < hi:
            k = by_op[str(e["name"])[:80]]
            k[0] += 1
            k[1] += e["dur"]
    lines += ["", f"Host ops per step (mean over {n}; inclusive times, nested ops counted in each):", "",
              "| op | count | ms |", "|---|---:|---:|"]
    for name, (c, d) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"| {name.replace('|', '/')} | {c / n:g} | {d / n / 1e3:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--top", type=int, default=30)
    ns = p.parse_args(argv)
    sys.stdout.write(summarise(load(ns.trace), ns.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
