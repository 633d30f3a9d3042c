"""The performance options an expert turns on, and which of them the compiler sets by default.

Megatron-LM ships these off; its own Llama-3 H100 example (examples/llama/train_llama3_8b_h100_fp8.sh:
--cross-entropy-loss-fusion, --manual-gc, --overlap-grad-reduce, --overlap-param-gather with the
distributed optimizer) and Megatron Bridge's recipes (v0.5.1 src/megatron/bridge/recipes/common.py:
manual_gc with interval 100, overlap_grad_reduce and overlap_param_gather with the distributed
optimizer) turn them on. The compiler does the same where Megatron's rules at the pinned commit
(571370c8) allow it; training.performance turns each one off (or TP comm overlap on). Each default
below says why it is safe.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..tuples import NamedTuple
from .hf.model import HFModel


class Options(NamedTuple):
    """Each option as the launch passes it, and why (the compiler's default, or the spec)."""

    overlap_grad_reduce: bool
    overlap_param_gather: bool
    cross_entropy_fusion: bool
    manual_gc: bool
    manual_gc_interval: int
    tp_comm_overlap: bool
    attention_mask: bool  # the data loader builds the causal mask (Megatron's default; off: the flag below)
    reasons: tuple[tuple[str, str], ...]  # (option, why it is on or off), for plan.md


# Each flag and the training.performance field that decides it
FIELD_OF = {"--overlap-grad-reduce": "overlap_grad_reduce", "--overlap-param-gather": "overlap_param_gather",
            "--cross-entropy-loss-fusion": "cross_entropy_fusion", "--manual-gc": "manual_gc",
            "--manual-gc-interval": "manual_gc_interval", "--tp-comm-overlap": "tp_comm_overlap",
            "--no-create-attention-mask-in-dataloader": "attention_mask_in_dataloader"}
FLAGS = tuple(FIELD_OF)


class _Defaults(NamedTuple):
    """training.performance when the spec leaves it out: schema/models.py Performance's defaults."""

    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None
    cross_entropy_fusion: bool | None = None
    manual_gc: bool | None = None
    manual_gc_interval: int = 100
    tp_comm_overlap: bool = False
    attention_mask_in_dataloader: bool | None = None


_DEFAULTS = _Defaults()


def _pick(given: bool | None, default: bool, why_default: str) -> tuple[bool, str]:
    if given is None:
        return default, f"{'on' if default else 'off'} by default: {why_default}"
    return given, f"{'on' if given else 'off'}: the spec says so"


def resolve(t: Any, data_parallel: int) -> Options:
    """The options of a pretrain training section at a data-parallel size."""
    p = t.performance if t.performance is not None else _DEFAULTS
    dp = data_parallel > 1
    grad, grad_why = _pick(p.overlap_grad_reduce, dp, (
        "the gradient reduce-scatter/all-reduce of each bucket starts during the backward pass "
        "(distributed_data_parallel.py), same arithmetic" if dp else "data parallel 1 has nothing to reduce"))
    param_default = dp and t.distributed_optimizer and grad
    param, param_why = _pick(p.overlap_param_gather, param_default, (
        "the parameter all-gather of the distributed optimizer overlaps the next forward "
        "(arguments.py:1003-1008: needs the distributed optimizer and overlap_grad_reduce)" if param_default else
        "needs the distributed optimizer, overlap_grad_reduce and data parallel > 1 (arguments.py:1003-1008)"))
    deterministic = "--deterministic-mode" in getattr(t, "args", ())
    ce, ce_why = _pick(p.cross_entropy_fusion, bool(t.fused_kernels) and not deterministic, (
        "training.fused_kernels is false" if not t.fused_kernels else
        "--deterministic-mode refuses it (arguments.py:1538)" if deterministic else
        "Megatron's native fused vocab-parallel cross entropy (fusions/fused_cross_entropy.py), the same "
        "loss; --cross-entropy-fusion-impl te is refused (arguments.py:1528-1533)"))
    gc, gc_why = _pick(p.manual_gc, True, (
        f"Python's collector runs on every rank at the same steps (every {p.manual_gc_interval}; training.py:2945, "
        "3264) instead of at random times that stall the collectives"))
    tp_why = ("on: the spec says so (needs TE built with userbuffers; arguments.py:1386 needs sequence parallel)"
              if p.tp_comm_overlap else
              "off: needs Transformer Engine built with userbuffers in the image, which the compiler cannot see")
    reset = "--reset-attention-mask" in getattr(t, "args", ())
    mask, mask_why = _pick(p.attention_mask_in_dataloader, reset, (
        "--reset-attention-mask masks each document on its own through the data loader's mask, which Megatron's "
        "local unfused softmax applies (its fused kernels and Transformer Engine's causal attention never read it)"
        if reset else
        "a causal GPT needs no mask from the data loader (Transformer Engine's attention and the local softmax "
        "build their own, fused_softmax.py:323-327); building it costs b x s x s bytes a micro batch through the "
        "loader's workers, pinned memory and the copy to the GPU: measured on the H200, te-s16384-b1 120 -> 68 ms "
        "an iteration, te-s8192-l4 47 -> 35 ms (tests/fixtures/h200-hosts/call9); Megatron's own "
        "examples/llama/train_llama3_8b_h100_fp8.sh turns it off"))
    reasons = (("overlap_grad_reduce", grad_why), ("overlap_param_gather", param_why),
               ("cross_entropy_fusion", ce_why), ("manual_gc", gc_why), ("tp_comm_overlap", tp_why),
               ("attention_mask_in_dataloader", mask_why))
    return Options(grad, param, ce, gc, p.manual_gc_interval, p.tp_comm_overlap, mask, reasons)


def bridge_te_kernels(t: Any) -> bool:
    """Whether an init_from MoE model gets Bridge's kernel choices (hf/moe.py te_flags: grouped experts,
    fused permutation): only when it trains with Transformer Engine and fused kernels."""
    return t.model.transformer_impl == "transformer_engine" and bool(t.fused_kernels)


def grouped_gemm(t: Any) -> bool:
    """--moe-grouped-gemm as the launch passes it: in training.args, or Bridge's choice for an init_from
    MoE model (flags.py adds it); what the memory and step-time models price."""
    m = t.model
    if m.num_experts is None or m.transformer_impl == "local":  # the local spec builds SequentialMLP whatever
        return False  # the flag says (core/models/backends.py:133-142 LocalSpecProvider.grouped_mlp_modules)
    return "--moe-grouped-gemm" in t.args or (isinstance(m, HFModel) and bridge_te_kernels(t))


def qk_layernorm(t: Any) -> bool:
    """--qk-layernorm as the launch passes it: in training.args, or the converted model's (huggingface.py: Qwen3's
    and the DeepSeek bridges' configs set it); each head's query and key normalised (attention.py:1648-1652), or
    with multi-latent attention its latent norms."""
    return "--qk-layernorm" in t.args or bool(getattr(t.model, "qk_layernorm", False))


def nan_check(t: Any) -> bool:
    """Megatron's check for NaN in the loss and gradients (a host sync in the loss function): on by
    default; off with --no-check-for-nan-in-loss-and-grad (arguments.py:2526) and with fp16's dynamic
    loss scaling, that is without --loss-scale (arguments.py:1163-1170)."""
    args = list(t.args)
    if "--no-check-for-nan-in-loss-and-grad" in args:
        return False
    static_scale = any(a == "--loss-scale" or a.startswith("--loss-scale=") for a in args)
    return not (t.precision == "fp16" and not static_scale)


def gradient_accumulation_fusion(t: Any) -> bool:
    """Megatron's gradient accumulation fusion (the weight-gradient GEMM adds into main_grad; needs Apex
    or TE): on by default (arguments.py:2600-2602, a store_false flag); off with training.fused_kernels:
    false, which passes --no-gradient-accumulation-fusion (flags.UNFUSED_FLAGS), or that flag in
    training.args (Megatron's parser takes no abbreviations)."""
    return bool(t.fused_kernels) and "--no-gradient-accumulation-fusion" not in list(t.args)


def launch_flags(options: Options) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(flag, values) for the options that are on."""
    if options.overlap_grad_reduce:
        yield "--overlap-grad-reduce", ()
    if options.overlap_param_gather:
        yield "--overlap-param-gather", ()
    if options.cross_entropy_fusion:
        yield "--cross-entropy-loss-fusion", ()
    if options.manual_gc:
        yield "--manual-gc", ()
        if options.manual_gc_interval:  # Megatron's default is 0
            yield "--manual-gc-interval", (str(options.manual_gc_interval),)
    if options.tp_comm_overlap:
        yield "--tp-comm-overlap", ()
    if not options.attention_mask:
        yield "--no-create-attention-mask-in-dataloader", ()


def imported(present: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """training.performance for a script's flags: each option exactly as the script has it."""
    out: dict[str, Any] = {
        "overlap_grad_reduce": "--overlap-grad-reduce" in present,
        "overlap_param_gather": "--overlap-param-gather" in present,
        "cross_entropy_fusion": "--cross-entropy-loss-fusion" in present,
        "manual_gc": "--manual-gc" in present,
        "tp_comm_overlap": "--tp-comm-overlap" in present,
        "attention_mask_in_dataloader": "--no-create-attention-mask-in-dataloader" not in present,
    }
    interval = present.get("--manual-gc-interval")
    out["manual_gc_interval"] = int(interval[0]) if interval and interval[0].isdigit() else 0
    return out
