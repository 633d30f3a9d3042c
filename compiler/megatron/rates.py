"""Measured kernel rates of a GPU: what one GEMM, batched matmul, bandwidth-bound op, optimizer step
and kernel launch cost, read from the micro-benchmark tools/microbench.py ran on it.

data/microbench-h200.json is the H200's (one run, 2026-12-01, torch 2.11.0+cu130; its log is
tests/fixtures/microbench/device-h26-1.txt). A GEMM's time is interpolated in log space over the
measured (m, n, k) grid (128 … 32768 each), per layout (forward x·Wᵀ, data gradient dy·W, weight
gradient dyᵀ·x) and dtype; outside the grid the nearest edge's rate (FLOP/s) is used. A
bandwidth-bound op costs its elements times the per-element time measured at 2^28 elements (forward
and backward together). data/embedding-h200.json is the word embedding's forward and backward
(tools/embedding_bench.py, device call 31: tests/fixtures/h200-hosts/call31/embedding-bench.json), interpolated
the same way. data/expert-activation-h200.json is a local expert's activation path between its two GEMMs
(tools/expert_act_bench.py, device call 37: tests/fixtures/h200-hosts/call37/expert_act-bench.json), interpolated
the same way over the tokens an expert receives and its FFN, and data/layer-elementwise-h200.json a local dense layer's
element-wise paths (SwiGLU, unfused RoPE, torch's norms; tools/layer_ew_bench.py, device call 46) over rows and
width. Nothing here is fitted.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

DATA = Path(__file__).resolve().parent / "data"


@lru_cache(maxsize=None)
def table(gpu: str = "h200") -> dict[str, Any]:
    """The micro-benchmark of `gpu` (only the H200 was measured)."""
    data: dict[str, Any] = json.loads((DATA / f"microbench-{gpu}.json").read_text())
    return data


@lru_cache(maxsize=None)
def _gemm_grid(dtype: str, kind: str) -> tuple[tuple[int, ...], dict[tuple[int, ...], float]]:
    rows = table()[f"gemm_{dtype}"]
    grid = tuple(sorted({r["m"] for r in rows}))
    # log of the rate (FLOP/s): smooth across the grid where the time spans seven decades
    rates: dict[tuple[int, ...], float] = {
        (r["m"], r["n"], r["k"]): math.log(2.0 * r["m"] * r["n"] * r["k"] / r[f"{kind}_s"]) for r in rows}
    return grid, rates


def _bracket(grid: tuple[int, ...], x: float) -> tuple[int, int, float]:
    """Indices of the grid points around x and x's position between them (log space, clamped)."""
    lx = math.log(min(max(x, grid[0]), grid[-1]))
    i = min(max(bisect.bisect_right(grid, math.exp(lx)) - 1, 0), len(grid) - 2)
    lo, hi = math.log(grid[i]), math.log(grid[i + 1])
    return i, i + 1, (lx - lo) / (hi - lo)


