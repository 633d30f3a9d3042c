"""What Megatron-LM's `validate_args` refuses, decided offline from a spec's arguments.

The parser accepts flags that validate_args (megatron/training/arguments.py at the pinned commit)
rejects on every rank at start: `--checkpoint-activations` exits, `--weight-decay-incr-style cosine`
without `--start-weight-decay` fails an assert, 126 layers on pipeline 8 fail unless the embedding and
the loss are counted as layers. data/megatron_validate.json holds validate_args' statements as
tools/megatron_validate_args.py read them from the source (asserts, exits and raises under their
`if`s, and the assignments between them); this module runs them on the values the arguments give,
with three-valued logic: a test that reads anything not known here (a value no literal default
gives, a call such as is_te_min_version, an enum) is unknown, and an unknown test refuses nothing.
So a refusal reported here is one Megatron makes whatever the image holds.

The same data holds TransformerConfig.__post_init__ (ModelParallelConfig's first), whose raises stop
the model's construction: each config field is the expression core_transformer_config_from_args gives
it over the arguments validate_args left (`args.F` for the dest of the same name, a rename, or none:
unknown); nothing is judged where another config class may be picked (multi-latent attention).

Stdlib only; the data loads once, lazily.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from ..tuples import NamedTuple
from .argflags import _surface
from .expr import UNKNOWN, evaluator

DATA_FILE = Path(__file__).parent / "data" / "megatron_validate.json"


class Refusal(NamedTuple):
    """validate_args (or TransformerConfig.__post_init__, SOURCE) stops here: its source line, what it
    says, and the dests its test read."""

    line: int
    message: str
    reads: tuple[str, ...]
    source: str = ""  # "" is validate_args' file

    @property
    def where(self) -> str:
        return f"{self.source or _data()['source']}:{self.line}"

    @property
    def in_validate_args(self) -> bool:
        return not self.source


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA_FILE.read_text())
    return data


@functools.lru_cache(maxsize=4096)
def _parse(source: str) -> ast.expr:
    return ast.parse(source.strip(), mode="eval").body


def validate_meta() -> dict[str, Any]:
    """The data file's header: commit, source file, the function's lines."""
    d = _data()
    return {k: d[k] for k in ("megatron_commit", "source", "function_lines", "generated_by")}


def default_of(dest: str) -> Any:
    """Megatron's default for DEST where its source spells it as a literal; UNKNOWN otherwise."""
    return _data()["defaults"].get(dest, UNKNOWN)


# --- the argument values: defaults, then the flags as argparse stores them -------------------------

_CONVERT: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "enum": str}


