"""Check stage: SourceDoc -> (JobSpec | None, facts, diagnostics), schema and semantic problems together.

Pydantic-core checks the shape; each error's `loc` is walked back to the YAML position it came from
(the key for an unknown key, the parent mapping for a missing one, the value otherwise). The facts
are derived once from every section that validated, and the rules (check/rules/) run on them, so
one run reports everything it can.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import ValidationError

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic, Severity, dotted
from ..load.source import SourceDoc, is_identifier
from ..schema import validator as schema_validator
from ..schema.records import JobSpec
from .context import RuleContext
from ..platform.engines import DEFAULT_ENGINE, ENGINES
from .facts import Facts, derive

if TYPE_CHECKING:
    from ..load.attachments import ConfigJson
from .rules import run_rules


def describe(value: Any) -> str:
    """A short, human description of a parsed value: 'the integer 3', 'a list'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the float {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "bool_type": "a boolean (true or false)",
    "dict_type": "a mapping",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "float_type": "a number",
    "none_required": "null",
}


def is_number(text: str) -> bool:
    """Whether Python reads the text as a number (1e-4, .001, 3)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _yaml11_float(text: str) -> str:
    """'1e-4' -> '1.0e-4': the spelling YAML 1.1 reads as a float."""
    mantissa, sep, exponent = text.lower().partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + sep + exponent


class _Locator:
    """Turns pydantic locations into diagnostics placed in the source."""

    def __init__(self, doc: SourceDoc) -> None:
        self.doc = doc

    def diag(self, code: str, message: str, path: tuple[str | int, ...], *, key: bool = False, hint: str | None = None,
             severity: Severity = Severity.ERROR) -> Diagnostic:
        loc = self.doc.keys.get(path) if key else None
        loc = loc or self.doc.value_location(path)
        where: dict[str, Any] = {"file": self.doc.file}
        if loc is not None:
            span = loc.span
            where = {"file": loc.file, "line": span.line, "column": span.column,
                     "end_line": span.end_line, "end_column": span.end_column}
        return Diagnostic(code=code, severity=severity, message=message, hint=hint, key_path=path, **where)


def _model_at(path: tuple[str | int, ...]) -> Any:
    """The model class that owns the mapping at `path` (for did-you-mean and missing keys). The
    pydantic models are imported only here, for a spec with an unknown key: a spec that validates
    never pays for them."""
    from pydantic import BaseModel  # deferred: an unknown key only: its hint lists the model's keys

    from ..schema.models import annotation_at  # deferred: an unknown key only: its hint lists the model's keys

    annotation = annotation_at(path)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _key_names(model: Any) -> list[str]:
    from ..schema.models import key_names  # deferred: an unknown key only: its hint lists the model's keys

    return key_names(model)


def _did_you_mean(word: str, parent: tuple[str | int, ...]) -> str | None:
    model = _model_at(parent)
    if model is None:
        return None
    import difflib  # deferred: only a misspelt key needs it

    matches = difflib.get_close_matches(word, _key_names(model), n=1, cutoff=0.6)
    return matches[0] if matches else None


def pydantic_to_diagnostics(error: ValidationError, doc: SourceDoc, base: tuple[str | int, ...] = ()) -> list[Diagnostic]:
    """Each pydantic error, reworded and placed at its YAML position. A misspelt key gives 'unknown
    key X; did you mean Y?' and 'missing required key Y'; the first says it all, so the second is
    dropped."""
    at = _Locator(doc)
    out: list[Diagnostic] = []
    missing: dict[int, tuple[str | int, ...]] = {}  # index in out -> the path of the missing key
    suggested: set[tuple[str | int, ...]] = set()  # paths a did-you-mean proposed
    for err in error.errors(include_url=False):
        kind = err["type"]
        raw_loc = base + tuple(err["loc"])
        is_key = bool(raw_loc) and raw_loc[-1] == "[key]"
        path = tuple(p for p in raw_loc if p != "[key]")
        name = dotted(path)
        value = err.get("input")
        if kind == "missing":
            parent, key = path[:-1], path[-1]
            missing[len(out)] = path
            out.append(at.diag(
                "missing-key", f"missing required key '{key}' in {dotted(parent)}", parent,
                hint=f"add `{key}:` to {dotted(parent)}",
            ))
        elif kind == "extra_forbidden":
            parent, key = path[:-1], path[-1]
            guess = _did_you_mean(str(key), parent) if is_identifier(key) else None
            # a key that is not a word is not echoed: a base that is a link to another file (a
            # password file's name:hash lines) must not print that file into a CI log
            message = (f"unknown key '{key}' in {dotted(parent)}" if is_identifier(key)
                       else f"a key that is not a field name (not shown) in {dotted(parent)}")
            if guess:
                message += f"; did you mean '{guess}'?"
                suggested.add(parent + (guess,))
            model = _model_at(parent)
            hint = None if guess or model is None else "allowed keys: " + ", ".join(_key_names(model))
            out.append(at.diag("unknown-key", message, path, key=True, hint=hint))
        elif kind == "literal_error" and path == ("version",):
            out.append(at.diag(
                "unsupported-version", f"spec version {value!r} is not supported; this compiler reads version 1",
                path, hint="set `version: 1`",
            ))
        elif kind == "unsafe_character":
            out.append(at.diag("unsafe-character", f"{name} {err['msg']}", path, key=is_key,
                               hint="remove the character; write multi-line content into a file instead"))
        elif kind in _EXPECTED:
            expected = _EXPECTED[kind]
            spelling = doc.spellings.get(path)
            if kind == "string_type" and spelling is not None and not isinstance(value, (dict, list)):
                out.append(at.diag(
                    "yaml-implicit-type",
                    f"{name}: expected a string, but YAML read the plain value `{spelling.text}` as {describe(value)}",
                    path, hint=f"quote it: '{spelling.text}'",
                ))
            elif kind == "float_type" and isinstance(value, str) and is_number(value):
                out.append(at.diag(
                    "yaml-implicit-type",
                    f"{name}: expected a number, but YAML 1.1 read `{value}` as a string (its floats need a '.')",
                    path, hint=f"write it as {_yaml11_float(value)}",
                ))
            else:
                out.append(at.diag("type", f"{name}: expected {expected}, got {describe(value)}", path, key=is_key))
        elif kind == "format":
            out.append(at.diag("value", f"{name} {err['msg']}", path, key=is_key))
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            ctx = err.get("ctx", {})
            bound = next(iter(ctx.values())) if ctx else "?"
            relation = {"greater_than_equal": "at least", "less_than_equal": "at most",
                        "greater_than": "more than", "less_than": "less than"}[kind]
            out.append(at.diag("value", f"{name} must be {relation} {bound} (got {value!r})", path))
        elif kind in ("string_too_short", "too_short"):
            out.append(at.diag("value", f"{name} must not be empty", path))
        else:  # a pydantic error we have not reworded still gets a location and its own text
            out.append(at.diag("value", f"{name}: {err['msg']}", path, key=is_key))
    return [d for i, d in enumerate(out) if missing.get(i) not in suggested]


def _recovered(data: Any, error: ValidationError) -> Any:
    """The spec as the rules may read it past its unknown keys: each renamed to the key it misspells (the
    did-you-mean its diagnostic gives) or dropped, so that the section it sits in still validates and that
    section's rules still report what else is wrong. The spec itself stays refused by the unknown key."""
    fixed: Any = None
    for err in error.errors(include_url=False):
        if err["type"] != "extra_forbidden":
            continue
        path = tuple(p for p in err["loc"] if p != "[key]")
        if fixed is None:
            import copy  # deferred: a spec with an unknown key only

            fixed = copy.deepcopy(data)
        node = fixed
        for step in path[:-1]:
            node = node.get(step) if isinstance(node, dict) else (
                node[step] if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node) else None)
        key = path[-1] if path else None
        if not isinstance(node, dict) or key not in node:
            continue  # a location that is not the document's own shape (a union's branch): left as it is
        value = node.pop(key)
        guess = _did_you_mean(str(key), path[:-1]) if is_identifier(key) else None
        if guess is not None and guess not in node:
            node[guess] = value
    return data if fixed is None else fixed


