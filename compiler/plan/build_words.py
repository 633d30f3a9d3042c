"""A Megatron flag as shell words."""

from __future__ import annotations

from ..megatron.flags import Flag
from .shell import Var, Word


def flag_words(flag: Flag) -> tuple[Word, ...]:
    """A flag as argv words; run-root-relative values become "$RUN_ROOT/…"."""
    if flag.run_root_relative:
        return (Word.lit(flag.name), Word((Var("RUN_ROOT"), "/" + flag.values[0])))
    return (Word.lit(flag.name),) + tuple(Word.lit(v) for v in flag.values)
