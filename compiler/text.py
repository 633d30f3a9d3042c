"""Characters that must not reach a generated file unescaped: control and format characters (a newline in a
comment ends it; a right-to-left override hides what a reviewer reads). Every layer reads them: the loader to
refuse a file name or an `extends` entry, the schema to refuse a value, the plan to echo one in a header."""

from __future__ import annotations

import re

# C0 and C1 control characters, DEL, and the Unicode line and paragraph separators: each can end a
# line or hide text in a shell script, a Dockerfile or a terminal. Also the invisible format
# characters that reorder or hide text on screen (Trojan Source, CVE-2021-42574): the bidi
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), the zero-width characters and
# marks (U+200B-U+200F), U+2060-U+206F, the Arabic letter mark U+061C and U+FEFF (a BOM inside text);
# and the other default-ignorable code points a terminal does not show: the soft hyphen U+00AD, the
# combining grapheme joiner, the Hangul fillers, the variation selectors and the tag characters.
# Any other format character (Unicode category Cf) is refused too (`_invisible`), so a character
# added to Unicode later is covered by its category, not by this list.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\xad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2028\u2029\u061c\u200b-\u200f"
                     r"\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\uffa0\ufeff\ufff0-\ufff8\U000e0100-\U000e01ef]")


def printable(text: str) -> str:
    """`text` with each control or format character written as its escape (a newline as \\n): a file name or a --set
    line that a generated comment echoes, which must stay one line."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


# Text from the command line: Python keeps a byte of argv that is not UTF-8 as a lone surrogate
# (surrogateescape), which no spec value, path in a generated file or diagnostic may carry.
def is_utf8(text: str) -> bool:
    """Whether the text is UTF-8 throughout."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(text: str) -> str:
    """The text as a diagnostic prints it: a byte that is not UTF-8 written as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def first_bad_byte(text: str) -> int:
    """The 0-based byte offset of the first byte that is not UTF-8 (len in bytes when there is none)."""
    for i, c in enumerate(text):
        if "\ud800" <= c <= "\udfff":
            return len(text[:i].encode("utf-8", "surrogateescape"))
    return len(text.encode("utf-8", "surrogateescape"))
