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
from typing import Any, Mapping


from ..tuples import NamedTuple
from .discover import LOCK_SUFFIX
from .discover import lock_path as discovered_lock_path

LOCK_VERSION = 1

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
# What the recorded image was built from (optional: a record written before they existed has none,
# and is stale): the spec values each build path reads, under the spec field they come from.
BUILT_FROM = {"from_base_digest": "image.base", "from_megatron_repo": "megatron.repo",
              "from_megatron_commit": "megatron.commit", "from_megatron_root": "megatron.root",
              "from_packages": "init_from"}
BUILT_FROM_FIELDS = tuple(BUILT_FROM)
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
    from_base_digest: str = ""  # the locked base digest the build started FROM
    from_megatron_repo: str = ""
    from_megatron_commit: str = ""
    from_megatron_root: str = ""
    from_packages: str = ""  # what pip installed (Bridge, modelscope: megatron/packages.py), "none" without


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


class LockProblem(NamedTuple):
    """One reason a lock file cannot be read, at its 1-based line and column."""

    line: int
    column: int
    message: str
    hint: str


class LockError(Exception):
    """A lock file that cannot be read: every problem found, located (`line`, `column`, `message` and
    `hint` are the first one's)."""

    def __init__(self, path: str, problems: list[LockProblem]) -> None:
        problems = problems or [LockProblem(1, 1, "the lock cannot be read", "")]
        super().__init__(problems[0].message)
        self.path, self.problems = path, sorted(problems)
        self.line, self.column, self.message, self.hint = self.problems[0]

    def __str__(self) -> str:
        lines = []
        for p in self.problems:
            lines.append(f"{self.path}:{p.line}:{p.column}: error: {p.message}")
            if p.hint:
                lines.append(f"  hint: {p.hint}")
        return "\n".join(lines)


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
    return {key: value for key, value in vars(entry).items() if value}


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
    """What no longer matches between a lock and the spec's validated image section (base, platform, and
    the built reference's registry/namespace/repository/tag); empty when the lock fits the spec."""
    update = f"run `megatron-compile lock --update {spec}` and review the new digest"
    problems = []
    base = image.get("base")
    if base != lock.base.reference:
        problems.append(_problem(
            lock, "image.base", "base.reference",
            f"image.base is {base} but the lock {lock.where('base.reference')} pins {lock.base.reference}", update))
    platform = image["platform"]
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


def built_from(base_digest: str, repo: str, commit: str, root: str, packages: tuple[str, ...]) -> dict[str, str]:
    """The values a built record carries (BUILT_FROM): what the image is built from today."""
    return {"from_base_digest": base_digest, "from_megatron_repo": repo, "from_megatron_commit": commit,
            "from_megatron_root": root, "from_packages": " ".join(packages) or "none"}


def check_built_from(lock: Lock, current: Mapping[str, str], spec: str = "SPEC") -> list[Problem]:
    """Where the recorded image was built from something else than the spec builds today (another
    megatron.commit, base digest, repository or Bridge): the job would run the old image while the
    Dockerfile builds the new one. A record without these fields predates them and is stale too."""
    built = lock.built
    if built is None:
        return []
    hint = (f"rebuild and push the image, then run `megatron-compile lock --record-built {spec}` "
            f"(`lock --update {spec}` drops the stale record)")
    where = lock.where("built.reference")
    problems = []
    for key, spec_field in BUILT_FROM.items():
        recorded = getattr(built, key)
        if not recorded:
            problems.append(_problem(lock, spec_field, "built.reference",
                                     f"the lock {where} records the built image {built.reference} without the "
                                     f"{spec_field} it was built from (recorded by an older megatron-compile)", hint))
            break
        if recorded != current[key]:
            problems.append(_problem(lock, spec_field, f"built.{key}",
                                     f"the built image the lock {lock.where('built.' + key)} records was built from "
                                     f"{spec_field} {recorded}; the spec now builds from {current[key]}", hint))
    return problems


def with_base(lock: Lock | None, base: BaseEntry) -> Lock:
    """A lock with `base` replaced (the built record kept only while the base digest is unchanged)."""
    if lock is None:
        return Lock(base=base)
    built = lock.built if lock.base.digest == base.digest else None
    return replace(lock, base=base, built=built, positions={})
