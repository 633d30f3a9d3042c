"""The architecture as a test: stage folders import only lower stages and the wings, no cycles,
no module over 400 lines (source.py and generated code aside)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "compiler"

# Lower number: lower layer. A module may import its own layer's modules and lower layers only.
# The wings (megatron, platform) sit below the stages that read them and above what they need.
LAYERS = {
    "tuples": -1,  # the NamedTuple base every layer's plain data uses
    "paths": 0, "diagnostics": 0, "__init__": 0, "installation": 0, "tree": 0, "text": 0,
    "load": 1,
    "schema": 2,
    "megatron": 3, "platform": 3,
    "check": 4,
    "plan": 5,
    "render": 6,
    "emit": 7,
    "one_pass": 8,
    "batch": 9,
    "commands": 10,
    "cli": 11, "__main__": 12,
}
LONG_ALLOWED = {"load/source.py", "schema/records.py", "schema/validator_schema.py"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, the compiler module a statement imports: its first component under compiler/)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PACKAGE)
    package = list(rel.parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.split(".")[0] == "compiler":
                    parts = node.module.split(".")[1:]
                else:
                    continue
            else:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                parts = base + (node.module.split(".") if node.module else [])
            if not parts:  # `from . import x` at the top of the package: a module, or the package's own name
                names = [alias.name for alias in node.names]
                parts = [names[0] if (PACKAGE / names[0]).is_dir() or (PACKAGE / f"{names[0]}.py").exists()
                         else "__init__"]
            found.append((node.lineno, parts[0]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "compiler":
                    found.append((node.lineno, alias.name.split(".")[1]))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    unit = _unit(path)
    assert unit in LAYERS, f"{unit} has no layer: add it to LAYERS"
    for line, target in _imports(path):
        assert target in LAYERS, f"{path.name}:{line} imports unknown compiler.{target}"
        if target == unit:
            continue
        assert LAYERS[target] < LAYERS[unit], (
            f"{path.relative_to(PACKAGE)}:{line} imports compiler.{target} (layer {LAYERS[target]}) from "
            f"{unit} (layer {LAYERS[unit]}): a back-arrow")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_400_lines(path):
    rel = str(path.relative_to(PACKAGE))
    if rel in LONG_ALLOWED:
        return
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"{rel} has {lines} lines: split it by responsibility"


def test_no_import_cycle_between_modules():
    graph: dict[str, set[str]] = {}
    names = {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).with_suffix("")
        names[path] = ".".join(rel.parts)
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = names[path].split(".")
        package = here[:-1] if path.name != "__init__.py" else here[:-1]
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
                candidates = [".".join(target + [a.name]) for a in node.names] + [".".join(target)]
                for c in candidates:
                    if c in names.values() or c + ".__init__" in names.values():
                        edges.add(c if c in names.values() else c + ".__init__")
        graph[names[path]] = edges - {names[path]}
    # only top-level (module-scope) imports create cycles at import time; function-level ones are lazy
    seen, stack = set(), []

    def visit(node: str) -> None:
        if node in stack:
            cycle = stack[stack.index(node):] + [node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in seen:
            return
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            visit(nxt)
        stack.pop()
        seen.add(node)

    for node in sorted(graph):
        visit(node)


# The one seam for an import inside a function: its line ends with `# deferred: <why>`, saying
# which runs do not pay for the module (docs/architecture.md, "Deferred imports").
DEFERRED = re.compile(r"#\s*deferred:\s*\S.{8,}")


def _function_imports(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    end = inner.end_lineno or inner.lineno
                    found.append((inner.lineno, " ".join(lines[inner.lineno - 1:end])))
    return sorted(set(found))


def test_function_local_imports_only_at_the_deferred_seam():
    """An import inside a function is the named seam (`# deferred: why` on its line) or a defect:
    everything else is imported at the top of its module."""
    unmarked = []
    for path in _modules():
        for line, text in _function_imports(path):
            if not DEFERRED.search(text):
                unmarked.append(f"compiler/{path.relative_to(PACKAGE)}:{line}: {text.strip()}")
    assert not unmarked, "function-local imports without `# deferred: <why>`:\n" + "\n".join(unmarked)


# The spec is typed end to end: a parameter (or a record field) named `spec` or `view`, or one whose
# annotation names the spec's records (JobSpec, SpecView), is annotated, and never with Any or object,
# so mypy strict checks every field the compiler reads of it. A derived spec is a record built with
# schema/record.py's replace/extend/new, never an attribute proxy (no __getattr__ in the package).
SPEC_NAMES = {"spec", "view"}
SPEC_RECORDS = re.compile(r"\b(JobSpec|SpecView)\b")
UNTYPED = re.compile(r"\b(Any|object)\b")


def _untyped_spec(name: str, annotation: ast.expr | None) -> str | None:
    text = ast.unparse(annotation) if annotation is not None else None
    if name not in SPEC_NAMES and (text is None or not SPEC_RECORDS.search(text)):
        return None
    if text is None:
        return f"{name} (unannotated)"
    return f"{name}: {text}" if UNTYPED.search(text) else None


def spec_typing_defects(source: str, where: str) -> list[str]:
    """Each parameter or class field of source that carries the spec untyped, and each __getattr__."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == "__getattr__":
                found.append(f"{where}:{node.lineno}: __getattr__ (an attribute proxy mypy cannot see through)")
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v is not None]:
                defect = _untyped_spec(arg.arg, arg.annotation)
                if defect is not None:
                    found.append(f"{where}:{node.lineno}: {node.name}({defect})")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    defect = _untyped_spec(item.target.id, item.annotation)
                    if defect is not None:
                        found.append(f"{where}:{item.lineno}: {node.name}.{defect}")
    return found


def test_the_spec_is_typed_end_to_end():
    found = []
    for path in _modules():
        found += spec_typing_defects(path.read_text(encoding="utf-8"), f"compiler/{path.relative_to(PACKAGE)}")
    assert not found, "the spec is untyped here:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "def f(spec): pass", "def f(spec: Any): pass", "def f(*, spec: 'Any | None' = None): pass",
    "def f(x: JobSpec | Any): pass", "def f(view: object): pass",
    "class R(NamedTuple):\n    spec: Any = None", "class O:\n    def __getattr__(self, name: str) -> int: ...",
])
def test_the_spec_typing_check_finds_an_untyped_spec(source):
    assert spec_typing_defects(source, "x.py")


@pytest.mark.parametrize("source", [
    "def f(spec: JobSpec, other: Any): pass", "def f(view: SpecView | JobSpec): pass",
    "class R(NamedTuple):\n    spec: JobSpec | None = None",
])
def test_the_spec_typing_check_passes_a_typed_spec(source):
    assert not spec_typing_defects(source, "x.py")
