"""Each template's Python as Jinja generates it, kept in compiler/render/precompiled.json by the Jinja version and the
template's source, so a compile compiles that code instead of running Jinja's code generation for each template again
in every process (24 of a one-spec compile's 176 ms; docs/performance.md).

    python -m compiler.render   # after editing templates/; tests/test_render.py keeps it in sync

Not a cache: a template's code is found by its source's hash, so an edited template without its entry is generated
from its source as before, and nothing is written at run time.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PRECOMPILED = Path(__file__).resolve().parent / "precompiled.json"


def source_key(source: str) -> str:
    """A template's entry: Jinja's version and the template's source, hashed."""
    return hashlib.sha1(f"{jinja2.__version__}\0{source}".encode()).hexdigest()


def generate(env: jinja2.Environment) -> dict[str, Any]:
    """The file's document: each template of the environment's loader, its key and its generated code."""
    assert env.loader is not None
    entries = {}
    for name in env.list_templates():
        source = env.loader.get_source(env, name)[0]
        entries[name] = {"key": source_key(source), "code": env.compile(source, name, raw=True)}
    return {"generated_by": "python -m compiler.render", "jinja2": jinja2.__version__, "templates": entries}


@lru_cache(maxsize=1)
def _codes() -> dict[str, str]:
    try:
        document = json.loads(PRECOMPILED.read_text())
    except (OSError, ValueError):
        return {}
    return {entry["key"]: entry["code"] for entry in document.get("templates", {}).values()}


def code_for(source: str) -> str | None:
    """The generated code of a template with this source, where the file has it."""
    return _codes().get(source_key(source))
