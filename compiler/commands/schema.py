"""The JSON Schemas under schemas/, generated from the pydantic models (tests keep them in sync)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from ..emit import check_outputs, write_files

from ..platform.aistudio_schema import JOB_SCHEMA_ID, AIStudioJobDocument
from ..schema.models import SPEC_SCHEMA_ID, JobSpec
from ..tree import rebuild

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _with_draft(schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DRAFT, **schema}


def spec_schema() -> dict[str, Any]:
    """The job spec's schema, as editors (yaml-language-server) and jsonschema read it.

    A spec may `extends` base specs (composed before the models see it), so the top-level keys are
    required only in a spec that extends nothing; a base spec is a partial spec."""
    schema = JobSpec.model_json_schema(mode="validation")
    schema["properties"] = {
        "extends": {
            "description": "base specs (paths relative to this one) deep-merged under it; later wins, lists replaced",
            "anyOf": [{"type": "string", "minLength": 1},
                      {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}],
        },
        **schema["properties"],
    }
    # A spec that extends others, or a base spec (one without a name), is checked as a partial spec:
    # the same keys and types with nothing required; a complete spec is checked in full.
    defs = schema.pop("$defs")
    body_keys = ("type", "properties", "required", "additionalProperties", "description")
    full = {k: schema.pop(k) for k in body_keys if k in schema}
    defs.update({f"Partial{name}": _without_required(definition) for name, definition in list(defs.items())})
    defs["JobSpec"] = full
    defs["PartialJobSpec"] = _without_required(full)
    schema["$defs"] = defs
    schema["if"] = {"anyOf": [{"required": ["extends"]}, {"not": {"required": ["name"]}}]}
    schema["then"] = {"$ref": "#/$defs/PartialJobSpec"}
    schema["else"] = {"$ref": "#/$defs/JobSpec"}
    return _with_draft(schema)


def _without_required(schema: object) -> object:
    """A copy of a schema with every `required` removed and $refs pointed at the Partial* defs."""

    def entry(key: str, value: object) -> tuple[tuple[str, object], ...]:
        if key == "required":
            return ()
        if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
            return ((key, "#/$defs/Partial" + value[len("#/$defs/"):]),)
        return ((key, value),)

    return rebuild(schema, lambda leaf: leaf, entry)


def job_schema() -> dict[str, Any]:
    """The AIStudio job document's schema."""
    return _with_draft(AIStudioJobDocument.model_json_schema(mode="serialization"))


def schema_files() -> dict[str, str]:
    """File name -> text for every schema under schemas/."""
    return {
        SPEC_SCHEMA_ID: json.dumps(spec_schema(), indent=2, ensure_ascii=False) + "\n",
        JOB_SCHEMA_ID: json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n",
    }


def schemas_dir() -> Path:
    """schemas/ inside the installed package, or at the top of a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "schemas", package.parent / "schemas"):
        if (candidate / SPEC_SCHEMA_ID).is_file():
            return candidate
    raise FileNotFoundError("megatron-compile's schemas/ directory is missing from this installation")


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile schema [--check] [--out-dir schemas]`."""
    parser = argparse.ArgumentParser(prog="megatron-compile schema",
                                     description="Write (or --check) the JSON Schemas generated from the models.")
    parser.add_argument("--out-dir", default="schemas")
    parser.add_argument("--check", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    files = schema_files()
    directory = Path(args.out_dir)
    if args.check:
        result = check_outputs(directory, files)
        for diff in result.diffs:
            out.write(diff)
        for path in result.missing:
            out.write(f"missing: {path}\n")
        if result.changed or result.missing:
            err.write("schemas are stale: run `megatron-compile schema`\n")
            return 1
        return 0
    written = write_files(directory, files)
    if written is None:
        err.write(f"{directory}: cannot write the schemas\n")
        return 1
    for name in written:
        out.write(f"wrote {directory / name}\n")
    return 0