def arg_values(argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """(dest -> value, dest -> index in argv of the flag that set it) after Megatron's parser, for an
    argument list its parser accepts; a value this module cannot convert is UNKNOWN."""
    values: dict[str, Any] = dict(_data()["defaults"])
    where: dict[str, int] = {}
    flags = _surface(False).flags
    i = 0
    while i < len(argv):
        token = argv[i]
        name, _, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        entry = flags.get(name)
        if entry is None:
            i += 1
            continue
        dest, action, nargs = entry["dest"], entry["action"], entry["nargs"]
        following: list[str] = [inline] if inline else []
        j = i + 1
        if not inline and nargs != 0:
            while j < len(argv) and not (argv[j].startswith("--") and argv[j].split("=", 1)[0] in flags):
                following.append(argv[j])
                j += 1
                if nargs is None or nargs == "?":
                    break
        if action == "store_true":
            value: Any = True
        elif action == "store_false":
            value = False
        elif action == "boolean_optional":
            value = not name.startswith("--no-")
        elif action == "store" and entry.get("type", "str") in _CONVERT or (action == "store" and "type" not in entry):
            convert = _CONVERT.get(entry.get("type", "str"), str)
            try:
                items = [convert(x) for x in following]
            except ValueError:
                items = [UNKNOWN]
            value = items if nargs in ("+", "*") or isinstance(nargs, int) and nargs > 1 else \
                (items[0] if items else UNKNOWN)
        else:
            value = UNKNOWN
        values[dest] = value
        where[dest] = i
        i = j
    return values, where


# --- the interpreter --------------------------------------------------------------------------------

class _State:
    def __init__(self, values: dict[str, Any]) -> None:
        self.args = values
        self.local: dict[str, Any] = {}
        self.lost = False  # something changed args in a way not modelled: stop judging
        self.reads: set[str] = set()
        self.keep_going = False  # record each refusal and go on, as if it had been fixed
        self.found: list[Refusal] = []

    def arg(self, dest: str) -> Any:
        self.reads.add(dest)
        return self.args.get(dest, UNKNOWN)


def _assigned(block: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for st in block:
        if st["kind"] == "assign":
            out.add(st["dest"])
        elif st["kind"] == "unknown":
            out.update(st["dests"])
            if st["any"]:
                out.add("*")
        elif st["kind"] == "if":
            out |= _assigned(st["body"]) | _assigned(st["orelse"])
    return out


def _forget(s: _State, dests: set[str]) -> None:
    if "*" in dests:
        s.lost = True
    for d in dests:
        s.args[d] = UNKNOWN


def _run(block: list[dict[str, Any]], s: _State, guards: frozenset[str] = frozenset()) -> Refusal | None:
    """Run a block of validate_args; the first refusal reached. GUARDS: what the enclosing tests read."""
    for st in block:
        if s.lost:
            return None
        kind = st["kind"]
        if kind == "if":
            s.reads = set()
            test = evaluator(st["test"])(s)
            if test is UNKNOWN:
                _forget(s, _assigned(st["body"]) | _assigned(st["orelse"]))
                s.local.clear()  # locals assigned in either branch are not known either
                continue
            found = _run(st["body"] if test else st["orelse"], s, guards | s.reads)
            if found and not s.keep_going:
                return found
        elif kind == "assert":
            s.reads = set()
            value = evaluator(st["test"])(s)
            if value is not UNKNOWN and not value:
                found = Refusal(st["line"], st["message"] or f"assert {st['test']}", tuple(sorted(s.reads | guards)))
                s.found.append(found)
                if not s.keep_going:
                    return found
        elif kind == "refuse":
            found = Refusal(st["line"], st["message"] or "validate_args stops here", tuple(sorted(guards)))
            s.found.append(found)
            return found  # an exit or a raise ends the block whatever follows
        elif kind == "assign":
            s.args[st["dest"]] = evaluator(st["value"])(s)
        elif kind == "let":
            s.local[st["name"]] = evaluator(st["value"])(s)
        elif kind == "script-defaults":
            for key, value in _data()["script_defaults"].items():
                if s.args.get(key) is None:
                    s.args[key] = value
                elif s.args.get(key) is UNKNOWN:
                    s.args[key] = UNKNOWN
        elif kind == "unknown":
            inputs_default = "*" not in st["reads"] and all(
                s.args.get(d, UNKNOWN) is not UNKNOWN and s.args.get(d) == default_of(d) for d in st["reads"])
            _forget(s, set(st["dests"]) | ({"*"} if st["any"] and not inputs_default else set()))
    return None


def refusals(values: dict[str, Any], world_size: int, limit: int = 8) -> list[Refusal]:
    """What validate_args refuses for these argument values (arg_values), in order: the first, then
    what it would refuse next were that one fixed; empty when nothing can be decided offline."""
    if values.get("use_checkpoint_args") or values.get("yaml_cfg") is not None:
        return []  # the values come from a checkpoint or a YAML file, not from these arguments
    state = _State(dict(values, rank=0, world_size=world_size))
    state.keep_going = True
    _run(_data()["program"], state)
    if not state.lost:
        state.found += _config_refusals(state)
    return state.found[:limit]


def _config_refusals(after: _State) -> list[Refusal]:
    """What TransformerConfig.__post_init__ (ModelParallelConfig's first) refuses for the config that
    core_transformer_config_from_args builds from the arguments as validate_args left them: each field's
    value is its expression over args, UNKNOWN where the data has none; nothing is judged where another
    config class may be picked. Reads are reported as the dests the fields come from."""
    config = _data()["config"]
    if any(evaluator(test)(after) is not False for test in config["applies_when"]):
        return []
    fields: dict[str, Any] = {f: UNKNOWN if expr is None else evaluator(expr)(after)
                              for f, expr in config["fields"].items()}
    state = _State(fields)
    state.keep_going = True
    for part in config["programs"]:
        found_before = len(state.found)
        _run(part["program"], state)
        state.found[found_before:] = [r._replace(source=part["source"]) for r in state.found[found_before:]]
        if state.lost:
            break

    def dests(field: str) -> tuple[str, ...]:
        expr = config["fields"].get(field)
        return dests_read(expr) if expr else ()
    return [r._replace(reads=tuple(sorted({d for f in r.reads for d in dests(f)}))) for r in state.found]


# --- for the doctor: a refusal seen in a log, back to its statement ----------------------------------


def _statements(block: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for st in block:
        if st["kind"] in ("assert", "refuse"):
            out.append(st)
        elif st["kind"] == "if":
            out += [dict(x, guard=x.get("guard", ()) + (st["test"],)) for x in _statements(st["body"])]
            out += [dict(x, guard=x.get("guard", ()) + (f"not ({st['test']})",)) for x in _statements(st["orelse"])]
    return out


@functools.lru_cache(maxsize=1)
def refusal_statements() -> tuple[dict[str, Any], ...]:
    """Every assert, exit and raise of validate_args, each with the tests that guard it."""
    return tuple(_statements(_data()["program"]))


def dests_read(*sources: str) -> tuple[str, ...]:
    """The args.X that expressions read, in order of first appearance."""
    seen: dict[str, None] = {}
    for source in sources:
        for node in ast.walk(_parse(source)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
                seen.setdefault(node.attr)
    return tuple(seen)
