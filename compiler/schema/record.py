"""The base of the generated spec records: read-only attributes that pydantic-core fills in.

Kept apart from the validator so that the generated records (records.py) import nothing that
imports them back; the validator installs the serializer `model_dump` uses.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, TypeVar

from ..tree import rebuild

# Set by validator.py when it is imported (which any validated spec went through): record class -> serializer.
serializer_for: Callable[[type], Any] | None = None


class Record:
    """A validated part of a spec: read-only attributes, filled in by pydantic-core."""

    __slots__ = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
    __pydantic_fields_set__: set[str]  # a slot pydantic-core fills in (declared for the type checker)
    __aliases__: ClassVar[dict[str, str]] = {}  # field name -> the key a spec spells (global_ -> global)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (a validated spec)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (a validated spec)")

    @property
    def model_fields_set(self) -> set[str]:
        """The fields the spec set (not filled in from a default), as pydantic's models have it."""
        return self.__pydantic_fields_set__

    def model_dump(self, *, mode: str = "python", by_alias: bool = False) -> dict[str, Any]:
        assert serializer_for is not None, "a Record is made only by the validator"
        result: dict[str, Any] = serializer_for(type(self)).to_python(self, mode=mode, by_alias=by_alias)
        return result

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), dict(self.__dict__), set(self.__pydantic_fields_set__))


def to_json(value: Any) -> Any:
    """A validated spec (or part of it) as JSON data with the keys a spec spells: what
    `model_dump(mode="json", by_alias=True)` gives (a test holds it to that), without building
    pydantic-core's serializer for it (which also imports uuid and platform)."""
    return rebuild(value, _record_json)


def _record_json(value: Any) -> Any:
    if isinstance(value, Record):
        aliases = value.__aliases__
        return {aliases.get(name, name): to_json(item) for name, item in value.__dict__.items()}
    return value


def _rebuild(cls: type[Record], values: dict[str, Any], fields_set: set[str]) -> Record:
    record = object.__new__(cls)
    object.__setattr__(record, "__dict__", values)
    object.__setattr__(record, "__pydantic_fields_set__", fields_set)
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


R = TypeVar("R", bound=Record)


_FIELDS: dict[type[Record], frozenset[str]] = {}


def fields(cls: type[Record]) -> frozenset[str]:
    """The fields of a record class (its own and its bases'), as its attributes name them."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = frozenset(name for klass in cls.__mro__ if issubclass(klass, Record)
                                         and klass is not Record for name in vars(klass).get("__annotations__", {}))
    return found


def replace(record: R, **changes: Any) -> R:
    """A new record of record's class with some fields replaced (a derived value where the spec left
    a field out: the architecture init_from derives, a candidate layout of `size`); the fields the
    spec set stay those it set. Nested records are replaced by passing a replaced record."""
    return extend(record, type(record), **changes)


def new(cls: type[R], **values: Any) -> R:
    """A record of cls from a value for each of its fields: a derived section the spec did not write
    (a candidate's recompute in `size`)."""
    if set(values) != fields(cls):
        raise TypeError(f"{cls.__name__}: fields {sorted(fields(cls))}, given {sorted(values)}")
    record = _rebuild(cls, dict(values), set(values))
    assert isinstance(record, cls)
    return record


def extend(record: Record, cls: type[R], **changes: Any) -> R:
    """record as cls, a subclass of its class that adds fields (given in changes, all of them), with
    changes applied: a derived record typed with what is derived beyond the spec's fields."""
    if not issubclass(cls, type(record)):
        raise TypeError(f"{cls.__name__} does not extend {type(record).__name__}")
    unknown = set(changes) - fields(cls)
    missing = fields(cls) - fields(type(record)) - set(changes)
    if unknown or missing:
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(unknown)}, missing fields {sorted(missing)}")
    rebuilt = _rebuild(cls, {**record.__dict__, **changes}, set(record.__pydantic_fields_set__))
    assert isinstance(rebuilt, cls)
    return rebuilt
