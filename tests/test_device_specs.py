"""The specs that device runs compile (tests/e2e/, tests/e2e/failed/: docs/e2e.md, docs/doctor.md)
compile without errors here: a spec that does not compile is found on this machine, not on a
lent GPU. The failed-run specs break something at run time, never at compile time."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.load.discover import bases_of
from compiler.one_pass import compile_spec

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("tests/e2e", "tests/e2e/failed", "tests/e2e/multigpu", "tests/e2e/te")
ALL = sorted(str(p) for folder in FOLDERS for p in (REPO / folder).glob("*.yaml"))
BASES = bases_of(ALL)
JOBS = [p for p in ALL if str(Path(p).resolve()) not in BASES]


def test_the_device_specs_are_many():
    assert len(JOBS) > 40 and any("/failed/" in p for p in JOBS)


@pytest.mark.parametrize("path", JOBS, ids=lambda p: str(Path(p).relative_to(REPO)))
def test_a_device_spec_compiles(path):
    display = str(Path(path).relative_to(REPO))
    result = compile_spec(path, display)
    errors = [f"{d.file}:{d.line}:{d.column}: {d.message}" for d in result.diagnostics if d.is_error]
    assert result.ok and not errors, "\n".join(errors)
