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


def load_configs(spec_path: str, *names: str) -> list[tuple[SourceDoc | None, list[Diagnostic]]]:
    """Each settings file `names` names in the spec's repository, parsed with positions; (None, [])
    for one there is none of. The repository is looked for once for all of them."""
    root = repository_root(spec_path)
    loaded: list[tuple[SourceDoc | None, list[Diagnostic]]] = []
    for name in names:
        path = None if root is None else os.path.join(root, CONFIG_DIR, name)
        if root is None or path is None or not inputs.exists(path):
            loaded.append((None, []))
        else:  # shown relative to the repository root
            loaded.append(load_file(path, os.path.relpath(path, root)))
    return loaded

