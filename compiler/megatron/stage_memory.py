"""Peak memory of the first and the last pipeline stage, each on its own (issue 26).

The estimator (memory.py) gives the most loaded rank; a pipeline's stages differ: the first holds
the embedding (and learned position embeddings) and the most micro batches in flight (1F1B warm-up),
the last the output layer, the final norm and the logits at the loss. Each stage's figure here is
the same tensor-by-tensor count (activations.py) with that stage's weights and in-flight micro
batches; tests/fixtures/fakepg holds the ranks measured with --fake-process-group
(tools/fakepg.py), and tests/test_memory.py compares them.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from . import activations as act
from .memory import MB, bytes_per_parameter, position_parameters, shape_of
from .param_counts import stage_counts
from .parallel import ParallelLayout
from .pretrain import num_microbatches, padded_vocab_size, vocab_size


class StagePeak(NamedTuple):
    stage: str  # "first" or "last" (the same rank when pipeline is 1)
    rank: int  # the global rank of that stage's tensor- and data-parallel rank 0 (tp-cp-ep-dp-pp order)
    parameters: int
    weights_mb: float  # parameters x bytes per parameter (bf16 weight, fp32 grad, optimizer share)
    activations_mb: float  # the layers' activations and the loss's, at this stage's peak
    buffers_mb: float  # the unfused attention's score buffer
    peak_mb: float
    at: str


def in_flight(x: act.Shape, stage_rank: int) -> float:
    """Micro batches (in units of the whole stage's layers) whose activations pipeline rank
    `stage_rank` holds at the start of its first backward: 1F1B warms up pp - r micro batches
    (schedules.py forward_backward_pipelining_without_interleaving), interleaving
    (pp - r - 1)·2 + (v - 1)·pp + 1 model chunks of 1/v of the stage each
    (forward_backward_pipelining_with_interleaving's num_warmup_microbatches)."""
    if x.pp == 1:
        return 1.0
    if x.vpp is not None:
        chunks = min((x.pp - stage_rank - 1) * 2 + (x.vpp - 1) * x.pp + 1, x.microbatches * x.vpp)
        return chunks / x.vpp
    return float(min(x.pp - stage_rank, x.microbatches))


def stage_peaks(t: Any, layout: ParallelLayout) -> list[StagePeak] | None:
    """The first and the last stage's peak (one entry when pipeline is 1) for a spec's training
    section (init_from's derived model filled in); None when the estimator cannot size it."""
    vocab = vocab_size(t)
    if vocab is None or layout.data < 1 or layout.expert_data < 1:
        return None
    padded = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, layout.tensor)
    micro = num_microbatches(t.batch.global_, t.batch.micro, layout.data)
    x = shape_of(t, layout, padded, micro)
    dense_bpp = bytes_per_parameter(t.distributed_optimizer, layout.data, t.precision)
    expert_bpp = bytes_per_parameter(t.distributed_optimizer, layout.expert_data, t.precision)
    buffers = act.attention_buffer_bytes(x)
    pp = layout.pipeline
    ranks = [("first", 0)] + ([("last", pp - 1)] if pp > 1 else [])
    out = []
    for stage, r in ranks:
        first, last = r == 0, r == pp - 1
        kept, backward = act.microbatch_profile(x, r)  # the first dense layers, the MTP layers
        dense, expert = stage_counts(t, layout, padded, r, x.vpp)
        params = dense + expert
        weights = dense * dense_bpp + expert * expert_bpp
        if first:
            weights += position_parameters(t) * dense_bpp
        held = (in_flight(x, r) - 1) * kept
        extra = act.first_stage_extra(x) if first else 0.0
        at_backward = held + backward + extra
        batch = extra if first else act.attention_mask_bytes(x)  # the micro batch's mask on the last stage too
        at_loss = held + kept + batch + act.loss_bytes(x) if last else 0.0
        activations, at = (at_loss, "the loss") if at_loss > at_backward else (at_backward, "a layer's backward")
        peak = weights + activations + buffers + act.workspace_bytes(x)
        rank = r * layout.tensor * layout.context * layout.data
        out.append(StagePeak(stage, rank, int(round(params)), round(weights / MB, 2), round(activations / MB, 2),
                             round(buffers / MB, 2), round(peak / MB, 2), at))
    return out
