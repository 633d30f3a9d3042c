"""Compose stage: a spec, the base specs it `extends`, and `--set` overrides -> one SourceDoc.

`extends: base.yaml` (relative to the spec, or a list of them) deep-merges mappings, later wins,
lists are replaced whole; the spec itself wins over its bases. Every value keeps the location of the
file (or the --set) it came from, so a diagnostic points where the offending value was written,
through any number of levels.
"""

from __future__ import annotations

import os
import posixpath
import re
import typing
from typing import Any, Callable


from ..diagnostics import Diagnostic, Span, make_error
from . import inputs
from ..text import first_bad_byte, is_utf8, printable
from .discover import leaves, trusted_root
from .override import Override
from .source import Location, ScalarSpelling, SourceDoc, load_file, load_value

EXTENDS = "extends"
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # https://, s3://, git+ssh://: not a path
MAX_EXTENDS_DEPTH = 16


class Composed:
    """What composing a spec gave: the document (None on errors), diagnostics, and the bases used."""

    __slots__ = ("doc", "diagnostics", "bases", "root", "resolved")

    def __init__(self, doc: SourceDoc | None, root: str = "/") -> None:
        self.doc = doc
        self.root = root  # the repository (or the spec's directory): a linked base must stay inside
        self.diagnostics: list[Diagnostic] = []
        self.bases: list[str] = []  # real paths of every base file used
        # each base composed once per spec (its real path -> the composed base, None on errors): a diamond of
        # extends (two bases extending one) would otherwise compose the shared one once per path to it,
        # exponentially many times in the depth
        self.resolved: dict[str, SourceDoc | None] = {}


_bases: dict[tuple[str, str], tuple[object, SourceDoc | None, list[Diagnostic]]] = {}


def _load_base(path: str, display: str) -> tuple[SourceDoc | None, list[Diagnostic]]:
    """load_file of a base, parsed once per process while its content is the same (many specs of a
    batch extend the same base). Keyed by the name diagnostics print too: a file that failed to
    load must not report under another name."""
    real = os.path.realpath(path)
    mtime = inputs.stamp(real)
    if mtime is None:
        return load_file(path, display)
    hit = _bases.get((real, display))
    if hit is not None and hit[0] == mtime:
        return hit[1], hit[2]
    doc, diags = load_file(path, display)
    _bases[(real, display)] = (mtime, doc, diags)
    return doc, diags


def _has(data: Any, path: tuple[str | int, ...]) -> bool:
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return False
    return True


def _paths(data: Any, prefix: tuple[str | int, ...] = ()) -> typing.Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, prefix + (index,))


def deep_merge(base: Any, top: Any) -> Any:
    """Mappings merge key by key (top wins); anything else, lists included, is replaced by top."""
    if isinstance(base, dict) and isinstance(top, dict):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = deep_merge(base[key], value) if key in base else value
        return merged
    return top


def _merge_docs(base: SourceDoc, top: SourceDoc) -> SourceDoc:
    data = deep_merge(base.data, top.data)
    values, keys, spellings = {}, {}, {}
    for path in _paths(data):
        source = top if _has(top.data, path) else base
        if path in source.values:
            values[path] = source.values[path]
        if path in source.keys:
            keys[path] = source.keys[path]
        if path in source.spellings:
            spellings[path] = source.spellings[path]
    return SourceDoc(file=top.file, text=top.text, data=data, values=values, keys=keys, spellings=spellings)


def _error_at(doc: SourceDoc, path: tuple[str | int, ...], code: str, message: str, hint: str | None = None) -> Diagnostic:
    loc = doc.value_location(path)
    where: dict[str, Any] = {"file": doc.file}
    if loc is not None:
        where = {"file": loc.file, "line": loc.span.line, "column": loc.span.column}
    return make_error(code, message, hint=hint, key_path=path, **where)


