#!/usr/bin/env python3
"""Micro-benchmarks of the kernels a Megatron layer issues, on the GPU this runs on (issue 26).

Each figure the step-time model uses (compiler/megatron/gpu_rates.py) is measured here on its own,
never fitted jointly with another:

- gemm: time of torch.matmul at a grid of (m, n, k) for the three layouts a Linear issues (forward
  x @ W^T, data gradient dy @ W, weight gradient dy^T @ x), bf16 and fp16;
- bmm: the unfused attention's baddbmm (Q K^T) and bmm (P V) over (batch x heads, s, s, d);
- ops: forward + backward of the bandwidth-bound ops Megatron's local layers run (LayerNorm,
  RMSNorm-as-written, GeLU, dropout, softmax, add, casts, the fp32 cross entropy), per element;
- copy: HBM rate of a device-to-device copy by size;
- launch: host cost per kernel launch (a tiny add, enqueued without waiting) and per autograd op;
- adam: torch.optim.AdamW (foreach, what Megatron uses without TE or Apex) per fp32 parameter.

    python tools/microbench.py OUT.json [--quick] [--only FAMILY[,FAMILY]]

`--only launch` times the host's launch figures alone (a few seconds): tools/host_measure_device.sh takes
them before and after a batch of runs, the host's speed where those runs ran.

Writes one JSON object (device, torch version, and one list per family). Timing: CUDA events
around a loop of repetitions after warm-up; the median of 5 such loops.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

GRID = (128, 512, 2048, 8192, 32768)
MAX_FLOPS = 4e12  # a GEMM above this is timed with one repetition per loop


def timed(fn, target_ms: float = 4.0, loops: int = 5) -> float:
    """Median seconds per call of fn (on the GPU's clock)."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    reps = max(1, min(200, int(target_ms / once)))
    samples = []
    for _ in range(loops):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / reps / 1e3)
    return statistics.median(samples)


def gemm(dtype: torch.dtype) -> list[dict]:
    out = []
    for m in GRID:
        for n in GRID:
            for k in GRID:
                if m * n * 2 + n * k * 2 + m * k * 2 > 6e9:
                    continue
                a = torch.randn(m, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype)
                flops = 2.0 * m * n * k
                target = 4.0 if flops < MAX_FLOPS else 0.0
                fwd = timed(lambda: torch.matmul(a, w.t()), target, 3 if flops >= MAX_FLOPS else 5)
                dy = torch.randn(m, n, device="cuda", dtype=dtype)
                dgrad = timed(lambda: torch.matmul(dy, w), target, 3 if flops >= MAX_FLOPS else 5)
                wgrad = timed(lambda: torch.matmul(dy.t(), a), target, 3 if flops >= MAX_FLOPS else 5)
                out.append({"m": m, "n": n, "k": k, "fwd_s": fwd, "dgrad_s": dgrad, "wgrad_s": wgrad})
                del a, w, dy
    torch.cuda.empty_cache()
    return out


def bmm() -> list[dict]:
    out = []
    for bh in (8, 32, 128):
        for s in (256, 1024, 2048, 4096, 8192):
            for d in (64, 128):
                if bh * s * s * 2 > 8e9:
                    continue
                q = torch.randn(bh, s, d, device="cuda", dtype=torch.bfloat16)
                kt = torch.randn(bh, d, s, device="cuda", dtype=torch.bfloat16)
                buf = torch.empty(bh, s, s, device="cuda", dtype=torch.bfloat16)
                scores = timed(lambda: torch.baddbmm(buf, q, kt, beta=0.0, alpha=0.125))
                p = torch.randn(bh, s, s, device="cuda", dtype=torch.bfloat16)
                v = torch.randn(bh, s, d, device="cuda", dtype=torch.bfloat16)
                context = timed(lambda: torch.bmm(p, v))
                out.append({"bh": bh, "s": s, "d": d, "qk_s": scores, "pv_s": context})
                del q, kt, buf, p, v
    torch.cuda.empty_cache()
    return out


