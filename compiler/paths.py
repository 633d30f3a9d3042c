"""POSIX paths as the platform reads them: one normal form, and containment."""

from __future__ import annotations

import posixpath


def normalize_path(path: str) -> str:
    """Collapse '..', '.', '//' and a trailing '/' so that spelling cannot move a path."""
    norm = posixpath.normpath(path)
    if norm.startswith("//"):  # POSIX keeps a leading '//'; the platform does not
        norm = "/" + norm.lstrip("/")
    return norm


def is_within(path: str, parent: str) -> bool:
    """True when normalised `path` equals `parent` or lies below it."""
    path, parent = normalize_path(path), normalize_path(parent)
    if parent == "/":
        return True
    return path == parent or path.startswith(parent + "/")
