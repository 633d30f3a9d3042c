"""One `--set KEY=VALUE` as given on the command line (applied by compose.py)."""

from __future__ import annotations

from ..text import shown
from ..tuples import NamedTuple


class Override(NamedTuple):
    """One `--set KEY=VALUE`, as given on the command line."""

    raw: str

    @property
    def origin(self) -> str:
        return f"--set {self.shown}"

    @property
    def shown(self) -> str:
        """The text as a diagnostic may print it (text.shown)."""
        return shown(self.raw)