def gemm_seconds(m: float, n: float, k: float, kind: str = "fwd", dtype: str = "bf16") -> float:
    """Seconds of one (m x k)·(k x n) GEMM; kind: fwd, dgrad or wgrad (the table's (m, n, k) is the
    forward's: tokens, output features, input features)."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    return 2.0 * m * n * k / _gemm_rate(m, n, k, kind, dtype)


# A pure function of its arguments and the committed table, memoised: `size` prices the same few hundred shapes
# for tens of thousands of layouts (the interpolation was most of its time); a compile's figures are the same.
@lru_cache(maxsize=1 << 16)
def _gemm_rate(m: float, n: float, k: float, kind: str, dtype: str) -> float:
    """The interpolated rate (FLOP/s) of an (m x k)·(k x n) GEMM of `kind` and `dtype`."""
    grid, rates = _gemm_grid(dtype, kind)
    return math.exp(_interpolate((grid, grid, grid), rates, (m, n, k)))


def _interpolate(axes: tuple[tuple[int, ...], ...], values: dict[tuple[int, ...], float],
                 point: tuple[float, ...]) -> float:
    """Multilinear interpolation of `values` (one per grid point; a point without one gives its weight to the
    others) at `point`, each axis in log space and clamped to its grid (_bracket)."""
    sides = []  # each axis's two grid points and their weights
    for axis, x in zip(axes, point):
        lo, hi, f = _bracket(axis, x)
        sides.append(((axis[lo], 1 - f), (axis[hi], f)))
    total = weight = 0.0
    for corner in itertools.product(*sides):
        w = 1.0
        for _, wi in corner:
            w *= wi
        value = values.get(tuple(k for k, _ in corner)) if w > 0 else None
        if value is not None:
            total += w * value
            weight += w
    if weight == 0:  # every corner unmeasured (the GEMM grid lacks 32768^3): the nearest measured point's
        return values[min(values, key=lambda k: sum(math.log(a / min(max(x, axis[0]), axis[-1])) ** 2
                                                    for a, x, axis in zip(k, point, axes)))]
    return total / weight


@lru_cache(maxsize=None)
def _embedding_grid() -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]:
    rows = json.loads((DATA / "embedding-h200.json").read_text())["rows"]
    # the time per looked-up element (tokens x hidden)
    return log_rate_grid(rows, ("tokens", "hidden", "vocab_shard", "tp"), lambda r: r["tokens"] * r["hidden"])


def embedding_seconds(tokens: float, hidden: float, rows: float, tp: int = 1) -> float:
    """The GPU's time of an embedding lookup's forward and backward (its gradient: the rank's `rows` x hidden zeroed,
    each token's row added in) for `tokens` ids on a rank of `tp` (VocabParallelEmbedding: at tp > 1 the ids
    outside the rank's shard masked and their rows zeroed); measured at TP 1, 2 and 8, interpolated between."""
    axes, values = _embedding_grid()
    return tokens * hidden * math.exp(_interpolate(axes, values, (tokens, hidden, rows, tp)))


@lru_cache(maxsize=None)
def _expert_activation_grid(glu: bool) -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]:
    rows = [r for r in json.loads((DATA / "expert-activation-h200.json").read_text())["rows"]
            if r["kind"] == "activation" and r["glu"] == glu and r["gpu_seconds"]]
    # the time per output element (tokens x ffn)
    return log_rate_grid(rows, ("tokens", "ffn"), lambda r: r["tokens"] * r["ffn"])


def expert_activation_seconds(tokens: float, ffn: float, glu: bool) -> float:
    """The GPU's time of one expert's activation path in Megatron's MLP without the bias-activation fusion, forward
    and backward, on `tokens` rows of an FFN of `ffn` on the rank (mlp.py: SwiGLU's chunk, silu, the offset's add and
    product, or GeLU; the router's per-token scale and its cast back): measured over 256-16384 tokens x 512-14336,
    interpolated between."""
    axes, values = _expert_activation_grid(glu)
    return tokens * ffn * math.exp(_interpolate(axes, values, (tokens, ffn)))


@lru_cache(maxsize=None)
def _layer_path_grid(kind: str) -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]:
    rows = [r for r in layer_path_rows() if r["kind"] == kind and r["gpu_seconds"]]
    return log_rate_grid(rows, ("tokens", "width"), lambda r: r["elements"])


def layer_path_rows() -> list[dict[str, Any]]:
    """The rows of tools/layer_ew_bench.py: device call 46's, call 48's GQA repeats as a layer lays them out (gqa_kv;
    call 46's on contiguous tensors, gqa_repeat, kept as measured and not taken)."""
    rows: list[dict[str, Any]] = json.loads((DATA / "layer-elementwise-h200.json").read_text())["rows"]
    return rows


def log_rate_grid(rows: list[dict[str, Any]], keys: tuple[str, ...], elements: Callable[[dict[str, Any]], float]
                  ) -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]:
    """A bench's rows as _interpolate takes them: each key's measured values, and at each point the log of the GPU's
    time an element (`elements` of the row; a point measured twice, RoPE's 8 x 64 and 4 x 128 heads, their mean);
    outside the grid the nearest edge's rate."""
    per: dict[tuple[int, ...], list[float]] = {}
    for r in rows:
        per.setdefault(tuple(r[k] for k in keys), []).append(r["gpu_seconds"] / elements(r))
    axes = tuple(tuple(sorted({point[i] for point in per})) for i in range(len(keys)))
    return axes, {point: math.log(sum(v) / len(v)) for point, v in per.items()}


