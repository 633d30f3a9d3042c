"""Render stage: Plan -> {artifact name: text}. Logic-free templates, quoting that fails closed.

Every `{{ … }}` in a template must end in one of the quoting filters of quoting.py, which return `Safe`
strings; `finalize` raises on anything else, so a value that was not quoted for its target
language can never reach an artifact. job.json is serialised from a model, never templated.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..platform.aistudio import job_document
from ..plan.types import Plan
from .quoting import QUOTING_FILTERS, finalize


def templates_dir() -> Path:
    """templates/ inside the installed package, or at the top of a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / "launch.sh.j2").is_file():
            return candidate
    raise FileNotFoundError("megatron-compile's templates/ directory is missing from this installation")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One Jinja environment per process: templates are compiled once and cached."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.clear()  # only quoting filters: no string methods or arithmetic helpers in templates
    env.globals.clear()  # no range, dict, cycler…: templates read the plan and nothing else
    env.tests.clear()
    env.filters.update(QUOTING_FILTERS)
    return env


def to_json(document: dict) -> str:
    """Stable JSON: the document's key order, two-space indent, UTF-8, one trailing newline.

    Byte for byte `json.dumps(document, indent=2, ensure_ascii=False)` (a test holds it to that),
    with each scalar encoded by json's C encoder: with an indent, json.dumps runs its pure-Python
    encoder, which took a tenth of a 500-spec run."""
    return _json_text(document, "\n") + "\n"


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def _json_text(value: Any, newline: str) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = newline + "  "
        return "{" + inner + ("," + inner).join(
            _encode(str(key)) + ": " + _json_text(item, inner) for key, item in value.items()) + newline + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = newline + "  "
        return "[" + inner + ("," + inner).join(_json_text(item, inner) for item in value) + newline + "]"
    return _encode(value)


def _tidy(text: str) -> str:
    """LF line endings and exactly one trailing newline."""
    return text.replace("\r\n", "\n").rstrip("\n") + "\n"


def _generated_by(plan: Plan) -> dict[str, Any]:
    h = plan.header
    return {"tool": h.tool, "version": h.version, "spec": h.spec, "spec_sha256": h.spec_sha256,
            "regenerate": h.regenerate}


def render(plan: Plan) -> dict[str, str]:
    """Render every artifact of a plan, keyed by file name, in plan.artifacts order: each step's
    templates, then the platform's job document of each step that runs (it embeds the launch)."""
    env = environment()
    rendered: dict[str, str] = {}
    for step in plan.steps:
        for artifact in step.artifacts:
            if artifact.template is not None:
                rendered[artifact.file] = _tidy(env.get_template(artifact.template).render(plan=plan, step=step))
    for artifact in plan.summary:
        assert artifact.template is not None
        rendered[artifact.file] = _tidy(env.get_template(artifact.template).render(plan=plan))
    for step in plan.steps:
        for artifact in step.artifacts:
            if artifact.template is None:
                assert step.job is not None and artifact.embeds is not None
                rendered[artifact.file] = to_json(job_document(step.job, _generated_by(plan), rendered[artifact.embeds]))
    return {name: rendered[name] for name in plan.artifacts}
