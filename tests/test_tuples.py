"""compiler/tuples.py: the NamedTuple every module's plain data uses, typing's class syntax without its
import cost (docs/performance.md)."""

from __future__ import annotations

import ast
import pickle
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


def test_what_this_named_tuple_does_not_make_is_refused_not_made_wrong():
    """typing's generic and functional forms, and a class body without __annotations__ (Python 3.14
    without the future import), raise instead of making a different class."""
    from typing import Generic, TypeVar

    T = TypeVar("T")
    with pytest.raises(TypeError, match="inherits from NamedTuple only"):
        class Boxed(NamedTuple, Generic[T]):
            item: T
    with pytest.raises(TypeError, match="functional form"):
        NamedTuple("F", [("a", int)])
    with pytest.raises(TypeError, match="no __annotations__"):
        type(NamedTuple)("Empty", (NamedTuple,), {"__module__": __name__, "__qualname__": "Empty"})


def test_the_compiler_defines_named_tuples_through_compiler_tuples():
    """typing.NamedTuple compiles every annotation at import: about 50 us a class, 80 classes a compile."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "tuples.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = isinstance(node, ast.ImportFrom) and node.module == "typing" and any(
                alias.name == "NamedTuple" for alias in node.names)
            attribute = isinstance(node, ast.Attribute) and node.attr == "NamedTuple" and isinstance(
                node.value, ast.Name) and node.value.id == "typing"
            if imported or attribute:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, "use `from compiler.tuples import NamedTuple` (relative):\n" + "\n".join(found)