def _refusal(entry: str, base_path: str, base_display: str, real: str, display: str, stack: tuple[str, ...],
             root: str) -> tuple[str, str, str | None] | None:
    """Why a base that `extends` names is not read, as (code, message, hint); None when it is read."""
    if URL.match(entry):
        return ("extends-not-spec", f"extends: {entry} is a URL; a base is a spec file in the repository, never "
                "fetched", "copy the base into the repository and name its path, e.g. extends: base.yaml")
    if real in stack:
        return ("extends-cycle", f"extends cycle: {display} -> {base_display}, which is already being extended",
                "a base must not extend, directly or not, a spec that extends it")
    if not base_path.lower().endswith((".yaml", ".yml")):
        # checked before the file is opened: a diagnostic quotes the lines it points at, and a base
        # that is not a spec (../../etc/shadow) must not be read, nor its existence told
        return ("extends-not-spec", f"extends: {base_display} is not a spec file (.yaml or .yml); it was not read",
                "a base is another job spec, e.g. extends: base.yaml")
    if leaves(base_path, root):
        return ("link-outside-repository", f"extends: {base_display} is a symbolic link to a file outside the "
                "repository; it was not read", "copy the base into the repository, or link to a file inside it")
    if not inputs.is_file(base_path):
        return ("extends-missing", f"extends: {base_display} does not exist",
                "paths in extends are relative to the spec that names them")
    if len(stack) >= MAX_EXTENDS_DEPTH:
        return ("extends-cycle", f"extends nests deeper than {MAX_EXTENDS_DEPTH} levels", None)
    return None


def _resolve(path: str, display: str, stack: tuple[str, ...], out: Composed) -> SourceDoc | None:
    # Bases are remembered (many specs extend one); the job spec itself is read once and dropped, so
    # a batch of a thousand specs does not keep a thousand documents (docs/performance.md).
    doc, diags = _load_base(path, display) if len(stack) > 1 else load_file(path, display)
    out.diagnostics.extend(diags)
    if doc is None:
        return None
    if EXTENDS not in doc.data:
        return doc
    raw = doc.data[EXTENDS]
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list) or not all(isinstance(e, str) and e for e in entries):
        out.diagnostics.append(_error_at(doc, (EXTENDS,), "type", "extends: expected a path or a list of paths",
                                         hint="extends: base.yaml"))
        return None
    own = SourceDoc(file=doc.file, text=doc.text, data={k: v for k, v in doc.data.items() if k != EXTENDS},
                    values=doc.values, keys=doc.keys, spellings=doc.spellings)
    merged: SourceDoc | None = None
    ok = True
    for index, entry in enumerate(entries):
        where = (EXTENDS,) if isinstance(raw, str) else (EXTENDS, index)
        if printable(entry) != entry:  # a NUL or a newline: no file is named so, and os.path refuses the NUL
            out.diagnostics.append(_error_at(doc, where, "extends-not-spec", f"extends: {printable(entry)!r} holds a "
                                             "control character; it was not read", "extends: base.yaml"))
            ok = False
            continue
        base_path = os.path.normpath(os.path.join(os.path.dirname(path), entry))
        base_display = posixpath.normpath(posixpath.join(posixpath.dirname(display), entry))
        real = os.path.realpath(base_path)
        refused = _refusal(entry, base_path, base_display, real, display, stack, out.root)
        if refused is not None:
            code, message, hint = refused
            out.diagnostics.append(_error_at(doc, where, code, message, hint))
            ok = False
            continue
        out.bases.append(real)
        if real not in out.resolved:
            out.resolved[real] = _resolve(base_path, base_display, stack + (real,), out)
        base = out.resolved[real]
        if base is None:
            ok = False
            continue
        merged = base if merged is None else _merge_docs(merged, base)
    if not ok:
        return None
    return own if merged is None else _merge_docs(merged, own)


def _no_strings(path: tuple[str | int, ...]) -> bool:
    return False


