"""validate_args' expressions (megatron/validate.py), turned once into Python closures.

Each expression of data/megatron_validate.json is evaluated for every spec. Walking its syntax tree
for each spec spent most of a batch spec's check on isinstance tests that give the same answer for
every spec; `evaluator` makes that walk once per expression and process, into a closure that does
only what depends on the spec's values. Its result is the tree walk's, by construction, node for
node: a value, or UNKNOWN where anything it depends on is not known (an unknown name, an argument
not set, a call outside a few builtins, an operation that raises); the same arguments are read, in
the same order. Nothing is kept between runs: the closures live as long as the process.

Stdlib only.
"""

from __future__ import annotations

import ast
import functools
import operator
from typing import Any, Callable

# The state an expression reads: `args` (dest -> value), `local` (validate_args' locals) and `reads`
# (the dests read, which a refusal reports); megatron/validate.py's _State.
State = Any
Evaluator = Callable[[State], Any]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()

_ERRORS = (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError, AttributeError)
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}
_CALLS: dict[str, Callable[..., Any]] = {"len": len, "int": int, "float": float, "str": str, "bool": bool,
                                         "min": min, "max": max, "abs": abs, "any": any, "all": all}
_SEQUENCES: dict[type, Callable[[list[Any]], Any]] = {ast.List: list, ast.Tuple: tuple, ast.Set: set}


@functools.lru_cache(maxsize=4096)
def evaluator(source: str) -> Evaluator:
    """The closure that evaluates the expression `source` on a state."""
    return _compile(ast.parse(source.strip(), mode="eval").body)


def _unknown(s: State) -> Any:
    return UNKNOWN


def _arg(dest: str) -> Evaluator:
    def arg(s: State) -> Any:
        s.reads.add(dest)
        return s.args.get(dest, UNKNOWN)
    return arg


def _compile(node: ast.expr) -> Evaluator:
    if isinstance(node, ast.Constant):
        constant = node.value
        return lambda s: constant
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
        return _arg(node.attr)
    if isinstance(node, ast.Name):
        name = node.id
        return lambda s: s.local.get(name, UNKNOWN)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return _sequence(_SEQUENCES[type(node)], [_compile(e) for e in node.elts])
    if isinstance(node, ast.BoolOp):
        return _boolean(isinstance(node.op, ast.And), [_compile(v) for v in node.values])
    if isinstance(node, ast.UnaryOp):
        return _unary(_UNARY.get(type(node.op)), _compile(node.operand))
    if isinstance(node, ast.Compare):
        return _comparison(_compile(node.left), [(_COMPARE[type(op)], _compile(r))
                                                 for op, r in zip(node.ops, node.comparators)])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(_BINARY[type(node.op)], _compile(node.left), _compile(node.right))
    if isinstance(node, ast.IfExp):
        return _conditional(_compile(node.test), _compile(node.body), _compile(node.orelse))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) \
                and node.args[0].id == "args" and isinstance(node.args[1], ast.Constant):
            return _getattr(_arg(str(node.args[1].value)), len(node.args) >= 3)
        if node.func.id in _CALLS and not node.keywords:
            return _call(_CALLS[node.func.id], [_compile(a) for a in node.args])
    return _unknown


def _sequence(make: Callable[[list[Any]], Any], items: list[Evaluator]) -> Evaluator:
    def sequence(s: State) -> Any:
        values = [f(s) for f in items]
        if any(x is UNKNOWN for x in values):
            return UNKNOWN
        try:
            return make(values)
        except _ERRORS:  # an unhashable member of a set
            return UNKNOWN
    return sequence


def _boolean(conjunction: bool, operands: list[Evaluator]) -> Evaluator:
    """and/or: every operand is evaluated (each one's reads count); an unknown operand decides
    nothing unless a known one settles the result."""
    decisive: Callable[[Any], bool] = (lambda v: not v) if conjunction else bool

    def boolean(s: State) -> Any:
        values = [f(s) for f in operands]
        try:
            for v in values:
                if v is UNKNOWN:
                    return next((w for w in values if w is not UNKNOWN and decisive(w)), UNKNOWN)
                if decisive(v):
                    return v
            return values[-1]
        except _ERRORS:
            return UNKNOWN
    return boolean


def _unary(apply: Callable[[Any], Any] | None, operand: Evaluator) -> Evaluator:
    def unary(s: State) -> Any:
        v = operand(s)
        if v is UNKNOWN or apply is None:
            return UNKNOWN
        try:
            return apply(v)
        except _ERRORS:
            return UNKNOWN
    return unary


def _comparison(first: Evaluator, rest: list[tuple[Callable[[Any, Any], Any], Evaluator]]) -> Evaluator:
    def comparison(s: State) -> Any:
        left = first(s)
        try:
            for compare, right_of in rest:
                right = right_of(s)
                if left is UNKNOWN or right is UNKNOWN:
                    return UNKNOWN
                if not compare(left, right):
                    return False
                left = right
        except _ERRORS:
            return UNKNOWN
        return True
    return comparison


def _binary(apply: Callable[[Any, Any], Any], left: Evaluator, right: Evaluator) -> Evaluator:
    def binary(s: State) -> Any:
        a, b = left(s), right(s)
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        try:
            return apply(a, b)
        except _ERRORS:
            return UNKNOWN
    return binary


def _conditional(test: Evaluator, body: Evaluator, orelse: Evaluator) -> Evaluator:
    def conditional(s: State) -> Any:
        t = test(s)
        if t is UNKNOWN:
            return UNKNOWN
        try:
            chosen = body if t else orelse
        except _ERRORS:
            return UNKNOWN
        return chosen(s)
    return conditional


def _getattr(arg: Evaluator, has_default: bool) -> Evaluator:
    """getattr(args, "X"[, default]): a default makes an unset X unknown."""
    def attribute(s: State) -> Any:
        value = arg(s)
        return UNKNOWN if value is UNKNOWN and has_default else value
    return attribute


def _call(function: Callable[..., Any], arguments: list[Evaluator]) -> Evaluator:
    def call(s: State) -> Any:
        values = [f(s) for f in arguments]
        if any(a is UNKNOWN for a in values):
            return UNKNOWN
        try:
            return function(*values)
        except _ERRORS:
            return UNKNOWN
    return call
