"""`NamedTuple` for the compiler's plain data: typing's class syntax and checking, without its import cost.

typing.NamedTuple turns each field's annotation into a ForwardRef, and a ForwardRef compiles its text
(`from __future__ import annotations` makes every annotation text): about 50 µs a class, 4 ms of the
imports of one compile, which defines some 80 of them (docs/performance.md). The class statement here
makes the same class, collections.namedtuple with the class body's methods, docstring and defaults,
its `__annotations__` kept as written; the type checker sees typing.NamedTuple itself.

The class is the one collections.namedtuple makes (tests/test_tuples.py holds them to the same
behaviour), built without its `eval`: namedtuple compiles the source of a `__new__` for every class,
30 of its 34 µs; here one `__new__` is compiled per number of fields and each class takes a copy
with its own argument names (`CodeType.replace`), about 10 µs a class.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    import sys
    from collections import _tuplegetter  # the C field accessor collections.namedtuple uses
    from types import FunctionType

    _NEW_GLOBALS = {"_tuple_new": tuple.__new__, "__builtins__": {}}
    _NEW_CODE: dict[int, object] = {}  # number of fields -> code of `lambda _cls, _0, _1: _tuple_new(_cls, (_0, _1))`

    def _new(typename, field_names, arg_list, defaults):
        """namedtuple's `__new__`: the code compiled once per arity, with this class's argument names."""
        code = _NEW_CODE.get(len(field_names))
        if code is None:
            args = ", ".join(f"_{i}" for i in range(len(field_names))) + ("," if len(field_names) == 1 else "")
            code = _NEW_CODE[len(field_names)] = eval(  # noqa: S307 (our own text, as namedtuple's)
                f"lambda _cls, {args}: _tuple_new(_cls, ({args}))", _NEW_GLOBALS).__code__
        new = FunctionType(code.replace(co_varnames=("_cls",) + field_names), _NEW_GLOBALS, "__new__",
                           tuple(defaults))
        new.__doc__ = f"Create new instance of {typename}({arg_list})"
        return new

    def _namedtuple(typename, field_names, defaults, module):
        """collections.namedtuple(typename, field_names, defaults=defaults, module=module), the same class."""
        field_names = tuple(map(sys.intern, field_names))
        for name in field_names:
            if name.startswith("_"):
                raise ValueError(f"Field names cannot start with an underscore: {name!r}")
        num_fields = len(field_names)
        arg_list = ", ".join(field_names) + ("," if num_fields == 1 else "")
        repr_fmt = "(" + ", ".join(f"{name}=%r" for name in field_names) + ")"
        tuple_new = tuple.__new__

        @classmethod
        def _make(cls, iterable):
            result = tuple_new(cls, iterable)
            if len(result) != num_fields:
                raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
            return result

        _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"

        def _replace(self, /, **kwds):
            result = self._make(map(kwds.pop, field_names, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return result

        _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"

        def __repr__(self):
            "Return a nicely formatted representation string"
            return self.__class__.__name__ + repr_fmt % self

        def _asdict(self):
            "Return a new dict which maps field names to their values."
            return dict(zip(self._fields, self))

        def __getnewargs__(self):
            "Return self as a plain tuple.  Used by copy and pickle."
            return tuple(self)

        __new__ = _new(typename, field_names, arg_list, defaults)
        for method in (__new__, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):
            method.__qualname__ = f"{typename}.{method.__name__}"
        namespace = {
            "__doc__": f"{typename}({arg_list})", "__slots__": (), "_fields": field_names,
            "_field_defaults": dict(zip(field_names[num_fields - len(defaults):], defaults)) if defaults else {},
            "__new__": __new__, "_make": _make, "_replace": _replace, "__repr__": __repr__, "_asdict": _asdict,
            "__getnewargs__": __getnewargs__, "__match_args__": field_names, "__module__": module,
        }
        for index, name in enumerate(field_names):
            namespace[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
        return type(typename, (tuple,), namespace)

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
            cls = _namedtuple(typename, list(fields), defaults, ns["__module__"])
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
