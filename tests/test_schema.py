"""The compile path's validator (compiler/coreschema.py) against the pydantic models it comes from.

The models are the source of truth; the compile path validates with pydantic-core and plain Record
classes. These tests hold the two to the same values, the same fields set and the same errors on
every spec the project has, good and bad, and check the cache that keeps pydantic's model machinery
out of a cold compile.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from compiler.load.compose import compose
from compiler.platform.aistudio import job_document
from compiler.platform.aistudio_schema import AIStudioJobDocument, GeneratedBy
from compiler.schema import generate, models
from compiler.schema.record import to_json
from compiler.schema import validator as coreschema
from compiler.one_pass import compile_spec
from helpers import REPO

def _data(path: Path):
    composed = compose(str(path), str(path.relative_to(REPO)))
    return None if composed.doc is None else composed.doc.data


# Every spec of the project that loads as YAML (the rest never reaches a validator), good and bad.
SPEC_FILES = sorted(
    p for pattern in ("specs/*.yaml", "tests/e2e/*.yaml", "tests/conformance_specs/*.yaml", "tests/bad_specs/*.yaml",
                      "tests/bad_specs/_bases/*.yaml")
    for p in REPO.glob(pattern) if _data(p) is not None
)


def _errors(exc: ValidationError) -> list[tuple]:
    return [(e["type"], e["loc"], e["msg"], repr(e.get("input"))) for e in exc.errors(include_url=False)]


def _fields_set(value) -> object:
    """Every nested model's fields_set, as a comparable tree."""
    if hasattr(value, "model_fields_set"):
        return {"set": sorted(value.model_fields_set),
                "fields": {k: _fields_set(v) for k, v in vars(value).items()}}
    if isinstance(value, list):
        return [_fields_set(v) for v in value]
    if isinstance(value, dict):
        return {k: _fields_set(v) for k, v in value.items()}
    return None


def test_records_are_generated_from_the_models():
    assert (REPO / "compiler" / "schema" / "records.py").read_text() == generate.generate(), (
        "compiler/schema/records.py is stale: run `python -m compiler.schema.generate`")


def test_the_corpus_is_large_enough_to_mean_something():
    assert len(SPEC_FILES) > 80


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_values_fields_and_errors_as_the_models(path):
    data = _data(path)
    try:
        expected = models.JobSpec.model_validate(data)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            coreschema.validator().validate_python(data)
        assert _errors(got.value) == _errors(exc)
        return
    record = coreschema.validator().validate_python(data)
    assert record.model_dump(mode="json", by_alias=True) == expected.model_dump(mode="json", by_alias=True)
    # what the header's spec sha256 is taken of, without pydantic-core's serializer: the same data,
    # and the same key order
    assert json.dumps(to_json(record)) == json.dumps(expected.model_dump(mode="json", by_alias=True))
    assert record.model_dump() == expected.model_dump()
    assert _fields_set(record) == _fields_set(expected)
    assert type(record).__name__ == "JobSpec" and type(record.training).__name__ == "Training"


@pytest.mark.parametrize("name", coreschema.SECTIONS)
def test_each_section_validates_alone_like_its_model(name):
    model = models.unwrap(models.JobSpec.model_fields[name].annotation)
    for path in SPEC_FILES:
        data = _data(path)
        raw = data.get(name) if isinstance(data, dict) else None
        if not isinstance(raw, dict):
            continue
        try:
            expected = model.model_validate(raw)
        except ValidationError as exc:
            with pytest.raises(ValidationError) as got:
                coreschema.section_validator(name).validate_python(raw)
            assert _errors(got.value) == _errors(exc)
            continue
        got = coreschema.section_validator(name).validate_python(raw)
        assert got.model_dump() == expected.model_dump()


def test_sections_are_the_models_sections():
    sections = [name for name, info in models.JobSpec.model_fields.items()
                if isinstance(models.unwrap(info.annotation), type) and issubclass(models.unwrap(info.annotation), BaseModel)]
    assert tuple(sections) == coreschema.SECTIONS


def test_records_are_read_only_and_pickle():
    spec = compile_spec(str(REPO / "specs" / "tp2.yaml"), "specs/tp2.yaml", render_files=False).spec
    with pytest.raises(AttributeError):
        spec.name = "other"
    with pytest.raises(AttributeError):
        del spec.resources.workers
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.model_fields_set == spec.model_fields_set
    assert "JobSpec(version=1, name='mcore-tp2-01'" in repr(spec)


