"""Reading a lock file through the spec loader: the same positioned YAML (source.load_text: duplicate
keys, tags, aliases and control characters refused as in a spec), then every field checked, every
problem collected: a damaged lock is reported whole, each problem at its line and column."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from .files import SPEC_LIMIT
from .inputs import read_bytes
from .lockfile import (
    _CONTROL, _DIGEST, _PLATFORM, _REFERENCE, _TIME, BASE_FIELDS, BUILT_FIELDS, BUILT_FROM_FIELDS, LOCK_VERSION,
    TOP_FIELDS, BaseEntry, BuiltEntry, Lock, LockError, LockProblem, Position,
)
from .source import SourceDoc, decode, is_identifier, load_text

REGENERATE = "delete the file and run `megatron-compile lock SPEC` to write it anew"


class _Reader:
    def __init__(self, doc: SourceDoc) -> None:
        self.doc = doc
        self.problems: list[LockProblem] = []
        self.positions: dict[str, Position] = {}

    def at(self, path: tuple[str, ...], key: bool = False) -> Position:
        loc = (self.doc.keys if key else self.doc.values).get(path) or self.doc.value_location(path)
        return (loc.span.line, loc.span.column) if loc is not None else (1, 1)

    def fail(self, path: tuple[str, ...], message: str, hint: str = REGENERATE, key: bool = False) -> None:
        line, column = self.at(path, key)
        self.problems.append(LockProblem(line, column, message, hint))

    def mapping(self, path: tuple[str, ...], value: Any, what: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"{what} must be a mapping")
            return {}
        out = {}
        for key, item in value.items():
            dotted = ".".join(path + (key,))
            if key not in allowed:
                # never echo a key that is not a word: a lock that is a link to another file must not
                # print that file's lines into a CI log
                shown = f"{dotted}: unknown key" if is_identifier(key) else "a key that is not a lock field"
                self.fail(path + (key,), f"{shown} in {what}", f"the keys of {what} are {', '.join(allowed)}", key=True)
                continue
            self.positions[dotted] = self.at(path + (key,), key=True)
            out[key] = item
        return out

    def string(self, path: tuple[str, ...], value: Any) -> str | None:
        key = ".".join(path)
        if not isinstance(value, str) or not value:
            self.fail(path, f"{key} must be a non-empty string")
            return None
        if _CONTROL.search(value):
            self.fail(path, f"{key} contains a control character")
            return None
        name = path[-1]
        problem = None
        if name.endswith("digest") and not _DIGEST.fullmatch(value):
            problem = f"{key} ({value}) is not a sha256 digest (sha256: and 64 lowercase hex digits)"
        elif name.endswith("_at"):
            if not _TIME.fullmatch(value):
                problem = f"{key} ({value}) is not a UTC time like 2026-12-01T09:30:00Z"
            else:
                try:
                    _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
                except ValueError:
                    problem = f"{key} ({value}) is not a valid date and time"
        elif name == "reference" and not _REFERENCE.fullmatch(value):
            problem = f"{key} ({value}) is not an image reference: it has a space, quote or backslash"
        elif name == "platform" and not _PLATFORM.fullmatch(value):
            problem = f"{key} ({value}) is not a platform like linux/amd64"
        if problem:
            self.fail(path, problem)
            return None
        return value

    def entry(self, section: str, value: Any, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, str] | None:
        fields = self.mapping((section,), value, section, names + optional)
        if not isinstance(value, dict):
            return None
        missing = [name for name in names if name not in fields]
        if missing:
            self.fail((section,), f"{section}: missing {', '.join(missing)}", key=True)
        out = {name: self.string((section, name), fields[name]) for name in fields}
        if missing or any(v is None for v in out.values()):
            return None
        return {k: v for k, v in out.items() if v is not None}


def parse_lock(text: str, path: str = "<lock>") -> Lock:
    """A lock's text -> Lock; LockError carrying every problem found (syntax, a missing, unknown or
    repeated key, a wrong type, a malformed digest or time, an unsupported version), each located."""
    doc, diags = load_text(path, text)
    if doc is None or diags:
        problems = [LockProblem(d.line or 1, d.column or 1, d.message if d.code != "yaml-syntax" else
                                f"not valid YAML: {d.message}", d.hint or REGENERATE) for d in diags]
        if doc is None and any(d.code == "yaml-empty" for d in diags):
            problems = [LockProblem(1, 1, "the lock file is empty", REGENERATE)]
        elif doc is None and any(d.code == "yaml-not-mapping" for d in diags):
            problems = [LockProblem(1, 1, "the lock must be a mapping", REGENERATE)]
        raise LockError(path, problems)
    reader = _Reader(doc)
    top = reader.mapping((), doc.data, "the lock", TOP_FIELDS)
    version = top.get("version")
    if "version" not in top:
        reader.fail((), "missing version")
    elif not isinstance(version, int) or isinstance(version, bool):
        reader.fail(("version",), "version must be an integer")
    elif version != LOCK_VERSION:
        reader.fail(("version",), f"lock version {version} is not supported (this megatron-compile reads {LOCK_VERSION})",
                    "regenerate it with this megatron-compile: `megatron-compile lock --update SPEC`")
    if "base" not in top:
        reader.fail((), "missing base")
    base = reader.entry("base", top["base"], BASE_FIELDS) if "base" in top else None
    built = reader.entry("built", top["built"], BUILT_FIELDS, BUILT_FROM_FIELDS) if "built" in top else None
    if reader.problems or base is None:
        raise LockError(path, reader.problems)
    built_entry = None
    if built is not None:
        built_entry = BuiltEntry(**{name: built.get(name, "") for name in BUILT_FIELDS + BUILT_FROM_FIELDS})
    return Lock(base=BaseEntry(**base), built=built_entry, version=LOCK_VERSION, path=path, positions=reader.positions)


def read_lock(path: str | Path) -> Lock | None:
    """The lock at `path`, None when there is none; LockError when it cannot be read (a directory, a
    FIFO or a device included: files.read_regular refuses them without blocking)."""
    try:
        data = read_bytes(str(path), SPEC_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockError(str(path), [LockProblem(1, 1, f"cannot read the lock: {exc.strerror or exc}",
                                                "the lock is a file written by `megatron-compile lock`")]) from None
    text, diags = decode(str(path), data)
    if text is None:
        raise LockError(str(path), [LockProblem(d.line or 1, d.column or 1, d.message, REGENERATE) for d in diags])
    return parse_lock(text, str(path))

