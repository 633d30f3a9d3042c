#!/usr/bin/env python3
"""Write what Megatron-LM's `validate_args` refuses, as a JSON data file the compiler interprets.

    python tools/megatron_validate_args.py /work/ext/megatron-lm \
        -o compiler/megatron/data/megatron_validate.json

Megatron's parser (argsurface.py) accepts flags that `validate_args` (megatron/training/arguments.py)
then rejects at start on every rank: `--checkpoint-activations` exits, `--weight-decay-incr-style
cosine` without `--start-weight-decay` fails an assert. This tool reads validate_args with `ast` (no
import, no torch) and writes its statements in a small form that compiler/megatron/validate.py runs
on a spec's argument values:

- `if` (the test as source text, both branches), `assert` (test and message), `refuse` (an `exit()`,
  `sys.exit()` or `raise` reached under its tests, with the message printed or raised beside it),
  `assign` (`args.X = <expression>`), `unknown` (any other statement: the dests it may change become
  unknown, so nothing after it is judged on a guess);
- `defaults`: each flag's default where the source spells it as a literal (arguments.py's
  `add_argument(default=...)`, and the dataclass fields behind ArgumentGroupFactory's flags); a dest
  with no literal default is left out, and every check that reads it is skipped.

Deterministic (sorted keys, no timestamps); tests/test_validate_args.py regenerates it from a checkout
when one is present and compares.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

PINNED_COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
ARGS_FILE = "megatron/training/arguments.py"
# Where ArgumentGroupFactory's dataclasses live (arguments.py imports them from these).
DATACLASS_FILES = ("megatron/training/config", "megatron/core/transformer/transformer_config.py",
                   "megatron/core/model_parallel_config.py", "megatron/training/models",
                   "megatron/training/resilience")
_MISSING = object()


def _literal(node: ast.AST | None) -> Any:
    """A literal's value, or _MISSING (enum members and calls are not literals)."""
    if node is None:
        return _MISSING
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return _MISSING
    return list(value) if isinstance(value, tuple) else value


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _argparse_defaults(tree: ast.Module) -> dict[str, Any]:
    """dest -> default of every add_argument call whose default is a literal (or implied by its action)."""
    out: dict[str, Any] = {}
    conflicts: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest_node = _kw(node, "dest")
        dest = dest_node.value if isinstance(dest_node, ast.Constant) else None
        if dest is None:
            long = [n for n in names if n.startswith("--")] or names
            if not long:
                continue
            dest = long[0].lstrip("-").replace("-", "_")
        action = _kw(node, "action")
        action_name = action.value if isinstance(action, ast.Constant) else None
        default = _literal(_kw(node, "default"))
        if default is _MISSING:
            if _kw(node, "default") is not None:
                conflicts.add(dest)
                continue
            default = {"store_true": False, "store_false": True}.get(action_name or "", None)
        if dest in out and out[dest] != default:
            conflicts.add(dest)
        out[dest] = default
    return {k: v for k, v in out.items() if k not in conflicts}


def _dataclass_defaults(root: Path, factory_classes: dict[str, frozenset[str] | None] | None = None) -> dict[str, Any]:
    """field name -> default of the dataclass fields behind ArgumentGroupFactory (literal ones only). A
    field of a class arguments.py hands to ArgumentGroupFactory is that flag's default: it wins over a
    field of the same name in another class (MLATransformerConfig's multi_latent_attention = True)."""
    if factory_classes:
        behind = _dataclass_defaults(root)  # every class, conflicts dropped
        own = _dataclass_defaults_of(root, lambda name: factory_classes.get(name) is not None)
        excluded = {f for ex in factory_classes.values() for f in ex or ()}
        return dict(sorted({**behind, **{k: v for k, v in own.items() if k not in excluded}}.items()))
    return _dataclass_defaults_of(root, lambda name: True)


