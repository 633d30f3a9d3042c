"""The job spec's validator on the compile path: pydantic-core running the models' own schema.

models.py is the source of truth for the spec's shape. Creating its pydantic classes and building
their validator costs a cold process about 50 ms (docs/performance.md), more than the whole compile
beside it. So the compile path does neither:

- a validated spec is made of plain read-only `Record` classes of the same names and fields,
  generated into schema/records.py (`python -m compiler.schema.generate`; a test keeps it in sync), read
  exactly like the models (`spec.training.model.num_layers`, `model_fields_set`, `model_dump`);
- the validator is pydantic-core's, given the core schema pydantic builds from the models, with
  each model class replaced by its Record and a default that pydantic makes by calling a model class
  (`Field(default_factory=Parallelism)`) replaced by `{}` validated through that model's schema:
  the same values, the same errors;
- that schema depends on the installed pydantic and on models.py. It is committed, built, in
  validator_schema.py (`python -m compiler.schema.generate`; tests/test_schema.py fails while it
  is stale), with the key it was built under (pydantic's and pydantic-core's versions, and the
  sources here it comes from): a compile imports it like any module. Under another pydantic, or
  with a source changed and the module not regenerated, the key differs and the module is not
  used: each process then builds the schema from the models (about 50 ms more; the same
  validation). Nothing is written to the user's cache (docs/architecture.md says why this one
  mechanism).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    from pydantic import BaseModel

from ..tree import nodes, rebuild
from . import record
from .record import Record
import importlib.util
import pydantic_core
from . import records, validator_schema
from pydantic_core import SchemaValidator
from pydantic_core import SchemaSerializer

_SOURCES = ("models.py", "sections.py", "formats.py", "validator.py", "record.py", "records.py", "generate.py")  # what the schema is built from

# The sections the rules see on their own when the whole spec did not validate.
SECTIONS = ("image", "megatron", "resources", "storage", "parallelism", "training", "init_from", "stop", "slurm",
            "kubernetes", "skypilot")


# --- the schema, built from the models -------------------------------------------------------------


def transform(schema: Any, resolve: Callable[[Any], Any]) -> Any:
    """pydantic's core schema of JobSpec, with model classes, functions and factories passed through
    `resolve`, model-class default factories turned into validated `{}` defaults, and the JSON-schema
    metadata dropped (pydantic-core does not read it)."""
    from pydantic import BaseModel  # deferred: building the schema only: a compile validates with the committed one, without pydantic's models

    def entry(key: str, value: Any) -> Iterable[tuple[str, Any]]:
        if key == "metadata":
            return ()
        if key == "default_factory" and isinstance(value, type) and issubclass(value, BaseModel):
            return (("default", {}), ("validate_default", True))
        return ((key, value),)

    def leaf(node: Any) -> Any:
        return node if node is None or isinstance(node, (str, int, float, bool)) else resolve(node)

    return rebuild(schema, leaf, entry)


def _job_spec_schema() -> Any:
    from . import models  # deferred: building the schema only: a compile validates with the committed one, without pydantic's models

    models.JobSpec.model_rebuild()
    return models.JobSpec.__pydantic_core_schema__


def model_classes() -> list[type[BaseModel]]:
    """Every model class of the spec, JobSpec last (the order records.py defines them in)."""
    from pydantic import BaseModel  # deferred: building the schema only: a compile validates with the committed one, without pydantic's models

    from . import models, sections  # deferred: building the schema only: a compile validates with the committed one, without pydantic's models

    found = [obj for obj in vars(models).values()
             if isinstance(obj, type) and issubclass(obj, BaseModel)
             and obj.__module__ in (models.__name__, sections.__name__) and not obj.__name__.startswith("_")]
    return sorted(found, key=lambda cls: (cls is models.JobSpec, cls.__name__))


def schema_key() -> str:
    """What the schema is built from: pydantic (its version file, read without importing pydantic),
    pydantic-core, and this package's sources of it. The committed schema (validator_schema.py)
    records the key it was built under."""
    digest = hashlib.sha256(f"{pydantic_core.__version__}".encode())
    found = importlib.util.find_spec("pydantic")
    origin = found.origin if found is not None and found.origin else None
    here = os.path.dirname(os.path.abspath(__file__))
    sources = [os.path.join(here, name) for name in _SOURCES]
    sources.append(os.path.join(os.path.dirname(origin), "version.py") if origin else "pydantic-not-found")
    for path in sources:
        try:
            with open(path, "rb") as fh:
                digest.update(fh.read())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:32]


def _record_class(name: str) -> type[Record]:
    """records.py's Record class of that name, or a new one for a model records.py does not have yet."""
    existing = getattr(records, name, None)
    if isinstance(existing, type) and issubclass(existing, Record):
        return existing
    return _DYNAMIC.setdefault(name, type(name, (Record,), {"__slots__": ()}))


_DYNAMIC: dict[str, type[Record]] = {}


def _built() -> dict[str, Any]:
    """The schema built from the models now (imports pydantic's model machinery)."""
    from pydantic import BaseModel  # deferred: building the schema only: a compile validates with the committed one, without pydantic's models

    def resolve(obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return _record_class(obj.__name__)
        return obj

    result: dict[str, Any] = transform(_job_spec_schema(), resolve)
    return result


def _committed(key: str) -> dict[str, Any] | None:
    """The schema committed in validator_schema.py, when it was built under this key."""
    if validator_schema.KEY != key:
        return None
    return validator_schema.schema()


@lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    """The core schema the compile path validates with: the committed one when it was built from
    these sources under this pydantic-core, else built from the models now (each process, nothing kept)."""
    committed = _committed(schema_key())
    return committed if committed is not None else _built()


@lru_cache(maxsize=None)
def validator() -> Any:
    return SchemaValidator(schema())


@lru_cache(maxsize=None)
def _record_schemas() -> dict[type, dict[str, Any]]:
    """Each record class -> its model schema (with the definitions it may refer to)."""
    top = schema()
    definitions = top.get("definitions") if top.get("type") == "definitions" else None
    found: dict[type, dict[str, Any]] = {}
    for _, node, is_key in nodes(top):
        if not is_key and isinstance(node, dict) and node.get("type") == "model" and node.get("cls") not in found:
            found[node["cls"]] = node
    if definitions is None:
        return found
    return {cls: {"type": "definitions", "schema": node, "definitions": definitions} for cls, node in found.items()}


@lru_cache(maxsize=None)
def section_validator(name: str) -> Any:
    """The validator of one top-level section (rules see the sections that validate on their own)."""
    top = schema()
    body = top["schema"] if top.get("type") == "definitions" else top
    node = body["schema"]["fields"][name]["schema"]
    while node.get("type") in ("default", "nullable"):
        node = node["schema"]
    return SchemaValidator(_record_schemas()[node["cls"]])


@lru_cache(maxsize=None)
def _serializer(cls: type) -> Any:
    return SchemaSerializer(_record_schemas()[cls])


record.serializer_for = _serializer
