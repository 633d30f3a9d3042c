"""megatron/expr.py: validate_args' expressions as closures, three-valued like the statements they
come from (an unknown operand decides nothing unless a known one settles the result)."""

from __future__ import annotations

import pytest

from compiler.megatron.expr import UNKNOWN, evaluator


class State:
    def __init__(self, args: dict, local: dict | None = None) -> None:
        self.args, self.local, self.reads = args, local or {}, set()


@pytest.mark.parametrize("source, args, expected", [
    ("args.a == 2", {"a": 2}, True),
    ("args.a == 2", {}, UNKNOWN),  # not set
    ("args.a and args.b", {"a": False}, False),  # a known False settles `and`
    ("args.b and args.a", {"a": False}, False),
    ("args.a or args.b", {"a": 3}, 3),
    ("args.a and args.b", {"a": True}, UNKNOWN),
    ("1 < args.a < 3", {"a": 2}, True),
    ("1 < args.a < 3", {"a": 5}, False),
    ("args.a / args.b", {"a": 1, "b": 0}, UNKNOWN),  # raises: unknown
    ("args.a % 2 == 0", {"a": "x"}, UNKNOWN),
    ("len(args.a)", {"a": [1, 2]}, 2),
    ("is_te_min_version('2.0')", {}, UNKNOWN),  # a call outside the few builtins
    ("getattr(args, 'a', None)", {}, UNKNOWN),
    ("getattr(args, 'a', None)", {"a": 4}, 4),
    ("args.a if args.b else 7", {"a": 1, "b": 0}, 7),
    ("{args.a}", {"a": []}, UNKNOWN),  # unhashable
    ("~args.a", {"a": 1}, UNKNOWN),  # an operator not modelled
    ("x + 1", {}, UNKNOWN),
])
def test_values_and_unknowns(source: str, args: dict, expected: object) -> None:
    value = evaluator(source)(State(args))
    assert value is UNKNOWN if expected is UNKNOWN else value == expected and value is not UNKNOWN


def test_locals_and_reads() -> None:
    state = State({"a": 1, "b": 2}, {"x": 5})
    assert evaluator("x + args.a > 0 and args.b")(state) == 2
    assert state.reads == {"a", "b"}  # every operand of and/or is read, as refusals report them
