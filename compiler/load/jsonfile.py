"""A committed JSON file (a Hugging Face config.json) read with bounds, each refusal located.

Python's json module accepts `NaN`, `Infinity` and `1e400` (as inf), recurses once per nesting
level (a deep file is a RecursionError) and turns a number of any length into an int. A config.json
is data the compile derives flags and estimates from, so: numbers are finite and of a sane size,
nesting is shallow, and the architecture keys lie in ranges a model can have (`BOUNDS`), wherever
they sit (a multimodal config nests its text model under `text_config`). Each refusal is a
`JsonProblem` with the 1-based line and column in the file.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from typing import Any

from ..tuples import NamedTuple
from . import limits

MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 18  # beyond int64 a config value is not a size or a count

# config.json key -> (least, greatest) it may hold: the spec's own bounds (limits.py) for the same
# quantity, so that a model the spec could not describe is refused where it is read.
_L, _H, _F, _N = limits.MAX_LAYERS, limits.MAX_HIDDEN, limits.MAX_FFN, limits.MAX_HEADS
BOUNDS: dict[str, tuple[float, float]] = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers"), (1, _L)),
    **dict.fromkeys(("first_k_dense_replace", "num_nextn_predict_layers"), (0, _L)),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "kv_lora_rank", "q_lora_rank"), (1, _H)),
    **dict.fromkeys(("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "n_inner"),
                    (1, _F)),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "qk_rope_head_dim",
                     "qk_nope_head_dim", "v_head_dim"), (1, _N)),
    "vocab_size": (1, limits.MAX_VOCAB),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "sliding_window"), (1, limits.MAX_POSITIONS)),
    **dict.fromkeys(("num_experts", "n_routed_experts", "num_local_experts", "n_shared_experts"),
                    (0, limits.MAX_EXPERTS)),
    "num_experts_per_tok": (1, limits.MAX_TOPK),
    "rope_theta": (1, limits.MAX_ROTARY_BASE),
    **dict.fromkeys(("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"), (1e-30, 1.0)),
    "factor": (0, 1e6),
}


class JsonProblem(NamedTuple):
    """Why a JSON file was refused, and where (1-based line and column; 1, 1 when the whole file)."""

    line: int
    column: int
    message: str


class _Refuse(Exception):
    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def _position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


class _Lines:
    """(line, column) of many offsets of one text, each by bisection over its line starts (a config.json's
    every key: _position's count from the start would be quadratic in a large id2label table)."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


# text, compiled by the first _scan (re's cache keeps them): most compiles read no JSON file
_NON_FINITE = r"-?(?:NaN|Infinity)\b"
_LONG = r"[0-9]{%d}" % (MAX_INT_DIGITS + 1)


def _scan(text: str) -> None:
    """Depth and non-finite constants, outside strings, before json recurses or reads them."""
    long_number, non_finite = re.compile(_LONG), re.compile(_NON_FINITE)
    depth = 0
    in_string = escaped = False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _Refuse(f"nests deeper than {MAX_JSON_DEPTH} levels; a config.json is a shallow mapping", offset)
        elif char in "]}":
            depth -= 1
        elif char.isdigit() and (offset == 0 or not text[offset - 1].isdigit()) and long_number.match(text, offset):
            raise _Refuse(f"holds a number of more than {MAX_INT_DIGITS} digits; no config value is that large", offset)
        elif char in "NI-":
            match = non_finite.match(text, offset)
            if match:
                raise _Refuse(f"holds {match.group(0)}, which is not a number JSON allows; every value must be "
                              "finite", offset)


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refuse(f"holds an integer of {len(text.lstrip('-'))} digits ({text[:12]}...)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refuse(f"holds {text}, which is out of a float's range (it would read as infinity)")
    return value


def _constant(name: str) -> float:
    raise _Refuse(f"holds {name}, which is not a number JSON allows; every value must be finite")


def _locate_key(text: str, key: str, after: int = 0) -> int | None:
    """The offset of `"key":` at or after `after` (a plain search, then the colon checked: no pattern compiled a key)."""
    quoted = '"' + key + '"'
    at = text.find(quoted, after)
    while at >= 0:
        rest = at + len(quoted)
        while rest < len(text) and text[rest] in " \t\r\n":
            rest += 1
        if rest < len(text) and text[rest] == ":":
            return at
        at = text.find(quoted, at + 1)
    return None


def key_positions(text: str, value: Any) -> dict[str, tuple[int, int]]:
    """(line, column) of each key of a JSON object and of the keys of its objects ("rope_scaling.factor"),
    found in order as _check_bounds finds them."""
    out: dict[str, tuple[int, int]] = {}
    if not isinstance(value, dict):
        return out
    lines = _Lines(text)
    after = 0
    for key, item in value.items():
        offset = _locate_key(text, key, after) if isinstance(key, str) else None
        if offset is None:
            continue
        out[key] = lines.position(offset)
        after = offset
        if isinstance(item, dict):
            inner = offset
            for child in item:
                found = _locate_key(text, child, inner) if isinstance(child, str) else None
                if found is not None:
                    out[f"{key}.{child}"] = lines.position(found)
                    inner = found
    return out


def _check_bounds(text: str, value: Any, path: tuple[str | int, ...], problems: list[JsonProblem], after: int = 0) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            offset = _locate_key(text, key, after) if isinstance(key, str) else None
            where = offset if offset is not None else after
            bound = BOUNDS.get(key)
            if bound is not None and item is not None:
                shown = ".".join(str(p) for p in path + (key,))
                low, high = bound
                if isinstance(item, bool) or not isinstance(item, (int, float)):
                    problems.append(JsonProblem(*_position(text, where), f"{shown} must be a number, got {item!r:.40}"))
                elif not low <= item <= high:
                    problems.append(JsonProblem(*_position(text, where),
                                                f"{shown} = {item!r} is outside the range a model has ({_num(low)} to {_num(high)})"))
            _check_bounds(text, item, path + (key,), problems, where)
            after = where  # the next key is searched from this one, not from the object's start again
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_bounds(text, item, path + (index,), problems, after)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def parse(text: str) -> tuple[Any, list[JsonProblem]]:
    """JSON text -> (value, []) or (None, the located problems). Never raises on any input."""
    try:
        _scan(text)
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _Refuse as exc:
        line, column = _position(text, exc.offset) if exc.offset is not None else (1, 1)
        return None, [JsonProblem(line, column, exc.message)]
    except json.JSONDecodeError as exc:
        return None, [JsonProblem(exc.lineno, exc.colno, f"is not valid JSON: {exc.msg}")]
    except (ValueError, RecursionError) as exc:  # pragma: no cover - _scan and the hooks bound both
        return None, [JsonProblem(1, 1, f"is not valid JSON: {exc}")]
    problems: list[JsonProblem] = []
    _check_bounds(text, value, (), problems)
    return (None, problems) if problems else (value, [])
