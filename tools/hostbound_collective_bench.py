"""What a TP collective costs a host-bound step, by the size of its group (issue 26, the vTrain TP 8 rows).

Run under torchrun on one host, one process per GPU (8 GPUs: groups of 1, 2, 4 and 8 in turn, all ranks
busy at once, as TP n x DP 8/n runs):

    torchrun --nproc_per_node 8 tools/hostbound_collective_bench.py --out hostbound.jsonl

Each rank runs Megatron's pattern where the host, not the GPU, sets the pace: per "layer" `--ops` small
kernels (an elementwise op on a 1 MiB tensor each: a few microseconds of GPU, tens of host) and then
`--collectives` all-reduces of `--bytes` over its group; per "micro batch" of `--layers` layers a sync of
the host with the GPU (`.cpu()` of a CUDA tensor, as Megatron's get_batch -> broadcast_data does). Rank 0
writes one JSON line per (group size, message size): wall milliseconds per layer, and the same loop's
GPU-only time of one all-reduce (CUDA events, GPU-bound loop) beside it. The published vTrain rows take
5.0-5.2 ms a layer at TP 8 where TP 1, 2 and 4 take 3.3-3.7 (docs/performance-model.md): if a group's
collective costs a host-bound loop more than its NCCL time, and more the larger the group (the wait for
the slowest host), the per-layer figure grows from n = 4 to n = 8 by more than the all-reduce's own time.
With `--backend gloo` it runs on CPUs for a smoke test; such figures say nothing about GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--ops", type=int, default=40, help="small kernels a layer (host-bound)")
    ap.add_argument("--collectives", type=int, default=6, help="all-reduces a layer (forward, recompute, backward)")
    ap.add_argument("--layers", type=int, default=12, help="layers between host syncs (a micro batch)")
    ap.add_argument("--microbatches", type=int, default=20)
    ap.add_argument("--sizes", default="2097152,8388608", help="all-reduce bytes, comma-separated")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    gpu = args.backend == "nccl"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    sizes = [n for n in (1, 2, 4, 8) if n <= world and world % n == 0]
    groups = {n: [dist.new_group(list(range(g * n, (g + 1) * n))) for g in range(world // n)] for n in sizes if n > 1}
    small = torch.ones(1 << 18, device=device)  # 1 MiB of fp32

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    def step(group: object, buf: torch.Tensor | None) -> None:
        x = small
        for _ in range(args.ops):
            x = x * 1.0001
        if buf is not None:
            for _ in range(args.collectives):
                dist.all_reduce(buf, group=group)

    out = []
    for size in (int(s) for s in args.sizes.split(",")):
        buf_all = torch.ones(size // 2, dtype=torch.float16 if gpu else torch.float32, device=device)
        for n in sizes:
            group = groups[n][rank // n] if n > 1 else None
            buf = buf_all if n > 1 else None
            for _ in range(2):  # warm-up
                step(group, buf)
            dist.barrier()
            sync()
            start = time.perf_counter()
            for _ in range(args.microbatches):
                for _ in range(args.layers):
                    step(group, buf)
                small.sum().cpu()  # get_batch's host sync a micro batch
            sync()
            per_layer = (time.perf_counter() - start) / (args.microbatches * args.layers)
            gpu_ar = None
            if gpu and buf is not None:
                t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0.record()
                for _ in range(50):
                    dist.all_reduce(buf, group=group)
                t1.record()
                sync()
                gpu_ar = t0.elapsed_time(t1) / 50
            out.append({"group": n, "bytes": size, "ms_per_layer": per_layer * 1e3, "allreduce_gpu_ms": gpu_ar,
                        "ops": args.ops, "collectives": args.collectives, "layers": args.layers})
            dist.barrier()
    if rank == 0:
        with open(args.out, "w") as f:
            for row in out:
                f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
