"""The lock file beside a spec (`specs/NAME.lock`): the image digests a compile pins, reviewable like
a package lock.

One stable byte form, written only by `megatron-compile lock`: two comment lines, then YAML whose
keys are sorted at every level and whose strings are all double-quoted (JSON string syntax, which
YAML reads the same), so `dump_lock(parse_lock(text)) == text` for every file this module wrote.

    base:
      digest: "sha256:…"           # the platform's manifest digest of `reference`
      platform: "linux/amd64"
      reference: "nvcr.io/nvidia/pytorch:25.03-py3"
      resolved_at: "2026-12-01T09:30:00Z"
      resolved_with: "skopeo 1.9.3"
    built:                         # optional: recorded after buildx.sh or regctl.sh pushed it
      digest: "sha256:…"
      recorded_at: "…"
      recorded_with: "skopeo 1.9.3"
      reference: "registry/namespace/repository:tag"
    version: 1

`resolved_at` and `recorded_at` are the only time-dependent fields. Parsing keeps the line and
column of every key, so a damaged lock, or one that no longer matches its spec, is reported at
`file:line:col`. Imports only the standard library and PyYAML; no network.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import yaml

from .discover import LOCK_SUFFIX
from .inputs import read_bytes
from .discover import lock_path as discovered_lock_path

LOCK_VERSION = 1
DEFAULT_PLATFORM = "linux/amd64"  # the spec schema's default for image.platform

HEADER = (
    "# megatron-compile lock file: the image digests its spec compiles against. Review changes like a\n"
    "# package lock. Written by `megatron-compile lock` (--update re-resolves); do not edit by hand.\n"
)

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_PLATFORM = re.compile(r"[a-z0-9]+/[a-z0-9_]+(?:/v[0-9]+)?")
# Control characters can end a line of a generated artifact; a reference never has a space or quote.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_REFERENCE = re.compile(r"[^\s\"'\\]+")

BASE_FIELDS = ("digest", "platform", "reference", "resolved_at", "resolved_with")
BUILT_FIELDS = ("digest", "recorded_at", "recorded_with", "reference")
TOP_FIELDS = ("base", "built", "version")


@dataclass(frozen=True)
class BaseEntry:
    """The base image resolved for one platform."""

    reference: str
    platform: str
    digest: str
    resolved_at: str
    resolved_with: str


@dataclass(frozen=True)
class BuiltEntry:
    """The image buildx.sh or regctl.sh pushed, as recorded afterwards (its digest cannot be predicted)."""

    reference: str
    digest: str
    recorded_at: str
    recorded_with: str


Position = tuple[int, int]  # 1-based line and column


@dataclass(frozen=True)
class Lock:
    """A parsed (or new) lock; `positions` maps "base.digest" and the like to where each key was read."""

    base: BaseEntry
    built: BuiltEntry | None = None
    version: int = LOCK_VERSION
    path: str | None = field(default=None, compare=False)
    positions: Mapping[str, Position] = field(default_factory=dict, compare=False)

    def position(self, key: str) -> Position:
        """Where `key` (or the nearest enclosing key read) was in the file; (1, 1) for a new lock."""
        while key:
            if key in self.positions:
                return self.positions[key]
            key = key.rpartition(".")[0]
        return (1, 1)

    def where(self, key: str) -> str:
        """`path:line` of a key, for messages that name the lock."""
        return f"{self.path or '<lock>'}:{self.position(key)[0]}"


class LockError(Exception):
    """A lock file that cannot be read, at the line and column of the first problem."""

    def __init__(self, path: str, line: int, column: int, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.path, self.line, self.column, self.message, self.hint = path, line, column, message, hint

    def __str__(self) -> str:
        text = f"{self.path}:{self.line}:{self.column}: error: {self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class Problem(NamedTuple):
    """A mismatch between a lock and its spec's image section: the spec field, the lock key and where it is."""

    field: str  # the spec's field, e.g. "image.platform": the lead locates it in the spec
    message: str
    hint: str
    lock_key: str  # e.g. "base.platform"
    line: int  # of lock_key in the lock
    column: int


def lock_path(spec_path: str | Path) -> Path:
    """specs/NAME.yaml -> specs/NAME.lock (load/discover.py's, as a Path)."""
    return Path(discovered_lock_path(spec_path))


def utc_now(epoch: float | None = None) -> str:
    """UTC time at second precision as `YYYY-MM-DDTHH:MM:SSZ` (of `epoch` when given)."""
    moment = _dt.datetime.now(_dt.timezone.utc) if epoch is None else _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- writing ------------------------------------------------------------------------------------


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=True)


