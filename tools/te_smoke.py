#!/usr/bin/env python3
"""Transformer Engine on the lent GPU, before any Megatron run: does it import, and do its layers run?

    python tools/te_smoke.py

Prints one line per check with its time: the import (and the versions and GPU it sees), a TE Linear
and a LayerNormMLP forward and backward in BF16, the fused attention (DotProductAttention, causal,
BF16) forward and backward with the backend TE picked, and a Linear under FP8 delayed scaling.
Exit status 0 when every check passed. Used by tools/te_device.sh (issue 27).
"""

from __future__ import annotations

import os
import sys
import time
import traceback


def check(name: str, fn) -> bool:
    start = time.time()
    try:
        detail = fn()
    except Exception as exc:  # every failure is reported, the next check still runs
        print(f"FAIL {name} after {time.time() - start:.1f} s: {exc!r}")
        traceback.print_exc(limit=3)
        return False
    print(f"ok   {name} in {time.time() - start:.1f} s{': ' + detail if detail else ''}")
    return True


def main() -> int:
    os.environ.setdefault("NVTE_DEBUG", "1")
    os.environ.setdefault("NVTE_DEBUG_LEVEL", "1")  # TE logs which attention backend it picks
    import torch

    te = None

    def imports() -> str:
        nonlocal te
        import transformer_engine
        import transformer_engine.pytorch as te_pytorch

        te = te_pytorch
        return (f"transformer_engine {transformer_engine.__version__}, torch {torch.__version__}, "
                f"{torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))})")

    if not check("import transformer_engine.pytorch", imports):
        return 1
    assert te is not None
    dev, dt = "cuda", torch.bfloat16

    def linear() -> str:
        layer = te.Linear(1024, 4096, params_dtype=dt, device=dev)
        x = torch.randn(2048, 1024, device=dev, dtype=dt, requires_grad=True)
        y = layer(x)
        y.float().pow(2).mean().backward()
        torch.cuda.synchronize()
        return f"out {tuple(y.shape)}, grad norm {x.grad.float().norm().item():.3g}"

    def mlp() -> str:
        layer = te.LayerNormMLP(1024, 4096, params_dtype=dt, device=dev, normalization="RMSNorm",
                                activation="swiglu")
        x = torch.randn(2048, 1024, device=dev, dtype=dt, requires_grad=True)
        layer(x).float().sum().backward()
        torch.cuda.synchronize()
        return ""

    def attention() -> str:
        heads, dim, seq, batch = 16, 64, 2048, 2
        attn = te.DotProductAttention(heads, dim, attn_mask_type="causal", qkv_format="sbhd")
        q, k, v = (torch.randn(seq, batch, heads, dim, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
        out = attn(q, k, v)
        out.float().sum().backward()
        torch.cuda.synchronize()
        return f"out {tuple(out.shape)} (NVTE_DEBUG logs name the backend TE picked)"

    def fp8() -> str:
        from transformer_engine.common.recipe import DelayedScaling, Format

        layer = te.Linear(1024, 4096, params_dtype=dt, device=dev)
        x = torch.randn(2048, 1024, device=dev, dtype=dt, requires_grad=True)
        recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
        with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
            y = layer(x)
        y.float().sum().backward()
        torch.cuda.synchronize()
        return f"out {tuple(y.shape)} {y.dtype}"

    ok = all([check("te.Linear bf16 fwd+bwd", linear), check("te.LayerNormMLP bf16 fwd+bwd", mlp),
              check("te.DotProductAttention causal bf16 fwd+bwd", attention), check("te.Linear fp8 fwd+bwd", fp8)])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
