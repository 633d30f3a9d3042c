"""What `diff` compares: a compiled spec as the values it resolves to, and the changes between two.

A side is the compile's own typed data, flattened to dotted keys: the resolved spec (`spec.…`,
extends merged, defaults filled, so a reorder or an extends refactor is no change), the --explain
document (`explain.…`: every derived size and estimate), the base image as the artifacts pin it
(`image.…`), the flags Megatron receives and the launch environment (`flags.…`, `env.…`), and each
artifact's text with its header and the spec's own path left out (`artifact.…`). Nothing is
computed again here: a number in a change is the number the compile of that side prints.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic
from ..load.gitrev import Revision
from ..megatron.flags import at_default
from ..load.discover import lock_path
from ..plan.shell import argv_of
from ..schema.record import to_json
from .explain import explain_data

EXIT_SAME, EXIT_ERROR, EXIT_CHANGED = 0, 1, 2

# The derived values a reviewer looks at first, in this order (explain keys), with their names.
HEADLINE: tuple[tuple[str, str], ...] = (
    ("explain.world_size", "world size"),
    ("explain.data_parallel", "data parallel"),
    ("explain.num_microbatches", "micro-batches per step"),
    ("explain.timing.gpu_hours", "GPU-hours"),
    ("explain.cost.amount", "cost"),
    ("explain.memory_mb.peak", "peak memory per GPU (MiB)"),
    ("image.digest", "base image digest"),
    ("explain.timing.seconds_per_iteration", "time per iteration (s)"),
    ("explain.schedule.bubble_fraction", "pipeline bubble"),
    ("explain.peak_fraction_of_gpu", "peak / GPU memory"),
    ("explain.timing.train_seconds", "time to train (s)"),
    ("explain.storage_bytes.total", "storage (bytes)"),
    ("explain.checkpoint_bytes.per_save", "checkpoint per save (bytes)"),
)
LABELS = dict(HEADLINE)
# A list of records named by one of these keys is flattened record by record (timing terms by name,
# per-stage figures by stage).
NAMING_KEYS = ("name", "stage")
# Where a value was read, not what it is: a price row that moves down its file is no change.
IGNORED = ("explain.cost.where",)


class Side(NamedTuple):
    """One spec compiled at one revision."""

    path: str  # relative to the repository root, as a compile from there prints it
    ok: bool
    diagnostics: tuple[Diagnostic, ...]
    values: dict[str, Any]  # dotted key -> JSON value; empty when it did not compile
    result: Any = None  # stages.CompileResult, for the guardrails' locations


class Change(NamedTuple):
    key: str  # dotted: spec.parallelism.tensor, explain.data_parallel, flags.--tensor-model-parallel-size, …
    label: str
    base: Any  # None when absent on that side
    head: Any
    kind: str  # spec | derived | flag | env | image | artifact

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "kind": self.kind, "base": self.base, "head": self.head}


def flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """JSON data -> {dotted key: leaf}; a list of named records is keyed by name, another list is a leaf."""
    if isinstance(value, dict):
        for key, item in value.items():
            flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and any(all(isinstance(v, dict) and key in v for v in value)
                                                   for key in NAMING_KEYS):
        key = next(k for k in NAMING_KEYS if all(k in v for v in value))
        for item in value:
            flatten({k: v for k, v in item.items() if k != key}, f"{prefix}.{item[key]}", out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = json.loads(json.dumps(value))
    else:
        out[prefix] = value


def _flags(words: list[str]) -> dict[str, Any]:
    """argv after the script -> {flag: its values}; a repeated flag gets #2, #3 …"""
    flags: dict[str, list[str]] = {}
    current = None
    for word in words:
        if word.startswith("--") or current is None:
            name = word
            count = 2
            while name in flags:
                name, count = f"{word}#{count}", count + 1
            flags[name] = []
            current = name
        else:
            flags[current].append(word)
    # a typed flag written out at Megatron's default is the flag left out: Megatron gets the same value
    return {k: " ".join(v) if v else True for k, v in flags.items() if not at_default(k, tuple(v))}


