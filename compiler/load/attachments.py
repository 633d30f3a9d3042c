"""Files a spec names that the compiler reads offline: init_from's committed config.json."""

from __future__ import annotations

import json
import os
from typing import Any

from ..diagnostics import Diagnostic, make_error
from .inputs import read_bytes
from .source import SourceDoc

CONFIG_PATH = ("init_from", "huggingface", "config")


def _where(doc: SourceDoc, path: tuple[str, ...]) -> dict[str, Any]:
    loc = doc.value_location(path)
    if loc is None:
        return {"file": doc.file}
    return {"file": loc.file, "line": loc.span.line, "column": loc.span.column}


def hf_config(doc: SourceDoc, spec_path: str) -> tuple[dict[str, Any] | None, list[Diagnostic]]:
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
    try:
        config = json.loads(read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        return None, [make_error("init-from-config", f"init_from.huggingface.config: no file {name} beside the spec",
                                 hint=hint, **where)]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [make_error("init-from-config", f"init_from.huggingface.config: {name} is not a readable JSON "
                                 f"file ({exc})", hint=hint, **where)]
    if not isinstance(config, dict):
        return None, [make_error("init-from-config", f"init_from.huggingface.config: {name} holds no JSON object",
                                 hint=hint, **where)]
    return config, []
