"""Where megatron-compile's own files are: its modules, and templates/ (inside the installed wheel,
or at the top of a source checkout)."""

from __future__ import annotations

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def templates_dir() -> str:
    """templates/ inside the installed package, or at the top of a source checkout."""
    for candidate in (os.path.join(PACKAGE_DIR, "templates"), os.path.join(os.path.dirname(PACKAGE_DIR), "templates")):
        if os.path.isfile(os.path.join(candidate, "launch.sh.j2")):
            return candidate
    raise FileNotFoundError("megatron-compile's templates/ directory is missing from this installation")
