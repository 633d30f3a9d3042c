"""Every file a compile reads from the user's tree, recorded, so that a kept result (compiler/reuse.py)
is used again only while each of them is as it was.

The loaders read through `read_bytes` and ask through `exists`: while a `Recording` is open each
such call notes the file's absolute path with the sha256 of what was read, or `None` for a file
that was looked for and is not there (a lock that does not exist yet is an input too: creating one
changes the result). tests/test_reuse.py runs every spec of the repository under an audit hook and
fails on a file opened during a compile that is not noted here.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from typing import Any, Iterator

ABSENT = None
PRESENT = "present"  # looked for and found, but not read (what `exists` saw)

_recordings: list[dict[str, str | None]] = []
# Trees that serve the files under their root instead of the file system (gitrev.GitTree: a
# revision read from git, for `diff`); innermost last.
_served: list[Any] = []


@contextmanager
def serving(tree: Any) -> Iterator[None]:
    """Inside the block, files under `tree.root` are read from `tree` (relative, is_file, is_dir, read, blob)."""
    _served.append(tree)
    try:
        yield
    finally:
        _served.remove(tree)


def _server(path: str) -> tuple[Any, str] | None:
    for tree in reversed(_served):
        rel = tree.relative(path)
        if rel is not None:
            return tree, rel
    return None


class Recording:
    """`with Recording() as inputs:` notes every input read inside the block in `inputs`
    (absolute path -> sha256 hex of its bytes, PRESENT, or ABSENT)."""

    def __enter__(self) -> dict[str, str | None]:
        self.inputs: dict[str, str | None] = {}
        _recordings.append(self.inputs)
        return self.inputs

    def __exit__(self, *exc: object) -> None:
        _recordings.remove(self.inputs)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note(path: str, state: str | None) -> None:
    """Record one input in every open recording; a content digest outranks PRESENT."""
    if not _recordings:
        return
    key = os.path.abspath(path)
    for inputs in _recordings:
        if state == PRESENT and inputs.get(key) not in (None, PRESENT):
            continue
        inputs[key] = state


def read_bytes(path: str) -> bytes:
    """The file's bytes, noted as an input (a missing file is noted ABSENT, then raised)."""
    served = _server(path)
    if served is not None:
        data_or_none: bytes | None = served[0].read(served[1])
        if data_or_none is None:
            note(path, ABSENT)
            raise FileNotFoundError(2, "No such file in the revision read", path)
        note(path, digest(data_or_none))
        return data_or_none
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        note(path, ABSENT)
        raise
    note(path, digest(data))
    return data


def exists(path: str) -> bool:
    """os.path.exists, noted as an input."""
    served = _server(path)
    found = (served[0].is_file(served[1]) or served[0].is_dir(served[1])) if served else os.path.exists(path)
    note(path, PRESENT if found else ABSENT)
    return found


def is_file(path: str) -> bool:
    """os.path.isfile, through a served tree when one holds the path (not an input by itself:
    the file is read next)."""
    served = _server(path)
    return bool(served[0].is_file(served[1])) if served else os.path.isfile(path)


def stamp(path: str) -> object | None:
    """What identifies a file's content cheaply: its mtime, or a served tree's object id; None
    when there is no such file."""
    served = _server(path)
    if served is not None:
        blob: object | None = served[0].blob(served[1])
        return blob
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def unchanged(inputs: dict[str, str | None]) -> bool:
    """Whether every recorded input is as it was recorded."""
    for path, state in inputs.items():
        if state is ABSENT:
            if os.path.exists(path):
                return False
            continue
        if state == PRESENT:
            if not os.path.exists(path):
                return False
            continue
        try:
            with open(path, "rb") as handle:
                if digest(handle.read()) != state:
                    return False
        except OSError:
            return False
    return True
