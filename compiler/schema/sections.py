"""Spec sections of the job spec v1 kept apart from models.py (which holds the rest, under its size
limit): the section base every model shares, FP8's recipe and the performance options.
compiler/schema/validator.py model_classes reads the models of both modules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# defer_build: validators are built on first use, not at import, so that `--help` and a spec that
# fails in YAML never pay for them (docs/performance.md).
_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True, allow_inf_nan=False)  # no .inf/.nan


class _Section(BaseModel):
    model_config = _CONFIG


class Fp8(_Section):
    """FP8 matrix multiplies through Transformer Engine (training.precision: fp8), on a BF16 base."""

    format: Literal["hybrid", "e4m3"] = "hybrid"  # --fp8-format: hybrid keeps gradients in e5m2
    recipe: Literal["delayed", "tensorwise", "blockwise", "mxfp8"] = "delayed"  # --fp8-recipe
    amax_history_len: int = Field(default=1024, ge=1)  # delayed scaling's window (Megatron's Llama-3 FP8 example)
    amax_compute_algo: Literal["max", "most_recent"] = "max"


class Performance(_Section):
    """Megatron's performance options; null: the compiler's default where Megatron's rules allow it."""

    overlap_grad_reduce: bool | None = None  # default: on at data parallel > 1
    overlap_param_gather: bool | None = None  # default: on with the distributed optimizer at data parallel > 1
    cross_entropy_fusion: bool | None = None  # default: on with fused_kernels (--cross-entropy-loss-fusion)
    manual_gc: bool | None = None  # default: on (--manual-gc: collect at fixed steps on every rank)
    manual_gc_interval: int = Field(default=100, ge=0)  # --manual-gc-interval; 0: only around evaluation
    tp_comm_overlap: bool = False  # TE userbuffers: needs sequence parallel and an image that built them
    # the data loader's causal mask (false: --no-create-attention-mask-in-dataloader); default: off unless
    # training.args has --reset-attention-mask
    attention_mask_in_dataloader: bool | None = None
