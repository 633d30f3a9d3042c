"""Raw training.args against Megatron-LM's whole argument surface at the pinned commit.

The surface (compiler/megatron/data/megatron_args.json) is generated from Megatron's own parser by
tools/megatron_argsurface.py; the checker agrees with that parser on every list of its corpus
(docs/argsurface.md). Only pretrain_gpt.py reads Megatron's parser; other scripts take their own.
"""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron.flops import UNREAD_SHAPE_FLAGS
from ..context import RuleContext


def check_raw_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    training = ctx.sections["training"]
    if not ctx.facts.is_pretrain or not training.args:
        return
    from ...megatron.argsurface import check_args  # deferred: its data file loads only for specs with raw args

    for issue in check_args(list(training.args)):
        yield ctx.locate(issue.code, issue.message, ("training", "args", issue.index), hint=issue.hint)


def check_unread_shape_flags(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Raw flags that change the model's shape where the estimates do not look (a warning: Megatron runs it)."""
    training = ctx.sections["training"]
    if not ctx.facts.is_pretrain or not training.args:
        return
    for i, token in enumerate(training.args):
        what = UNREAD_SHAPE_FLAGS.get(token.split("=", 1)[0])
        if what is not None:
            yield ctx.locate(
                "args-unread-shape-flag", f"{token.split('=', 1)[0]} changes {what} in Megatron, but the memory, "
                "parameter and step-time estimates do not read it from training.args: plan.md's figures are for "
                "the model without it", ("training", "args", i), severity=Severity.WARNING,
                hint="continue from the model's Hugging Face config (init_from), whose fields the estimates read, "
                     "or read plan.md's figures as a model without this flag")
