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
  validator_schema.py (`python -m compiler.schema.generate`), with the key it was built under
  (pydantic's and pydantic-core's versions, and the sources here it comes from): a first compile
  on a fresh machine imports it like any module. Under another pydantic, or with a source changed
  and the module not regenerated, the key differs and the module is not used: the schema is then
  built from the models the first time and kept in the user's cache under the same key and
  Python's version; later processes load it (about 1 ms). The cache file is read with an
  unpickler that resolves nothing but the Records and formats.py's checks.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    from pydantic import BaseModel

from ..tree import nodes, rebuild
from . import record
from .record import Record

_SOURCES = ("models.py", "formats.py", "validator.py", "record.py", "records.py", "generate.py")  # what the schema is built from

# The sections the rules see on their own when the whole spec did not validate.
SECTIONS = ("image", "megatron", "resources", "storage", "parallelism", "training", "init_from", "slurm", "kubernetes",
            "skypilot")


# --- the schema, built from the models -------------------------------------------------------------


def transform(schema: Any, resolve: Callable[[Any], Any]) -> Any:
    """pydantic's core schema of JobSpec, with model classes, functions and factories passed through
    `resolve`, model-class default factories turned into validated `{}` defaults, and the JSON-schema
    metadata dropped (pydantic-core does not read it)."""
    from pydantic import BaseModel

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
    from . import models

    models.JobSpec.model_rebuild()
    return models.JobSpec.__pydantic_core_schema__


def model_classes() -> list[type[BaseModel]]:
    """Every model class of the spec, JobSpec last (the order records.py defines them in)."""
    from pydantic import BaseModel

    from . import models

    found = [obj for obj in vars(models).values()
             if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == models.__name__
             and not obj.__name__.startswith("_")]
    return sorted(found, key=lambda cls: (cls is models.JobSpec, cls.__name__))


def schema_key() -> str:
    """What the schema is built from: pydantic (its version file, read without importing pydantic),
    pydantic-core, and this package's sources of it. The committed schema (validator_schema.py)
    records the key it was built under."""
    import importlib.util

    import pydantic_core

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


def _cache_key() -> str:
    """The user's cache file's key: the schema's, and Python's (a pickle is of one Python)."""
    return hashlib.sha256(f"{schema_key()} {sys.version}".encode()).hexdigest()[:32]


class _Pickler(pickle.Pickler):
    """Records, checks and factories are written as names, resolved again by _Unpickler."""

    def persistent_id(self, obj: Any) -> Any:
        from . import formats

        if isinstance(obj, type) and issubclass(obj, Record):
            return ("record", obj.__name__)
        if obj is formats.no_control:
            return ("no_control", "")
        for name, check in formats.CHECKS.items():
            if obj is check:
                return ("check", name)
        if obj is list or obj is dict:
            return ("builtin", obj.__name__)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        from . import formats

        kind, name = pid
        if kind == "record":
            return _record_class(name)
        if kind == "check":
            return formats.CHECKS[name]
        if kind == "no_control":
            return formats.no_control
        if kind == "builtin":
            return {"list": list, "dict": dict}[name]
        raise pickle.UnpicklingError(f"unknown reference {pid!r}")

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the validator cache may not refer to {module}.{name}")


def _record_class(name: str) -> type[Record]:
    """records.py's Record class of that name, or a new one for a model records.py does not have yet."""
    from . import records

    existing = getattr(records, name, None)
    if isinstance(existing, type) and issubclass(existing, Record):
        return existing
    return _DYNAMIC.setdefault(name, type(name, (Record,), {"__slots__": ()}))


_DYNAMIC: dict[str, type[Record]] = {}


def _built() -> dict[str, Any]:
    """The schema built from the models now (imports pydantic's model machinery)."""
    from pydantic import BaseModel

    def resolve(obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return _record_class(obj.__name__)
        return obj

    result: dict[str, Any] = transform(_job_spec_schema(), resolve)
    return result


def _committed(key: str) -> dict[str, Any] | None:
    """The schema committed in validator_schema.py, when it was built under this key."""
    try:
        from . import validator_schema
    except ImportError:
        return None
    if validator_schema.KEY != key:
        return None
    return validator_schema.schema()


@lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    """The core schema the compile path validates with: the committed one when it was built from
    these sources under this pydantic; else from the user's cache; else built and cached."""
    import io

    from .cache import cache_dir, write_atomic

    committed = _committed(schema_key())
    if committed is not None:
        return committed
    directory = cache_dir("validator")
    path = None if directory is None else f"{directory}/{_cache_key()}.pickle"
    if path is not None:
        try:
            with open(path, "rb") as fh:
                loaded = _Unpickler(fh).load()
            if isinstance(loaded, dict) and loaded.get("cls") is _record_class("JobSpec"):
                return loaded
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, KeyError, TypeError, AttributeError,
                IndexError):
            pass  # missing, or not one we wrote: build it again
    built = _built()
    if path is not None:
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(built)
        data = buffer.getvalue()
        try:
            _Unpickler(io.BytesIO(data)).load()  # only a schema that loads again is kept
        except pickle.UnpicklingError:
            return built
        write_atomic(path, data)
    return built


@lru_cache(maxsize=None)
def validator() -> Any:
    from pydantic_core import SchemaValidator

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
    from pydantic_core import SchemaValidator

    top = schema()
    body = top["schema"] if top.get("type") == "definitions" else top
    node = body["schema"]["fields"][name]["schema"]
    while node.get("type") in ("default", "nullable"):
        node = node["schema"]
    return SchemaValidator(_record_schemas()[node["cls"]])


@lru_cache(maxsize=None)
def _serializer(cls: type) -> Any:
    from pydantic_core import SchemaSerializer

    return SchemaSerializer(_record_schemas()[cls])


record.serializer_for = _serializer