def test_job_json_has_the_aistudio_models_fields_in_order():
    plan = compile_spec(str(REPO / "specs" / "tp2-dp2.yaml"), "specs/tp2-dp2.yaml", render_files=False).plan
    generated_by = {"tool": "megatron-compile", "version": "0.1.0", "spec": "specs/tp2-dp2.yaml", "spec_sha256": "0" * 64,
                    "regenerate": "megatron-compile specs/tp2-dp2.yaml"}
    document = job_document(plan.job, generated_by, "launch")
    assert list(document) == list(AIStudioJobDocument.model_fields)
    assert list(document["generated_by"]) == list(GeneratedBy.model_fields)
    AIStudioJobDocument.model_validate(document)


# --- the committed core schema: the one mechanism ------------------------------------------------

PROBE = """
import sys
if sys.argv[3] == "other":  # a committed schema built under another pydantic, or stale
    from compiler.schema import validator_schema
    validator_schema.KEY = "built under another pydantic"
from compiler.cli import main
code = main(["-q", sys.argv[1], "-o", sys.argv[2]])
print(json.dumps({"code": code, "pydantic": "pydantic.main" in sys.modules, "models": "compiler.schema.models" in sys.modules}))
"""


def _cold_compile(tmp_path: Path, cache: Path, pydantic: str = "committed") -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", "import json\n" + PROBE, str(REPO / "specs" / "tp2.yaml"),
                           str(tmp_path / "out"), pydantic], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _committed_applies() -> bool:
    import pydantic_core

    from compiler.schema import validator_schema

    return (validator_schema.PYDANTIC_CORE, validator_schema.PYDANTIC) == (pydantic_core.__version__,
                                                                           __import__("pydantic").VERSION)


def test_the_committed_schema_is_the_one_built_from_the_models():
    """Under the pydantic it was built with, validator_schema.py is exactly what the generator
    writes now: a model, format or validator change without regenerating fails here."""
    from compiler.schema import validator_schema

    if _committed_applies():
        assert (REPO / "compiler" / "schema" / "validator_schema.py").read_text() == generate.generate_schema(), (
            "compiler/schema/validator_schema.py is stale: run `python -m compiler.schema.generate`")
        assert coreschema._committed(coreschema.schema_key()) is not None
    else:  # another pydantic is installed: the committed schema must not be used, the built one is
        assert validator_schema.KEY != coreschema.schema_key()
        assert coreschema._committed(coreschema.schema_key()) is None


def test_a_compile_imports_no_pydantic_model_machinery_and_writes_no_cache(tmp_path):
    cache = tmp_path / "cache"
    expected_pydantic = not _committed_applies()
    assert _cold_compile(tmp_path, cache) == {"code": 0, "pydantic": expected_pydantic, "models": expected_pydantic}
    assert not cache.exists(), sorted(str(p) for p in cache.rglob("*"))


def test_under_another_pydantic_the_schema_is_built_in_the_process_and_not_kept(tmp_path):
    cache = tmp_path / "cache"
    for _ in range(2):  # built again by each process: nothing is kept
        assert _cold_compile(tmp_path, cache, "other") == {"code": 0, "pydantic": True, "models": True}
    assert not cache.exists()


def test_the_built_schema_validates_as_the_committed_one():
    """The fallback (built in the process) gives what the committed schema gives, on a spec and on an error."""
    from pydantic_core import SchemaValidator, ValidationError

    from compiler.load.source import load_file

    doc, _ = load_file(str(REPO / "generated" / ".." / "tests" / "bad_specs" / "platform-kubernetes-names.yaml"),
                       "spec.yaml")
    built, committed = SchemaValidator(coreschema._built()), coreschema.validator()
    assert built.validate_python(doc.data) == committed.validate_python(doc.data)
    broken = {**doc.data, "resources": {**doc.data["resources"], "workers": 0}}
    errors = []
    for validator in (built, committed):
        with pytest.raises(ValidationError) as caught:
            validator.validate_python(broken)
        errors.append(caught.value.errors())
    assert errors[0] == errors[1]


def test_the_key_follows_pydantic_core_and_the_sources(monkeypatch):
    import pydantic_core

    key = coreschema.schema_key()
    monkeypatch.setattr(pydantic_core, "__version__", pydantic_core.__version__ + ".other")
    assert coreschema.schema_key() != key
    assert coreschema._committed(coreschema.schema_key()) is None
