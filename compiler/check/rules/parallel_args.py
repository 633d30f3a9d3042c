"""Parallel sizes written as raw flags for an entry point the spec does not type (pretrain_mamba.py,
pretrain_hybrid.py, examples/bert/pretrain_bert.py, a multimodal script, one's own): the script
receives them, while the plan, the rank groups and the world-size checks follow `parallelism`. Where
the two disagree the plan would describe another job (TP 4 x PP 3 compiling on 2 GPUs as 1/1/1), so
the flag must agree with its typed field (which is then checked against the world size).
The flags are the parallelism rows of megatron/flags.py, the one flag table."""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic
from ...megatron.flags import ROWS
from ..context import RuleContext

# --tensor-model-parallel-size -> "tensor", … (each Megatron-wide: every entry point parses them)
PARALLEL_FLAGS = {row.flag: row.path[1] for row in ROWS if row.path[0] == "parallelism" and row.kind == "int"}


def _values(args: list[str]) -> Iterator[tuple[int, str, str]]:
    """(index, flag, value) for each parallel flag in raw args, `--flag V` or `--flag=V`."""
    for index, arg in enumerate(args):
        flag, sep, value = arg.partition("=")
        if flag not in PARALLEL_FLAGS:
            continue
        if not sep:
            value = args[index + 1] if index + 1 < len(args) else ""
        yield index, flag, value


def check_parallel_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    if ctx.facts.is_pretrain:
        return  # pretrain_gpt.py's typed flags: args-duplicate-flag refuses these there
    training, parallelism = ctx.sections["training"], ctx.sections["parallelism"]
    for index, flag, text in _values(list(training.args)):
        field = PARALLEL_FLAGS[flag]
        typed = getattr(parallelism, field)
        if field == "expert_tensor" and typed is None:
            typed = parallelism.tensor  # Megatron's default: the tensor size
        try:
            value = int(text)
        except ValueError:
            continue  # not a number: the argument surface check says so
        if value != typed:
            yield ctx.locate(
                "args-parallel-mismatch", f"training.args[{index}] passes {flag} {value} but parallelism.{field} is "
                f"{typed}: the plan, the rank groups and the world-size checks follow parallelism.{field}, so they "
                "would describe another job than the script runs", ("training", "args", index),
                hint=f"set parallelism.{field}: {value} (the script still receives {flag} from training.args)",
            )
