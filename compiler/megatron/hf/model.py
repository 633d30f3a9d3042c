"""training.model with init_from's architecture: a typed record, so that what the estimators read
beyond the spec's own fields is checked like the rest (check/facts.py effective_training builds it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...schema.records import Model

if TYPE_CHECKING:
    from .mla import MLA


class HFModel(Model):
    """The typed model fields as the Hugging Face config has them, and the values Megatron derives
    from it beyond them: kv_channels, multi-latent attention and the MoE layout (flops.py flops_args)."""

    __slots__ = ()

    kv_channels: int
    mla: MLA | None
    moe_layer_freq: tuple[int, ...] | None
    moe_shared_expert_intermediate_size: int | None
    mtp_num_layers: int | None
    qk_layernorm: bool  # each head's query and key normalised (or MLA's latent norms): the step time prices them
