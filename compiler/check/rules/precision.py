"""FP8's rules (megatron/fp8.py) and the performance options' (megatron/performance.py), checked
before a GPU against Megatron-LM 571370c8 and Transformer Engine 2.14."""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron.flags import arg_flag_name
from ...megatron.fp8 import dimension_problems, recipe_of, recipe_refusal
from ...megatron.gpus import gpu_of_flavor
from ...megatron.performance import resolve
from ..context import RuleContext


def _pretrain(ctx: RuleContext) -> Any:
    t = ctx.facts.training
    return t if ctx.facts.is_pretrain and t is not None and t.model is not None else None


def check_fp8(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None:
        return
    recipe = recipe_of(t)
    if recipe is None:
        if t.fp8 is not None:
            yield ctx.locate("fp8-unused", f"training.fp8 applies only with training.precision: fp8 (it is "
                             f"{t.precision}); Megatron would get no FP8 flag", ("training", "fp8"), key=True,
                             hint="set training.precision: fp8, or remove training.fp8")
        return
    here = ("training", "precision")
    if t.model.transformer_impl != "transformer_engine":
        # fp8_utils.py:680-682: without TE get_fp8_context is a null context; local layers never enter it
        yield ctx.locate("fp8-transformer-engine", "training.precision: fp8 runs through Transformer Engine's layers; "
                         "with transformer_impl: local Megatron would train in BF16 without a word", here,
                         hint="set training.model.transformer_impl: transformer_engine (the image must have TE)")
    res = ctx.sections["resources"]
    gpu = gpu_of_flavor(res.worker_flavor)
    at = ("training", "fp8", "recipe") if t.fp8 is not None else here
    if gpu is None:
        yield ctx.locate("fp8-gpu", f"resources.worker_flavor ({res.worker_flavor or 'not set'}) names no GPU the "
                         "compiler knows, so it cannot tell whether the GPU runs FP8 (compute capability 8.9+; "
                         "Hopper H100/H200/H20/H800 run it, A100 and V100 do not)", here, severity=Severity.WARNING,
                         hint="name the GPU in resources.worker_flavor (e.g. H200)")
    else:
        why = recipe_refusal(recipe.recipe, gpu.compute_capability)
        if why is not None:
            cc = ".".join(map(str, gpu.compute_capability))
            yield ctx.locate("fp8-gpu", f"FP8 recipe {recipe.recipe} cannot run on the {gpu.name.upper()} (compute "
                             f"capability {cc}): Transformer Engine says {why!r}", at,
                             hint="train in bf16 on this GPU" if recipe.recipe in ("delayed", "tensorwise") else
                             "use fp8.recipe: delayed or tensorwise (blockwise needs Hopper, mxfp8 Blackwell)")
    par = ctx.sections["parallelism"]
    if all(getattr(t.model, f) is not None for f in ("hidden_size", "num_attention_heads")):
        for path, message in dimension_problems(t, par.tensor, par.context):
            yield ctx.locate("fp8-dimensions", f"{message}; Transformer Engine's FP8 GEMM refuses it "
                             "(transformer_engine/pytorch/utils.py:479-489)", path,
                             hint="choose sizes that are multiples of 16 per tensor-parallel rank, or train in bf16")
    flags = [arg_flag_name(a) for a in t.args]
    if "--first-last-layers-bf16" in flags and recipe.recipe == "delayed":
        yield ctx.locate("fp8-recipe", "--first-last-layers-bf16 with the delayed FP8 recipe: TransformerConfig raises "
                         "'Delayed scaling does not support first / last layer in BF16' (transformer_config.py:1260)",
                         ("training", "args", flags.index("--first-last-layers-bf16")),
                         hint="set training.fp8.recipe: tensorwise, or drop the flag")


def _mask_checks(ctx: RuleContext, t: Any) -> Iterator[Diagnostic]:
    """The data loader's causal mask against the flags that need it or refuse it."""
    args = list(t.args)
    set_ = None if t.performance is None else t.performance.attention_mask_in_dataloader
    field = ("training", "performance", "attention_mask_in_dataloader")
    if "--sft" in args and (resolve(t, 1).attention_mask or "--reset-attention-mask" in args):
        # the SFT dataset packs sequences with cu_seqlens and asserts neither mask is asked for
        where = field if set_ else ("training", "args", args.index("--reset-attention-mask"))
        yield ctx.locate("performance-option", "--sft asserts the data loader builds no attention mask and resets "
                         "none (megatron/training/datasets/sft_dataset.py:174): the job would fail at its first batch",
                         where, hint="drop attention_mask_in_dataloader: true and --reset-attention-mask")
    elif set_ is False and "--reset-attention-mask" in args:
        yield ctx.locate("performance-option", "--reset-attention-mask masks each document through the data loader's "
                         "mask, which attention_mask_in_dataloader: false turns off: the local unfused softmax then "
                         "takes a plain causal mask and the fused kernels never read one, so documents attend to each "
                         "other", field, severity=Severity.WARNING,
                         hint="remove attention_mask_in_dataloader: false (the compiler keeps the mask for "
                              "--reset-attention-mask)")


def check_performance(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None:
        return
    yield from _mask_checks(ctx, t)
    if t.performance is None:
        return
    p, here = t.performance, ("training", "performance")
    # overlap_param_gather without the distributed optimizer: megatron-validate-args reports it (arguments.py:1004)
    if p.overlap_param_gather and p.overlap_grad_reduce is False:
        yield ctx.locate("performance-option", "training.performance.overlap_param_gather needs overlap_grad_reduce "
                         "(arguments.py:1007: 'Must use --overlap-param-gather with --overlap-grad-reduce')",
                         here + ("overlap_grad_reduce",), hint="remove overlap_grad_reduce: false")
    if p.tp_comm_overlap:
        par = ctx.sections["parallelism"]
        if not t.sequence_parallel or par.tensor == 1:
            yield ctx.locate("performance-option", "training.performance.tp_comm_overlap needs sequence parallel at "
                             f"parallelism.tensor > 1 (arguments.py:1379-1387; tensor is {par.tensor})",
                             here + ("tp_comm_overlap",), hint="set training.sequence_parallel: true with tensor > 1")
        if t.model.transformer_impl != "transformer_engine":
            yield ctx.locate("performance-option", "training.performance.tp_comm_overlap is Transformer Engine's "
                             "userbuffers overlap; transformer_impl is local", here + ("tp_comm_overlap",),
                             hint="set training.model.transformer_impl: transformer_engine")