class Checked(NamedTuple):
    spec: JobSpec | None  # None when any error was found
    facts: Facts
    diagnostics: list[Diagnostic]


def check(doc: SourceDoc, hf_config: ConfigJson | None = None) -> Checked:
    """Check a loaded spec: its schema, then the facts and the rules on every section that validated (past its
    unknown keys: _recovered)."""
    diags: list[Diagnostic] = []
    spec: JobSpec | None = None
    data = doc.data
    try:
        spec = schema_validator.validator().validate_python(doc.data)
    except ValidationError as exc:
        diags.extend(pydantic_to_diagnostics(exc, doc))
        data = _recovered(doc.data, exc)
    # The rules see each section that validated on its own, even when another one failed.
    sections: dict[str, Any] = {}
    if spec is not None:
        sections = {name: getattr(spec, name) for name in schema_validator.SECTIONS if getattr(spec, name) is not None}
    else:
        for name in schema_validator.SECTIONS:
            raw = data.get(name, {} if name in ("parallelism", "training") else None)
            if not isinstance(raw, dict):
                continue
            try:
                sections[name] = schema_validator.section_validator(name).validate_python(raw)
            except ValidationError:
                pass
    spec_name = doc.data.get("name") if isinstance(doc.data.get("name"), str) else None
    named = doc.data.get("platform")
    platform: str = named if isinstance(named, str) and named in ENGINES else DEFAULT_ENGINE
    facts = derive(sections, spec_name, platform, hf_config)
    if facts.training is not None:  # the rules read training with init_from's model filled in
        sections["training"] = facts.training
    diags.extend(run_rules(RuleContext(doc=doc, sections=sections, facts=facts, locate=_Locator(doc).diag)))
    return Checked(spec if not any(d.is_error for d in diags) else None, facts, diags)
