"""compiler/tuples.py: the NamedTuple every module's plain data uses, typing's class syntax without its
import cost (docs/performance.md)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from compiler.tuples import NamedTuple

PACKAGE = Path(__file__).resolve().parent.parent / "compiler"


class Pair(NamedTuple):
    """A docstring kept."""

    first: int
    second: str = "b"

    def both(self) -> str:
        return f"{self.first}{self.second}"


def test_a_class_statement_makes_typings_named_tuple():
    pair = Pair(1)
    assert pair == (1, "b") and isinstance(pair, tuple)
    assert pair._replace(second="c").both() == "1c"
    assert Pair._fields == ("first", "second") and Pair._field_defaults == {"second": "b"}
    assert Pair.__doc__ == "A docstring kept." and Pair.__qualname__ == "Pair" and Pair.__module__ == __name__
    assert Pair.__annotations__ == {"first": "int", "second": "str"}  # as written, not evaluated
    assert pickle.loads(pickle.dumps(pair)) == pair  # the batch's workers send outcomes back pickled


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match="field second without a default"):
        class Bad(NamedTuple):
            first: int = 0
            second: int


def test_a_named_tuple_method_cannot_be_replaced():
    with pytest.raises(AttributeError, match="_replace"):
        class Bad(NamedTuple):
            first: int

            def _replace(self) -> None:
                pass


def test_the_compiler_defines_named_tuples_through_compiler_tuples():
    """typing.NamedTuple compiles every annotation at import: about 50 us a class, 80 classes a compile."""
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py")) if path.name != "tuples.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.match(r"\s*from typing import .*\bNamedTuple\b|.*\btyping\.NamedTuple\b", line)]
    assert not found, "use `from compiler.tuples import NamedTuple` (relative):\n" + "\n".join(found)
