"""Results kept between runs: a spec is not compiled again while nothing it was compiled from changed.

A compile is a function of three things, and a kept result is used only when all three are what
they were:

- the compiler: its modules, templates and data, the libraries it runs (Jinja, PyYAML, pydantic,
  pydantic-core) and Python itself. Their files' sizes and modification times make the
  *fingerprint*, which names the directory results are kept in;
- how it was asked: the spec's path as given, the working directory, how headers record the spec
  and the command that regenerates it (the output directory and every --set are in it), the --set
  values and --require-lock. Their sha256 is the *key*, one entry file per key;
- the files it read: the spec, its bases, init_from's config.json, the lock beside the spec, or
  that lock's absence (load/inputs.py records each with the sha256 of its bytes). The entry holds
  them, and every one is read and hashed again before the entry is used.

Only compiles without errors are kept: their artifacts and their warnings, printed again as if
compiled. An entry that is missing, unreadable, not of this format or with one input changed is
ignored and the spec compiled (and the entry written anew): the cache can make a compile faster,
never different. Entries are JSON (never unpickled), compressed (a spec's artifacts are about
30 KB, 5 KB compressed), written atomically, under
$XDG_CACHE_HOME/megatron-compile/results/ (~/.cache by default); directories of other
fingerprints that were not used for a month are removed when a new one is made.
`--no-cache` or MEGATRON_COMPILE_CACHE=off compiles every spec.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import zlib
from functools import lru_cache
from typing import Any, NamedTuple

from . import installation
from .diagnostics import Diagnostic, Severity
from .load.inputs import unchanged
from .schema.cache import cache_dir, write_atomic

FORMAT = 2  # of the entry files (zlib-compressed JSON); part of the fingerprint
ENTRY_SUFFIX = ".json.z"
LIBRARIES = ("jinja2", "markupsafe", "yaml", "pydantic", "pydantic_core")  # what the output depends on
STALE_DAYS = 30
OFF_VALUES = ("0", "off", "false", "no")


class Kept(NamedTuple):
    diagnostics: list[Diagnostic]
    files: dict[str, str]


def enabled() -> bool:
    return os.environ.get("MEGATRON_COMPILE_CACHE", "").strip().lower() not in OFF_VALUES


def _tree(root: str, digest: Any, below: bool = True) -> None:
    """Each file of root, and below it unless `below` is false (bytecode caches aside): its path,
    size and modification time. A library's own directory alone is enough to see it reinstalled."""
    digest.update(f"{root}\n".encode())
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__") if below else []
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """The compiler as it is installed now (computed once per process)."""
    import importlib.util

    digest = hashlib.sha256(f"{FORMAT}\0{sys.version}\0{sys.executable}\n".encode())
    _tree(installation.PACKAGE_DIR, digest)
    templates = installation.templates_dir()
    if not templates.startswith(installation.PACKAGE_DIR + os.sep):  # a source checkout's top-level templates/
        _tree(templates, digest)
    for name in LIBRARIES:
        found = importlib.util.find_spec(name)
        origin = found.origin if found is not None else None
        if origin is None:
            digest.update(f"{name}: not found\n".encode())
            continue
        _tree(os.path.dirname(origin), digest, below=False)
    return digest.hexdigest()[:32]


@lru_cache(maxsize=1)
def _directory() -> str | None:
    """This fingerprint's directory of entries (made now), or None when nothing can be kept."""
    results = cache_dir("results")
    if results is None:
        return None
    directory = os.path.join(results, fingerprint())
    if not os.path.isdir(directory):
        try:
            os.mkdir(directory)
        except FileExistsError:
            pass
        except OSError:
            return None
        _prune(results, keep=directory)
    return directory


def _prune(results: str, keep: str) -> None:
    """Remove the directories of other fingerprints not used for STALE_DAYS (an old installation)."""
    cutoff = time.time() - STALE_DAYS * 86400
    try:
        entries = list(os.scandir(results))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.path != keep and entry.is_dir(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def key(path: str, display: str, recorded: str, regenerate: str, overrides: list[str], require_lock: bool) -> str:
    """How the compile was asked, as one key."""
    asked = [path, os.getcwd(), display, recorded, regenerate, overrides, require_lock]
    return hashlib.sha256(json.dumps(asked, ensure_ascii=False).encode("utf-8")).hexdigest()


def _diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    fields = d._asdict()
    fields["severity"] = d.severity.value
    fields["key_path"] = list(d.key_path)
    return fields


def _diagnostic(fields: dict[str, Any]) -> Diagnostic:
    fields = dict(fields)
    fields["severity"] = Severity(fields["severity"])
    fields["key_path"] = tuple(fields["key_path"])
    return Diagnostic(**fields)


def load(entry_key: str) -> Kept | None:
    """The result kept for this key, when every input it was compiled from is unchanged."""
    directory = _directory()
    if directory is None:
        return None
    try:
        with open(os.path.join(directory, entry_key + ENTRY_SUFFIX), "rb") as handle:
            entry = json.loads(zlib.decompress(handle.read()))
        if entry.get("format") != FORMAT or entry.get("key") != entry_key:
            return None
        inputs, files = entry["inputs"], entry["files"]
        diagnostics = [_diagnostic(d) for d in entry["diagnostics"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, zlib.error):
        return None  # none kept, or not one this version wrote: compile
    if not isinstance(inputs, dict) or not isinstance(files, dict) or not inputs or not unchanged(inputs):
        return None
    return Kept(diagnostics, files)


def store(entry_key: str, inputs: dict[str, str | None], diagnostics: list[Diagnostic], files: dict[str, str]) -> None:
    """Keep a compile's result (one without errors) for the next run with the same key."""
    directory = _directory()
    if directory is None or not inputs or any(d.is_error for d in diagnostics):
        return
    entry = {"format": FORMAT, "key": entry_key, "inputs": inputs,
             "diagnostics": [_diagnostic_json(d) for d in diagnostics], "files": files}
    write_atomic(os.path.join(directory, entry_key + ENTRY_SUFFIX),
                 zlib.compress(json.dumps(entry, ensure_ascii=False, sort_keys=True).encode("utf-8")))
