"""--print: a spec as the compiler resolved it (bases merged, overrides applied, defaults filled).

training's typed fields apply to pretrain_gpt.py only (compiler/megatron/pretrain.py); for another
script (the bounded example, a pretrain_bert.py …) they are left out where they hold their defaults,
so the print shows what the script is run with, not logging or precision defaults it never reads.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

from ..megatron.pretrain import is_pretrain
from ..plan.build import spec_digest
from ..schema.records import JobSpec
from ..schema.models import Training

# What every training script gets: the launch command's script, its arguments and environment,
# and whether the run continues the one in run_root.
GENERAL_TRAINING = ("script", "args", "env", "resume")


@lru_cache(maxsize=1)
def _training_defaults() -> dict[str, Any]:
    """training's defaults, dumped as a resolved spec dumps them."""
    return Training().model_dump(mode="json", by_alias=True)


def applicable_training(training: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """training without the pretrain-only fields that hold their defaults; and the names left out."""
    defaults = _training_defaults()
    kept = {k: v for k, v in training.items()
            if k in GENERAL_TRAINING or k not in defaults or v != defaults[k]}
    return kept, [k for k in training if k not in kept]


def resolved_data(spec: JobSpec) -> tuple[dict[str, Any], list[str]]:
    """The resolved spec as plain data, in the models' field order; and the training fields left out
    at their defaults because the script does not read them."""
    data = spec.model_dump(mode="json", by_alias=True)
    left_out: list[str] = []
    if not is_pretrain(spec.training.script):
        data["training"], left_out = applicable_training(data["training"])
    return data, left_out


def resolved_json(spec: JobSpec, display: str) -> dict[str, Any]:
    """One spec of `--print --format json`: its file, digest, resolved data and the fields left out."""
    data, left_out = resolved_data(spec)
    return {"spec": display, "sha256": spec_digest(spec), "resolved": data, "left_out": left_out}


def resolved_yaml(spec: JobSpec, display: str) -> str:
    """The resolved spec as YAML, in the models' field order, with a header naming its source."""
    data, left_out = resolved_data(spec)
    header = f"# {display}, resolved (spec sha256 {spec_digest(spec)[:16]})\n---\n"
    note = ""
    if left_out:  # at the end, so that line N of a spec stays line N + 2 of its print
        note = (f"# training: {spec.training.script} does not read the pretrain_gpt.py fields, left out at "
                f"their defaults: {', '.join(left_out)}\n")
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    return header + body + note
