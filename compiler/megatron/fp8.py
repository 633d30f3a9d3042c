"""FP8 training as Megatron-LM (571370c8) and Transformer Engine 2.14 run it: flags, rules, memory, time.

Megatron trains in FP8 only through Transformer Engine's layers: `--fp8-format` sets
TransformerConfig.fp8 (transformer_config.py:518), `--fp8-recipe` its recipe (default delayed, :525),
and fp8_utils.py:554-611 builds TE's recipe from them. The base precision stays BF16 (`--bf16`): the
weights, gradients and optimizer state are those of BF16 training, and TE casts the GEMM inputs to
FP8 inside its modules. Without TE, `get_fp8_context` is a null context (fp8_utils.py:680-682) and
the local layers never enter it, so a `transformer_impl: local` job would train in BF16 silently.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from ..tuples import NamedTuple
from .pretrain import ffn_hidden_size

# Which GPUs run which recipe: TE 2.14.1 transformer_engine/pytorch/quantization.py:48-87
# (check_fp8_support, check_mxfp8_support, check_fp8_block_scaling_support).
FP8_MIN_CAPABILITY = (8, 9)  # delayed and tensorwise scaling: Ada (8.9) with cuBLASLt 12.1.3+, Hopper (9.0) on
RECIPE_CAPABILITY: dict[str, tuple[tuple[int, int], tuple[int, int] | None, str]] = {
    # recipe: (lowest compute capability, first one refused or None, TE's words)
    "delayed": (FP8_MIN_CAPABILITY, None, "compute capability 8.9 or higher required for FP8 execution"),
    "tensorwise": (FP8_MIN_CAPABILITY, None, "compute capability 8.9 or higher required for FP8 execution"),
    "blockwise": ((9, 0), None, "FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9"),
    "mxfp8": ((10, 0), (12, 0), "MXFP8 needs compute capability 10.0 (Blackwell) and is not supported on 12.0+"),
}

# TE's FP8 GEMMs: transformer_engine/pytorch/utils.py:479-489 assert_dim_for_fp8_exec, called on the
# input and weight of every Linear, LayerNormLinear and LayerNormMLP (module/linear.py:176,
# layernorm_linear.py:159, layernorm_mlp.py:335): the product of the leading dimensions divisible by
# 8, the last dimension by 16.
LEADING, LAST = 8, 16

# Delayed scaling keeps, per FP8 tensor of every TE module, an fp32 amax history of
# amax_history_len entries and an fp32 scale (TE's fp8_meta["scaling_fwd"/"scaling_bwd"]): a Linear
# quantizes input, weight and output forward and two gradients backward (5); a transformer layer's
# LayerNormLinear (QKV), Linear (projection) and LayerNormMLP (6 + 4) hold 20.
FP8_TENSORS_PER_LAYER = 20
FP8_TENSORS_PER_EXPERT = 10  # two GEMMs of a grouped expert MLP, 5 each
# Hopper's FP8 GEMM takes only the TN layout, so TE keeps a weight's FP8 copy row-wise (forward) and
# column-wise (the backward's dgrad): two bytes per GEMM weight element, cached across the micro
# batches of a step (Megatron passes is_first_microbatch). Counted whole: an upper bound.
FP8_WEIGHT_COPY_BYTES = 2

# The step-time ratio FP8 / BF16 of published pairs: same model, layout, batch and GPU count, H100,
# NeMo with Transformer Engine (NVIDIA dgxc-benchmarking v24.11 and v25.04 in
# ../shared/published/disclosed.csv; tests/fixtures/published/fp8_bf16_pairs.csv holds the 38 pairs,
# tools/fp8_ratio.py recomputes these figures). A whole-step ratio on the H100, not a GEMM rate, and
# not measured on the H200.
PUBLISHED_STEP_RATIO = 0.748  # median of 38 pairs
PUBLISHED_STEP_RATIO_RANGE = (0.621, 0.828)
PUBLISHED_STEP_RATIO_SOURCE = ("published H100 pairs (NVIDIA dgxc-benchmarking v24.11/v25.04, NeMo + TE): FP8 steps "
                               f"took {PUBLISHED_STEP_RATIO:.2f}x the BF16 step (median of 38, "
                               f"{PUBLISHED_STEP_RATIO_RANGE[0]:.2f}-{PUBLISHED_STEP_RATIO_RANGE[1]:.2f}); "
                               "not measured on the H200")


class Fp8Recipe(NamedTuple):
    """What a spec's FP8 choice resolves to (Fp8's defaults where training.fp8 is absent)."""

    format: str
    recipe: str
    amax_history_len: int
    amax_compute_algo: str


def recipe_of(t: Any) -> Fp8Recipe | None:
    """The FP8 recipe of a training section, or None when it does not train in FP8."""
    if t.precision != "fp8":
        return None
    f = t.fp8
    if f is None:
        return Fp8Recipe("hybrid", "delayed", 1024, "max")
    return Fp8Recipe(f.format, f.recipe, f.amax_history_len, f.amax_compute_algo)


def recipe_refusal(recipe: str, capability: tuple[int, int]) -> str | None:
    """Why TE refuses a recipe on a GPU of this compute capability, or None when it runs."""
    low, refused_from, words = RECIPE_CAPABILITY[recipe]
    if capability < low or (refused_from is not None and capability >= refused_from):
        return words
    return None


def dimension_problems(t: Any, tensor: int, context: int) -> Iterator[tuple[tuple[str, ...], str]]:
    """(field, what is wrong) for each GEMM dimension TE's FP8 GEMM refuses at this layout."""
    m = t.model
    h, heads = m.hidden_size, m.num_attention_heads
    groups = m.num_query_groups or heads
    head_dim = h // heads
    ffn = ffn_hidden_size(m)
    here = ("training", "model")
    if h % LAST:
        yield here + ("hidden_size",), f"training.model.hidden_size ({h}) is the inner dimension of the QKV and FC1 GEMMs: " \
                                       f"FP8 needs it divisible by {LAST}"
    if (heads * head_dim // tensor) % LAST:
        yield here + ("num_attention_heads",), (
            f"the attention projection's inner dimension per tensor-parallel rank, heads × head size / tensor = "
            f"{heads} × {head_dim} / {tensor}, is not divisible by {LAST}")
    if ((heads + 2 * groups) * head_dim // tensor) % LEADING:
        yield here + ("num_attention_heads",), (
            f"the QKV weight's rows per tensor-parallel rank, (heads + 2 × query groups) × head size / tensor, "
            f"are not divisible by {LEADING}")
    if (ffn // tensor) % LAST:
        yield here + ("ffn_hidden_size",), (f"the FC2 GEMM's inner dimension per tensor-parallel rank, training.model.ffn_hidden_size "
                                            f"/ tensor = {ffn} / {tensor}, is not divisible by {LAST}")
    if t.batch is None:  # the batch's own rule reports a missing training.batch
        return
    tokens = m.seq_length * t.batch.micro // context
    if tokens % LEADING:
        yield here + ("seq_length",), (f"the tokens a GEMM sees, seq_length × micro batch / context = {tokens}, are "
                                       f"not divisible by {LEADING}")


class Fp8Memory(NamedTuple):
    weight_copies: float  # bytes
    amax_history: float  # bytes
    note: str


def _gemm_weights_per_rank(t: Any, layout: Any) -> tuple[float, int, int]:
    """(GEMM weight elements, layers, local experts) on the most loaded rank: QKV, projection and the
    MLP's input and output matrices of its layers, or its experts' (not embeddings, norms or biases)."""
    m = t.model
    layers = math.ceil(m.num_layers / layout.pipeline)
    h, heads = m.hidden_size, m.num_attention_heads
    head_dim = h // heads
    attention = ((heads + 2 * (m.num_query_groups or heads)) * head_dim * h + heads * head_dim * h) / layout.tensor
    matrices = 3 if m.swiglu else 2
    if m.num_experts is None:
        return layers * (attention + matrices * ffn_hidden_size(m) * h / layout.tensor), layers, 0
    local = layers * m.num_experts // layout.expert
    expert = matrices * (m.moe_ffn_hidden_size or ffn_hidden_size(m)) * h / layout.expert_tensor
    return layers * attention + local * expert, layers, local


def fp8_memory(t: Any, layout: Any) -> Fp8Memory | None:
    """FP8's own bytes on the most loaded rank beside BF16 training's: the FP8 copies of its GEMM
    weights and, with delayed scaling, the amax histories; None when the spec does not train in FP8."""
    recipe = recipe_of(t)
    if recipe is None:
        return None
    weights, layers, experts = _gemm_weights_per_rank(t, layout)
    copies = FP8_WEIGHT_COPY_BYTES * weights
    history = 0.0
    if recipe.recipe == "delayed":
        tensors = layers * FP8_TENSORS_PER_LAYER + experts * FP8_TENSORS_PER_EXPERT
        history = tensors * (recipe.amax_history_len + 1) * 4
    note = (f"FP8 ({recipe.recipe}): {copies / 2**20:,.1f} MiB of FP8 weight copies (row- and column-wise) and "
            f"{history / 2**20:,.1f} MiB of amax history added, derived from TE's source; activations counted at "
            "BF16 size (TE keeps some GEMM inputs in FP8): an upper bound, measured once on the H200 "
            "(delayed scaling, L4 h1024: +3.0 %, docs/transformer-engine.md)")
    return Fp8Memory(copies, history, note)