def _section(name: str, values: Mapping[str, str]) -> str:
    lines = [f"{name}:\n"]
    lines += [f"  {key}: {_quoted(values[key])}\n" for key in sorted(values)]
    return "".join(lines)


def dump_lock(lock: Lock) -> str:
    """The one byte form of a lock: header comment, keys sorted, strings double-quoted, LF endings."""
    parts = [HEADER, _section("base", _entry_dict(lock.base))]
    if lock.built is not None:
        parts.append(_section("built", _entry_dict(lock.built)))
    parts.append(f"version: {lock.version}\n")
    return "".join(parts)


def _entry_dict(entry: BaseEntry | BuiltEntry) -> dict[str, str]:
    return dict(vars(entry))


def write_lock(lock: Lock, path: str | Path) -> bool:
    """Write the lock unless the file already holds these bytes; True when it wrote."""
    text = dump_lock(lock)
    target = Path(path)
    try:
        if target.read_bytes() == text.encode("utf-8"):
            return False
    except FileNotFoundError:
        pass
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(text.encode("utf-8"))
    tmp.replace(target)  # never a half-written lock in the work tree
    return True


# -- reading ------------------------------------------------------------------------------------


def read_lock(path: str | Path) -> Lock | None:
    """The lock at `path`, None when there is none; LockError when it cannot be read."""
    try:
        data = read_bytes(str(path))
    except FileNotFoundError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockError(str(path), 1, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})", _REGENERATE) from None
    return parse_lock(text, str(path))


_REGENERATE = "delete the file and run `megatron-compile lock SPEC` to write it anew"


