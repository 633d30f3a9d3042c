"""The environment a launch sets for Megatron beyond the spec's training.env, each variable with its reason.

The spec's own training.env wins over every default here (a user who sets one keeps it)."""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple

# cuBLASLt's heuristics cache, in plans (cublasLtHeuristicsCacheGetCapacity reports 8192 by default): six GEMM shapes
# for each of 174,762 token counts, every count a local expert can receive from a micro batch of that many tokens
HEURISTICS_CACHE_CAPACITY = 1048576


class EnvDefault(NamedTuple):
    name: str
    value: str
    why: str  # one line, launch.sh's comment above the exports ("NAME: why")


def local_experts(t: Any) -> bool:
    """Whether the experts run Megatron's local SequentialMLP: the local spec builds it whatever the grouped-GEMM
    flag says (core/models/backends.py:133-142 LocalSpecProvider.grouped_mlp_modules)."""
    return t.model.num_experts is not None and t.model.transformer_impl == "local"


def launch_env(t: Any, tensor: int, context: int) -> tuple[EnvDefault, ...]:
    """What a pretraining launch exports for Megatron, with the reasons."""
    out = []
    if tensor > 1 or context > 1:
        out.append(EnvDefault(
            "CUDA_DEVICE_MAX_CONNECTIONS", "1",
            "Megatron asserts 1 with TP or CP on Hopper and older GPUs: communication kernels queue ahead of the "
            "compute they overlap with"))
    if local_experts(t):
        # Issue 26, device calls 50 and 51 (tests/fixtures/h200-hosts/README.md): each local expert's GEMM is planned
        # by cuBLASLt for its token count; a router spreads the counts over thousands of values, which the default
        # cache's 8192 plans cannot hold (six shapes a count), so a long run keeps planning them again (~110 us of
        # host time a call). With this capacity the late steps ran 0.80x (8192 tokens an expert) and 0.87x (an
        # OLMoE-shaped block) of the default's.
        out.append(EnvDefault(
            "CUBLASLT_HEURISTICS_CACHE_CAPACITY", str(HEURISTICS_CACHE_CAPACITY),
            "the local experts' token counts outgrow cuBLASLt's default 8192 plans; with room for them, their GEMMs are "
            "not planned again (docs/performance-model.md, local experts)"))
    return tuple(out)