def _factory_classes(tree: ast.Module) -> dict[str, frozenset[str] | None]:
    """The classes arguments.py builds flags from (`ArgumentGroupFactory(X, exclude=...)`) -> the fields
    they exclude (None where the exclude list is not a literal here: that class wins nothing)."""
    lists = {t.id: _literal(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    out: dict[str, frozenset[str] | None] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "ArgumentGroupFactory" and n.args \
                and isinstance(n.args[0], ast.Name):
            ex = _kw(n, "exclude")
            value = [] if ex is None else lists.get(ex.id, _MISSING) if isinstance(ex, ast.Name) else _literal(ex)
            out[n.args[0].id] = frozenset(value) if isinstance(value, list) and n.args[0].id not in out else None
    return out


def _dataclass_defaults_of(root: Path, wanted: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    conflicts: set[str] = set()
    files: list[Path] = []
    for rel in DATACLASS_FILES:
        p = root / rel
        files += sorted(p.rglob("*.py")) if p.is_dir() else ([p] if p.exists() else [])
    for path in files:
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef) or not wanted(cls.name):
                continue
            for stmt in cls.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                value = stmt.value
                default: Any = _literal(value)
                if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
                    default = _literal(_kw(value, "default"))
                    meta = _kw(value, "metadata")
                    if isinstance(meta, ast.Dict):
                        for k, v in zip(meta.keys, meta.values):
                            if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                                for mk, mv in zip(v.keys, v.values):
                                    if isinstance(mk, ast.Constant) and mk.value == "default":
                                        default = _literal(mv)
                name = stmt.target.id
                if value is None:
                    continue
                if default is _MISSING or (name in out and out[name] != default):
                    conflicts.add(name)
                    continue
                out[name] = default
    return {k: v for k, v in out.items() if k not in conflicts}


def _src(node: ast.AST, lines: list[str]) -> str:
    return ast.unparse(node)  # one line, parseable on its own (source segments keep inner indentation)


def _assigned(stmt: ast.stmt) -> list[str]:
    """The args.X a statement may assign or delete (anywhere inside it)."""
    dests = set()
    for node in ast.walk(stmt):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("setattr", "delattr"):
            dests.add("*")  # setattr(args, key, ...): any dest
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "args":
                    dests.add(sub.attr)
    return sorted(dests)


def _message(node: ast.AST | None) -> str | None:
    """A message's text: a string literal, an f-string's literal parts, or a concatenation of them."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values if isinstance(v, (ast.Constant, ast.FormattedValue)))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return (left or "") + (right or "") if left or right else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _message(node.func.value)
    return None


def _is_exit(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) in ("exit", "sys.exit", "quit"))


def _printed(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args and \
            ast.unparse(stmt.value.func) in ("print", "print_rank_0", "warn_rank_0"):
        return _message(stmt.value.args[0])
    return None


def _locals(stmt: ast.stmt) -> list[str]:
    """Local names a statement binds (targets, loop variables, with-as, except-as)."""
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return sorted(names)


def _passes_args(stmt: ast.stmt) -> list[ast.Call]:
    """The calls in a statement that hand `args` itself to a function (which may change it)."""
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
            and ast.unparse(n.func) not in ("getattr", "hasattr", "isinstance", "vars", "print", "print_rank_0")
            and (any(isinstance(a, ast.Name) and a.id == "args" for a in n.args)
                 or isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "args")]


def _reads(node: ast.AST) -> list[str]:
    """The args.X a statement or function reads."""
    return sorted({n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                   and n.value.id == "args" and isinstance(n.ctx, ast.Load)})


def _effects(stmt: ast.stmt, calls: list[ast.Call]) -> dict[str, Any]:
    """What a statement may change on args: the dests it (or a function of this module it calls) assigns
    by name; `any` when it may set a dest named at run time (setattr), or calls a function of another
    module with args; `reads`: the dests those functions read (their inputs)."""
    dests, reads, anything = set(_assigned(stmt)), set(_reads(stmt)), False
    for call in calls:
        fn = FUNCTIONS.get(ast.unparse(call.func))
        if fn is None:
            anything = True
            reads.add("*")  # a function nothing here can read: its effect is unknown whatever its inputs
            continue
        named = _assigned(fn)
        anything = anything or "*" in named
        dests.update(d for d in named if d != "*")
        reads.update(_reads(fn))
    anything = anything or "*" in dests
    return {"dests": sorted(dests - {"*"}), "any": anything, "reads": sorted(reads)}


def _is_defaults_loop(stmt: ast.stmt) -> bool:
    """validate_args' `for key in defaults: ... setattr(args, key, defaults[key])`: the script's defaults."""
    return isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Name) and stmt.iter.id == "defaults"


FUNCTIONS: dict[str, ast.FunctionDef] = {}


def _block(body: list[ast.stmt], lines: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    last_print: str | None = None
    for stmt in body:
        printed = _printed(stmt)
        if printed is not None:
            last_print = printed
            continue
        if _is_defaults_loop(stmt):
            out.append({"kind": "script-defaults", "line": stmt.lineno})
        elif _passes_args(stmt) and not isinstance(stmt, (ast.If, ast.Assert)):
            out.append({"kind": "unknown", "line": stmt.lineno, **_effects(stmt, _passes_args(stmt))})
        elif isinstance(stmt, ast.If):
            out.append({"kind": "if", "line": stmt.lineno, "test": _src(stmt.test, lines),
                        "body": _block(stmt.body, lines), "orelse": _block(stmt.orelse, lines)})
        elif isinstance(stmt, ast.Assert):
            out.append({"kind": "assert", "line": stmt.lineno, "test": _src(stmt.test, lines),
                        "message": _message(stmt.msg)})
        elif _is_exit(stmt):
            out.append({"kind": "refuse", "line": stmt.lineno, "message": last_print})
        elif isinstance(stmt, ast.Raise):
            exc = stmt.exc
            msg = _message(exc.args[0]) if isinstance(exc, ast.Call) and exc.args else None
            out.append({"kind": "refuse", "line": stmt.lineno, "message": msg})
            break  # nothing after a raise in this block runs
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute)
              and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == "args"):
            out.append({"kind": "assign", "line": stmt.lineno, "dest": stmt.targets[0].attr,
                        "value": _src(stmt.value, lines)})
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out.append({"kind": "let", "line": stmt.lineno, "name": stmt.targets[0].id, "value": _src(stmt.value, lines)})
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            value = ast.unparse(ast.BinOp(ast.Name(stmt.target.id), stmt.op, stmt.value))
            out.append({"kind": "let", "line": stmt.lineno, "name": stmt.target.id, "value": value})
        elif isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom)) or (
                isinstance(stmt, ast.Expr) and not _assigned(stmt)):
            continue  # calls that print or warn, docstrings: no effect on args that is modelled
        else:
            if _assigned(stmt):
                out.append({"kind": "unknown", "line": stmt.lineno, **_effects(stmt, [])})
            # local names this statement binds in ways not modelled (loops, unpacking): unknown from here
            for name in _locals(stmt):
                out.append({"kind": "let", "line": stmt.lineno, "name": name, "value": "__unknown__"})
    return out


def _module_path(root: Path, module: str) -> Path | None:
    base = root / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _find_function(root: Path, module: str, name: str, depth: int = 0) -> ast.FunctionDef | None:
    """NAME as defined in MODULE, following its re-exports (`from .x import NAME`) a few levels."""
    path = _module_path(root, module)
    if path is None or depth > 3:
        return None
    tree = ast.parse(path.read_text())
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return n
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and any(a.name == name for a in n.names):
            parts = package.split(".")
            source = ".".join(parts[:len(parts) - (n.level - 1)] if n.level > 1 else parts) if n.level else ""
            target = (source + "." + n.module if n.module else source) if n.level else (n.module or "")
            found = _find_function(root, target, name, depth + 1)
            if found is not None:
                return found
    return None


def _imported_functions(root: Path, tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Functions arguments.py imports from Megatron's own modules (`from megatron.x import f`)."""
    out: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megatron")):
            continue
        for alias in node.names:
            fn = _find_function(root, node.module, alias.name)
            if fn is not None:
                out[alias.asname or alias.name] = fn
    return out


def _script_defaults(root: Path) -> dict[str, Any]:
    """pretrain_gpt.py's args_defaults (validate_args sets each that the arguments leave None)."""
    for node in ast.walk(ast.parse((root / "pretrain_gpt.py").read_text())):
        if isinstance(node, ast.keyword) and node.arg == "args_defaults":
            value = _literal(node.value)
            return value if isinstance(value, dict) else {}
    return {}


def extract(root: Path) -> dict[str, Any]:
    """The data file's content from a Megatron-LM checkout at ROOT."""
    text = (root / ARGS_FILE).read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "validate_args")
    FUNCTIONS.clear()
    FUNCTIONS.update(_imported_functions(root, tree))
    FUNCTIONS.update({n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)})
    defaults = _dataclass_defaults(root, _factory_classes(tree))
    defaults.update(_argparse_defaults(tree))
    return {
        "format": 1, "megatron_commit": PINNED_COMMIT, "source": ARGS_FILE,
        "generated_by": "tools/megatron_validate_args.py (ast of validate_args; no import)",
        "function_lines": [fn.lineno, fn.end_lineno],
        "defaults": dict(sorted(defaults.items())),
        "script_defaults": _script_defaults(root),
        "program": _block(fn.body, lines),
        "config": extract_config(root),
    }