def _pos(node: yaml.Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _fail(path: str, node: yaml.Node | None, message: str, hint: str = _REGENERATE) -> LockError:
    line, column = _pos(node) if node is not None else (1, 1)
    return LockError(path, line, column, message, hint)


def _mapping(path: str, node: yaml.Node, what: str, allowed: tuple[str, ...],
             positions: dict[str, Position], prefix: str) -> dict[str, yaml.Node]:
    """The keys of a mapping node, each recorded in `positions`; unknown and repeated keys fail."""
    if not isinstance(node, yaml.MappingNode):
        raise _fail(path, node, f"{what} must be a mapping")
    values: dict[str, yaml.Node] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in allowed:
            raise _fail(path, key_node, f"{prefix}{key}: unknown key in {what}" if key else f"{what}: keys must be words",
                        f"the keys of {what} are {', '.join(allowed)}")
        if key in values:
            raise _fail(path, key_node, f"{prefix}{key} appears twice")
        values[key] = value_node
        positions[prefix + key] = _pos(key_node)
    return values


_TEXT_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp")  # an unquoted time reads as a timestamp


def _string(path: str, node: yaml.Node, key: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or node.tag not in _TEXT_TAGS or not node.value:
        raise _fail(path, node, f"{key} must be a non-empty string")
    if _CONTROL.search(node.value):
        raise _fail(path, node, f"{key} contains a control character")
    result: str = node.value
    return result


def _check_value(path: str, node: yaml.Node, key: str, value: str) -> None:
    name = key.rpartition(".")[2]
    if name == "digest" and not _DIGEST.fullmatch(value):
        raise _fail(path, node, f"{key} ({value}) is not a sha256 digest (sha256: and 64 lowercase hex digits)")
    if name.endswith("_at"):
        if not _TIME.fullmatch(value):
            raise _fail(path, node, f"{key} ({value}) is not a UTC time like 2026-12-01T09:30:00Z")
        try:
            _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise _fail(path, node, f"{key} ({value}) is not a valid date and time") from None
    if name == "reference" and not _REFERENCE.fullmatch(value):
        raise _fail(path, node, f"{key} ({value}) is not an image reference: it has a space, quote or backslash")
    if name == "platform" and not _PLATFORM.fullmatch(value):
        raise _fail(path, node, f"{key} ({value}) is not a platform like linux/amd64")


def _entry(path: str, node: yaml.Node, section: str, names: tuple[str, ...],
           positions: dict[str, Position]) -> dict[str, str]:
    values = _mapping(path, node, section, names, positions, section + ".")
    missing = [name for name in names if name not in values]
    if missing:
        line, column = positions[section]
        raise LockError(path, line, column, f"{section}: missing {', '.join(missing)}", _REGENERATE)
    out = {}
    for name in names:
        key = f"{section}.{name}"
        out[name] = _string(path, values[name], key)
        _check_value(path, values[name], key, out[name])
    return out


def parse_lock(text: str, path: str = "<lock>") -> Lock:
    """Parse a lock's text; LockError (located) on a syntax error, a missing, unknown or repeated key,
    a wrong type, a malformed digest or time, or an unsupported version."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise LockError(path, line, column, f"not valid YAML: {exc.problem or exc.context}", _REGENERATE) from None
    except yaml.YAMLError as exc:
        raise LockError(path, 1, 1, f"not valid YAML: {exc}", _REGENERATE) from None
    if root is None:
        raise LockError(path, 1, 1, "the lock file is empty", _REGENERATE)
    positions: dict[str, Position] = {}
    top = _mapping(path, root, "the lock", TOP_FIELDS, positions, "")
    version_node = top.get("version")
    if version_node is None:
        raise _fail(path, root, "missing version")
    if not isinstance(version_node, yaml.ScalarNode) or version_node.tag != "tag:yaml.org,2002:int":
        raise _fail(path, version_node, "version must be an integer")
    version = int(version_node.value)
    if version != LOCK_VERSION:
        raise _fail(path, version_node, f"lock version {version} is not supported (this megatron-compile reads {LOCK_VERSION})",
                    "regenerate it with this megatron-compile: `megatron-compile lock --update SPEC`")
    if "base" not in top:
        raise _fail(path, root, "missing base")
    base = BaseEntry(**_entry(path, top["base"], "base", BASE_FIELDS, positions))
    built = None
    if "built" in top:
        built = BuiltEntry(**_entry(path, top["built"], "built", BUILT_FIELDS, positions))
    return Lock(base=base, built=built, version=version, path=path, positions=positions)


# -- the lock against its spec --------------------------------------------------------------------


def built_reference(image: Mapping[str, Any]) -> str:
    """registry/namespace/repository:tag: the image the spec's build pushes."""
    return f"{image['registry']}/{image['namespace']}/{image['repository']}:{image['tag']}"


def _split_built(reference: str) -> dict[str, str] | None:
    """registry/namespace/repository:tag -> its four parts (repository may hold '/'); None if not that shape."""
    head, _, tag = reference.rpartition(":")
    parts = head.split("/")
    if not tag or "/" in tag or len(parts) < 3:
        return None
    return {"registry": parts[0], "namespace": parts[1], "repository": "/".join(parts[2:]), "tag": tag}


def _problem(lock: Lock, spec_field: str, lock_key: str, message: str, hint: str) -> Problem:
    line, column = lock.position(lock_key)
    return Problem(spec_field, message, hint, lock_key, line, column)


def check_lock(lock: Lock, image: Mapping[str, Any], spec: str = "SPEC") -> list[Problem]:
    """What no longer matches between a lock and the spec's image section (base, platform, and the
    built reference's registry/namespace/repository/tag); empty when the lock fits the spec."""
    update = f"run `megatron-compile lock --update {spec}` and review the new digest"
    problems = []
    base = image.get("base")
    if base != lock.base.reference:
        problems.append(_problem(
            lock, "image.base", "base.reference",
            f"image.base is {base} but the lock {lock.where('base.reference')} pins {lock.base.reference}", update))
    platform = image.get("platform", DEFAULT_PLATFORM)
    if platform != lock.base.platform:
        problems.append(_problem(
            lock, "image.platform", "base.platform",
            f"image.platform is {platform} but the lock {lock.where('base.platform')} was resolved for "
            f"{lock.base.platform}", update))
    if lock.built is not None:
        problems += _check_built(lock, lock.built, image, spec)
    return problems


def _check_built(lock: Lock, built: BuiltEntry, image: Mapping[str, Any], spec: str) -> list[Problem]:
    hint = (f"rebuild and push the image, then run `megatron-compile lock --record-built {spec}` "
            f"(`lock --update {spec}` drops the stale record)")
    where = lock.where("built.reference")
    recorded = _split_built(built.reference)
    if recorded is None:
        return [_problem(lock, "image.repository", "built.reference",
                         f"the lock {where} records {built.reference}, not a registry/namespace/repository:tag", hint)]
    problems = []
    for part in ("registry", "namespace", "repository", "tag"):
        value = image.get(part)
        if value != recorded[part]:
            problems.append(_problem(
                lock, f"image.{part}", "built.reference",
                f"image.{part} is {value} but the lock {where} records the built image {built.reference}", hint))
    return problems


def with_base(lock: Lock | None, base: BaseEntry) -> Lock:
    """A lock with `base` replaced (the built record kept only while the base digest is unchanged)."""
    if lock is None:
        return Lock(base=base)
    built = lock.built if lock.base.digest == base.digest else None
    return replace(lock, base=base, built=built, positions={})
