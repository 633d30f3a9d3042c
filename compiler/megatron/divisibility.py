"""Megatron's divisibility rules for a parallel layout, as plain predicates.

The compiler's rules (check/rules/megatron.py) turn each into a located diagnostic; `size`
(commands/size.py) enumerates only the layouts that pass them. One place, so the two never differ.
Each cites the line of Megatron at the pinned commit (571370c8) that asserts it.
"""

from __future__ import annotations

from typing import Any

from .pretrain import PipelineSplit, ffn_hidden_size, pipeline_split_refusal


def head_size_derives(model: Any) -> bool:
    """arguments.py:1282-1283: the head size is hidden_size / num_attention_heads, whole."""
    return bool(model.hidden_size % model.num_attention_heads == 0)


def model_shapes_ok(model: Any) -> bool:
    """The layer's GEMMs have shapes: a whole head size of at least 1 and an FFN of at least 1 (with swiglu and
    no ffn_hidden_size, arguments.py:1276-1281 rounds 4 x hidden x 2/3 down to a multiple of 64: 0 below h 24).
    What the memory and step-time models need before they price a layer."""
    return head_size_derives(model) and model.hidden_size >= model.num_attention_heads and ffn_hidden_size(model) >= 1


def heads_split_over_tp(heads: int, tp: int) -> bool:
    """transformer_config.py:1195: num_attention_heads % TP == 0."""
    return heads % tp == 0


def groups_fit_tp(groups: int | None, tp: int) -> bool:
    """transformer_config.py:1209-1212: query groups a multiple or a divisor of TP."""
    return groups is None or groups % tp == 0 or tp % groups == 0


def heads_split_over_groups(heads: int, groups: int | None) -> bool:
    """attention.py splits heads evenly over the query groups."""
    return groups is None or heads % groups == 0


def sequence_splits_over_cp(seq: int, cp: int) -> bool:
    """arguments.py:1286-1289: seq_length % (2 x CP) == 0 when CP > 1."""
    return cp == 1 or seq % (2 * cp) == 0


def pipeline_split_ok(layers: int, pp: int, layers_per_virtual_stage: int | None = None) -> bool:
    """Megatron accepts this even split (and virtual pipeline): pretrain.pipeline_split_refusal, the
    function the pipeline rule (check/rules/runtime.py) reports from."""
    return pipeline_split_refusal(PipelineSplit(layers, pp, layers_per_virtual_stage)) is None


def batch_splits(global_batch: int, micro: int, dp: int) -> bool:
    """num_microbatches_calculator.py:381: global % (micro x DP) == 0."""
    return global_batch % (micro * dp) == 0


def experts_split_over_ep(num_experts: int | None, ep: int) -> bool:
    """arguments.py:1486-1489: EP > 1 needs experts, and num_experts % EP == 0."""
    if num_experts is None:
        return ep == 1
    return num_experts % ep == 0
