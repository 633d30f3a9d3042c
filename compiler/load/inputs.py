"""Every file a compile reads from the user's tree goes through here, so that `diff` can serve a
git revision (gitrev.GitTree) at the same paths instead of the file system.

The loaders read through `read_bytes` and ask through `exists`/`is_file`; inside `serving(tree)`
a path under the tree's root is answered by the tree. Nothing is recorded or kept between runs:
a compile reads its inputs every time.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator

from .files import SPEC_LIMIT, read_regular

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


def read_bytes(path: str, limit: int = SPEC_LIMIT) -> bytes:
    """The file's bytes, from a served tree when one holds the path (FileNotFoundError when there is
    none); from the file system a regular file only and at most `limit` bytes (files.read_regular:
    a FIFO, a device or a directory raises files.Refused without blocking)."""
    served = _server(path)
    if served is not None:
        data: bytes | None = served[0].read(served[1])
        if data is None:
            raise FileNotFoundError(2, "No such file in the revision read", path)
        return data
    return read_regular(path, limit)


def exists(path: str) -> bool:
    """os.path.exists, through a served tree when one holds the path."""
    served = _server(path)
    return bool(served[0].is_file(served[1]) or served[0].is_dir(served[1])) if served else os.path.exists(path)


def is_file(path: str) -> bool:
    """os.path.isfile, through a served tree when one holds the path."""
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