def ops() -> list[dict]:
    """Forward + backward seconds of one op over `elements` elements (bf16 unless named)."""
    out = []
    for elements in (1 << 20, 1 << 23, 1 << 26, 1 << 28):
        hidden = 1024 if elements >= 1 << 23 else 256
        rows = elements // hidden

        def fb(f, dtype=torch.bfloat16, shape=(rows, hidden)):
            x = torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
            g = torch.randn(*shape, device="cuda", dtype=dtype)

            def run():
                y = f(x)
                y.backward(g)
            return timed(run), timed(lambda: f(x.detach()))

        ln = torch.nn.LayerNorm(hidden, device="cuda", dtype=torch.bfloat16)
        cases = {
            "layernorm": lambda x: ln(x),
            "gelu": F.gelu,
            "dropout": lambda x: F.dropout(x, 0.1, training=True),
            "softmax": lambda x: torch.softmax(x, dim=-1),
            "add": lambda x: x + x,
            "scale": lambda x: x * 0.5,
            "to_fp32": lambda x: x.float(),
        }
        for name, f in cases.items():
            both, fwd = fb(f)
            out.append({"op": name, "elements": elements, "fwd_bwd_s": both, "fwd_s": fwd})
        # the vocab-parallel cross entropy works on fp32 logits (cross_entropy.py)
        both, fwd = fb(lambda x: torch.log_softmax(x, dim=-1), torch.float32)
        out.append({"op": "log_softmax_fp32", "elements": elements, "fwd_bwd_s": both, "fwd_s": fwd})
        torch.cuda.empty_cache()
    return out


def copy() -> list[dict]:
    out = []
    for size in (1 << 16, 1 << 20, 1 << 24, 1 << 27, 1 << 30, 1 << 32):
        a = torch.empty(size, device="cuda", dtype=torch.uint8)
        b = torch.empty_like(a)
        out.append({"bytes": size, "copy_s": timed(lambda: b.copy_(a))})
        del a, b
    torch.cuda.empty_cache()
    return out


def launch() -> dict:
    x = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    gpu = timed(lambda: x.add_(1.0))
    # an autograd op with its backward: what a small layer costs per op on the host
    y = torch.ones(16, device="cuda", requires_grad=True)
    m = 2000
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(m):
        (y * 2.0).sum().backward()
    torch.cuda.synchronize()
    autograd = (time.perf_counter() - t) / m
    # a Linear forward + backward at a tiny size: host-bound by construction
    lin = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    z = torch.ones(8, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(m):
        lin(z).sum().backward()
    torch.cuda.synchronize()
    linear = (time.perf_counter() - t) / m
    return {"host_per_launch_s": host, "gpu_per_tiny_kernel_s": gpu,
            "autograd_mul_sum_backward_s": autograd, "tiny_linear_fwd_bwd_s": linear}


def adam() -> list[dict]:
    out = []
    for params in (1 << 20, 1 << 24, 1 << 27, 1 << 29):
        for tensors in (8, 64):
            shards = [torch.zeros(params // tensors, device="cuda", requires_grad=True) for _ in range(tensors)]
            for s in shards:
                s.grad = torch.randn_like(s)
            opt = torch.optim.AdamW(shards, lr=1e-4)
            opt.step()
            torch.cuda.synchronize()
            t = time.perf_counter()
            gpu = timed(opt.step, 1.0, 3)
            wall = time.perf_counter() - t
            out.append({"params": params, "tensors": tensors, "step_s": gpu, "wall_s": wall})
            del shards, opt
            torch.cuda.empty_cache()
    return out


def main() -> None:
    path = sys.argv[1]
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    result: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, fn in (("launch", launch), ("copy", copy), ("adam", adam), ("ops", ops), ("bmm", bmm),
                     ("gemm_bf16", lambda: gemm(torch.bfloat16)), ("gemm_fp16", lambda: gemm(torch.float16))):
        if only is not None and name not in only:
            continue
        t = time.time()
        try:
            result[name] = fn()
        except Exception as exc:  # a family that fails leaves the others
            result[name] = {"error": repr(exc)}
        print(f"{name}: {time.time() - t:.1f} s", flush=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
