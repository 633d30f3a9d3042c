#!/usr/bin/env python3
"""What a query/key norm (--qk-layernorm) costs a layer pass, measured on its own (issue 26, device call 19).

    python3 tools/norm_host_bench.py > norm-bench.txt

Megatron normalises each head's query and key over the head size (attention.py:1648-1652 at the pinned commit):
two norm modules a layer, Transformer Engine's RMSNorm/LayerNorm (TENorm) with `transformer_impl:
transformer_engine`, torch's (WrappedTorchNorm: torch.nn.RMSNorm or LayerNorm) with the local spec. For each
module this prints:

- host: the host's time of one module's forward and backward through autograd, from a chain of K modules on a
  tiny tensor (the GPU idle, so the host's enqueue is all that is timed) minus a chain of none, over K: the
  median of REPS steps, each step the forward of the chain and one backward;
- kernels: the CUDA kernels one module launches forward and backward (torch.profiler over one chain step);
- gpu: the module's forward and backward at the query's and key's real shapes (s, b, heads, head size), CUDA
  events around REPS steps.

The last line times a pure-Python loop (the host's yardstick in every call's summary.txt). Needs a GPU; TE's rows
need transformer_engine (tools/te_measure_device.sh installs it first).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
from yardstick import python_loop_line  # tools/, beside this script

K = 32
REPS = 40
HEAD = 128
SHAPES = {  # (s, b, heads): the h2048 model's query and key at s4096 b2; the h1024 model's at s2048 b2
    "q-h2048": (4096, 2, 16), "k-h2048": (4096, 2, 8), "q-h1024": (2048, 2, 16), "k-h1024": (2048, 2, 8)}


def modules() -> dict[str, Callable[[], torch.nn.Module]]:
    bf16 = torch.bfloat16
    out: dict[str, Callable[[], torch.nn.Module]] = {
        "torch-rmsnorm": lambda: torch.nn.RMSNorm(HEAD, eps=1e-6, device="cuda", dtype=bf16),
        "torch-layernorm": lambda: torch.nn.LayerNorm(HEAD, eps=1e-5, device="cuda", dtype=bf16),
    }
    try:
        import transformer_engine.pytorch as te
    except Exception as e:  # noqa: BLE001 - a GPU without TE still measures torch's
        print(f"# transformer_engine: not importable ({type(e).__name__}: {e})")
        return out
    out["te-rmsnorm"] = lambda: te.RMSNorm(HEAD, eps=1e-6, params_dtype=bf16, device="cuda")
    out["te-layernorm"] = lambda: te.LayerNorm(HEAD, eps=1e-5, params_dtype=bf16, device="cuda")
    return out


def chain_step(mods: list[torch.nn.Module], x: torch.Tensor) -> None:
    y = x
    for m in mods:
        y = m(y)
    y.sum().backward()


def host_seconds(make: Callable[[], torch.nn.Module], k: int) -> float:
    mods = [make() for _ in range(k)]
    x = torch.randn(4, 1, 2, HEAD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for _ in range(5):
        chain_step(mods, x)
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        chain_step(mods, x)
        times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    return statistics.median(times)


def kernels(make: Callable[[], torch.nn.Module]) -> int:
    mods = [make() for _ in range(4)]
    x = torch.randn(4, 1, 2, HEAD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    chain_step(mods, x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        chain_step(mods, x)
        torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as base:
        chain_step([], x)
        torch.cuda.synchronize()

    def count(p: Any) -> int:
        return sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return round((count(prof) - count(base)) / 4)


def gpu_seconds(make: Callable[[], torch.nn.Module], shape: tuple[int, int, int]) -> float:
    m = make()
    x = torch.randn(*shape, HEAD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn_like(x)
    for _ in range(5):
        m(x).backward(g)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        m(x).backward(g)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / REPS


def main() -> None:
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}; K={K} REPS={REPS} head size {HEAD}")
    for name, make in modules().items():
        per = (host_seconds(make, K) - host_seconds(make, 0)) / K
        gpu = " ".join(f"{tag}={gpu_seconds(make, shape) * 1e6:.1f}us({shape[0] * shape[1] * shape[2] * HEAD} el)"
                       for tag, shape in SHAPES.items())
        print(f"{name}: host {per * 1e6:.1f} us a module fwd+bwd; kernels {kernels(make)}; gpu {gpu}", flush=True)
    print(python_loop_line())


if __name__ == "__main__":
    main()
