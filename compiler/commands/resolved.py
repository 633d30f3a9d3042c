"""--print: a spec as the compiler resolved it (bases merged, overrides applied, defaults filled)."""

from __future__ import annotations

import yaml

from ..plan.build import spec_digest
from ..schema.records import JobSpec


def resolved_yaml(spec: JobSpec, display: str) -> str:
    """The resolved spec as YAML, in the models' field order, with a header naming its source."""
    data = spec.model_dump(mode="json", by_alias=True)
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    return f"# {display}, resolved (spec sha256 {spec_digest(spec)[:16]})\n---\n" + body
