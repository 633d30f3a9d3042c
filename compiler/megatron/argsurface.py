"""Check raw Megatron-LM arguments (training.args) against the pinned commit's parser, offline.

The data file data/megatron_args.json is written by tools/megatron_argsurface.py from Megatron's own
`argparse` parser (megatron/training/arguments.py:127-136: `ArgumentParser(description='Megatron-LM
Arguments', allow_abbrev=False)` plus `add_megatron_arguments`). This module replays what Python 3.11's
argparse does with that parser on a list of strings (classification of each token as option, value or
`--`; nargs matching; `=` values; type conversion; choices), so a flag Megatron would reject is reported
at compile time instead of after the job has its GPUs. Stdlib only; the data loads once, lazily.

tests/test_argsurface.py checks this against a corpus of argument lists that Megatron's real parser
accepted or rejected (tests/fixtures/argsurface/corpus.json).
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any, NamedTuple, Sequence

DATA_FILE = Path(__file__).with_name("data") / "megatron_args.json"
WHERE = "training.args"

UNKNOWN = "megatron-unknown-flag"
REMOVED = "megatron-removed-flag"
VALUE = "megatron-flag-value"
ARITY = "megatron-flag-arity"
HELP = "megatron-help-flag"

CODES: dict[str, str] = {
    UNKNOWN: "a flag Megatron-LM's parser does not know at the pinned commit",
    REMOVED: "a flag an older Megatron-LM release had and the pinned commit rejects",
    VALUE: "a flag value Megatron-LM's parser rejects (type or choices)",
    ARITY: "a flag given the wrong number of values, or a value no flag takes",
    HELP: "-h/--help, which makes Megatron print its help and exit instead of training",
}

# Why a removed flag went and what to do instead, where the history says more than "delete it".
# Each cites the Megatron-LM commit that removed it.
REMOVED_HINTS: dict[str, str] = {
    "--data-impl": "delete it: Megatron now detects the dataset format itself (the mmap indexed "
                   "dataset is the only one; removed in 34ac1ad05e)",
    "--no-query-key-layer-scaling": "delete it: query-key layer scaling is now off unless "
                                    "--apply-query-key-layer-scaling is given (removed in 94a3749f87)",
    "--no-async-tensor-model-parallel-allreduce": "delete it: Megatron ignored it for years (its help read "
                                                  "'DEPRECATED. This flag is ignored.'; removed in 639c08ab82)",
}

# argparse's own rule (Python 3.11 argparse.py, ArgumentParser.__init__): a token matching this is a
# value, not an option, because no Megatron option string looks like a negative number.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# megatron/training/arguments.py:254-263 (_eval_pattern): the only characters a layer pattern may use.
_PATTERN_CHARS = re.compile(r"[^,\d\[\]\(\)\+\*]")
_PATTERN_LIMIT = 10_000_000  # elements; a larger pattern would exhaust memory in Megatron too


class ArgIssue(NamedTuple):
    index: int  # type: ignore[assignment]  # index into args of the offending token (shadows tuple.index)
    code: str
    message: str
    hint: str | None


class FlagInfo(NamedTuple):
    """One option string of the pinned parser."""

    name: str
    dest: str
    action: str  # store, store_true, store_false, boolean_optional, help, ...
    nargs: int | str | None  # None (one value), '?', '*', '+', or a count (0 for switches)
    type: str | None  # str, int, float, bool, enum, int_or_pattern, int_tuple; None for switches
    choices: tuple[Any, ...] | None
    aliases: tuple[str, ...]
    hidden: bool  # help=argparse.SUPPRESS
    deprecated: str | None  # Megatron's own words, from the help text or dest
    src: str  # megatron/training/arguments.py:LINE, or ArgumentGroupFactory


class RemovedFlag(NamedTuple):
    """A flag some release had and the pinned commit lacks."""

    name: str
    first: str  # first release tag scanned that had it
    last: str  # last release tag that had it
    src: str  # its add_argument line at that tag
    dest: str | None
    help: str | None


class _Surface(NamedTuple):
    meta: dict[str, Any]
    flags: dict[str, dict[str, Any]]  # the option strings this parse knows
    removed: dict[str, dict[str, Any]]
    by_normal: dict[str, str]  # dashes-for-underscores spelling -> option string
    absent: dict[str, dict[str, Any]]  # flags Megatron adds only when a package imports: why they are missing


@functools.lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    """The data file, read once."""
    doc: dict[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return doc


@functools.lru_cache(maxsize=2)
def _surface(modelopt: bool = False) -> _Surface:
    """The parser's view: Megatron's own flags, plus add_modelopt_args's when modelopt is installed."""
    doc = _document()
    extra = doc.get("modelopt", {})
    flags = {**doc["flags"], **extra} if modelopt else doc["flags"]
    absent = {name: entry for name, entry in doc.get("conditional", {}).items()}
    if not modelopt:
        absent.update({name: {"src": entry["src"], "when": doc["modelopt_when"]} for name, entry in extra.items()})
    by_normal = {_normal(name): name for name in sorted(flags)}
    meta = {k: v for k, v in doc.items() if k not in ("flags", "removed", "modelopt", "conditional")}
    return _Surface(meta, flags, doc.get("removed", {}), by_normal, absent)


