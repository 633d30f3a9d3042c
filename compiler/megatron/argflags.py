"""The pinned Megatron-LM parser's flags, offline: data/megatron_args.json read once, lazily, and what
it says about one option string (known, its action, nargs, type and choices; or its release history
if the pinned commit removed it).

tools/megatron_argsurface.py writes the data file from Megatron's own `argparse` parser
(megatron/training/arguments.py:127-136); argsurface.py replays that parser on argument lists.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from ..tuples import NamedTuple

DATA_FILE = Path(__file__).with_name("data") / "megatron_args.json"

# argparse's own rule (Python 3.11 argparse.py, ArgumentParser.__init__): a token matching this is a
# value, not an option, because no Megatron option string looks like a negative number.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


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

