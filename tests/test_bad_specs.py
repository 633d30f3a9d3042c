"""The bad-spec corpus: tests/bad_specs/<case>.yaml and the exact diagnostics in <case>.expected.

A new case is two new files; `pytest --update-golden` writes the .expected files, which are
reviewed like code.
"""

import re
from pathlib import Path

import pytest

from compiler.diagnostics import CODES, OUTPUT_CODES, format_text, sort_diagnostics
from compiler.one_pass import compile_spec

CORPUS = Path(__file__).resolve().parent / "bad_specs"
CASES = sorted(CORPUS.glob("*.yaml"))


def diagnostics_text(spec: Path) -> str:
    result = compile_spec(str(spec), f"bad_specs/{spec.name}")
    return format_text(sort_diagnostics(result.diagnostics))


@pytest.mark.parametrize("spec", CASES, ids=lambda p: p.stem)
def test_bad_spec_gives_exactly_the_expected_diagnostics(spec, update_golden):
    text = diagnostics_text(spec)
    expected = spec.with_suffix(".expected")
    if update_golden:
        expected.write_text(text, encoding="utf-8")
    assert text, f"{spec.name} compiled without any diagnostic"
    assert text == expected.read_text(encoding="utf-8")


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30


def test_every_code_has_a_case():
    seen = set()
    for expected in CORPUS.glob("*.expected"):
        seen.update(re.findall(r"  \[([a-z0-9-]+)\]$", expected.read_text(), flags=re.M))
    assert seen <= set(CODES), f"codes used but not registered: {seen - set(CODES)}"
    missing = set(CODES) - OUTPUT_CODES - seen
    assert not missing, f"codes without a bad-spec case: {sorted(missing)}"


def test_every_rule_has_a_case():
    from compiler.check.rules import RULES

    seen = set()
    for expected in CORPUS.glob("*.expected"):
        seen.update(re.findall(r"  \[([a-z0-9-]+)\]$", expected.read_text(), flags=re.M))
    for rule in RULES:
        if rule.code == "engine":  # the adapters' own rules: their codes have cases (test above)
            continue
        assert rule.code in seen, f"rule {rule.check.__name__} ({rule.code}) has no bad-spec case"


def test_five_independent_mistakes_give_five_errors():
    result = compile_spec(str(CORPUS / "five-independent-mistakes.yaml"), "five.yaml")
    errors = [d for d in result.diagnostics if d.is_error]
    assert len(errors) == 5, errors
    assert not result.files


def test_reserved_mounts_are_written_normalised():
    """check_reserved_mount compares a normalised mount path with them as they are written."""
    from compiler.paths import normalize_path
    from compiler.platform.aistudio import RESERVED_MOUNTS

    assert all(normalize_path(r) == r and r != "/" for r in RESERVED_MOUNTS)


CITED = re.compile(r"Megatron refuses it at (\S+?):(\d+)(?:-(\d+))? \((\w+)\)")


def test_cited_megatron_lines_are_of_the_pinned_commit():
    """A rule that reproduces a check of Megatron's cites where (compiler.megatron.cited): every citation in the
    corpus names a Python file of Megatron-LM at the pinned commit (megatron_files.txt) and that commit; with a
    checkout (MEGATRON_LM_DIR, as tests/test_scripts.py takes it), the lines cited hold the check (an assert, a raise
    or the comparison)."""
    from compiler.megatron import PINNED_COMMIT
    from compiler.megatron.scripts import pinned_files
    from test_scripts import CHECKOUT

    cites = {m.groups() for e in CORPUS.glob("*.expected") for m in CITED.finditer(e.read_text())}
    assert len(cites) >= 10
    files = pinned_files()
    for path, first, last, commit in cites:
        assert path in files and commit == PINNED_COMMIT[:8], (path, commit)
        if CHECKOUT:
            lines = (Path(CHECKOUT) / path).read_text().splitlines()[int(first) - 1:int(last or first)]
            assert any(w in line for line in lines for w in ("assert", "raise", " % ", "<", ">", "if ")), (path, first)