def _artifact_digest(text: str, header_lines: tuple[str, ...], spec_path: str) -> str:
    """sha256 of an artifact without its header and with the spec's own path replaced: a renamed
    spec renders the same job."""
    lines = [line for line in text.splitlines() if not any(h and h in line for h in header_lines)]
    body = "\n".join(lines).replace(lock_path(spec_path), "SPEC.lock").replace(spec_path, "SPEC")
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def side_of(path: str, result: Any) -> Side:
    """A compile's result (stages.CompileResult) as a Side."""
    plan = result.plan
    if plan is None:
        return Side(path, False, tuple(result.diagnostics), {}, result)
    values: dict[str, Any] = {}
    flatten(to_json(result.spec), "spec", values)
    document = explain_data(plan)
    document.pop("spec", None)
    flatten(json.loads(json.dumps(document)), "explain", values)
    image = plan.image
    flatten({"base": image.base, "from": image.from_reference, "digest": image.base_digest, "pinned": image.pinned},
            "image", values)
    launch = plan.launch
    argv = argv_of(launch.torchrun)
    script_at = next((i for i, line in enumerate(launch.torchrun) if line and not line[0].as_text().startswith(
        ("torchrun", "--"))), len(launch.torchrun))
    flatten({"launcher": argv_of(launch.torchrun[:script_at + 1])}, "flags", values)
    flatten(_flags(argv[len(argv_of(launch.torchrun[:script_at + 1])):]), "flags", values)
    flatten(dict(launch.env), "env", values)
    # the steps and the data preparation's estimates, as plan.md prints them (not in --explain)
    for section in plan.report:
        if section.title == "Steps":
            flatten({label: text for label, text in section.rows}, "steps", values)
    header = plan.header.lines()
    flatten({name: _artifact_digest(text, header, plan.header.spec) for name, text in (result.files or {}).items()},
            "artifact", values)
    for key in IGNORED:
        values.pop(key, None)
    return Side(path, True, tuple(result.diagnostics), values, result)


def _kind(key: str) -> str:
    section = key.split(".", 1)[0]
    return {"explain": "derived", "flags": "flag", "steps": "step"}.get(section, section)


def changes(base: Side, head: Side) -> list[Change]:
    """Every value that differs, in the head's key order then the base's."""
    found = []
    for key in list(head.values) + [k for k in base.values if k not in head.values]:
        old, new = base.values.get(key), head.values.get(key)
        if old != new or (key in base.values) != (key in head.values):
            label = LABELS.get(key, key.split(".", 1)[1] if "." in key else key)
            if key == "explain.cost.amount":  # the money's unit
                label += f" ({head.values.get('explain.cost.currency') or base.values.get('explain.cost.currency')})"
            found.append(Change(key, label, old, new, _kind(key)))
    return found


def headline(found: list[Change]) -> list[Change]:
    """The changes of HEADLINE's values, in its order."""
    by_key = {c.key: c for c in found}
    return [by_key[key] for key, _ in HEADLINE if key in by_key]


def semantic(found: list[Change] | tuple[Change, ...]) -> bool:
    """Whether changes change the job: an artifact that differs while every value is the same
    differs in form only (a flag written out at Megatron's default, a lock re-resolved to the same
    digest)."""
    return any(c.kind != "artifact" for c in found)


def same_job(base: Side, head: Side) -> bool:
    """Whether two compiled sides are the same job (a rename when their paths differ)."""
    return base.ok and head.ok and not semantic(changes(base, head))


def gpu_hours(side: Side) -> float | None:
    value = side.values.get("explain.timing.gpu_hours")
    return float(value) if isinstance(value, (int, float)) else None


class SpecDiff(NamedTuple):
    path: str
    status: str  # unchanged | changed | added | removed | renamed | error
    changes: tuple[Change, ...] = ()
    renamed_from: str | None = None
    base: Side | None = None
    head: Side | None = None
    guardrails: tuple[Diagnostic, ...] = ()  # warnings and failures of the repository's guardrails
    errors: tuple[Diagnostic, ...] = ()  # why the work tree's spec does not compile


class DiffReport(NamedTuple):
    revision: Revision
    specs: tuple[SpecDiff, ...]
    diagnostics: tuple[Diagnostic, ...] = ()  # not of one spec: arguments that match nothing

    @property
    def changed(self) -> bool:
        return any(s.status not in ("unchanged", "error") for s in self.specs)

    @property
    def failed(self) -> bool:
        return bool(self.diagnostics) or any(s.errors or any(g.is_error for g in s.guardrails) for s in self.specs)

    def exit_code(self) -> int:
        return EXIT_ERROR if self.failed else EXIT_CHANGED if self.changed else EXIT_SAME
