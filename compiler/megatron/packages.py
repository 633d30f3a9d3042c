"""What the image installs with pip for a spec's steps (the Dockerfile's RUN, and what a lock's built
record says the image was built from): Bridge's validated wheels for init_from, modelscope's for the
download step (huggingface.py holds the pins and why)."""

from __future__ import annotations

from typing import Any


def image_packages(init_from: Any) -> tuple[str, ...]:
    """The pinned pip requirements the image installs for `init_from` (none without one)."""
    if init_from is None:
        return ()
    from .huggingface import BRIDGE_REQUIREMENTS, MODELSCOPE_REQUIREMENTS  # deferred: init_from specs only

    download = MODELSCOPE_REQUIREMENTS if init_from.huggingface.modelscope else ()
    return BRIDGE_REQUIREMENTS[init_from.bridge] + download