def layer_path_seconds(kind: str, rows: float, width: float) -> float:
    """The GPU's time, forward and backward, of one of a local layer's element-wise paths as Megatron runs it over
    `rows` x `width` elements (tools/layer_ew_bench.py, device call 46; replayed from a CUDA graph, interpolated in
    log space): `swiglu` mlp.py's gated activation without the bias-activation fusion on FC1's two strided halves
    (rows tokens, width the FFN on the rank); `rope` rope_utils' unfused rotary embedding (rows tokens, width the
    heads' (or groups') features on the rank); `rmsnorm` / `layernorm` torch's norm module with its weight gradient
    (rows the vectors normalised, width their size: the layer's norms over h, --qk-layernorm's over a head)."""
    axes, values = _layer_path_grid(kind)
    return rows * width * math.exp(_interpolate(axes, values, (rows, width)))


def gqa_repeat_seconds(tokens: float, width: float, repeat: float) -> float:
    """The GPU's time, forward and backward, of a local core attention's two GQA repeats (dot_product_attention.py:
    key and value repeat_interleave'd over the heads of a group) at `tokens` x `width` (the query heads' features on
    the rank) and `repeat` heads a group, as a layer lays them out: the key contiguous after RoPE, the value a strided
    view of the QKV output, their gradients as the attention's matmuls return them (tools/layer_ew_bench.py gqa_kv,
    device call 48, within 4-6 % of call 45's traced kernels), at the nearest measured repeat (2, 4 or 8)."""
    grids = _gqa_grids()
    axes, values = grids[min(grids, key=lambda x: abs(math.log(x / repeat)))]
    return tokens * width * math.exp(_interpolate(axes, values, (tokens, width)))


@lru_cache(maxsize=None)
def _gqa_grids() -> dict[int, tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]]:
    """gqa_kv's grid of each measured repeat, a time by tokens x query features (both repeats')."""
    rows = [r for r in layer_path_rows() if r["kind"] == "gqa_kv" and r["gpu_seconds"]]
    return {k: log_rate_grid([r for r in rows if r["repeat"] == k], ("tokens", "width"),
                             lambda r: r["tokens"] * r["width"]) for k in sorted({r["repeat"] for r in rows})}


def linear_seconds(tokens: float, out_features: float, in_features: float, dtype: str = "bf16") -> float:
    """A Linear's forward, data gradient and weight gradient."""
    return sum(gemm_seconds(tokens, out_features, in_features, kind, dtype) for kind in ("fwd", "dgrad", "wgrad"))


# A bench row whose time is under this multiple of the bench's smallest (of its kind) timed the host issuing its
# ops, not the GPU: the benches time a loop of ops between CUDA events, and where the GPU finishes each op before
# the host issues the next they time the host, whose work a run's host figures already price (host_time.py).
HOST_FLOOR_RATIO = 2.0


def gpu_set(rows: list[dict[str, Any]], seconds: Callable[[dict[str, Any]], float]) -> list[dict[str, Any]]:
    """The bench rows the GPU's work set: those that took at least HOST_FLOOR_RATIO x the smallest row's time."""
    floor = min(seconds(r) for r in rows)
    return [r for r in rows if seconds(r) >= HOST_FLOOR_RATIO * floor]


