#!/usr/bin/env python3
"""Check the bench of the local layers' element-wise paths (device calls 46 and 48) against call 45's traces (issue 26).

For each unprofiled job of a call's plan.json with a profiled step (`experiments/<job>/trace.json.gz`): the kernel time
a step of each path in the trace (SwiGLU, RoPE, GQA's repeat, the norms), each kernel given to a path by the op that
launched it and that op's input shapes (`--pytorch-profiler-collect-shapes`), beside the path priced by the bench's
table (rates.layer_path_seconds; GQA's repeats rates.gqa_repeat_seconds, call 48's) and by the passes the model
priced it as before call 46, at the job's shapes. The attribution is by shape: an op on a tensor of the FFN's width is
SwiGLU's, a 4-d op on heads (not the scores) RoPE's, a 5-d one or an expand's backward GQA's, a norm op a norm's.

    python tools/layer_path_check.py tests/fixtures/h200-hosts/call45
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from compiler.megatron import rates  # noqa: E402
from trace_summary import kernels_with_ops, load  # noqa: E402

PATHS = ("swiglu", "rope", "gqa", "norm")
ATTENTION_CORE = ("bmm", "softmax", "dropout", "masked_fill", "CopySlices", "AsStrided")


def _dims(inputs: list[Any]) -> list[list[int]]:
    out: list[list[int]] = []
    for d in inputs:
        if isinstance(d, list) and d and isinstance(d[0], list):
            out += [x for x in d if isinstance(x, list)]
        elif isinstance(d, list):
            out.append(d)
    return out


def path_of(outer: str, ops: str, inputs: list[Any], ffn: int, head: int) -> str | None:
    """The path a kernel belongs to by its launching ops (outer autograd function, the aten ops open around the
    launch) and the innermost op's input shapes; None for GEMMs, the attention's core, gradients and the rest."""
    if ("mm" in ops and "bmm" not in ops) or "AccumulateGrad" in outer or "Optimizer" in outer:
        return None
    innermost = ops.split()[-1] if ops else ""
    if innermost.endswith(("rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward")):
        return "norm"  # the norm's own kernels (not autograd's accumulation into the residual's gradient beside them)
    dims = _dims(inputs)
    if any(len(x) == 5 for x in dims) or "repeat_interleave" in ops or "ExpandBackward" in outer:
        return "gqa"
    if any(len(x) == 3 and x[-1] in (ffn, 2 * ffn) for x in dims):
        return "swiglu"
    core = any(a in ops or a in outer for a in ATTENTION_CORE)
    if not core and any(len(x) == 4 and x[-1] in (head, head // 2, 0) and x[1] != x[2] for x in dims):
        return "rope"
    return None


def trace_paths(path: Path, ffn: int, head: int) -> dict[str, float]:
    """Milliseconds a profiled step of each path's kernels."""
    out: dict[str, float] = defaultdict(float)
    for g, around in kernels_with_ops(load(path)):
        outer = [a["name"] for a in around if a["name"].startswith("autograd::") or not a["name"].startswith("aten::")]
        inner = [a for a in around if a["name"].startswith("aten::")]
        inputs = inner[-1]["args"].get("Input Dims", []) if inner else []
        p = path_of((outer or ["-"])[0], " ".join(a["name"] for a in inner), inputs, ffn, head)
        if p:
            out[p] += g["dur"] / 1e3
    return dict(out)


def _arg(args: list[str], flag: str, default: int | None = None) -> int:
    return int(args[args.index(flag) + 1]) if flag in args else int(default or 0)


def priced(args: list[str]) -> dict[str, tuple[float, float]]:
    """(the bench's table, the passes priced before call 46) in ms a step of each path at the job's shapes."""
    s, b = _arg(args, "--seq-length"), _arg(args, "--micro-batch-size", 1)
    h, heads = _arg(args, "--hidden-size"), _arg(args, "--num-attention-heads")
    groups = _arg(args, "--num-query-groups", heads) if "--group-query-attention" in args else heads
    d = _arg(args, "--kv-channels", h // heads)
    ffn, layers = _arg(args, "--ffn-hidden-size", 4 * h), _arg(args, "--num-layers")
    m = _arg(args, "--global-batch-size") // b
    n, rms = s * b, "RMSNorm" in args
    kind = "rmsnorm" if rms else "layernorm"
    out: dict[str, tuple[float, float]] = {}
    if "--swiglu" in args:
        out["swiglu"] = (rates.layer_path_seconds("swiglu", n, ffn) * layers,
                         (rates.op_seconds("gelu", n * ffn) + rates.op_seconds("scale", n * ffn)) * layers)
    if "rope" in args:
        out["rope"] = ((rates.layer_path_seconds("rope", n, heads * d) + rates.layer_path_seconds("rope", n, groups * d))
                       * layers, 3 * rates.op_seconds("scale", n * (heads + groups) * d) * layers)
    if groups != heads:
        out["gqa"] = (rates.gqa_repeat_seconds(n, heads * d, heads / groups) * layers,
                      rates.op_seconds("add", n * 2 * heads * d) * layers)
    norm = (2 * layers + 1) * rates.layer_path_seconds(kind, n, h)
    norm_before = (2 * layers + 1) * rates.op_seconds("layernorm", n * h) * (0.8 if rms else 1.0)
    if "--qk-layernorm" in args:
        norm += layers * (rates.layer_path_seconds(kind, n * heads, d) + rates.layer_path_seconds(kind, n * groups, d))
        norm_before += layers * rates.QK_NORM_S_PER_ELEMENT["torch-" + kind] * n * (heads + groups) * d
    out["norm"] = (norm, norm_before)
    return {k: (a * m * 1e3, c * m * 1e3) for k, (a, c) in out.items()}


def main(argv: list[str]) -> int:
    call = Path(argv[0])
    print("| job | path | trace (ms a step) | the bench's table | ratio | passes before call 46 | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for job in json.loads((call / "plan.json").read_text()):
        trace = call / "experiments" / job["name"] / "trace.json.gz"
        if not trace.exists():
            continue
        args = job["args"]
        h, heads = _arg(args, "--hidden-size"), _arg(args, "--num-attention-heads")
        measured = trace_paths(trace, _arg(args, "--ffn-hidden-size", 4 * h), _arg(args, "--kv-channels", h // heads))
        for path, (bench, before) in priced(args).items():
            got = measured.get(path, 0.0)
            ratio = f"{bench / got:.2f}" if got else "-"
            ratio_before = f"{before / got:.2f}" if got else "-"
            print(f"| {job['name']} | {path} | {got:.2f} | {bench:.2f} | {ratio} | {before:.2f} | {ratio_before} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
