"""`megatron-compile import`, part three: each recorded Megatron flag -> a typed field of the spec,
training.args verbatim, or a line of the report; all read from the one flag table (megatron/flags.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence, get_args, get_origin

from ..check.rules.parallel_args import PARALLEL_FLAGS
from ..check.validate import is_number
from ..megatron.flags import ALWAYS, IMPLIED, IMPORTED_TYPED, ROWS, STOP_FLAGS, import_table
from ..schema.models import JobSpec
from .import_record import MARKER, ImportFailed, _marker_reason, _show

# flag -> (spec path, type), from the one flag table; types: int, float, str, switch, const:<value>.
FLAG_TABLE: dict[str, tuple[tuple[str, ...], str]] = import_table()
# flag -> (its spec field, its directory under $RUN_ROOT, whether every spec passes it): the table's
# run-root rows (--save, --load, --tensorboard-dir). A script's value is replaced by the run root's.
RUN_ROOT_FLAGS: dict[str, tuple[tuple[str, ...], str, bool]] = {
    row.flag: (row.path, row.kind.split(":", 1)[1], row.when == ALWAYS) for row in ROWS if row.kind.startswith("run-root:")}

# Why a job needs a value the spec's field does not take, where Megatron itself demands it.
NEEDED_BY = {
    ("--ckpt-format", "fsdp_dtensor"): "Megatron-FSDP (--use-megatron-fsdp) asserts this format "
                                       "(megatron/training/arguments.py:1142)",
}


@dataclass
class Mapped:
    """What the recorded flags became: spec data (filled in place), training.args, the report, and
    what the training section is completed from afterwards."""

    data: dict[str, Any]
    report: list[str]
    raw: list[str] = field(default_factory=list)  # training.args, verbatim
    typed_apart: dict[str, tuple[str, ...]] = field(default_factory=dict)  # FP8's and the performance options' flags
    precision_set: bool = False


def field_choices(path: tuple[str, ...]) -> tuple[Any, ...] | None:
    """The values a spec field takes when its type is a Literal (None: not a Literal, or no such field)."""
    annotation: Any = JobSpec
    for part in path:
        fields = getattr(annotation, "model_fields", None)
        if fields is None or part not in fields:
            return None
        annotation = fields[part].annotation
        while get_origin(annotation) is not None and get_origin(annotation) is not Literal:
            # X | None, Annotated[X, …]: the first argument that is not None
            annotation = next(a for a in get_args(annotation) if a is not type(None))
    return get_args(annotation) if get_origin(annotation) is Literal else None


def _refuse_outside_choices(flag: str, value: Any, path: tuple[str, ...]) -> None:
    """A value the typed field does not take cannot go to training.args either: the typed field owns the flag."""
    choices = field_choices(path)
    if choices is None or value in choices:
        return
    needed = NEEDED_BY.get((flag, str(value)))
    raise ImportFailed(
        f"{flag} {value}: the spec's {'.'.join(path)} takes {' or '.join(map(str, choices))}, and {flag} belongs "
        "to that field, so training.args cannot carry it either. "
        + (f"The job needs {value}: {needed}; a spec cannot express this job at this version of the compiler."
           if needed else
           f"Change the script's {flag} to {' or '.join(map(str, choices))} if the job allows it, and import again.")
    )


def set_at(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """data[path[0]][path[1]]… = value, making the mappings on the way."""
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value


def _convert(kind: str, values: tuple[str, ...]) -> Any:
    if kind == "switch":
        if values:
            raise ValueError("a switch takes no value")
        return True
    if kind.startswith("const:"):
        return kind.split(":", 1)[1]
    if len(values) != 1:
        raise ValueError(f"expected one value, got {len(values)}")
    text = values[0]
    if MARKER.search(text):
        raise ValueError(_marker_reason(text))
    if kind not in ("int", "float") and re.search(r"[\"']", text):
        raise ValueError("it holds quote characters, which Megatron receives as they are")
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def _shown(values: tuple[str, ...]) -> str:
    return " ".join(_show(v) for v in values)


def _marked(values: tuple[str, ...]) -> str | None:
    """The first value that holds a run-time marker ($PWD, $RANDOM, an unset variable), if any."""
    return next((v for v in values if MARKER.search(v)), None)


def _untyped_script(out: Mapped, flag: str, values: tuple[str, ...]) -> None:
    """A script other than pretrain_gpt.py: every flag to training.args, its parallel sizes also typed."""
    marked = _marked(values)
    if marked is not None:
        out.report.append(f"{flag} {_shown(values)}: dropped ({_marker_reason(marked)}); "
                          "give it a fixed value in training.args")
        return
    out.raw += [flag, *values] if flag else list(values)
    if flag in PARALLEL_FLAGS and len(values) == 1 and values[0].isdigit():
        # the script reads it from training.args; the plan and the checks read parallelism
        set_at(out.data, ("parallelism", PARALLEL_FLAGS[flag]), int(values[0]))


def _run_root(out: Mapped, flag: str, values: tuple[str, ...]) -> None:
    """--save, --load, --tensorboard-dir: the spec passes its own directory under $RUN_ROOT, and the
    field that turns the flag on is set."""
    path, directory, always = RUN_ROOT_FLAGS[flag]
    if always:
        out.report.append(f"{flag} {' '.join(values)}: replaced; every spec passes $RUN_ROOT/{directory}")
        return
    if not values or values == ("",):
        out.report.append(f"{flag}: dropped (its value is empty)")
        return
    set_at(out.data, path, True)
    out.report.append(f"{flag} {' '.join(values)}: replaced; the spec passes $RUN_ROOT/{directory} with "
                      f"{'.'.join(path)}: true")


def _data_path(out: Mapped, values: tuple[str, ...]) -> None:
    """--data-path: prefixes, or weight/prefix pairs (the inverse of the table's --data-path)."""
    marked = _marked(values)
    if marked is not None:
        out.report.append(f"--data-path {_shown(values)}: dropped ({_marker_reason(marked)}); set training.data.paths")
    elif len(values) % 2 == 0 and values and all(is_number(v) for v in values[::2]):
        set_at(out.data, ("training", "data", "weights"), [float(v) for v in values[::2]])
        set_at(out.data, ("training", "data", "paths"), list(values[1::2]))
    elif any(is_number(v) for v in values):
        out.report.append(f"--data-path {' '.join(values)}: not a list of paths nor of weight/path pairs; "
                          "set training.data")
    else:
        set_at(out.data, ("training", "data", "paths"), list(values))


def _typed(out: Mapped, flag: str, values: tuple[str, ...], unset: Sequence[str]) -> None:
    """A flag of the table's rows: its typed field, or training.args verbatim when it has none."""
    marked = _marked(values)
    if marked is not None:
        where = ("a directory on the shared storage (under storage.mount_path), in training.args"
                 if flag == "--data-cache-path" else "a fixed value in the spec")
        out.report.append(f"{flag} {_shown(values)}: dropped ({_marker_reason(marked)}); give it {where}")
        return
    entry = FLAG_TABLE.get(flag)
    if entry is None:
        out.raw += [flag, *values] if flag else list(values)
        out.report.append(f"{' '.join([flag, *values]) if flag else ' '.join(values)}: no typed field; "
                          "passed through verbatim in training.args")
        return
    path, kind = entry
    if flag == "--split" and len(values) == 1 and re.fullmatch(r"(['\"])[0-9.,]+\1", values[0]):
        # Megatron reads only the split's digits and dots (re.findall(r"[.0-9]+", split),
        # megatron/core/datasets/blended_megatron_dataset_config.py:164): the quotes change nothing
        out.report.append(f"--split {values[0]}: typed as {values[0][1:-1]} (Megatron ignores the quotes)")
        values = (values[0][1:-1],)
    if not values and kind != "switch" and not kind.startswith("const:"):
        because = f"; unset {', '.join(unset)} expanded empty" if unset else ""
        out.report.append(f"{flag}: dropped (no value{because}); give it a value in the spec")
        return
    try:
        value = _convert(kind, values)
    except ValueError as exc:
        out.raw += [flag, *values]
        out.report.append(f"{flag} {' '.join(values)}: not typed ({exc}); passed through verbatim")
        return
    _refuse_outside_choices(flag, value, path)
    out.precision_set |= path == ("training", "precision")
    set_at(out.data, path, value)


def map_flags(groups: list[tuple[str, tuple[str, ...]]], pretrain: bool, out: Mapped, unset: Sequence[str]) -> None:
    """Each (flag, values) of the recorded launch into `out`; `pretrain`: the script is pretrain_gpt.py,
    whose flags the spec types (any other script's go to training.args)."""
    for flag, values in groups:
        if not pretrain:
            _untyped_script(out, flag, values)
        elif flag in RUN_ROOT_FLAGS:
            _run_root(out, flag, values)
        elif flag == "--data-path":
            _data_path(out, values)
        elif flag in IMPORTED_TYPED:
            out.typed_apart[flag] = values
        elif flag in IMPLIED:
            continue
        elif flag in STOP_FLAGS:
            out.report.append(f"{' '.join([flag, *values])}: replaced; the compiler derives the stop flags "
                              "(--exit-signal-handler always, --exit-duration-in-mins from the engine's time limit: "
                              "the stop section, docs/stop-resume.md)")
        else:
            _typed(out, flag, values, unset)
