"""Collective bus bandwidth across the GPUs of one host, for the step-time model's links (issue 33).

Run under torchrun, one process per GPU:

    torchrun --nproc_per_node N tools/comm_bench.py --out comm.jsonl [--backend nccl] [--sizes 1K..1G]

For each collective Megatron issues (all-reduce for data-parallel gradients and TP without sequence
parallel, all-gather and reduce-scatter for sequence parallel and the distributed optimizer,
all-to-all for expert parallel, send/recv between pipeline stages) and each message size, it times
`--iters` calls after `--warmup` and writes one JSON line per (op, size) on rank 0: the mean time,
the algorithm bandwidth (bytes / time) and the bus bandwidth in NCCL's convention (nccl-tests'
PERFORMANCE.md: all-reduce x 2(n-1)/n, all-gather / reduce-scatter / all-to-all x (n-1)/n,
send/recv x 1), so the figures compare with nccl-tests and with the model's `bytes / bandwidth`.
The last line is the fit per op: time = latency + bus bytes / bandwidth, by least squares over the
sizes (the latency from the small messages, the bandwidth from the large ones).

With `--backend gloo` it runs on CPUs (how the tests exercise it); such figures say nothing about
GPUs and are never folded into the model.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


def bus_factor(op: str, n: int) -> float:
    """NCCL's bus-bandwidth factor: how many bytes cross each rank's link per byte of message."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "send_recv":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def size_range(spec: str) -> list[int]:
    """`1K..1G` doubles from the first to the last; `4K,1M` lists sizes."""
    if ".." in spec:
        low, high = (parse_size(part) for part in spec.split("..", 1))
        sizes = []
        size = low
        while size <= high:
            sizes.append(size)
            size *= 2
        return sizes
    return [parse_size(part) for part in spec.split(",") if part.strip()]


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares of time = latency + x / bandwidth over (bus bytes x, seconds) points.

    Returns (latency in microseconds, bandwidth in GB/s); a non-positive slope (the sizes never left
    the latency floor) gives bandwidth 0, read as "not measured"."""
    n = len(points)
    if n < 2:
        raise ValueError("a fit needs at least two sizes")
    mean_x = sum(x for x, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxt = sum((x - mean_x) * (t - mean_t) for x, t in points)
    slope = sxt / sxx if sxx else 0.0
    latency = mean_t - slope * mean_x
    bandwidth = 1.0 / slope / 1e9 if slope > 0 else 0.0
    return max(latency, 0.0) * 1e6, bandwidth


def _collective(op: str, torch: object, dist: object, nbytes: int, rank: int, world: int,
                device: object) -> Callable[[], None]:
    t = torch  # the modules are passed in so that importing this file needs no torch (its tests)
    d = dist
    elems = max(nbytes // 4, world)
    elems -= elems % world
    x = t.ones(elems, dtype=t.float32, device=device)  # type: ignore[attr-defined]
    if op == "all_reduce":
        return lambda: d.all_reduce(x)  # type: ignore[attr-defined]
    if op == "all_gather":
        shard = x[: elems // world].contiguous()
        return lambda: d.all_gather_into_tensor(x, shard)  # type: ignore[attr-defined]
    if op == "reduce_scatter":
        shard = t.empty(elems // world, dtype=t.float32, device=device)  # type: ignore[attr-defined]
        return lambda: d.reduce_scatter_tensor(shard, x)  # type: ignore[attr-defined]
    if op == "all_to_all":
        out = t.empty_like(x)  # type: ignore[attr-defined]
        return lambda: d.all_to_all_single(out, x)  # type: ignore[attr-defined]
    if op == "send_recv":
        # Pipeline neighbours: even ranks send to the next, odd ranks receive from the previous.
        peer = rank + 1 if rank % 2 == 0 else rank - 1

        def exchange() -> None:
            if peer >= world:
                return
            if rank % 2 == 0:
                d.send(x, peer)  # type: ignore[attr-defined]
            else:
                d.recv(x, peer)  # type: ignore[attr-defined]
        return exchange
    raise ValueError(f"unknown collective {op!r}")


def measure(ops: Sequence[str], sizes: Sequence[int], warmup: int, iters: int, backend: str) -> list[dict[str, object]]:
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        sync: Callable[[], None] = torch.cuda.synchronize
    else:
        device = torch.device("cpu")
        sync = lambda: None  # noqa: E731 (gloo calls return when done)
    rows: list[dict[str, object]] = []
    for op in ops:
        for nbytes in sizes:
            call = _collective(op, torch, dist, nbytes, rank, world, device)
            for _ in range(warmup):
                call()
            sync()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            sync()
            seconds = (time.perf_counter() - start) / iters
            # The slowest rank's time is the collective's.
            slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            seconds = float(slowest.item())
            factor = bus_factor(op, world)
            rows.append({
                "op": op, "bytes": nbytes, "world": world, "backend": backend, "time_us": seconds * 1e6,
                "algbw_gb_s": nbytes / seconds / 1e9, "busbw_gb_s": nbytes * factor / seconds / 1e9,
            })
    dist.destroy_process_group()
    return rows if rank == 0 else []


def fits(rows: Sequence[dict[str, object]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for op in OPS:
        points = [(float(r["bytes"]) * bus_factor(op, int(r["world"])), float(r["time_us"]) / 1e6)  # type: ignore[arg-type]
                  for r in rows if r["op"] == op]
        points = [p for p in points if p[0] > 0]
        if len(points) >= 2:
            latency_us, bandwidth = fit(points)
            out[op] = {"latency_us": latency_us, "bus_gb_s": bandwidth}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--sizes", default="8K..1G")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args(argv)
    ops = [op for op in args.ops.split(",") if op]
    for op in ops:
        bus_factor(op, 2)
    rows = measure(ops, size_range(args.sizes), args.warmup, args.iters, args.backend)
    if rows:
        with open(args.out, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
            handle.write(json.dumps({"fit": fits(rows)}, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
