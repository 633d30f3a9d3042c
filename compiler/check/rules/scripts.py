"""The training script against the Megatron-LM the image builds (megatron/scripts.py's pinned list)."""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic
from ...megatron.scripts import script_problem
from ..context import RuleContext


def check_script_exists(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A script under megatron.root that Megatron-LM does not have at megatron.commit would compile
    # clean and fail on the GPUs after the job queued.
    training, megatron = ctx.sections["training"], ctx.sections["megatron"]
    problem = script_problem(training.script, megatron.root, megatron.commit)
    if problem is not None:
        yield ctx.locate("script-not-in-megatron", problem.message, ("training", "script"), hint=problem.hint)
