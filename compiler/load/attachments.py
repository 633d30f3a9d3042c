"""Files a spec names that the compiler reads offline: init_from's committed config.json."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from ..diagnostics import Diagnostic, make_error
from . import jsonfile
from .discover import leaves, trusted_root
from .files import CONFIG_LIMIT
from .inputs import read_bytes
from .source import SourceDoc

CONFIG_PATH = ("init_from", "huggingface", "config")


class ConfigJson(dict[str, Any]):
    """The parsed config.json, with where it is shown and where each key sits in it (for a refusal
    about one key: jsonfile.key_positions)."""

    def __init__(self, data: dict[str, Any], shown: str, positions: dict[str, tuple[int, int]]) -> None:
        super().__init__(data)
        self.shown = shown
        self.positions = positions


def _where(doc: SourceDoc, path: tuple[str, ...]) -> dict[str, Any]:
    loc = doc.value_location(path)
    if loc is None:
        return {"file": doc.file}
    return {"file": loc.file, "line": loc.span.line, "column": loc.span.column}


def hf_config(doc: SourceDoc, spec_path: str) -> tuple[ConfigJson | None, list[Diagnostic]]:
    """The Hugging Face config.json init_from names (relative to the spec's directory), parsed; or
    the diagnostic why it cannot be read. (None, []) when the spec names none."""
    init = doc.data.get("init_from") if isinstance(doc.data, dict) else None
    hf = init.get("huggingface") if isinstance(init, dict) else None
    name = hf.get("config") if isinstance(hf, dict) else None
    if not isinstance(name, str) or not name:
        return None, []
    path = name if os.path.isabs(name) else os.path.join(os.path.dirname(spec_path), name)
    where = _where(doc, CONFIG_PATH)
    hint = "commit the model's config.json beside the spec; the architecture flags derive from it offline"
    if leaves(path, trusted_root(spec_path)):
        return None, [make_error("link-outside-repository", f"init_from.huggingface.config: {name} is a symbolic "
                                 "link to a file outside the repository; it was not read", hint=hint, **where)]
    try:
        raw = read_bytes(path, CONFIG_LIMIT)
    except FileNotFoundError:
        return None, [make_error("init-from-config", f"init_from.huggingface.config: no file {name} beside the spec",
                                 hint=hint, **where)]
    except OSError as exc:
        return None, [make_error("init-from-config", f"init_from.huggingface.config: cannot read {name}: "
                                 f"{exc.strerror or exc}", hint=hint, **where)]
    shown = name if os.path.isabs(name) else posixpath.join(posixpath.dirname(doc.file), name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [make_error("init-from-config", f"{name} is not UTF-8 (byte {exc.start})", hint=hint,
                                 file=shown, line=1, column=1)]
    config, problems = jsonfile.parse(text.removeprefix("\ufeff"))
    if problems:
        fix = "commit the model's config.json as it was published; its values feed every architecture flag"
        return None, [make_error("init-from-config", f"config.json {p.message}", hint=fix, file=shown, line=p.line,
                                 column=p.column) for p in problems]
    if not isinstance(config, dict):
        return None, [make_error("init-from-config", f"init_from.huggingface.config: {name} holds no JSON object",
                                 hint=hint, **where)]
    return ConfigJson(config, shown, jsonfile.key_positions(text.removeprefix("\ufeff"), config)), []
