"""Each derived value has one home: one function computes it, the spec's value is computed once
(check/facts.py), and no module re-derives it inline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "compiler"

# function -> (its module, the modules that may call it with a spec's fields)
HOMES = {
    # world size and data parallel are also computed for layouts other than the spec's (init, size)
    "world_size": ("megatron/parallel.py", None),
    "data_parallel_size": ("megatron/parallel.py", None),
    "train_iterations": ("megatron/pretrain.py", {"check/facts.py"}),
    "num_microbatches": ("megatron/pretrain.py", {"check/facts.py"}),
    "virtual_pipeline_size": ("megatron/pretrain.py", {"check/facts.py"}),
}
# The Megatron wing evaluates the same functions for other shapes than the spec's (size's layouts,
# the memory hints): those calls are the function, not a second derivation.
WING = "megatron/"


def _trees() -> dict[str, ast.AST]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}


TREES = _trees()


def _source(node: ast.AST) -> str:
    return ast.unparse(node)


@pytest.mark.parametrize("name", sorted(HOMES))
def test_one_definition(name: str):
    defined = [path for path, tree in TREES.items() for node in getattr(tree, "body", [])
               if isinstance(node, ast.FunctionDef) and node.name == name]
    assert defined == [HOMES[name][0]], defined


@pytest.mark.parametrize("name", sorted(n for n, (_, callers) in HOMES.items() if callers is not None))
def test_the_specs_value_is_derived_once(name: str):
    """Outside the Megatron wing only check/facts.py calls it; the plan and the rules read the fact."""
    callers = {path for path, tree in TREES.items() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and _source(node.func).split(".")[-1] == name
               and not path.startswith(WING)}
    assert callers <= HOMES[name][1], callers


def _floordivs():
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
                yield path, node.lineno, _source(node.left), _source(node.right)


def test_no_inline_micro_batch_count():
    """global // (micro × data parallel) is num_microbatches, nowhere else."""
    found = [(p, line) for p, line, left, right in _floordivs()
             if "global" in left and "micro" in right and p != HOMES["num_microbatches"][0]]
    assert not found, found


def test_no_inline_training_iterations():
    """train_samples // global batch is train_iterations, nowhere else."""
    found = [(p, line) for p, line, left, right in _floordivs()
             if "train_samples" in left and "global" in right and p != HOMES["train_iterations"][0]]
    assert not found, found


def test_no_inline_virtual_pipeline_size():
    """num_layers // pipeline // layers per virtual stage is virtual_pipeline_size, nowhere else."""
    found = [(p, line) for p, line, left, right in _floordivs()
             if ("num_layers" in left or "layers" == left) and "virtual" in right
             and p != HOMES["virtual_pipeline_size"][0]]
    assert not found, found
