"""What the image installs with pip for a spec's steps (the Dockerfile's RUN, and what a lock's built
record says the image was built from): Bridge's validated wheels for init_from, modelscope's for the
download step (huggingface.py holds the pins and why)."""

from __future__ import annotations

from typing import Any

# NVIDIA's PyTorch containers ship Transformer Engine (the container release notes' package list; 25.03-py3, the
# schema's example base, has TE 2.1): Megatron then imports TE's FusedAdam and multi-tensor gradient norm whatever
# transformer_impl its layers take (optimizer/__init__.py:14, clip_grads.py:12)
NGC_PYTORCH = "nvcr.io/nvidia/pytorch"


def image_packages(init_from: Any) -> tuple[str, ...]:
    """The pinned pip requirements the image installs for `init_from` (none without one)."""
    if init_from is None:
        return ()
    from .huggingface import BRIDGE_REQUIREMENTS, MODELSCOPE_REQUIREMENTS  # deferred: init_from specs only

    download = MODELSCOPE_REQUIREMENTS if init_from.huggingface.modelscope else ()
    return BRIDGE_REQUIREMENTS[init_from.bridge] + download


def image_optimizer(image: Any, te_layers: bool) -> str | None:
    """The optimizer Megatron imports in the spec's image (host_time.optimizer_impl's names): TE's in an NGC PyTorch
    image (by tag, digest or neither) or with TE's layers (which need TE); None, the stack's, for a base the compiler cannot
    see into."""
    ngc = image is not None and image.base.startswith(NGC_PYTORCH) and image.base[len(NGC_PYTORCH):][:1] in ("", ":", "@")
    return "te" if te_layers or ngc else None
