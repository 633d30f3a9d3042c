"""The doctor's reads of a run root, bounded: regular files only, the head and tail of a large log,
the latest attempt of an appended one; what cannot be read is reported, never guessed.

A run root is written by the job, so it is input like any other: a log may be 2 GB, a FIFO (a read
would block), a device, a symlink loop, binary, or unreadable. Each read here stats first, reads at
most HEAD_BYTES + TAIL_BYTES, and counts the newlines of what it skips so that every quoted line
keeps its number in the file. Skipped lines are one marker line, `[doctor: N lines not read]`, that
failures_logs.lines_of counts as N lines.
"""

from __future__ import annotations

import os
import re
import stat

from ..tuples import NamedTuple
from ..megatron.failures_logs import SKIPPED as SKIPPED_RE, to_int

HEAD_BYTES = 4 << 20
TAIL_BYTES = 4 << 20
# the launch's own records (exit_status, runtime.txt) are a few lines; verify.sh reads them line by line in bash,
# so a record the job filled with megabytes is given to it (and read) as its head and tail of 32 KiB each
RECORD_BYTES = 32 << 10
CHUNK = 16 << 20
SKIPPED = "[doctor: {} lines not read]"


class Read(NamedTuple):
    text: str | None  # None: absent, or not readable (problem says why)
    problem: str | None = None
    bounded: bool = False  # the text is the file's head and tail, not all of it


def _count_newlines(fd: int, start: int, end: int) -> int:
    os.lseek(fd, start, os.SEEK_SET)
    count, left = 0, end - start
    while left > 0:
        block = os.read(fd, min(CHUNK, left))
        if not block:
            break
        count += block.count(b"\n")
        left -= len(block)
    return count


def read_bounded(path: str, head_bytes: int | None = None, tail_bytes: int | None = None) -> Read:
    """A log's text (head and tail when large: HEAD_BYTES and TAIL_BYTES unless given), or why it was not read;
    absent files are (None, None)."""
    head_bytes = HEAD_BYTES if head_bytes is None else head_bytes
    tail_bytes = TAIL_BYTES if tail_bytes is None else tail_bytes
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Read(None)
    except OSError as e:  # a symlink loop (ELOOP), a path through a non-directory, no permission
        return Read(None, f"cannot be read: {e.strerror or e}")
    if stat.S_ISDIR(st.st_mode):
        return Read(None, "is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        return Read(None, f"is {kind}, not a regular file: not read")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        return Read(None, f"cannot be read: {e.strerror or e}")
    try:
        size = st.st_size
        if size <= head_bytes + tail_bytes:
            data = _read_all(fd, size)
            head, tail, skipped = data, b"", None
        else:
            head = _read_all(fd, head_bytes)
            cut = size - tail_bytes
            os.lseek(fd, cut, os.SEEK_SET)
            tail = _read_all(fd, tail_bytes)
            # whole lines only: the head up to its last newline, the tail from its first
            h = head.rfind(b"\n") + 1
            t = tail.find(b"\n") + 1
            skipped = _count_newlines(fd, h, cut + t)
            head, tail = head[:h], tail[t:]
    except OSError as e:
        return Read(None, f"cannot be read: {e.strerror or e}")
    finally:
        os.close(fd)
    if b"\0" in head[:65536]:
        return Read(None, f"is binary ({size} bytes, NUL bytes in its first 64 KiB): not a log")
    text = head.decode("utf-8", errors="replace")
    if skipped is not None:
        text += SKIPPED.format(skipped) + "\n" + tail.decode("utf-8", errors="replace")
    return Read(text, bounded=skipped is not None)


def _read_all(fd: int, limit: int) -> bytes:
    parts, left = [], limit
    while left > 0:
        block = os.read(fd, min(CHUNK, left))
        if not block:
            break
        parts.append(block)
        left -= len(block)
    return b"".join(parts)


# Where an attempt of an appended log begins: launch.sh's own line in launch.log; in train.log (torchrun's
# output, appended by a resumed run), Megatron's start: its argument check prints "using world size:"
# first on rank 0 (megatron/training/arguments.py:570), after the warnings of its imports.
LAUNCH_START = re.compile(r"^launch\.sh: started ")
MEGATRON_START = re.compile(r"^using world size: [0-9]+")
# The last line of an attempt before the next one's preamble (torchrun's report, Megatron's end).
ATTEMPT_END = re.compile(r"^={20,}$|exiting program|\[after training is done\]|successfully saved checkpoint|"
                         r"^\s*iteration +\d+/|torchrun exited|Traceback|Error")
PREAMBLE_LINES = 60


def latest_attempt(text: str | None, log: str) -> str | None:
    """The latest attempt of an appended log (log: "launch" or "train"), its earlier lines replaced by one
    `[doctor: N lines not read]` line so that line numbers stay those of the file."""
    if text is None:
        return None
    lines = text.split("\n")
    starts = [i for i, x in enumerate(lines) if LAUNCH_START.search(x)] if log == "launch" else []
    if log == "train":
        megatron = [i for i, x in enumerate(lines) if MEGATRON_START.search(x)]
        if len(megatron) > 1:
            start = megatron[-1]
            floor = max(megatron[-2] + 1, start - PREAMBLE_LINES)
            # back over the preamble (warnings printed at import) to the previous attempt's last line
            while start > floor and not ATTEMPT_END.search(lines[start - 1]):
                start -= 1
            starts = [start]
    if not starts or starts[-1] == 0:
        return text
    first = starts[-1]
    earlier = _logical_lines(lines[:first])
    return SKIPPED.format(earlier) + "\n" + "\n".join(lines[first:])


def _logical_lines(lines: list[str]) -> int:
    """How many file lines these text lines stand for (a skipped-lines marker stands for its count)."""
    total = 0
    for x in lines:
        m = SKIPPED_RE.match(x) if x.startswith("[doctor: ") else None
        count = to_int(m.group(1)) if m else None  # a count not read as a number: an ordinary line
        total += count if count is not None else 1
    return total



def shadow_root(root: str, replaced: dict[str, str], into: str) -> str:
    """A view of ROOT under INTO in which the files of REPLACED (relative path -> text) hold that text and
    everything else is a symbolic link to the original: verify.sh reads a large log's head and tail there,
    as the doctor did, instead of all of it.

    The run root is input: a directory on the way to a replaced file may be a regular file (ckpt written as
    a file), a symlink loop, or unreadable. Such an entry is linked as it is (verify.sh sees what the run root
    holds), and an entry that cannot be mirrored at all is left out; nothing here raises on the run root's
    content (OSError of INTO itself, which is the caller's, aside)."""
    def link(src: str, dst: str) -> None:
        try:
            os.symlink(os.path.abspath(src), dst)
        except OSError:
            pass  # left out of the view: verify.sh finds it absent

    def mirror(rel: str) -> None:
        src, dst = os.path.join(root, rel), os.path.join(into, rel)
        if rel in replaced:
            try:
                with open(dst, "w", encoding="utf-8", errors="replace") as f:
                    f.write(replaced[rel])
            except OSError:
                pass
        elif any(r.startswith(rel + os.sep) or not rel for r in replaced):
            try:
                names = sorted(os.listdir(src)) if os.path.isdir(src) else None
            except OSError:
                names = None
            if names is None:  # not a directory to descend (a file, a loop, unreadable): as it is
                if rel:
                    link(src, dst)
                return
            try:
                os.makedirs(dst, exist_ok=True)
            except OSError:
                return
            for name in names:
                mirror(os.path.join(rel, name) if rel else name)
        else:
            link(src, dst)
    os.makedirs(into, exist_ok=True)
    mirror("")
    return into