def bmm_seconds(batch_heads: float, seq: float, head_dim: float, kind: str) -> float:
    """One of the unfused attention's batched matmuls: kind qk ([s, d]·[d, s] per head) or pv
    ([s, s]·[s, d]); its time per multiply-add at the nearest measured (heads x batch, sequence) in log space
    among the rows the GPU set (gpu_set: the small rows, 13-20 us each whatever their size, are the loop's
    launches), nearest head size."""
    rows = table()["bmm"]
    sizes = sorted({r["d"] for r in rows})

    def per_element(d: int) -> float:
        timed = gpu_set([r for r in rows if r["d"] == d], lambda r: float(r[f"{kind}_s"]))
        pts = sorted((r["bh"], r["s"], r[f"{kind}_s"]) for r in timed)
        # time per multiply-add at the nearest measured (bh, s)
        best = min(pts, key=lambda p: (math.log(p[0] / batch_heads)) ** 2 + (math.log(p[1] / seq)) ** 2)
        return float(best[2] / (best[0] * best[1] * best[1] * d))

    # between two measured head sizes (a head of 96 between 64 and 128), the per-element time in log d
    lo = max([d for d in sizes if d <= head_dim], default=sizes[0])
    hi = min([d for d in sizes if d >= head_dim], default=sizes[-1])
    if lo == hi:
        per = per_element(lo)
    else:
        t = math.log(head_dim / lo) / math.log(hi / lo)
        per = math.exp((1 - t) * math.log(per_element(lo)) + t * math.log(per_element(hi)))
    return float(per * batch_heads * seq * seq * head_dim)


@lru_cache(maxsize=None)
def _largest_op_row(op: str) -> dict[str, Any]:
    """The op's row measured at the most elements (the table is read once; `size` asks hundreds of thousands of times)."""
    return max((r for r in table()["ops"] if r["op"] == op), key=lambda r: r["elements"])


def op_seconds(op: str, elements: float) -> float:
    """Forward + backward of a bandwidth-bound op over `elements` elements (bf16; the *_fp32 ops fp32)."""
    big = _largest_op_row(op)
    return float(elements * big["fwd_bwd_s"] / big["elements"])


def op_forward_seconds(op: str, elements: float) -> float:
    """The op's forward alone (recompute repeats it)."""
    big = _largest_op_row(op)
    return float(elements * big["fwd_s"] / big["elements"])


def hbm_bytes_per_second() -> float:
    """Device-to-device copy of 4 GiB: bytes read + written per second."""
    big = max(table()["copy"], key=lambda r: r["bytes"])
    return float(2 * big["bytes"] / big["copy_s"])


def adam_seconds(params: float) -> float:
    """torch.optim.AdamW (foreach), the step Megatron takes without TE or Apex, over `params` fp32
    parameters: interpolated (linear) between the measured sizes, 64 tensors."""
    pts = sorted((r["params"], r["step_s"]) for r in table()["adam"] if r["tensors"] == 64)
    if params <= pts[0][0]:
        return float(pts[0][1])
    for (p0, t0), (p1, t1) in zip(pts, pts[1:]):
        if params <= p1:
            return float(t0 + (t1 - t0) * (params - p0) / (p1 - p0))
    p0, t0 = pts[-2]
    p1, t1 = pts[-1]
    return float(t1 + (t1 - t0) / (p1 - p0) * (params - p1))


def host_seconds_per_launch() -> float:
    """Host time to enqueue one small kernel (torch eager, no autograd)."""
    return float(table()["launch"]["host_per_launch_s"])


def attention_score_seconds(seq: float) -> float:
    """Seconds per attention score of the unfused attention's passes between its matmuls (masked_fill_
    on a view with autograd's CopySlices, softmax, dropout; forward + backward), measured on the whole
    sequence of ops as dot_product_attention.py runs them (tools/attention_bench.py): the run's time
    less that of its matmuls alone, at the measured sequence nearest in log space among the rows the GPU set.

    The smallest row (b2, 4 heads, s256: 0.46 ms for 0.5 M scores, 32-48x the per-score time of every other row)
    timed the bench's Python and launches, not the GPU (gpu_set)."""
    def passes(r: dict[str, Any]) -> float:
        return float(r["fwd_bwd_s"] - r["matmuls_only_s"])

    rows = gpu_set([r for r in table()["attention_core"] if "error" not in r], passes)
    best = min(rows, key=lambda r: (math.log(r["s"] / seq)) ** 2)
    same = [r for r in rows if r["s"] == best["s"]]
    per = [passes(r) / (r["b"] * r["heads"] * r["s"] * r["s"]) for r in same]
    return float(min(per))


