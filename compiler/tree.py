"""Walking JSON-like data (dicts, lists, tuples, and leaves): one traversal and one rebuild, for the
spec's raw data, pydantic's core schema and the JSON schemas alike."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

Path = tuple[Any, ...]


def nodes(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any, bool]]:
    """Every node, depth first in document order, as (path, node, is_key): a container before what
    it holds, and a dict's key (its path that of its value) just before its value."""
    yield path, value, False
    if isinstance(value, dict):
        for key, item in value.items():
            yield path + (key,), key, True
            yield from nodes(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from nodes(item, path + (index,))


def rebuild(value: Any, leaf: Callable[[Any], Any],
            entry: Callable[[Any, Any], Iterable[tuple[Any, Any]]] | None = None) -> Any:
    """A copy: dicts, lists and tuples rebuilt, every other value passed through `leaf`. `entry`,
    when given, turns each dict entry (key, value) into the entries the copy holds instead (none
    to drop it, another key or value to replace it); the values it returns are rebuilt in turn."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            for new_key, new_item in (entry(key, item) if entry is not None else ((key, item),)):
                out[new_key] = rebuild(new_item, leaf, entry)
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(rebuild(item, leaf, entry) for item in value)
    return leaf(value)
