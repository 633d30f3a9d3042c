"""Raw training.args against Megatron-LM's whole argument surface at the pinned commit.

The surface (compiler/megatron/data/megatron_args.json) is generated from Megatron's own parser by
tools/megatron_argsurface.py; the checker agrees with that parser on every list of its corpus
(docs/argsurface.md). Only pretrain_gpt.py reads Megatron's parser; other scripts take their own.
"""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic
from ..context import RuleContext


def check_raw_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    training = ctx.sections["training"]
    if not ctx.facts.is_pretrain or not training.args:
        return
    from ...megatron.argsurface import check_args  # deferred: its data file loads only for specs with raw args

    for issue in check_args(list(training.args)):
        yield ctx.locate(issue.code, issue.message, ("training", "args", issue.index), hint=issue.hint)
