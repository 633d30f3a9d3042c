#!/usr/bin/env python3
"""Peak memory of Megatron's vocabulary-parallel cross entropy, fused and unfused, per logit (issue 27).

    PYTHONPATH=/opt/Megatron-LM python3 tools/ce_memory_probe.py [S B V]   (default 2048 4 32000)

On the GPU machine, one process, TP 1 (a fake process group: the all-reduces are skipped). For each
implementation (megatron/core/tensor_parallel/cross_entropy.py vocab_parallel_cross_entropy, the
unfused one; megatron/core/fusions/fused_cross_entropy.py fused_vocab_parallel_cross_entropy, what
--cross-entropy-loss-fusion runs: torch.compile'd functions) it runs the output layer's matmul
(hidden [S*B, 1024] x weight [V, 1024], bf16), the loss and the backward twice (the first compiles),
and prints, over the second, torch's peak allocation above what was allocated before it, in bytes per
logit (S*B*V): the forward's (the matmul's logits and the loss) and the backward's. The hidden states
and weight are leaves held throughout; their gradients (small beside the logits) are in the backward
figure. Used by tools/te_measure_device.sh; the memory model's loss term (activations.loss_bytes).
"""

from __future__ import annotations

import sys

import torch


def main(argv: list[str]) -> int:
    s, b, v = (int(a) for a in argv[:3]) if len(argv) >= 3 else (2048, 4, 32000)
    from torch.testing._internal.distributed.fake_pg import FakeStore

    torch.cuda.set_device(0)
    torch.distributed.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.fusions.fused_cross_entropy import fused_vocab_parallel_cross_entropy
    from megatron.core.tensor_parallel.cross_entropy import vocab_parallel_cross_entropy

    parallel_state.initialize_model_parallel(1, 1, create_gloo_process_groups=False)  # none with the fake backend
    group = parallel_state.get_tensor_model_parallel_group()
    logits_count = s * b * v
    hidden = torch.randn(s * b, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(v, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True) * 0.02
    weight = weight.detach().requires_grad_(True)
    target = torch.randint(0, v, (s, b), device="cuda")

    def step(fused: bool) -> tuple[float, float]:
        hidden.grad = weight.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        logits = (hidden @ weight.t()).view(s, b, v)
        loss = (fused_vocab_parallel_cross_entropy(logits, target, group) if fused
                else vocab_parallel_cross_entropy(logits, target))
        del logits
        torch.cuda.synchronize()
        forward = torch.cuda.max_memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        loss.sum().backward()
        torch.cuda.synchronize()
        backward = torch.cuda.max_memory_allocated() - base
        del loss
        return forward / logits_count, backward / logits_count

    print(f"s {s} b {b} v {v}: {logits_count} logits; torch {torch.__version__}")
    for fused in (False, True):
        name = "fused (--cross-entropy-loss-fusion)" if fused else "unfused"
        step(fused)
        forward, backward = step(fused)
        print(f"{name}: forward peak {forward:.2f} B/logit, backward peak {backward:.2f} B/logit", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
