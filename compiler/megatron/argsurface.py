"""Check raw Megatron-LM arguments (training.args) against the pinned commit's parser, offline.

The data file data/megatron_args.json is written by tools/megatron_argsurface.py from Megatron's own
`argparse` parser (megatron/training/arguments.py:127-136: `ArgumentParser(description='Megatron-LM
Arguments', allow_abbrev=False)` plus `add_megatron_arguments`). This module replays what Python 3.11's
argparse does with that parser on a list of strings (classification of each token as option, value or
`--`; nargs matching; `=` values; type conversion; choices), so a flag Megatron would reject is reported
at compile time instead of after the job has its GPUs. Stdlib only; the data loads once, lazily.

tests/test_argsurface.py checks this against a corpus of argument lists that Megatron's real parser
accepted or rejected (tests/fixtures/argsurface/corpus.json).

argflags.py holds the data and the lookups of one flag, argissues.py the issues' codes and messages;
their public names are importable from here too.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Sequence

from ..tuples import NamedTuple
from .argflags import (
    _NEGATIVE_NUMBER, DATA_FILE, FlagInfo, RemovedFlag, _Surface, _surface, flag_info, known_flag, removed_flag,
    surface_meta,
)
from .argissues import (
    ARITY, CODES, HELP, REMOVED, REMOVED_HINTS, UNKNOWN, VALUE, WHERE, ArgIssue, _choice_issue, _count_issue,
    _double_dash_issue, _flag_name, _is_number, _missing_issue, _stray_issue, _switch_equals_issue, _type_issue,
    _unknown_issue,
)

__all__ = ["ARITY", "CODES", "DATA_FILE", "HELP", "REMOVED", "REMOVED_HINTS", "UNKNOWN", "VALUE", "WHERE",
           "ArgIssue", "FlagInfo", "RemovedFlag", "check_args", "flag_info", "known_flag", "removed_flag",
           "surface_meta"]

# megatron/training/arguments.py:254-263 (_eval_pattern): the only characters a layer pattern may use.
_PATTERN_CHARS = re.compile(r"[^,\d\[\]\(\)\+\*]")
_PATTERN_LIMIT = 10_000_000  # elements; a larger pattern would exhaust memory in Megatron too


# ---------------------------------------------------------------------------------------------------
# value conversion: the converters argparse calls, reproduced


def _convert(kind: str, text: str) -> tuple[bool, Any]:
    """(accepted, value) for one value string under a value type from the data file."""
    try:
        if kind in ("str", "enum"):
            return True, text
        if kind == "int":
            return True, int(text)
        if kind == "float":
            return True, float(text)
        if kind == "bool":
            return True, bool(text)  # type=bool: any string converts, and every non-empty one is True
        if kind == "int_or_pattern":
            return True, _layer_pattern(text)
        if kind == "int_tuple":
            # megatron/training/arguments.py:387-396 (tuple_type)
            return True, tuple(int(i) for i in text.strip("()").split(","))
    except (ValueError, TypeError, SyntaxError, IndexError, OverflowError, MemoryError, RecursionError):
        return False, None
    raise ValueError(f"unknown value type {kind!r} in {DATA_FILE.name}")


def _layer_pattern(text: str) -> Any:
    """megatron/training/arguments.py:337-360 (moe_freq_type and its twins): an int, or an eval'd pattern."""
    if "[" not in text:
        return int(text)
    if _PATTERN_CHARS.search(text):
        raise ValueError(f"Invalid pattern: {text}")
    # Megatron eval()s the pattern; here a small interpreter of the same expression grammar does it.
    return _eval_node(ast.parse(text, mode="eval").body)


