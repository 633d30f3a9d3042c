"""Parallel-layout arithmetic shared by the rules and the plan: one definition of each number.

The rank groups follow Megatron Core's RankGenerator (megatron/core/parallel_state.py at the
pinned commit): ranks are laid out in the order tp-cp-ep-dp-pp, tensor-parallel fastest.
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple

ORDER = ("tp", "cp", "ep", "dp", "pp")


def world_size(workers: int, gpus_per_worker: int) -> int:
    """Total ranks: one process per GPU on every worker."""
    return workers * gpus_per_worker


def divisors(n: int) -> list[int]:
    """The divisors of n in ascending order."""
    return [d for d in range(1, n + 1) if n % d == 0]


def model_parallel_size(tensor: int, pipeline: int, context: int) -> int:
    """Ranks in one model replica: tensor × pipeline × context."""
    return tensor * pipeline * context


def data_parallel_size(world: int, tensor: int, pipeline: int, context: int) -> int:
    """Megatron's derived data-parallel size; the caller has checked divisibility."""
    return world // model_parallel_size(tensor, pipeline, context)


def _orthogonal_groups(world: int, sizes: dict[str, int], order: tuple[str, ...], token: str) -> list[list[int]]:
    """All groups of `token` (a parallel dimension): ranks that differ only in that coordinate.

    Rank r has coordinates by mixed radix over `order` (first dimension fastest); a group fixes every
    other coordinate and varies `token`'s, which is what RankGenerator.get_ranks(token) yields.
    """
    strides = {}
    stride = 1
    for name in order:
        strides[name] = stride
        stride *= sizes[name]
    assert stride == world, (stride, world)
    groups: list[list[int]] = []
    seen: set[int] = set()
    for rank in range(world):
        if rank in seen:
            continue
        base = rank - ((rank // strides[token]) % sizes[token]) * strides[token]
        group = [base + i * strides[token] for i in range(sizes[token])]
        seen.update(group)
        groups.append(group)
    groups.sort()
    return groups


class RankLayout(NamedTuple):
    tensor: list[list[int]]
    context: list[list[int]]
    data: list[list[int]]
    pipeline: list[list[int]]


def rank_layout(world: int, tensor: int, pipeline: int, context: int) -> RankLayout:
    """Megatron's default dense groups for a world that the sizes divide (expert parallel = 1)."""
    data = data_parallel_size(world, tensor, pipeline, context)
    sizes = {"tp": tensor, "cp": context, "ep": 1, "dp": data, "pp": pipeline}
    return RankLayout(
        tensor=_orthogonal_groups(world, sizes, ORDER, "tp"),
        context=_orthogonal_groups(world, sizes, ORDER, "cp"),
        data=_orthogonal_groups(world, sizes, ORDER, "dp"),
        pipeline=_orthogonal_groups(world, sizes, ORDER, "pp"),
    )


def worker_ranks(workers: int, gpus_per_worker: int) -> list[list[int]]:
    """torchrun's global ranks per worker: node_rank × nproc_per_node + local_rank."""
    return [list(range(w * gpus_per_worker, (w + 1) * gpus_per_worker)) for w in range(workers)]


def normalize_path(path: str) -> str:
    """Collapse '..', '.', '//' and a trailing '/' so that spelling cannot move a path."""
    norm = posixpath.normpath(path)
    if norm.startswith("//"):  # POSIX keeps a leading '//'; the platform does not
        norm = "/" + norm.lstrip("/")
    return norm


def is_within(path: str, parent: str) -> bool:
    """True when normalised `path` equals `parent` or lies below it."""
    path, parent = normalize_path(path), normalize_path(parent)
    if parent == "/":
        return True
    return path == parent or path.startswith(parent + "/")
