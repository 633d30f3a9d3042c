"""The lock beside a spec: read it, hold it against the spec's image section, or require one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..diagnostics import Diagnostic, Severity, make_error
from ..megatron.packages import image_packages
from ..load.discover import leaves, lock_path, trusted_root
from ..load.inputs import exists
from ..load.source import SourceDoc
from ..schema.records import JobSpec

if TYPE_CHECKING:
    from ..load.lockfile import Lock


def _at(doc: SourceDoc, dotted: str) -> dict[str, Any]:
    loc = doc.value_location(tuple(dotted.split(".")))
    if loc is None:
        return {"file": doc.file}
    span = loc.span
    return {"file": loc.file, "line": span.line, "column": span.column, "end_line": span.end_line,
            "end_column": span.end_column}


def check_pins(doc: SourceDoc, spec: JobSpec, path: str, display: str, *, require: bool) -> tuple[Lock | None, list[Diagnostic]]:
    """The spec's lock (specs/NAME.lock beside specs/NAME.yaml) when it fits the spec, and the
    diagnostics: a lock that cannot be read (at its line), one that no longer matches the spec (at
    the spec's line, naming the lock's), or none when --require-lock asks for one."""
    lock_file = lock_path(path)
    shown = lock_path(display)
    lock = None
    if exists(lock_file) and leaves(lock_file, trusted_root(path)):
        return None, [make_error("link-outside-repository", f"{shown} is a symbolic link to a file outside the "
                                 "repository; it was not read", file=shown, line=1, column=1,
                                 hint="a lock is the file `megatron-compile lock` writes beside the spec")]
    if exists(lock_file):  # the lock file's reader loads only for a spec that has one
        from ..load.lockfile import LockError  # deferred: only a spec with a lock beside it reads one
        from ..load.lockparse import read_lock  # deferred: only a spec with a lock beside it reads one

        try:
            lock = read_lock(lock_file)
        except LockError as exc:
            return None, [make_error("lock-invalid", p.message, hint=p.hint or None, file=shown, line=p.line,
                                     column=p.column) for p in exc.problems]
    if lock is None:
        if not require:
            return None, []
        return None, [Diagnostic(code="image-unpinned", severity=Severity.ERROR, key_path=("image", "base"),
                                 message=f"image.base ({spec.image.base}) is not pinned: {shown} does not exist",
                                 hint=f"run `megatron-compile lock {display}` and commit {shown}",
                                 **_at(doc, "image.base"))]
    from ..load.lockfile import built_from, check_built_from, check_lock  # deferred: only a spec with a lock beside it reads one

    image = spec.image.model_dump(mode="json")
    problems = check_lock(lock, image, display)
    if not problems:
        current = built_from(lock.base.digest, spec.megatron.repo, spec.megatron.commit, spec.megatron.root,
                             image_packages(spec.init_from))
        problems = check_built_from(lock, current, display)
    diags = [Diagnostic(code="lock-stale", severity=Severity.ERROR, key_path=tuple(p.field.split(".")),
                        message=p.message.replace(lock.where(p.lock_key), f"{shown}:{p.line}"), hint=p.hint,
                        **_at(doc, p.field)) for p in problems]
    return (None if problems else lock), diags
