"""The repository's own settings for the compiler: `.megatron-compile/NAME.yaml` at the root of
the git work tree holding a spec (the price table that overrides the committed one, the guardrails).

Read through `inputs` like a spec, so a compile's kept result depends on them and `diff` reads them
as they were at the base revision.
"""

from __future__ import annotations

import os

from ..diagnostics import Diagnostic
from . import inputs
from .discover import repository_root
from .source import SourceDoc, load_file

CONFIG_DIR = ".megatron-compile"
PRICES = "prices.yaml"
GUARDRAILS = "guardrails.yaml"


def config_path(spec_path: str, name: str) -> str | None:
    """Where the repository holding `spec_path` keeps `name`, or None outside a repository."""
    root = repository_root(spec_path)
    return None if root is None else os.path.join(root, CONFIG_DIR, name)


def shown(path: str, spec_path: str) -> str:
    """The settings file as diagnostics print it: relative to the repository root."""
    root = repository_root(spec_path)
    return os.path.relpath(path, root) if root is not None else path


def load_config(spec_path: str, name: str) -> tuple[SourceDoc | None, list[Diagnostic]]:
    """The settings file `name` of the spec's repository, parsed with positions; (None, []) when
    there is none."""
    path = config_path(spec_path, name)
    if path is None or not inputs.exists(path):
        return None, []
    return load_file(path, shown(path, spec_path))
