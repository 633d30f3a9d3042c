#!/usr/bin/env python3
"""Summarise a torch profiler chrome trace of Megatron training steps (issue 26's host and MoE terms).

    python tools/trace_summary.py TRACE.json[.gz] [--top 30]
    python tools/trace_summary.py TRACE.json[.gz] --phases   # the host's time by micro batch, layer, iteration
    python tools/trace_summary.py TRACE.json[.gz] --ops      # the GPU's time by the op that launched each kernel
    python tools/trace_summary.py TRACE.json[.gz] --calls aten::mm [--slow-us 150]  # one op's host calls, slow ones apart
    python tools/trace_summary.py TRACE.json.gz --compact OUT.json.gz  # the events and fields these read, alone

Megatron writes the trace with `--profile --use-pytorch-profiler --profile-step-start A
--profile-step-end B --tensorboard-dir D` to D/../torch_profile/rank-0.json.gz
(megatron/training/training.py:3352). Per profiled step (`ProfilerStep#N`): its wall time, the time
the GPU was busy (the union of kernel, memcpy and memset intervals), the kernels and host launches it
issued, the host time spent waiting in synchronising calls, and the GPU's idle time split by what the
host was doing (waiting on a sync, or launching: the host-bound share). Then the kernels and CPU ops
with the most time. `--ops` (device call 37) groups the kernels' time by what launched each one: the launch that
carries its correlation id, and the CPU ops open on that thread around it, outermost autograd function or
module-level op first (`autograd::engine::evaluate_function: MulBackward0`, `aten::scatter_add_`), the innermost
aten op, then the kernel. `--calls OP` (device call 39) gives one host op's calls in the profiled steps: how many, their
median, and those slower than --slow-us apart (their share, time, and the GPU's busy time while they ran). The profiler slows the host (a few microseconds an op): kernel counts and GPU
times are exact, host times are upper bounds.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

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


def profiler_steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profiled steps, once each (the trace repeats each ProfilerStep# as a GPU annotation)."""
    return sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                   and e.get("cat") == "user_annotation"), key=lambda e: e["ts"])


def profiled_window(events: list[dict[str, Any]], steps: list[dict[str, Any]]) -> tuple[float, float]:
    """From the first profiled step's start to the last one's end (the whole trace where none is marked)."""
    if not steps:
        return min(e["ts"] for e in events), max(e["ts"] + e["dur"] for e in events)
    return steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]


LINEAR = "LinearWithGradAccumulationAndAsyncCommunication"  # Megatron's Linear autograd function (layers.py)
# Transformer Engine's linear autograd functions (transformer_engine/pytorch/module/layernorm_linear.py,
# linear.py): a TE layer's QKV and FC1 are _LayerNormLinear, its projection and FC2 _Linear; the output
# layer stays Megatron's Linear. Each is a layer's Linear call as LINEAR is for the local layer.
LINEARS = (LINEAR, "_LayerNormLinear", "_Linear")


