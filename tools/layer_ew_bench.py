#!/usr/bin/env python3
"""The dense layer's element-wise paths as Megatron's local layers run them, forward and backward, on the H200
(issue 26, device call 46).

Call 45's torch-profiler traces of whole dense models (tests/fixtures/h200-hosts/call45/experiments) put the GPU busy
4-6 % above the model's GPU time on the Llama- and Qwen-shaped jobs, and none of it in the GEMMs or the unfused
attention (both within 1 % of their terms): the element-wise work between them took 1.5-2x what the model priced.
The model prices those paths as contiguous, vectorised passes at their rate over 2^28 elements; at the pinned commit
they are not:

    SwiGLU (mlp.py:313-335, no bias-activation fusion): x_glu, x_linear = torch.chunk(fc1_out, 2, dim=-1)
        y = F.silu(x_glu) * (x_linear + 0.0): strided views, torch's generic kernel, an add kernel for the offset,
        and autograd's SplitBackward0 a cat of the two halves' gradients
    RoPE unfused (rope_utils.py:92-126 _apply_rotary_pos_emb_bshd): t * cos + cat(-x2, x1) * sin, cos and sin of
        [s, 1, 1, d] broadcast over the heads (generic kernels), and a final cat with the empty t_pass
    GQA (dot_product_attention.py:168-175): key and value repeat_interleave'd over the heads of a group; the
        backward a reduction (ExpandBackward0's sum). `gqa_repeat` on contiguous tensors (call 46, 0.51-0.73 of the
        traced kernels); `gqa_kv` as a layer lays them out (call 48): the key contiguous (RoPE's or the key norm's
        output), the value a strided view of the QKV output (attention.py get_query_key_value_tensors' split), their
        gradients as the core attention's matmuls give them back (the key's from baddbmm's backward, [b*np, hn, sk]
        contiguous; the value's from bmm's, [b*np, sk, hn])
    RMSNorm (torch_norm.py:58-63: torch.nn.RMSNorm) and LayerNorm (torch.nn.LayerNorm) over rows of a width: the
        layer's norms (width h) and --qk-layernorm's over each head (width d): the weight gradient reduces over
        every row, which at width 64-128 is slow

Each path is timed alone, bf16, at the shapes a layer issues: `gpu_seconds` captured in a CUDA graph and replayed
(the GPU's time without the host's: embedding_bench.replayed), `seconds` between CUDA events with the host issuing.

    python3 tools/layer_ew_bench.py OUT.json [KIND,...]   # on the GPU machine; torch only; default every kind
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedding_bench import replayed  # noqa: E402
from head_bench import record, timed, write_rows  # noqa: E402

TOKENS = (2048, 8192, 32768)  # tokens a micro batch on the rank (b x s)
FFN = (1024, 2816, 5632, 14336)  # the FFN on the rank
HEADS = (4, 8, 16, 32, 64)  # query heads (or query groups) on the rank
HEAD_DIM = (64, 128)
GROUPS = ((4, 64), (8, 64), (8, 128))  # query groups on the rank, head size
REPEAT = (2, 4, 8)  # query heads a group
ROWS = (4096, 16384, 65536, 262144, 1048576)
WIDTH = (64, 128, 1024, 2048, 4096, 8192)
MAX_ELEMENTS = 1 << 28


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """mlp.py's gated activation without the bias-activation fusion (glu_linear_offset 0.0, no clamp)."""
    x_glu, x_linear = torch.chunk(x, 2, dim=-1)
    return F.silu(x_glu) * (x_linear + 0.0)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(t: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """rope_utils._apply_rotary_pos_emb_bshd at the pinned commit (not interleaved, mscale 1, not MLA)."""
    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    cos_ = (torch.cos(freqs) * 1.0).to(t.dtype)
    sin_ = (torch.sin(freqs) * 1.0).to(t.dtype)
    t = (t * cos_) + (_rotate_half(t) * sin_)
    return torch.cat((t, t_pass), dim=-1)


def _case(rows: list[dict], row: dict, inputs: list[torch.Tensor], forward, grad: torch.Tensor) -> None:
    def step() -> None:
        for x in inputs:
            x.grad = None
        forward().backward(grad)

    _timed(rows, row, step)


def _timed(rows: list[dict], row: dict, step) -> None:
    record(rows, {**row, "seconds": timed(step), "gpu_seconds": replayed(step)})


def gqa_kv(n: int, g: int, d: int, r: int, dev: torch.device) -> tuple:
    """(step, row) of a layer's two repeats at n tokens (b = 1), g query groups of head size d, r heads a group: each
    repeat_interleave's forward (the expand's clone) and its backward as autograd runs it (ExpandBackward0's sum over
    the repeat of the gradient as the core attention's matmul returns it), issued as those ops: autograd.grad in a
    CUDA graph capture failed on the first attempt of call 48."""
    bf16 = torch.bfloat16
    key = torch.randn(n, 1, g, d, device=dev, dtype=bf16)
    mixed = torch.randn(n, 1, g, (r + 2) * d, device=dev, dtype=bf16)
    value = mixed[..., (r + 1) * d:]  # torch.split(mixed_qkv, [r*d, d, d], dim=3)'s last
    # the gradients of key.view(sk, b*np, hn) and value.view(...) as baddbmm's and bmm's backward return them
    key_grad = torch.randn(g * r, d, n, device=dev, dtype=bf16).permute(2, 0, 1)
    value_grad = torch.randn(g * r, n, d, device=dev, dtype=bf16).transpose(0, 1)

    def step() -> None:
        key.repeat_interleave(r, dim=2)
        value.repeat_interleave(r, dim=2)
        key_grad.view(n, 1, g, r, d).sum(3)
        value_grad.view(n, 1, g, r, d).sum(3)

    return step, {"kind": "gqa_kv", "tokens": n, "width": g * d * r, "repeat": r, "elements": 2 * n * g * d * r}


def main(out_path: str, kinds: set[str] | None = None) -> int:
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    rows: list[dict] = []
    want = (lambda k: kinds is None or k in kinds)
    if want("gqa_kv"):
        for n, (g, d), r in itertools.product(TOKENS, GROUPS, REPEAT):
            step, row = gqa_kv(n, g, d, r, dev)
            _timed(rows, row, step)
            del step
    for n, f in itertools.product(TOKENS, FFN) if want("swiglu") else ():
        x = torch.randn(n, 1, 2 * f, device=dev, dtype=bf16).requires_grad_(True)
        _case(rows, {"kind": "swiglu", "tokens": n, "width": f, "elements": n * f}, [x], lambda: swiglu(x),
              torch.randn(n, 1, f, device=dev, dtype=bf16))
        del x
    for n, heads, d in itertools.product(TOKENS, HEADS, HEAD_DIM) if want("rope") else ():
        t = torch.randn(n, 1, heads, d, device=dev, dtype=bf16).requires_grad_(True)
        freqs = torch.randn(n, 1, 1, d, device=dev, dtype=torch.float32)
        _case(rows, {"kind": "rope", "tokens": n, "width": heads * d, "elements": n * heads * d}, [t],
              lambda: rope(t, freqs), torch.randn_like(t))
        del t, freqs
    for n, (g, d), r in itertools.product(TOKENS, GROUPS, REPEAT) if want("gqa_repeat") else ():
        k = torch.randn(n, 1, g, d, device=dev, dtype=bf16).requires_grad_(True)
        _case(rows, {"kind": "gqa_repeat", "tokens": n, "width": g * d * r, "repeat": r, "elements": n * g * d * r},
              [k], lambda: k.repeat_interleave(r, dim=2), torch.randn(n, 1, g * r, d, device=dev, dtype=bf16))
        del k
    for kind, module in (("rmsnorm", torch.nn.RMSNorm), ("layernorm", torch.nn.LayerNorm)):
        for n, w in () if not want(kind) else itertools.product(ROWS, WIDTH):
            if n * w > MAX_ELEMENTS:
                continue
            norm = module(w, device=dev, dtype=bf16)
            x = torch.randn(n, w, device=dev, dtype=bf16).requires_grad_(True)
            _case(rows, {"kind": kind, "tokens": n, "width": w, "elements": n * w}, [x, *norm.parameters()],
                  lambda: norm(x), torch.randn_like(x))
            del x, norm
    torch.cuda.empty_cache()
    write_rows(out_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None))