def _eval_node(node: ast.AST) -> Any:
    """Evaluate the subset of Python the pattern characters can spell, as eval() would."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                items.extend(_eval_node(elt.value))
            else:
                items.append(_eval_node(elt))
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return +_eval_node(node.operand)
    if isinstance(node, ast.BinOp):
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Mult):
            size = _seq_size(left, right)
            if size > _PATTERN_LIMIT:
                raise MemoryError("pattern too large")
            return left * right
        if isinstance(node.op, ast.Pow):
            if not (type(left) is int and type(right) is int) or right > 4096:
                raise OverflowError("power too large") if type(right) is int else TypeError("power")
            return left ** right
    if isinstance(node, ast.Subscript):
        return _eval_node(node.value)[_eval_node(node.slice)]
    if isinstance(node, ast.Call):
        raise TypeError("object is not callable")  # ints, lists and tuples are never callable
    raise SyntaxError(f"unsupported pattern element {type(node).__name__}")


def _seq_size(left: Any, right: Any) -> int:
    """Length a sequence repetition would have (0 for int * int)."""
    if isinstance(left, (list, tuple)) and type(right) is int:
        return len(left) * right
    if isinstance(right, (list, tuple)) and type(left) is int:
        return len(right) * left
    return 0


# ---------------------------------------------------------------------------------------------------
# the parse: argparse's _parse_known_args for a parser with only optionals, no abbreviations


class _Option(NamedTuple):
    option: str | None  # the known option string, None for an unknown flag
    explicit: str | None  # the text after '=' (or after a short option's letter)


def _classify(token: str, flags: dict[str, dict[str, Any]]) -> _Option | None:
    """argparse's _parse_optional: an option (known or not) or None for a value token."""
    if not token or token[0] != "-":
        return None
    if token in flags:
        return _Option(token, None)
    if len(token) == 1:
        return None
    if "=" in token:
        option, explicit = token.split("=", 1)
        if option in flags:
            return _Option(option, explicit)
    if token[1] != "-":
        # allow_abbrev=False leaves only the short-option prefix match (-hX is -h with X after it)
        matches = [_Option(o, token[2:]) for o in flags if o == token[:2]]
        matches += [_Option(o, None) for o in flags if o != token[:2] and o.startswith(token)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            return _Option(None, None)  # argparse: "ambiguous option" error
    if _NEGATIVE_NUMBER.match(token):
        return None
    if " " in token:
        return None
    return _Option(None, None)


def check_args(args: Sequence[str], *, modelopt: bool = False) -> list[ArgIssue]:
    """Every problem Megatron's parser would stop on, in argument order (empty: it accepts the list).

    modelopt: the image has nvidia-modelopt, so pretrain_gpt.py passes add_modelopt_args as Megatron's
    extra_args_provider (pretrain_gpt.py:65-71, :396) and its flags (megatron/post_training/arguments.py)
    are accepted too.
    """
    surface = _surface(modelopt)
    flags = surface.flags
    tokens = list(args)
    kinds: list[str] = []
    options: dict[int, _Option] = {}
    for i, token in enumerate(tokens):
        if token == "--":
            kinds += ["-"] + ["A"] * (len(tokens) - i - 1)
            break
        option = _classify(token, flags)
        kinds.append("A" if option is None else "O")
        if option is not None:
            options[i] = option
    issues: list[ArgIssue] = []
    i = 0
    previous: tuple[int, str] | None = None  # the last flag consumed, for stray-value hints
    while i < len(tokens):
        if kinds[i] == "-":
            issues.append(_double_dash_issue(i, len(tokens) - i - 1))
            break
        if kinds[i] == "A" and tokens[i].startswith("--") and " " in tokens[i]:
            # argparse takes a token with a space for a value, but "--flag=a b" is a flag to the user
            known = _flag_name(tokens[i]) in flags
            issues.append(_stray_issue(i, tokens[i], previous, flags) if known
                          else _unknown_issue(i, tokens[i], surface))
            i += 1
            continue
        if kinds[i] == "A":
            issues.append(_stray_issue(i, tokens[i], previous, flags))
            i += 1
            continue
        stop, found = _consume(i, tokens, kinds, options[i], surface)
        issues += found
        name = options[i].option
        previous = (i, name) if name is not None else None
        i = stop
    return issues


def _consume(i: int, tokens: list[str], kinds: list[str], opt: _Option,
             surface: _Surface) -> tuple[int, list[ArgIssue]]:
    """argparse's consume_optional: (index after the option and its values, issues found)."""
    flags = surface.flags
    if opt.option is None:
        stop = i + 1
        while stop < len(tokens) and kinds[stop] == "A":
            stop += 1  # argparse would reject these as unrecognized too; they belong to the bad flag
        return stop, [_unknown_issue(i, tokens[i], surface)]
    option, explicit = opt.option, opt.explicit
    taken: list[str] = []
    while explicit is not None:
        entry = flags[option]
        if entry["nargs"] == 0 and option[1] != "-" and explicit != "":
            # a short switch with letters after it: argparse reads the next letter as another short flag
            taken.append(option)
            nxt = "-" + explicit[0]
            if nxt not in flags:
                return i + 1, [_unknown_issue(i, tokens[i], surface)]
            option, explicit = nxt, explicit[1:] or None
            continue
        if entry["nargs"] == 0:
            return i + 1, [_switch_equals_issue(i, option, tokens[i])]
        if isinstance(entry["nargs"], int) and entry["nargs"] != 1:
            return i + 1, [_count_issue(i, option, entry["nargs"], 1, tokens[i])]
        taken.append(option)
        return i + 1, _help_issues(i, taken, flags) + _value_issues(i, option, [explicit], flags, [i])
    taken.append(option)
    entry = flags[option]
    following = 0
    while i + 1 + following < len(tokens) and kinds[i + 1 + following] == "A":
        following += 1
    nargs = entry["nargs"]
    need = {None: 1, "+": 1}.get(nargs, nargs if isinstance(nargs, int) else 0)
    if following < need:
        stop = i + 1 + following  # too few values: they are this issue's, not strays
        if following == 0 and stop < len(tokens) and kinds[stop] == "O" and _is_number(tokens[stop]):
            stop += 1  # `--lr -1e5`: the number argparse took for a flag is this issue's, not a second one
        return stop, _help_issues(i, taken[:-1], flags) + [_missing_issue(i, option, entry, tokens)]
    count = {None: 1, "?": min(following, 1), "*": following, "+": following}.get(nargs, nargs)
    values = tokens[i + 1:i + 1 + count]
    indices = list(range(i + 1, i + 1 + count))
    return i + 1 + count, _help_issues(i, taken, flags) + _value_issues(i, option, values, flags, indices)


def _help_issues(i: int, taken: list[str], flags: dict[str, dict[str, Any]]) -> list[ArgIssue]:
    """An issue if a help action is among the options taken at index i."""
    for option in taken:
        if flags[option]["action"] == "help":
            # At the pinned commit printing the help even crashes: the help of
            # --moe-paged-stash-buffer-size-factor-cuda (megatron/core/transformer/transformer_config.py:1150)
            # holds a bare '%', and argparse's help formatter raises ValueError on it.
            return [ArgIssue(i, HELP, f"{WHERE}: {option} makes Megatron's parser print its help and exit "
                             "instead of training (at the pinned commit formatting the help even fails)",
                             "delete it")]
    return []


def _value_issues(i: int, option: str, values: list[str], flags: dict[str, dict[str, Any]],
                  indices: list[int]) -> list[ArgIssue]:
    """argparse's _get_values and _check_value on the strings one option took."""
    entry = flags[option]
    kind = entry.get("type")
    if kind is None:
        return []
    if "--" in values:
        # argparse drops the first '--' from an option's strings (only reachable as --flag=--)
        j = values.index("--")
        values, indices = values[:j] + values[j + 1:], indices[:j] + indices[j + 1:]
    issues = []
    choices = entry.get("choices")
    for index, text in zip(indices, values):
        ok, value = _convert(kind, text)
        if not ok:
            issues.append(_type_issue(index, option, kind, text, entry))
        elif choices is not None and value not in choices:
            issues.append(_choice_issue(index, option, text, choices))
    return issues
