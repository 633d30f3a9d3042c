"""The JSON Schemas under schemas/, generated from the pydantic models (tests keep them in sync)."""

from __future__ import annotations

import json
from pathlib import Path

from .aistudio import JOB_SCHEMA_ID, AIStudioJob
from .models import SPEC_SCHEMA_ID, JobSpec

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _with_draft(schema: dict) -> dict:
    return {"$schema": DRAFT, **schema}


def spec_schema() -> dict:
    """The job spec's schema, as editors (yaml-language-server) and jsonschema read it."""
    return _with_draft(JobSpec.model_json_schema(mode="validation"))


def job_schema() -> dict:
    """The AIStudio job document's schema."""
    return _with_draft(AIStudioJob.model_json_schema(mode="serialization"))


def schema_files() -> dict[str, str]:
    """File name -> text for every schema under schemas/."""
    return {
        SPEC_SCHEMA_ID: json.dumps(spec_schema(), indent=2, ensure_ascii=False) + "\n",
        JOB_SCHEMA_ID: json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n",
    }


def schemas_dir() -> Path:
    """schemas/ inside the installed package, or at the top of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "schemas", here.parent / "schemas"):
        if (candidate / SPEC_SCHEMA_ID).is_file():
            return candidate
    raise FileNotFoundError("megatron-compile's schemas/ directory is missing from this installation")
