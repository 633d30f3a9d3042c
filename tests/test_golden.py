"""generated/ is exactly what the specs compile to, and schemas/ what the models generate."""

import json
from pathlib import Path

import pytest

from compiler.load.discover import recorded_path as display_path
from compiler.commands.schema import schema_files
from compiler.one_pass import compile_spec
from helpers import REPO, SPECS

BASES = {"base.yaml"}  # extended by the others; a directory compile skips it
SPEC_FILES = sorted(p for p in SPECS.glob("*.yaml") if p.name not in BASES)


@pytest.mark.parametrize("spec", SPEC_FILES, ids=lambda p: p.name)
def test_generated_matches_spec_byte_for_byte(spec, in_repo, update_golden):
    result = compile_spec(str(spec), display_path(str(spec)))
    assert result.ok, result.diagnostics
    out = REPO / "generated" / spec.stem
    if update_golden:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in result.files.items():
            (out / name).write_text(text, encoding="utf-8")
    on_disk = sorted(p.name for p in out.iterdir())
    assert on_disk == sorted(result.files), "generated/ holds other files than the spec produces"
    for name, text in result.files.items():
        assert (out / name).read_bytes() == text.encode("utf-8"), f"generated/{spec.stem}/{name} is stale"


def test_every_generated_directory_has_a_spec():
    assert sorted(p.name for p in (REPO / "generated").iterdir()) == sorted(s.stem for s in SPEC_FILES)


def test_schemas_match_the_models(update_golden):
    for name, text in schema_files().items():
        path = REPO / "schemas" / name
        if update_golden:
            path.write_text(text, encoding="utf-8")
        assert path.read_text(encoding="utf-8") == text, f"schemas/{name} drifted: run `megatron-compile schema`"
        json.loads(text)
