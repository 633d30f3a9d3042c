"""Reading config.json fields: every refusal names the field, its value and why."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

_MISSING: Any = object()
T = TypeVar("T")


class HFConfigError(ValueError):
    """config.json describes something this derivation cannot express as Megatron-LM flags; key is the
    config.json key it is about ("rope_scaling.beta_fast"), where one is, for the diagnostic's position."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        named = _NAMED.match(message)  # "config.json KEY ..." names the key it is about
        self.key = key if key is not None else (named.group(1) if named else None)


_NAMED = re.compile(r"config\.json ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)")


class UnsupportedArchitecture(HFConfigError):
    """config.json's architectures names a model outside the supported families."""


def present(config: Mapping[str, Any], key: str) -> bool:
    """The key is there and not null (transformers treats null as its default)."""
    return config.get(key) is not None


def pos_int(config: Mapping[str, Any], key: str, default: Any = _MISSING, *, zero: bool = False,
            high: int | None = None) -> int:
    """A positive (or, with zero, non-negative) integer field, at most high; default when absent or null."""
    v = config.get(key)
    if v is None and default is not _MISSING and default is not None:
        return int(default)
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero else 1):
        kind = "a non-negative" if zero else "a positive"
        raise HFConfigError(f"config.json {key} must be {kind} integer, got {v!r}", key)
    if high is not None and v > high:
        raise HFConfigError(f"config.json {key} = {v} exceeds {high}, more than any model has (every layer is "
                            "built and counted one by one)", key)
    return v


def opt_int(config: Mapping[str, Any], key: str) -> int | None:
    """A positive integer field that may be null (absent: null)."""
    return None if config.get(key) is None else pos_int(config, key)


def number(config: Mapping[str, Any], key: str, default: float, *, positive: bool = False,
           low: float | None = None, high: float | None = None) -> float:
    """A finite number field (not a bool), with optional bounds."""
    v = config.get(key)
    if v is None:
        return float(default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise HFConfigError(f"config.json {key} must be a finite number, got {v!r}", key)
    if positive and v <= 0:
        raise HFConfigError(f"config.json {key} must be positive, got {v!r}", key)
    if (low is not None and v < low) or (high is not None and v > high):
        raise HFConfigError(f"config.json {key} = {v!r} is outside [{low}, {high}]", key)
    return float(v)


def _typed(config: Mapping[str, Any], key: str, default: T, kind: type[T], what: str) -> T:
    """A field of one type (`what` names it in the refusal); default when absent or null."""
    v = config.get(key)
    if v is None:
        return default
    if not isinstance(v, kind):
        raise HFConfigError(f"config.json {key} must be {what}, got {v!r}", key)
    return v


def boolean(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """A true/false field."""
    return _typed(config, key, default, bool, "true or false")


def text(config: Mapping[str, Any], key: str, default: str) -> str:
    """A string field."""
    return _typed(config, key, default, str, "a string")


def rope(config: Mapping[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, the scaling dict or None) from either config.json layout.

    transformers < 5 writes rope_theta + rope_scaling; transformers >= 5 writes one rope_parameters
    dict holding rope_theta and rope_type (Bridge reads both: conversion/transformers_compat.py:27
    rope_theta_from_hf; model_bridge.py:555 reads rope_scaling's "type" or "rope_type").
    """
    params = config.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise HFConfigError(f"config.json rope_parameters must be an object or null, got {params!r}", "rope_parameters")
    theta = config.get("rope_theta")
    scaling = config.get("rope_scaling")
    if isinstance(params, Mapping):
        theta = params.get("rope_theta", theta)
        if scaling is None and (params.get("rope_type") or params.get("type") or "default") != "default":
            scaling = dict(params)
    if theta is None:
        theta = 10000.0  # the transformers default of every supported config class
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta <= 0:
        raise HFConfigError(f"config.json rope_theta must be a positive number, got {theta!r}", "rope_theta")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise HFConfigError(f"config.json rope_scaling must be an object or null, got {scaling!r}", "rope_scaling")
    if scaling is not None and (scaling.get("rope_type") or scaling.get("type")) in (None, "default"):
        scaling = None
    return float(theta), (dict(scaling) if scaling is not None else None)


def rope_kind(scaling: Mapping[str, Any]) -> str:
    """The scaling's type ("type" or "rope_type", as Bridge reads it)."""
    kind = scaling.get("rope_type") or scaling.get("type")
    return kind if isinstance(kind, str) else repr(kind)


def scaling_number(scaling: Mapping[str, Any], key: str, default: float) -> float:
    """A number inside rope_scaling (named rope_scaling.KEY in a refusal)."""
    return number({f"rope_scaling.{key}": scaling.get(key)}, f"rope_scaling.{key}", default)


def rotary_base(theta: float) -> int:
    """--rotary-base is type=int (arguments.py:2132): refuse a base that would be truncated."""
    if theta != math.floor(theta):
        raise HFConfigError(f"config.json rope_theta {theta} is not an integer; "
                            "Megatron-LM's --rotary-base takes integers only (arguments.py:2132)")
    return int(theta)


def num(v: float) -> str:
    """A float as Python writes it, which argparse's float() reads back exactly."""
    return repr(float(v))
