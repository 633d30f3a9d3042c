"""Trust under real use (issue 14): hostile and surprising inputs get a diagnostic, never a traceback."""

from __future__ import annotations

import pytest

from compiler.render.quoting import TemplateSafetyError, md, sh
from compiler.schema.formats import CONTROL

from helpers import compile_text, resolved_text

TROJAN = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200b", "\u200d", "\u200f", "\ufeff", "\u061c", "\u2060"]


@pytest.mark.parametrize("char", TROJAN, ids=lambda c: f"U+{ord(c):04X}")
def test_invisible_format_characters_are_rejected_in_any_spec_string(char):
    text = resolved_text("tp2").replace("script: examples/run_simple_mcore_train_loop.py",
                                        f"script: examples/run_simple{char}_mcore_train_loop.py")
    assert char in text
    result = compile_text(text)
    assert not result.files
    assert [d.code for d in result.diagnostics if d.is_error] == ["unsafe-character"]
    assert f"U+{ord(char):04X}" in result.diagnostics[0].message


@pytest.mark.parametrize("char", TROJAN, ids=lambda c: f"U+{ord(c):04X}")
def test_render_filters_refuse_the_same_characters(char):
    assert CONTROL.search(char)
    for quote in (sh, md):
        with pytest.raises(TemplateSafetyError):
            quote(f"a{char}b")
