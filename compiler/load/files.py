"""Reading a file the user named, safely: a regular file only, never more than a bound.

A spec, a base, a lock or a committed config.json is opened without blocking (a FIFO would wait
for a writer forever), checked to be a regular file after the open (no race between a check and
the open: `/dev/zero` or a FIFO is refused, not read), and read up to a size bound (a file over it
is refused, not loaded into memory). `describe` says what a refused path is, in the diagnostic's words.
"""

from __future__ import annotations

import os
import stat

# A job spec is a few KiB and a config.json tens of KiB; these bound what a hostile file costs.
SPEC_LIMIT = 1 << 20  # 1 MiB: a spec, a base or a lock
CONFIG_LIMIT = 4 << 20  # 4 MiB: a Hugging Face config.json (some carry large label tables)


class Refused(OSError):
    """The path is not a regular file, or is larger than the bound; `reason` says which ("it is ...")."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.strerror = reason


def kind(mode: int) -> str:
    """What a file mode is, as a noun: 'a directory', 'a FIFO (named pipe)', 'a character device'..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file at `path` and its stat, opened without blocking (a FIFO is
    not waited on); Refused, with the descriptor closed, when it is something else."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(path, f"it is {kind(info.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path` (symlinks followed); Refused when it is something else
    or larger than `limit` bytes, FileNotFoundError/OSError as open() raises them."""
    fd, info = _open_regular(path)
    try:
        if info.st_size > limit:
            raise Refused(path, f"it is {info.st_size} bytes, more than the {limit} a file of this kind may hold")
        chunks: list[bytes] = []
        size = 0
        while True:  # a file that grows while it is read is still bounded
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise Refused(path, f"it is more than the {limit} bytes a file of this kind may hold")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_tail(path: str, limit: int) -> bytes:
    """The last `limit` bytes of the regular file at `path` (all of a smaller one); Refused when it is
    not a regular file: a log that is a FIFO or a device is not waited on."""
    fd, info = _open_regular(path)
    try:
        if info.st_size > limit:
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        size = 0
        while size < limit and (chunk := os.read(fd, min(1 << 16, limit - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
