"""One `--set KEY=VALUE` as given on the command line (applied by compose.py)."""

from __future__ import annotations

from ..tuples import NamedTuple


class Override(NamedTuple):
    """One `--set KEY=VALUE`, as given on the command line."""

    raw: str

    @property
    def origin(self) -> str:
        return f"--set {self.raw}"
