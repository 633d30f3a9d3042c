"""The engine table: a spec's `platform:` name -> its adapter (engine.Engine).

The one place that lists the engines; adding one is a module of this package and a row here
(docs/architecture.md, "Engines").
"""

from __future__ import annotations

from . import aistudio, kubernetes, skypilot, slurm
from .engine import Engine

ENGINES: dict[str, Engine] = {
    aistudio.ENGINE.name: aistudio.ENGINE,
    slurm.ENGINE.name: slurm.ENGINE,
    kubernetes.ENGINE.name: kubernetes.ENGINE,
    skypilot.ENGINE.name: skypilot.ENGINE,
}
DEFAULT_ENGINE = aistudio.ENGINE.name  # the spec schema's default for `platform:`


def engine(name: str) -> Engine:
    """The adapter of an engine the schema accepts (KeyError for another name: a bug)."""
    return ENGINES[name]


def engine_sections() -> tuple[tuple[str, str], ...]:
    """(engine name, the spec section of its settings) of each engine that has a section."""
    return tuple((e.name, e.section) for e in ENGINES.values() if e.section is not None)