def phases(events: list[dict[str, Any]], linears_per_layer: int = 4) -> list[dict[str, Any]]:
    """Per profiled step, in ms: `periods` (each micro batch but the last, from its data loader call to
    the next), `forward` and `backward` (each micro batch's spans on the two threads), `layer_forward`
    and `layer_backward` (each dense layer between consecutive QKV Linear calls, the output layer's one
    Linear counted after the layers), `iteration` (the step's host work outside its micro batches, less
    its time in synchronising calls) and `iteration_sync`."""
    out = []
    sync_iv = union([(e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "cuda_runtime" and e["name"] in SYNC])
    for st in profiler_steps(events):
        lo, hi, main = st["ts"], st["ts"] + st["dur"], st["tid"]
        starts = sorted(e["ts"] for e in events if e.get("cat") == "user_annotation"
                        and "DataLoader" in str(e["name"]) and lo <= e["ts"] < hi)
        back = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") != main and lo <= e["ts"] < hi]
        bounds = starts + [hi]
        spans = []
        for a, b in zip(bounds, bounds[1:]):
            mine = [e for e in back if a <= e["ts"] < b]
            spans.append((a, min(e["ts"] for e in mine), max(e["ts"] + e["dur"] for e in mine)))
        own = [(lo, starts[0]), (spans[-1][2], hi)]
        wait = sum(sum(e - s for s, e in clip(sync_iv, a, b)) for a, b in own)
        fwd = sorted(e["ts"] for e in events if e.get("cat") == "cpu_op" and e["name"] in LINEARS
                     and e.get("tid") == main and lo <= e["ts"] < hi)
        bwd = sorted(e["ts"] for e in events if e.get("cat") == "cpu_op" and str(e["name"]).endswith("Backward")
                     and e["name"][:-len("Backward")] in LINEARS and lo <= e["ts"] < hi)
        per = len(fwd) // len(starts)  # linears a micro batch: the layers' and the output layer's
        layers = (per - 1) // linears_per_layer if per % linears_per_layer == 1 else 0
        lf, lb = [], []
        for k in range(len(starts)):
            f, g = fwd[k * per:(k + 1) * per], bwd[k * per:(k + 1) * per]
            # forward: layer j's QKV call to layer j+1's; backward (output layer first, then each layer's
            # FC2, FC1, projection, QKV): layer j's QKV backward to the one before it
            lf += [(f[linears_per_layer * (j + 1)] - f[linears_per_layer * j]) / 1e3 for j in range(layers - 1)]
            lb += [(g[linears_per_layer * (j + 2)] - g[linears_per_layer * (j + 1)]) / 1e3 for j in range(layers - 1)]
        out.append({"periods": [(b - a) / 1e3 for a, b in zip(starts, starts[1:])],
                    "forward": [(f - a) / 1e3 for a, f, _ in spans], "backward": [(e - f) / 1e3 for _, f, e in spans],
                    "layer_forward": lf, "layer_backward": lb,
                    "iteration": (sum(b - a for a, b in own) - wait) / 1e3, "iteration_sync": wait / 1e3})
    return out


def kernel_ms(events: list[dict[str, Any]], *parts: str) -> float:
    """The mean GPU time of a profiled step (ms) of the kernels whose name holds every one of `parts`
    (rates.py's per-parameter optimizer and gradient-accumulation figures): every kernel of the trace, which
    Megatron's profiler records over its profiled steps only."""
    steps = profiler_steps(events)
    if not steps:
        raise ValueError("the trace has no profiled step")
    total = sum(e["dur"] for e in events if e.get("cat") == "kernel" and all(p in str(e["name"]) for p in parts))
    return total / len(steps) / 1e3


def kernels_with_ops(events: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each GPU event of the profiled steps with the CPU ops open around the launch that carries its correlation id
    (a launch sits inside its op's span), outermost first; none where no launch carries it."""
    lo, hi = profiled_window(events, profiler_steps(events))
    launch = {e["args"].get("correlation"): e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    ops: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in ("cpu_op", "user_annotation") and not str(e["name"]).startswith("ProfilerStep#"):
            ops[(e["pid"], e["tid"])].append(e)
    starts = {}
    for key, xs in ops.items():
        xs.sort(key=lambda e: e["ts"])
        starts[key] = [e["ts"] for e in xs]
    for g in events:
        if g.get("cat") not in GPU_CATS or not lo <= g["ts"] < hi:
            continue
        r = launch.get(g["args"].get("correlation"))
        around: list[dict[str, Any]] = []
        if r is not None:
            thread = (r["pid"], r["tid"])
            xs = ops.get(thread, [])
            i = bisect.bisect_right(starts.get(thread, []), r["ts"])
            around = [e for e in xs[max(0, i - 5000):i] if e["ts"] + e["dur"] >= r["ts"] + r["dur"]]
        yield g, around


def launched_by(events: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[float]]:
    """The profiled steps' GPU work, [count, ms a step], keyed by (the outermost CPU op open around its launch that
    is an autograd function or not an aten op, the innermost aten op, the kernel's name)."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    n = max(1, len(profiler_steps(events)))
    for g, ops in kernels_with_ops(events):
        around = [e["name"] for e in ops]
        outer = [a for a in around if a.startswith("autograd::") or not a.startswith("aten::")]
        inner = [a for a in around if a.startswith("aten::")]
        key = ((outer or around or ["-"])[0][:70], (inner or ["-"])[-1], str(g["name"])[:70])
        out[key][0] += 1 / n
        out[key][1] += g["dur"] / n / 1e3
    return out


def ops_text(events: list[dict[str, Any]], top: int = 30) -> str:
    rows = sorted(launched_by(events).items(), key=lambda kv: -kv[1][1])
    lines = ["| launched by | aten op | kernel | count | ms |", "|---|---|---|---:|---:|"]
    for (outer, inner, kernel), (c, ms) in rows[:top]:
        lines.append(f"| {outer.replace('|', '/')} | {inner} | {kernel.replace('|', '/')} | {c:g} | {ms:.3f} |")
    return "\n".join(lines) + "\n"


def calls_text(events: list[dict[str, Any]], op: str, slow_us: float = 150.0) -> str:
    """`op`'s host calls in the profiled steps: count, median, and the calls over `slow_us` apart."""
    steps = profiler_steps(events)
    lo, hi = profiled_window(events, steps)
    busy = union([(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in GPU_CATS])
    calls = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == op and lo <= e["ts"] < hi]
    if not calls:
        return f"no {op} calls in the profiled steps\n"
    slow = [e for e in calls if e["dur"] > slow_us]
    gpu = sum(b - a for e in slow for a, b in clip(busy, e["ts"], e["ts"] + e["dur"]))
    durs = sorted(e["dur"] for e in calls)
    return (f"| op | calls | median us | over {slow_us:g} us | share | their ms | their median us | GPU busy while they ran ms |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|\n"
            f"| {op} | {len(calls)} | {durs[len(durs) // 2]:.1f} | {len(slow)} | {len(slow) / len(calls):.3f} | "
            f"{sum(e['dur'] for e in slow) / 1e3:.1f} | "
            f"{sorted(e['dur'] for e in slow)[len(slow) // 2] if slow else 0.0:.1f} | {gpu / 1e3:.1f} |\n")


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def phases_text(events: list[dict[str, Any]], linears_per_layer: int = 4) -> str:
    lines = ["| step | micro batch ms | forward ms | layer forward ms | layer backward ms | iteration ms | "
             "iteration in syncs ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for i, p in enumerate(phases(events, linears_per_layer)):
        lines.append(f"| {i} | {_mean(p['periods']):.2f} | {_mean(p['forward']):.2f} | {_mean(p['layer_forward']):.2f} | "
                     f"{_mean(p['layer_backward']):.2f} | {p['iteration']:.2f} | {p['iteration_sync']:.2f} |")
    return "\n".join(lines) + "\n"


def summarise(events: list[dict[str, Any]], top: int = 30) -> str:
    steps = profiler_steps(events)
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
    lo, hi = profiled_window(events, steps)
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


KEPT_ARGS = ("correlation", "Input Dims")  # what the summaries (and tools/layer_path_check.py) read of an event's args


def compact(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's events without the flow arrows (ac2g, fwdbwd) and each event's args but KEPT_ARGS: what every mode
    here reads, at a third of the size (device call 45's traces, kept as fixtures)."""
    out = []
    for e in events:
        if e.get("cat") in ("ac2g", "fwdbwd"):
            continue
        args = {k: v for k, v in (e.get("args") or {}).items() if k in KEPT_ARGS}
        out.append({**{k: v for k, v in e.items() if k != "args"}, **({"args": args} if "args" in e else {})})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--phases", action="store_true", help="the host's time by micro batch, layer and iteration")
    p.add_argument("--ops", action="store_true", help="the GPU's time by the op that launched each kernel")
    p.add_argument("--calls", metavar="OP", help="one host op's calls (aten::mm), the slow ones apart")
    p.add_argument("--slow-us", type=float, default=150.0, help="--calls: a slow call's least duration (us)")
    p.add_argument("--linears-per-layer", type=int, default=4,
                   help="Megatron Linear calls a layer makes (4 dense; 2 + 2 x local experts with MoE)")
    p.add_argument("--compact", type=Path, metavar="OUT", help="write the events and fields the modes read (gzip)")
    ns = p.parse_args(argv)
    events = load(ns.trace)
    if ns.compact:
        with gzip.open(ns.compact, "wt", compresslevel=9) as f:
            json.dump({"traceEvents": compact(events)}, f, separators=(",", ":"))
        return 0
    sys.stdout.write(phases_text(events, ns.linears_per_layer) if ns.phases else ops_text(events, ns.top) if ns.ops
                     else calls_text(events, ns.calls, ns.slow_us) if ns.calls else summarise(events, ns.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
