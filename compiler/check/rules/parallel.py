"""Parallel-layout rules: the sizes against the world, and the bounded example's fixed layout."""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron.parallel import divisors, expert_tensor_size, model_parallel_size
from ...megatron.pretrain import BOUNDED_EXAMPLE
from ..context import RuleContext


def world_text(ctx: RuleContext) -> tuple[int, str]:
    """The world size and how it is made, for messages."""
    res: Any = ctx.sections["resources"]
    world = ctx.facts.world
    assert world is not None
    return world, f"workers {res.workers} × gpus_per_worker {res.gpus_per_worker} = {world}"


def _sizes_hint(world: int, what: str) -> str:
    options = divisors(world)
    listed = ", ".join(str(d) for d in options[:-1]) + (" or " if len(options) > 1 else "") + str(options[-1])
    return f"with {world} GPU{'s' if world != 1 else ''}, {what} must be {listed}"


def check_parallel_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    par: Any = ctx.sections["parallelism"]
    world, how = world_text(ctx)
    if world % par.tensor:
        yield ctx.locate(
            "parallel-divisibility", f"parallelism.tensor ({par.tensor}) must divide the world size ({how})",
            ("parallelism", "tensor"), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )
        return
    product = model_parallel_size(par.tensor, par.pipeline, par.context)
    if world % product:
        culprit = "pipeline" if world % (par.tensor * par.pipeline) else "context"
        yield ctx.locate(
            "parallel-divisibility",
            f"tensor × pipeline × context ({par.tensor} × {par.pipeline} × {par.context} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", culprit), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )


def check_expert_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron/core/parallel_state.py, initialize_model_parallel: the expert RankGenerator needs
    # world % (expert_tensor × expert × pipeline) == 0.
    par: Any = ctx.sections["parallelism"]
    world, how = world_text(ctx)
    etp = expert_tensor_size(par.tensor, par.expert_tensor)
    product = etp * par.expert * par.pipeline
    if par.expert > 1 and world % product:
        yield ctx.locate(
            "expert-divisibility",
            f"expert_tensor × expert × pipeline ({etp} × {par.expert} × {par.pipeline} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", "expert"), hint=_sizes_hint(world, "expert_tensor × expert × pipeline")
            + ("; expert_tensor defaults to tensor" if par.expert_tensor is None else ""),
        )


def check_bounded_layout(ctx: RuleContext) -> Iterator[Diagnostic]:
    if not ctx.facts.is_bounded_example:
        return
    par: Any = ctx.sections["parallelism"]
    why = f"{BOUNDED_EXAMPLE} hard-codes tensor=2, pipeline=1 and ignores the spec"
    wanted = {"tensor": 2, "pipeline": 1, "context": 1, "expert": 1}
    world, how = world_text(ctx)
    for field, value in wanted.items():
        actual = getattr(par, field)
        # a size that does not even divide the world size is parallel-divisibility's to report
        if actual != value and world % actual == 0:
            yield ctx.locate(
                "bounded-example-layout", f"parallelism.{field} must be {value} for the bounded example (got {actual})",
                ("parallelism", field),
                hint=f"{why}; set {field}: {value}, or train with pretrain_gpt.py for another layout",
            )
    if world % 2:
        yield ctx.locate(
            "bounded-example-layout", f"the bounded example needs an even world size ({how})",
            ("resources", "gpus_per_worker"), hint=f"{why}; its TP=2 groups need pairs of GPUs",
        )


def check_bounded_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    training: Any = ctx.sections["training"]
    if ctx.facts.is_bounded_example and training.args:
        yield ctx.locate(
            "bounded-example-args", f"training.args must be empty for the bounded example (got {len(training.args)})",
            ("training", "args"),
            hint=f"{BOUNDED_EXAMPLE} reads no arguments; the job would run something other than what was reviewed",
        )


def check_rdma(ctx: RuleContext) -> Iterator[Diagnostic]:
    res: Any = ctx.sections["resources"]
    if res.rdma and res.workers == 1:
        yield ctx.locate(
            "rdma-single-worker", "resources.rdma is on for a single worker, where it carries no traffic",
            ("resources", "rdma"), severity=Severity.WARNING, hint="turn it off, or use several workers",
        )


def check_tensor_spans_workers(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Megatron orders ranks tensor-parallel first: a tensor-parallel group of more GPUs than a worker has, or one
    that does not tile a worker, holds ranks of two workers, and its collectives (several a layer, on the critical
    path) cross the network instead of NVLink. It runs; it is rarely what a user means."""
    par: Any = ctx.sections["parallelism"]
    res: Any = ctx.sections["resources"]
    if res.workers > 1 and res.gpus_per_worker % par.tensor:
        yield ctx.locate(
            "tensor-spans-workers", f"parallelism.tensor ({par.tensor}) does not divide resources.gpus_per_worker "
            f"({res.gpus_per_worker}): tensor-parallel groups span workers, and their all-reduces cross the network "
            "every layer", ("parallelism", "tensor"), severity=Severity.WARNING,
            hint=f"a tensor size that divides {res.gpus_per_worker} keeps each group within a worker; pipeline or "
            "data parallel across workers",
        )