def _normal(flag: str) -> str:
    """--tensor_model_parallel_size -> --tensor-model-parallel-size (the old underscore spellings)."""
    return "--" + flag.lstrip("-").replace("_", "-") if flag.startswith("--") else flag


def surface_meta() -> dict[str, Any]:
    """Commit, generator and Python version the data file records."""
    return dict(_surface().meta)


def known_flag(name: str, *, modelopt: bool = False) -> bool:
    """Whether the pinned parser has this exact option string (modelopt: with add_modelopt_args's flags)."""
    return name in _surface(modelopt).flags


def flag_info(name: str, *, modelopt: bool = False) -> FlagInfo | None:
    """What the pinned parser knows about one option string (None if it has no such flag)."""
    entry = _surface(modelopt).flags.get(name)
    if entry is None:
        return None
    choices = entry.get("choices")
    return FlagInfo(name, entry["dest"], entry["action"], entry["nargs"], entry.get("type"),
                    tuple(choices) if choices is not None else None, tuple(entry.get("aliases", ())),
                    bool(entry.get("hidden")), entry.get("deprecated"), entry["src"])


def removed_flag(name: str) -> RemovedFlag | None:
    """The release history of a flag the pinned commit no longer has (None if never seen)."""
    entry = _surface().removed.get(name)
    if entry is None:
        return None
    return RemovedFlag(name, entry["first"], entry["last"], entry["src"], entry.get("dest"), entry.get("help"))


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


# ---------------------------------------------------------------------------------------------------
# messages: what is wrong, and how to fix it


_TYPE_WORDS = {"int": "an integer", "float": "a number", "int_or_pattern": "an integer or a layer "
               "pattern such as ([1]*3+[0]*1)*3", "int_tuple": "comma-separated integers such as 128,0"}


def _is_number(token: str) -> bool:
    """Whether a token reads as a number (argparse may still classify it as an option)."""
    try:
        float(token)
    except ValueError:
        return False
    return True


def _flag_name(token: str) -> str:
    """The flag a token names: --flag=value -> --flag."""
    return token.split("=", 1)[0] if token.startswith("--") else token


def _unknown_issue(i: int, token: str, surface: _Surface) -> ArgIssue:
    """An unknown or removed flag, with a did-you-mean."""
    name = _flag_name(token)
    removed = surface.removed.get(name)
    if removed is not None:
        return ArgIssue(i, REMOVED, f"{WHERE}: {name} was removed from Megatron-LM after {removed['last']}; "
                        "the pinned commit rejects it", _removed_hint(name, removed, surface))
    head = name.split(" ", 1)[0]
    if " " in name and head in surface.flags:
        return ArgIssue(i, UNKNOWN, f"{WHERE}: {name!r} is one item holding a flag and its value; Megatron "
                        "gets it as one word and rejects it", f"split it into two items: {head!r}, "
                        f"{name.split(' ', 1)[1]!r}")
    if name in surface.absent:
        absent = surface.absent[name]
        return ArgIssue(i, UNKNOWN, f"{WHERE}: {name} exists only when {absent['when']}; without that "
                        "Megatron's parser rejects it", f"delete it, or install what it needs ({absent['src']})")
    normal = surface.by_normal.get(_normal(name))
    if normal is not None and normal != name:
        return ArgIssue(i, UNKNOWN, f"{WHERE}: {name} is not a Megatron-LM flag: Megatron spells it {normal}",
                        f"did you mean {normal}? Megatron's flags use dashes, not underscores")
    close = difflib.get_close_matches(_normal(name), list(surface.by_normal), n=3, cutoff=0.8)
    suggestions = [surface.by_normal[c] for c in close]
    hint = (f"did you mean {' or '.join(suggestions)}?" if suggestions
            else "check the spelling against megatron/training/arguments.py at the pinned commit")
    what = "is not a flag of" if name.startswith("-") and not _NEGATIVE_NUMBER.match(name) else "is not known to"
    return ArgIssue(i, UNKNOWN, f"{WHERE}: {name} {what} Megatron-LM at the pinned commit "
                    f"{surface.meta['megatron_commit'][:10]}; its parser rejects it", hint)


