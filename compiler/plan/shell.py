"""Shell words as the plan builds them: literal text and variable references, quoted only when rendered."""

from __future__ import annotations

from ..tuples import NamedTuple


class Var(NamedTuple):
    """A reference to a shell variable inside a word; rendered as "$NAME"."""

    name: str


class Word(NamedTuple):
    """One shell word: literal text (quoted when rendered) and variable references, concatenated."""

    parts: tuple[str | Var, ...]

    @classmethod
    def lit(cls, text: str) -> "Word":
        return cls((text,))

    def reference(self, index: int) -> str:
        """How the variable at parts[index] is spelt: $NAME, or ${NAME} when text that could
        continue the name follows it."""
        part = self.parts[index]
        assert isinstance(part, Var)
        following = self.parts[index + 1] if index + 1 < len(self.parts) else ""
        if isinstance(following, str) and following[:1] and (following[0].isalnum() or following[0] == "_"):
            return "${" + part.name + "}"
        return "$" + part.name

    def as_text(self) -> str:
        """The word as shlex.split reads its rendering: literals verbatim, variables as referenced."""
        return "".join(p if isinstance(p, str) else self.reference(i) for i, p in enumerate(self.parts))


def argv_of(lines: tuple[tuple[Word, ...], ...]) -> list[str]:
    """The argv of command lines as shlex reads their rendering."""
    return [word.as_text() for line in lines for word in line]


def under(variable: str, relative: str) -> Word:
    """"$VARIABLE/relative": a path under a directory the script knows at run time."""
    return Word((Var(variable), "/" + relative))