# --- TransformerConfig.__post_init__ (and ModelParallelConfig's, which it calls first) ------------------

CONFIG_BUILDER = ("megatron/training/argument_utils.py", "core_transformer_config_from_args")
CONFIG_CLASSES = (("megatron/core/model_parallel_config.py", "ModelParallelConfig"),
                  ("megatron/core/transformer/transformer_config.py", "TransformerConfig"))


class _SelfIsArgs(ast.NodeTransformer):
    """`self.F` -> `args.F`: the interpreter reads a config field as it reads a dest."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name("args", node.ctx), node) if node.id == "self" else node


def _is_super_post_init(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and ast.unparse(stmt) == "super().__post_init__()"


def _class(root: Path, rel: str, name: str) -> ast.ClassDef:
    return next(n for n in ast.parse((root / rel).read_text()).body if isinstance(n, ast.ClassDef) and n.name == name)


def _config_fields(root: Path) -> dict[str, str | None]:
    """Each field of TransformerConfig (its own and ModelParallelConfig's) -> the expression over args
    core_transformer_config_from_args gives it (`args.F` where it copies the dest of the same name), or
    None where that is not one expression (set under an `if`, popped, or read from elsewhere)."""
    names = sorted({s.target.id for rel, cls in CONFIG_CLASSES for s in _class(root, rel, cls).body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)})
    tree = ast.parse((root / CONFIG_BUILDER[0]).read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == CONFIG_BUILDER[1])
    top: dict[str, str | None] = {}
    nested: set[str] = set()
    for stmt in fn.body:
        for node in ast.walk(stmt):
            key: str | None = None
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "kw_args" \
                    and isinstance(node.ctx, ast.Store) and isinstance(node.slice, ast.Constant):
                key = str(node.slice.value)
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "kw_args.pop" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                key = str(node.args[0].value)
            if key is None:
                continue
            simple = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node
            if simple and isinstance(stmt, ast.Assign):
                top[key] = ast.unparse(stmt.value)
            else:
                nested.add(key)
    return {f: None if f in nested else top.get(f, f"args.{f}") for f in names}


def _config_applies_when(root: Path) -> list[str]:
    """The tests under which core_transformer_config_from_args picks another config class (with its own
    __post_init__ and field defaults): the checks here are judged only where each is known false."""
    tree = ast.parse((root / CONFIG_BUILDER[0]).read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == CONFIG_BUILDER[1])
    return [ast.unparse(s.test) for s in fn.body if isinstance(s, ast.If)
            and any(isinstance(t, ast.Name) and t.id == "config_class" for b in s.body for t in ast.walk(b))]


def extract_config(root: Path) -> dict[str, Any]:
    """ModelParallelConfig.__post_init__ then TransformerConfig.__post_init__ (which calls it first), as
    programs over the config's fields (`args.F` in the program is the field F)."""
    programs = []
    for i, (rel, name) in enumerate(CONFIG_CLASSES):
        cls = _class(root, rel, name)
        fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if i:  # the subclass must call its parent's first, or running the two in order would be a guess
            if not body or not _is_super_post_init(body[0]):
                raise SystemExit(f"{rel}: {name}.__post_init__ does not start with super().__post_init__()")
            body = body[1:]
        FUNCTIONS.clear()
        FUNCTIONS.update({f"args.{m.name}": _SelfIsArgs().visit(m) for m in cls.body if isinstance(m, ast.FunctionDef)})
        renamed = [_SelfIsArgs().visit(s) for s in body]
        program = json.loads(json.dumps(_block(renamed, [])).replace("{args.", "{self."))  # messages as written
        programs.append({"source": rel, "class": name, "function_lines": [fn.lineno, fn.end_lineno],
                         "program": program})
    return {"builder": f"{CONFIG_BUILDER[0]}:{CONFIG_BUILDER[1]}", "applies_when": _config_applies_when(root),
            "fields": _config_fields(root), "programs": programs}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("megatron_lm", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    args.output.write_text(render(extract(args.megatron_lm)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