def _removed_hint(name: str, removed: dict[str, Any], surface: _Surface) -> str:
    """How to replace a removed flag: curated, or the current flag for the same setting."""
    if name in REMOVED_HINTS:
        return REMOVED_HINTS[name]
    normal = surface.by_normal.get(_normal(name))
    if normal is not None:
        return f"use {normal}: Megatron's flags use dashes now"
    dest = removed.get("dest")
    same = sorted(n for n, e in surface.flags.items() if dest and e["dest"] == dest)
    if same:
        return (f"delete it; the setting it controlled ({dest}) is now {' / '.join(same)}; check that "
                "flag's meaning before swapping one for the other")
    return f"delete it: the pinned Megatron-LM has no such option (last seen in {removed['src']})"


def _switch_equals_issue(i: int, option: str, token: str) -> ArgIssue:
    """--switch=value: argparse's 'ignored explicit argument'."""
    return ArgIssue(i, ARITY, f"{WHERE}: {option} is a switch and takes no value, so {token!r} is rejected",
                    f"write {option} alone to turn it on, or leave it out to keep Megatron's default")


def _count_issue(i: int, option: str, want: int, got: int, token: str) -> ArgIssue:
    """A fixed-count flag given another count."""
    return ArgIssue(i, ARITY, f"{WHERE}: {option} takes exactly {want} values, got {got} in {token!r}",
                    f"write {option} followed by {want} separate values")


def _missing_issue(i: int, option: str, entry: dict[str, Any], tokens: list[str]) -> ArgIssue:
    """A value-taking flag with no (or too few) values after it."""
    nargs = entry["nargs"]
    want = {None: "a value", "+": "at least one value"}.get(nargs, f"{nargs} values")
    if isinstance(nargs, int) and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
        return ArgIssue(i, ARITY, f"{WHERE}: {option} needs {want}, fewer follow it",
                        f"give {option} exactly {nargs} values")
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and nxt.startswith("-") and nxt != "--" and not nxt.startswith("--"):
        hint = f"argparse reads {nxt} as a flag, not a value; write {option}={nxt}"
    elif nxt is not None:
        hint = f"give {option} {want} before {nxt}, or delete {option}"
    else:
        hint = f"give {option} {want}, or delete it"
    return ArgIssue(i, ARITY, f"{WHERE}: {option} needs {want}", hint)


def _type_issue(index: int, option: str, kind: str, text: str, entry: dict[str, Any]) -> ArgIssue:
    """A value the flag's type function rejects."""
    if kind == "enum":
        return _choice_issue(index, option, text, entry["choices"])
    return ArgIssue(index, VALUE, f"{WHERE}: {option} expects {_TYPE_WORDS.get(kind, kind)}, got {text!r}",
                    f"write {option} with {_TYPE_WORDS.get(kind, kind)}")


def _choice_issue(index: int, option: str, text: str, choices: Sequence[Any]) -> ArgIssue:
    """A value outside the flag's choices."""
    shown = ", ".join(str(c) for c in choices[:12]) + (f", ... ({len(choices)} in all)" if len(choices) > 12 else "")
    close = difflib.get_close_matches(text, [str(c) for c in choices], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"use one of: {shown}"
    return ArgIssue(index, VALUE, f"{WHERE}: {option} must be one of {shown} (got {text!r})", hint)


def _stray_issue(i: int, token: str, previous: tuple[int, str] | None,
                 flags: dict[str, dict[str, Any]]) -> ArgIssue:
    """A value token no option takes (Megatron has no positional arguments)."""
    if previous is not None:
        option = previous[1]
        entry = flags[option]
        if entry["nargs"] == 0:
            state = "on" if entry["action"] != "store_false" else "off"
            return ArgIssue(i, ARITY, f"{WHERE}: {option} is a switch and takes no value; {token!r} after it "
                            "is left over and Megatron rejects it",
                            f"delete {token!r}: {option} alone turns the setting {state}")
        if entry["nargs"] is None or isinstance(entry["nargs"], int):
            return ArgIssue(i, ARITY, f"{WHERE}: {option} takes one value at a time; {token!r} is left over "
                            "and Megatron rejects it",
                            "delete it, or, if it belongs to the value before it, join them into one item")
    return ArgIssue(i, ARITY, f"{WHERE}: {token!r} is not a flag and no flag before it takes it; Megatron "
                    "takes no positional arguments", "delete it, or put the flag it belongs to before it")


def _double_dash_issue(i: int, after: int) -> ArgIssue:
    """'--' ends option parsing; Megatron has no positionals to give what follows."""
    rest = f" and the {after} item(s) after it" if after else ""
    return ArgIssue(i, ARITY, f"{WHERE}: '--' ends Megatron's options; it{rest} are left over and Megatron "
                    "rejects them", "delete '--'")