# Per-parameter GPU time of the optimizer step's and the gradient accumulation's kernels, measured in
# torch-profiler traces of three compiled launches on the lent H200 (tests/fixtures/h200-hosts/call14:
# te-llama-h4096-s4096, te-qwen-h2048-l8 and mem-llama-h3072-l6, 0.80-1.92 G parameters, TE installed): each
# kernel family's time a profiled step over the rank's parameters (and micro batches for the accumulation);
# TRACE_KERNELS names each family's kernels, tests/test_h200_hosts.py recomputes the figures from the traces.
# The copy rate (hbm_bytes_per_second) these were priced at before is the best a plain copy reaches; they do
# not reach it:
# - Megatron's unfused gradient accumulation, param.main_grad.add_(grad) in the DDP hook: a bf16 gradient
#   into fp32 (10 bytes) as torch's casting (unrolled, not vectorised) add: 3.93, 4.20, 4.27 ps a parameter
#   and micro batch, 2.3-2.5 TB/s (fp16's same-dtype add is another kernel, not measured);
# - TE's FusedAdam (multi_tensor_adam; 28 bytes a parameter): 8.34, 8.35, 8.24 ps, 3.4 TB/s;
# - the gradient clipping, clip_grads' grads *= clip_coeff (multi_tensor_scale on fp32: 8 bytes), which runs
#   when the norm exceeds --clip-grad (1.0 by default; every traced step): 2.20, 2.20, 2.19 ps;
# - TE's multi-tensor gradient norm (multi_tensor_l2norm, 4 bytes): 1.13, 1.13, 1.12 ps.
# The distributed optimizer's copy of the fp32 main parameters into the model's bf16 ones is torch's
# bfloat16 copy, 1.40-1.49 ps a parameter in the same traces: its 6 bytes at the copy rate (1.40).
GRAD_ACCUMULATION_S_PER_PARAM = 4.13e-12
FUSED_ADAM_S_PER_PARAM = 8.31e-12
GRAD_CLIP_S_PER_PARAM = 2.20e-12
GRAD_NORM_S_PER_PARAM = 1.13e-12
TRACE_KERNELS: dict[str, tuple[str, ...]] = {  # each figure's kernels: every part in the kernel's name
    "GRAD_ACCUMULATION_S_PER_PARAM": ("unrolled_elementwise_kernel", "CUDAFunctor_add<float>"),
    "FUSED_ADAM_S_PER_PARAM": ("multi_tensor_adam",),
    "GRAD_CLIP_S_PER_PARAM": ("multi_tensor_scale", "<float, float>"),
    "GRAD_NORM_S_PER_PARAM": ("multi_tensor_l2norm",),
}


# Megatron's query/key norms (--qk-layernorm: a norm over each head's query and key, attention.py:1648-1652) on the
# GPU, measured on their own (tools/norm_host_bench.py; tests/fixtures/h200-hosts/call19/pre-bench.txt, TE 2.14.1):
# torch's module, which the local spec's WrappedTorchNorm builds without Apex, and TE's, which TENorm builds, forward
# and backward over a head size of 128 at four query and key shapes (4.2 M to 16.8 M elements; a head size of 64, the
# call's h1024 runs', was not measured). A norm this narrow ran 15-100 ps an element (its weight gradient sums every
# row into the head's columns), not rising with the elements, against 6.9 ps for the layer's own norms: the median of
# the four shapes, a rough rate. Their host time: a local layer's feature (host_time.LAYER_FEATURES).
QK_NORM_S_PER_ELEMENT = {"torch-rmsnorm": 34.25e-12, "torch-layernorm": 44.21e-12,
                         "te-rmsnorm": 46.41e-12, "te-layernorm": 53.12e-12}


def qk_norm_module(te: bool, layernorm: bool) -> str:
    """The query/key norm's key in the table above: TE's (transformer_impl: transformer_engine) or torch's, and
    LayerNorm or RMSNorm as the model's normalization."""
    return ("te-" if te else "torch-") + ("layernorm" if layernorm else "rmsnorm")
