"""Render stage: Plan -> {artifact name: text}. Logic-free templates, quoting that fails closed.

Every `{{ … }}` in a template must end in one of the quoting filters of quoting.py, which return `Safe`
strings; `finalize` raises on anything else, so a value that was not quoted for its target
language can never reach an artifact. An engine's document without a template (job.json,
trainjob.yaml) is data from its adapter, serialised here, never templated.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, MutableMapping

import jinja2
import yaml

from .. import installation
from ..platform.engines import engine
from ..plan.types import Plan
from ..text import CONTROL
from .precompile import code_for
from .quoting import QUOTING_FILTERS, TemplateSafetyError, finalize


def templates_dir() -> Path:
    """templates/ inside the installed package, or at the top of a source checkout."""
    return Path(installation.templates_dir())


class _Loader(jinja2.FileSystemLoader):
    """templates/, each template's code as Jinja generated it taken from precompile.py's file where it has the
    template's source (by its hash), else generated from the source as Jinja does."""

    def load(self, environment: jinja2.Environment, name: str,
             globals: MutableMapping[str, Any] | None = None) -> jinja2.Template:
        source, filename, uptodate = self.get_source(environment, name)
        code = code_for(source)
        if code is None:
            return super().load(environment, name, globals)
        return environment.template_class.from_code(environment, compile(code, filename, "exec"), globals or {},
                                                    uptodate)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_Loader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
        # Jinja's optimizer folds constant expressions; every expression here is a plan value through a
        # quoting filter, so it finds nothing to fold and only costs time (about 3 of the 24 ms that
        # compiling tp2's six templates takes; docs/performance.md)
        optimized=False,
    )
    env.filters.clear()  # only quoting filters: no string methods or arithmetic helpers in templates
    env.globals.clear()  # no range, dict, cycler…: templates read the plan and nothing else
    env.tests.clear()
    env.filters.update(QUOTING_FILTERS)
    return env


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One Jinja environment per process: each template is compiled once, when first rendered."""
    return _environment()


def to_json(document: dict[str, Any]) -> str:
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


def _generated_by(plan: Plan) -> dict[str, str]:
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
            if artifact.template is not None and artifact.embeds is None:
                rendered[artifact.file] = _tidy(env.get_template(artifact.template).render(plan=plan, step=step))
    for artifact in plan.summary:
        assert artifact.template is not None
        rendered[artifact.file] = _tidy(env.get_template(artifact.template).render(plan=plan))
    # the platform's documents carry a script rendered above: job.json, job.sbatch, trainjob.yaml
    for step in plan.steps:
        for artifact in step.artifacts:
            if artifact.embeds is None:
                continue
            embedded = rendered[artifact.embeds]
            if artifact.template is not None:
                rendered[artifact.file] = _tidy(env.get_template(artifact.template).render(
                    plan=plan, step=step, embedded=embedded))
            else:
                document = engine(plan.platform).render(step.job, plan.header.lines(), _generated_by(plan), embedded)
                rendered[artifact.file] = (to_json(document.body) if document.format == "json"
                                           else to_yaml(list(document.comments), document.body))
    return {name: rendered[name] for name in plan.artifacts}


class _BlockDumper(yaml.SafeDumper):
    """YAML with multi-line strings as literal blocks (the TrainJob's command stays readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def to_yaml(comments: list[str], document: dict[str, Any]) -> str:
    """Stable YAML: comment lines, then the document in its key order, block scalars for multi-line text."""
    body = yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=4096)
    for line in comments:
        _no_control(line)
    return "".join(f"# {line}\n" if line else "#\n" for line in comments) + body


def _no_control(text: str) -> None:
    if CONTROL.search(text):
        raise TemplateSafetyError(f"control character in a YAML comment: {text!r}")
