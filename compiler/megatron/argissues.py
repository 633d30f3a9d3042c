"""The issues the argument checker reports: their codes, and each message with how to fix it.

argsurface.py decides which token is wrong and why; this module words it, with a did-you-mean from
the pinned parser's flags (argflags.py).
"""

from __future__ import annotations

import difflib
from typing import Any, Sequence

from ..tuples import NamedTuple
from .argflags import _NEGATIVE_NUMBER, _normal, _Surface

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


class ArgIssue(NamedTuple):
    index: int  # type: ignore[assignment]  # index into args of the offending token (shadows tuple.index)
    code: str
    message: str
    hint: str | None


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