def apply_override(doc: SourceDoc, override: Override,
                   expects_string: Callable[[tuple[str | int, ...]], bool] = _no_strings) -> tuple[SourceDoc | None, list[Diagnostic]]:
    """Set one dotted key to a value typed like the spec (`expects_string(path)`: the field takes a
    string, so a commit of 40 digits or a tag like 3.10 stays text); errors name the --set."""
    key, sep, text = override.raw.partition("=")
    origin = override.origin
    value_column = len("--set ") + len(key) + 2

    def error(message: str, column: int = 7, hint: str | None = None) -> list[Diagnostic]:
        return [make_error("set-value", message, hint=hint, file=origin, line=1, column=column)]

    if not is_utf8(override.raw):
        return None, error(f"--set {override.shown}: the command line holds a byte that is not UTF-8, which a spec "
                           "value cannot hold", 7 + first_bad_byte(override.raw),
                           hint="write the key and the value in UTF-8 (check the shell's locale and quoting)")
    parts = tuple(key.split(".")) if key else ()
    if not sep or not parts or not all(parts):
        return None, error(f"--set takes KEY=VALUE with a dotted key, got {override.raw!r}",
                           hint="--set parallelism.tensor=4")
    indexed = next((p for p in parts if "[" in p or "]" in p), None)
    if indexed is not None:
        listed = ".".join(parts[: parts.index(indexed)] + (indexed.split("[", 1)[0],))
        return None, error(f"--set {key}: a list item cannot be set by its index; --set replaces {listed} whole",
                           hint=f"--set {listed}='[...]' with every item")
    current: Any = doc.data
    for depth, part in enumerate(parts[:-1]):
        current = current.get(part) if isinstance(current, dict) else None
        if current is None or isinstance(current, dict):
            continue
        listed = ".".join(parts[: depth + 1])
        if isinstance(current, list):
            return None, error(f"--set {key}: {listed} is a list, which --set replaces whole (it has no keys)",
                               hint=f"--set {listed}='[...]' with every item, e.g. --set training.args='[\"--foo\", \"1\"]'")
        return None, error(f"--set {key}: {listed} is a single value ({type(current).__name__}), it has no keys",
                           hint=f"--set {listed}=VALUE")
    if expects_string(parts):
        value: Any = text
    else:
        # the spec loader's rules and limits (tags, aliases, nesting, integers), not yaml.safe_load's
        value, problems = load_value(origin, text)
        errors = [d for d in problems if d.is_error]
        if errors:
            return None, error(f"the value of --set {key} is not a spec value: {errors[0].message}", value_column,
                               errors[0].hint)
    data = deep_merge(doc.data, _nest(parts, value))
    span = Span(1, value_column, 1, value_column + len(text))
    values = {p: loc for p, loc in doc.values.items() if p[: len(parts)] != parts}
    keys = dict(doc.keys)
    for sub in _paths(value, parts):
        values[sub] = Location(origin, span)
    for depth in range(1, len(parts) + 1):
        keys.setdefault(parts[:depth], Location(origin, Span(1, 7, 1, 7 + len(key))))
        values.setdefault(parts[:depth], Location(origin, span))
    spellings = {p: s for p, s in doc.spellings.items() if p[: len(parts)] != parts}
    if not isinstance(value, (str, dict, list)) and value is not None:
        spellings[parts] = ScalarSpelling(text, plain=True)
    return SourceDoc(file=doc.file, text=doc.text, data=data, values=values, keys=keys, spellings=spellings), []


def _nest(parts: tuple[str | int, ...], value: Any) -> dict[str | int, Any]:
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}


def compose(path: str, display: str, overrides: tuple[Override, ...] = (),
            expects_string: Callable[[tuple[str | int, ...]], bool] = _no_strings) -> Composed:
    """Load a spec with its bases and overrides into one SourceDoc, or the diagnostics why not."""
    out = Composed(doc=None, root=trusted_root(path))
    doc = _resolve(path, display, (os.path.realpath(path),), out)
    if doc is None:
        return out
    for override in overrides:
        doc, diags = apply_override(doc, override, expects_string)
        out.diagnostics.extend(diags)
        if doc is None:
            return out
    out.doc = doc
    return out
