"""The Python that generated scripts carry (a `<<'PY'` heredoc, a `python -c '…'`) is checked like
code: it compiles, and pyflakes finds no undefined name, unused import or other mistake in it. A
NameError in export.sh's embedded export.py reached an H200 before this test existed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyflakes import api as pyflakes_api
from pyflakes import messages as pyflakes_messages
from pyflakes import reporter as pyflakes_reporter

from compiler.megatron.runfiles import RUNTIME_PROBE

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (REPO / "generated").rglob("*.sh"))

HEREDOC = re.compile(r"<<'PY'\n(.*?)\nPY\n", re.S)
# `python -c '…'` ('\'' for a quote inside) and `python -c "…"` (\" \\ \$ \` escaped), as the
# compiler's quoting writes them
SINGLE = re.compile(r"\bpython3? -c '((?:[^']|'\\'')*)'")
DOUBLE = re.compile(r'\bpython3? -c "((?:[^"\\]|\\.)*)"')


def _snippets(text: str) -> list[str]:
    found = [m.group(1) for m in HEREDOC.finditer(text)]
    found += [m.group(1).replace("'\\''", "'") for m in SINGLE.finditer(text)]
    found += [re.sub(r'\\(["\\$`])', r"\1", m.group(1)) for m in DOUBLE.finditer(text)]
    return found


class _Collect(pyflakes_reporter.Reporter):
    def __init__(self, probe: bool = False) -> None:
        self.problems: list[str] = []
        self.probe = probe

    def unexpectedError(self, filename, message):  # noqa: N802 (pyflakes' API)
        self.problems.append(f"{filename}: {message}")

    def syntaxError(self, filename, message, lineno, offset, text):  # noqa: N802
        self.problems.append(f"{filename}:{lineno}: {message}")

    def flake(self, message):
        if self.probe and isinstance(message, pyflakes_messages.UnusedImport):
            return  # the seed's runtime probe imports megatron.core to show that it imports
        self.problems.append(str(message))


def test_the_generated_scripts_carry_python_to_check():
    names = {p.name for p in SCRIPTS if _snippets(p.read_text())}
    assert {"convert.sh", "export.sh", "launch.sh", "prepare.sh", "download.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO / "generated")))
def test_embedded_python_is_clean(script):
    for index, snippet in enumerate(_snippets(script.read_text())):
        compile(snippet, f"{script.name}[{index}]", "exec")
        collect = _Collect(probe=snippet == RUNTIME_PROBE)
        pyflakes_api.check(snippet, f"{script.relative_to(REPO)}[python {index}]", collect)
        assert not collect.problems, "\n".join(collect.problems)


def test_the_check_finds_an_undefined_name():
    collect = _Collect()
    pyflakes_api.check("def main():\n    print(ckpt)\n", "probe", collect)
    assert any("undefined name 'ckpt'" in p for p in collect.problems)
