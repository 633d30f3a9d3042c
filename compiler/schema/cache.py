"""The user's cache directory for the compiled forms of this program (never of a spec).

Two things are kept between runs, each keyed by what it was built from, so that a changed
template, model or pydantic-core is rebuilt, never reused: the Jinja templates' bytecode and the
validator's core schema (compiler/schema/validator.py). Where the directory cannot be written, nothing is
cached and every run builds them (slower, same output).
"""

from __future__ import annotations

import os


def cache_dir(name: str) -> str | None:
    """$XDG_CACHE_HOME/megatron-compile/<name> (~/.cache by default), created; None if not writable."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "megatron-compile", name)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def write_atomic(path: str, data: bytes) -> None:
    """Write a cache file as emit writes an artifact (a temporary file renamed into place), so that a
    concurrent reader sees the old file or the whole new one; a failure leaves no file behind and is
    not an error (the cache is an optimisation)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
