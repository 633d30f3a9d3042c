"""`NamedTuple` for the compiler's plain data: typing's class syntax and checking, without its import cost.

typing.NamedTuple turns each field's annotation into a ForwardRef, and a ForwardRef compiles its text
(`from __future__ import annotations` makes every annotation text): about 50 µs a class, 4 ms of the
imports of one compile, which defines some 80 of them (docs/performance.md). The class statement here
makes the same class, collections.namedtuple with the class body's methods, docstring and defaults,
its `__annotations__` kept as written; the type checker sees typing.NamedTuple itself.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    import collections

    # what typing.NamedTupleMeta refuses to take from a class body, and what it does not copy
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                             "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleMeta(type):
        def __new__(mcls, typename, bases, ns):
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, typename, bases, ns)
            if bases != (NamedTuple,):
                raise TypeError("a NamedTuple class inherits from NamedTuple only (no Generic, no mixins)")
            if "__annotations__" not in ns:
                # Python 3.14 keeps unevaluated annotations behind __annotate__: never make a tuple
                # without fields silently; every module here has `from __future__ import annotations`
                raise TypeError(f"{typename}: no __annotations__ in the class body (is `from __future__ "
                                "import annotations` missing, or is this Python 3.14?)")
            fields = ns["__annotations__"]
            defaults: list[object] = []
            for name in fields:
                if name in ns:
                    defaults.append(ns[name])
                elif defaults:  # namedtuple would give the defaults to the last fields instead
                    raise TypeError(f"{typename}: field {name} without a default follows one with a default")
            cls = collections.namedtuple(typename, list(fields), defaults=defaults, module=ns["__module__"])
            cls.__annotations__ = dict(fields)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{typename}: a NamedTuple cannot overwrite {key}")
                if key not in _SPECIAL and key not in cls._fields:
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base of a class statement that makes a named tuple (typing.NamedTuple's class syntax)."""

        def __new__(cls, *args: object, **kwargs: object) -> NamedTuple:
            raise TypeError("NamedTuple's functional form is not supported: write a class statement")
