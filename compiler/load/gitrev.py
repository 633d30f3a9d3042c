"""Reading a git revision without checking it out: the one module that runs git.

`megatron-compile diff` compiles each spec as it is at a base revision and as it is in the work
tree. The base side is read from git's object store (`git ls-tree` for the paths, `git cat-file
--batch` for the bytes), served to the loaders through `inputs.serving` at the same paths the work
tree has, so a spec, its `extends` bases, its lock and init_from's config.json are all read as
they were committed at that revision, and the work tree is never touched.
"""

from __future__ import annotations

import os
import subprocess
from typing import IO

from ..tuples import NamedTuple

DEFAULT_BRANCHES = ("main", "master")
TIMEOUT_S = 60


class GitError(Exception):
    """git failed or is not usable here: the message says what and how to fix it."""


def git(args: list[str], cwd: str, *, check: bool = True) -> str:
    """git's stdout as text; GitError with git's own message when it fails (and check is set)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=TIMEOUT_S,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except FileNotFoundError as exc:
        raise GitError("git is not installed: `megatron-compile diff` reads the base revision through git") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {' '.join(args)} did not finish in {TIMEOUT_S} s") from exc
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {' '.join(args)}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def toplevel(cwd: str) -> str:
    """The real path of the work tree holding `cwd`."""
    root = git(["rev-parse", "--show-toplevel"], cwd).strip()
    if not root:
        raise GitError(f"{cwd} is not inside a git work tree: `diff` compares with a git revision")
    return os.path.realpath(root)


def _exists(ref: str, cwd: str) -> bool:
    return bool(git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd, check=False).strip())


def default_branch(cwd: str) -> str:
    """The default branch to compare with: what origin/HEAD points at, else main or master (the
    remote's, then the local one)."""
    head = git(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], cwd, check=False).strip()
    if head and _exists(head, cwd):
        return head.removeprefix("refs/remotes/")
    for name in DEFAULT_BRANCHES:
        for ref in (f"origin/{name}", name):
            if _exists(ref, cwd):
                return ref
    raise GitError("no default branch to compare with (no origin/HEAD, main or master): give --base REF")


class Revision(NamedTuple):
    commit: str  # 40 hex digits
    described: str  # how it was chosen, for the report: "main (merge base)" or the ref given


def base_revision(ref: str | None, cwd: str) -> Revision:
    """The commit `--base REF` names, or the merge base of HEAD with the default branch."""
    if ref is not None:
        if not _exists(ref, cwd):
            raise GitError(f"--base {ref}: no such commit in this repository")
        return Revision(git(["rev-parse", f"{ref}^{{commit}}"], cwd).strip(), ref)
    branch = default_branch(cwd)
    base = git(["merge-base", "HEAD", branch], cwd, check=False).strip()
    if not base:
        raise GitError(f"HEAD and {branch} have no merge base: give --base REF")
    return Revision(base, f"merge base with {branch}")


class Entry(NamedTuple):
    mode: str
    kind: str  # blob, tree, commit
    object: str


class GitTree:
    """The files of one commit, by path relative to the work tree's root (POSIX separators)."""

    def __init__(self, root: str, commit: str) -> None:
        self.root = root  # the work tree's real path: absolute paths under it are served from the commit
        self.commit = commit
        self.entries: dict[str, Entry] = {}
        self.dirs: set[str] = {""}
        listing = git(["ls-tree", "-r", "-z", "--full-tree", commit], root)
        for record in filter(None, listing.split("\0")):
            meta, _, path = record.partition("\t")
            mode, kind, obj = meta.split(" ")
            self.entries[path] = Entry(mode, kind, obj)
            parts = path.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self._batch: subprocess.Popen[bytes] | None = None

    def relative(self, path: str) -> str | None:
        """`path` relative to the root, or None for a path outside it."""
        absolute = os.path.normpath(os.path.abspath(path))
        if absolute == self.root:
            return ""
        prefix = self.root.rstrip(os.sep) + os.sep
        return absolute[len(prefix):].replace(os.sep, "/") if absolute.startswith(prefix) else None

    def is_file(self, rel: str) -> bool:
        entry = self.entries.get(rel)
        return entry is not None and entry.kind == "blob" and entry.mode != "120000"

    def is_dir(self, rel: str) -> bool:
        return rel in self.dirs

    def blob(self, rel: str) -> str | None:
        """The object id of a file, which names its content."""
        return self.entries[rel].object if self.is_file(rel) else None

    def files_under(self, rel_dir: str) -> list[str]:
        """The files directly in a directory, sorted."""
        prefix = f"{rel_dir}/" if rel_dir else ""
        return sorted(p for p in self.entries if p.startswith(prefix) and "/" not in p[len(prefix):]
                      and self.is_file(p))

    def read(self, rel: str) -> bytes | None:
        """A file's bytes at the commit, or None when it has no such file."""
        obj = self.blob(rel)
        if obj is None:
            return None
        if self._batch is None:
            self._batch = subprocess.Popen(["git", "cat-file", "--batch"], cwd=self.root, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        stdin, stdout = self._batch.stdin, self._batch.stdout
        assert stdin is not None and stdout is not None
        stdin.write(obj.encode("ascii") + b"\n")
        stdin.flush()
        header = stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise GitError(f"git cat-file: cannot read {rel} at {self.commit[:12]}")
        data = _read_exactly(stdout, int(header[2]))
        stdout.read(1)  # the newline after each object
        return data

    def close(self) -> None:
        if self._batch is not None:
            assert self._batch.stdin is not None
            self._batch.stdin.close()
            self._batch.wait(timeout=TIMEOUT_S)
            if self._batch.stdout is not None:
                self._batch.stdout.close()
            self._batch = None

    def __enter__(self) -> GitTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise GitError("git cat-file ended early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
