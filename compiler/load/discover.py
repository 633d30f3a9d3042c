"""Finding specs: files, directories and globs; which specs are bases; how a path is shown."""

from __future__ import annotations

import glob
import os
import re
from .source import load_text

from .files import SPEC_LIMIT, read_regular

SPEC_SUFFIXES = (".yaml", ".yml")
LOCK_SUFFIX = ".lock"


def lock_path(spec_path: str | os.PathLike[str]) -> str:
    """specs/NAME.yaml -> specs/NAME.lock: a spec's lock file lies beside it."""
    return os.path.splitext(os.fspath(spec_path))[0] + LOCK_SUFFIX


def display_path(path: str) -> str:
    """How a spec path is printed in diagnostics: as the user gave it (as gcc and mypy do)."""
    return path


def repository_root(path: str) -> str | None:
    """The work tree of the git repository holding `path` (the nearest directory above it with a
    .git entry), or None."""
    directory = os.path.dirname(os.path.realpath(path))
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def trusted_root(spec_path: str) -> str:
    """The directory a spec's linked inputs must stay inside: its repository's work tree, or the
    spec's own directory outside a repository (real paths)."""
    root = repository_root(spec_path)
    return root if root is not None else os.path.dirname(os.path.realpath(spec_path))


def leaves(path: str, root: str) -> bool:
    """Whether `path` goes through a symbolic link to somewhere outside `root` (a plain path is
    taken as written: only links are refused, so that a link cannot smuggle another file in)."""
    real = os.path.realpath(path)
    if real == os.path.abspath(path) or real == root:
        return False
    return not real.startswith(root.rstrip("/") + "/")


def recorded_path(path: str, root: str | None = None, *, searched: bool = False) -> str:
    """How a path is recorded in a generated file's header: relative to the repository root, so
    the header is the same from any working directory; below the working directory without a
    repository, relative to it; else its file name alone, never a machine's absolute path. `root`:
    the repository root when the caller has it (with `searched`, None means there is none)."""
    absolute = os.path.realpath(path)
    for base in (root if root is not None or searched else repository_root(path), _real_cwd()):
        if base is not None and (absolute == base or absolute.startswith(base.rstrip("/") + "/")):
            return os.path.relpath(absolute, base)
    return os.path.basename(absolute)


_REAL_CWD: dict[str, str] = {}


def _real_cwd() -> str:
    cwd = os.getcwd()
    if cwd not in _REAL_CWD:
        _REAL_CWD[cwd] = os.path.realpath(cwd)
    return _REAL_CWD[cwd]


def specs_in(directory: str) -> list[str]:
    """The spec files of a directory, sorted."""
    with os.scandir(directory) as entries:
        return sorted(os.path.join(directory, e.name) for e in entries
                      if e.name.endswith(SPEC_SUFFIXES) and _is_file(e))


def _is_file(entry: os.DirEntry[str]) -> bool:
    """A directory entry that is a file, or a link to one; a link that loops or dangles is listed, and its compile
    says it cannot read it, located."""
    try:
        return entry.is_file() or entry.is_symlink()
    except OSError:
        return True


def find_specs(arguments: list[str]) -> tuple[list[str], list[str], set[str]]:
    """Expand files, directories (their *.yaml/*.yml, sorted) and globs.

    Returns (specs, arguments that matched nothing, specs named explicitly). A spec found through a
    directory or glob that another spec extends is a base, not a job; one named explicitly is a job."""
    found: list[str] = []
    missing: list[str] = []
    explicit: set[str] = set()
    for arg in arguments:
        if any(ch in arg for ch in "*?[") and not os.path.exists(arg):
            matches = sorted(glob.glob(arg))
            if not matches:
                missing.append(arg)
            for match in matches:
                if os.path.isdir(match):
                    found.extend(specs_in(match))
                elif match.endswith(SPEC_SUFFIXES):
                    found.append(match)
        elif os.path.isdir(arg):
            found.extend(specs_in(arg))
        elif os.path.exists(arg):
            found.append(arg)
            explicit.add(arg)
        else:
            missing.append(arg)
    return list(dict.fromkeys(found)), missing, explicit


_BLOCK = re.compile(r"^extends\s*:.*(?:\n[ \t-].*)*", re.M)
_PLAIN = re.compile(r"extends\s*:[ \t]+([A-Za-z0-9_./][A-Za-z0-9_./-]*\.ya?ml)[ \t]*(?:#.*)?")


def bases_of(specs: list[str]) -> set[str]:
    """Real paths of the files that the given specs name in `extends`, read cheaply (only files with
    an `extends:` line are parsed; a one-line plain `extends: base.yaml` is not even parsed), so
    that bases are known before anything is compiled."""
    bases: set[str] = set()
    seen: set[tuple[str, str]] = set()
    for path in specs:
        try:
            text = read_regular(path, SPEC_LIMIT).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # the compile reports it, located
        entries = extends_in(text)
        directory = os.path.dirname(path)
        for entry in entries:
            if (directory, entry) not in seen and "\0" not in entry:  # the compile refuses a NUL, located
                seen.add((directory, entry))
                bases.add(os.path.realpath(os.path.join(directory, entry)))
    return bases


def extends_in(text: str) -> list[str]:
    """The bases a spec's text names in `extends`, read cheaply (see bases_of)."""
    match = _BLOCK.search(text)
    if match is None:
        return []
    simple = _PLAIN.fullmatch(match.group(0))
    return [simple.group(1)] if simple else extends_entries(match.group(0))


def extends_entries(text: str) -> list[str]:
    """The paths of an `extends:` entry (and its continuation lines), read by the spec loader."""
    doc, _ = load_text("<extends>", text)
    raw = doc.data.get("extends") if doc is not None and isinstance(doc.data, dict) else None
    entries = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return [entry for entry in entries if isinstance(entry, str)]
