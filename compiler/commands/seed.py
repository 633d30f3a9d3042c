"""The seed document's shared settings (the AIStudio page's image, Megatron commit and storage):
what `import` fills in around an imported command and what `init` writes when it has no base."""

from __future__ import annotations

from typing import Any

from ..megatron import PINNED_COMMIT
from ..schema.defaults import MEGATRON_REPO, MEGATRON_ROOT

SEED_BASE: dict[str, dict[str, Any]] = {
    "image": {"base": "nvcr.io/nvidia/pytorch:25.03-py3", "platform": "linux/amd64", "registry": "cr.infini-ai.com",
              "namespace": "te-0123456789abcdef", "repository": "megatron-core", "tag": "0.18.2-cu128"},
    "megatron": {"repo": MEGATRON_REPO,
                 "commit": PINNED_COMMIT, "root": MEGATRON_ROOT},
    "storage": {"mount_path": "/mnt/megatron"},
}
