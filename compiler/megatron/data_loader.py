"""The data loader's share of a step (issue 26): the causal mask it builds by default."""

from __future__ import annotations

from typing import Any

# The data loader's causal mask (--create-attention-mask-in-dataloader, Megatron's default; the compiler turns
# it off unless --reset-attention-mask needs it, performance.py): b x s x s booleans a micro batch, built in
# the loader's workers, pinned and copied to the GPU. Measured on the H200 (tests/fixtures/h200-hosts/call9):
# te-s16384-b1 ran 119.8 ms an iteration with it, 68.1 ms without: the loader, not the GPU, set the pace,
# 268 MB of mask in 119.8 ms (in-sample for that configuration's rows of the leave-one-out). te-s8192-l4's pair
# (47.1 against 35.2 ms) contradicts the bound: there the mask cost 12 ms where the bound, below the step, prices
# nothing, so a kept mask at moderate lengths is under-priced. A step is at least its micro batches' masks at
# this rate.
LOADER_MASK_BYTES_PER_S = 2.24e9


def mask_bytes(args: Any, par: Any) -> float:
    """The causal mask the data loader builds, pins and copies a micro batch: bool [b, 1, s, s], whole (context
    parallelism slices it on the GPU afterwards, pretrain_gpt.py get_batch; activations.attention_mask_bytes is
    the slice a rank keeps); 0 when the loader builds none. Its broadcast to the other TP ranks is not priced."""
    return float(par.micro_batch * args.seq_length * args.seq_length) if par.attention_mask else 0.0


def loader_seconds(args: Any, par: Any) -> float:
    """The least time a step can take when the data loader builds causal masks: its micro batches' masks
    at LOADER_MASK_BYTES_PER_S."""
    return float(par.microbatches * mask_bytes(args, par) / LOADER_MASK_BYTES_PER_S)
