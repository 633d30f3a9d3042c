"""Megatron's parallel layout: one definition of each size, and the rank groups.

The rank groups follow Megatron Core's RankGenerator (megatron/core/parallel_state.py at the
pinned commit): ranks are laid out in the order tp-cp-ep-dp-pp, tensor-parallel fastest.
"""

from __future__ import annotations

from ..tuples import NamedTuple

RANK_ORDER = ("tp", "cp", "ep", "dp", "pp")


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


def expert_tensor_size(tensor: int, expert_tensor: int | None) -> int:
    """Megatron's expert tensor-parallel size: --expert-tensor-parallel-size, else the tensor size
    (megatron/training/arguments.py at 571370c8: `if args.expert_tensor_parallel_size is None`)."""
    return tensor if expert_tensor is None else expert_tensor


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
        tensor=_orthogonal_groups(world, sizes, RANK_ORDER, "tp"),
        context=_orthogonal_groups(world, sizes, RANK_ORDER, "cp"),
        data=_orthogonal_groups(world, sizes, RANK_ORDER, "dp"),
        pipeline=_orthogonal_groups(world, sizes, RANK_ORDER, "pp"),
    )


class ExpertRankLayout(NamedTuple):
    tensor: list[list[int]]  # expert tensor parallel
    expert: list[list[int]]
    data: list[list[int]]  # expert data parallel


def expert_rank_layout(world: int, expert_tensor: int, expert: int, pipeline: int) -> ExpertRankLayout:
    """Megatron's expert groups (parallel_state.py: the expert RankGenerator, context 1, the same
    order), for a world that expert_tensor × expert × pipeline divides."""
    data = world // (expert_tensor * expert * pipeline)
    sizes = {"tp": expert_tensor, "cp": 1, "ep": expert, "dp": data, "pp": pipeline}
    return ExpertRankLayout(
        tensor=_orthogonal_groups(world, sizes, RANK_ORDER, "tp"),
        expert=_orthogonal_groups(world, sizes, RANK_ORDER, "ep"),
        data=_orthogonal_groups(world, sizes, RANK_ORDER, "dp"),
    )


def worker_ranks(workers: int, gpus_per_worker: int) -> list[list[int]]:
    """torchrun's global ranks per worker: node_rank × nproc_per_node + local_rank."""
    return [list(range(w * gpus_per_worker, (w + 1) * gpus_per_worker)) for w in range(workers)]


class ParallelLayout(NamedTuple):
    """Every parallel size of a job, derived once (facts), read by the rules, the estimates and the plan."""

    workers: int
    gpus_per_worker: int
    world: int
    tensor: int
    pipeline: int
    context: int
    expert: int
    expert_tensor: int
    data: int

    @property
    def expert_data(self) -> int:
        """Replicas of each expert: the world over expert_tensor × expert × pipeline (0 when that does
        not fit, a layout the rules reject)."""
        return self.world // (self.expert_tensor * self.expert * self.pipeline)

    def rank_groups(self) -> RankLayout:
        """Megatron's dense rank groups of this layout."""
        return rank_layout(self.world, self.tensor, self.pipeline, self.context)

    def expert_groups(self) -> ExpertRankLayout | None:
        """Megatron's expert groups of this layout; None when the expert sizes do not fit the world."""
        if self.expert_data < 1 or self.world % (self.expert_tensor * self.expert * self.pipeline):
            return None
        return expert_rank_layout(self.world, self.expert_tensor, self.expert, self.pipeline)

    def ranks_per_worker(self) -> tuple[tuple[int, ...], ...]:
        """torchrun's global ranks on each worker."""
        return tuple(tuple(r) for r in worker_ranks(self.workers, self.gpus_per_worker))


def parallel_layout(workers: int, gpus_per_worker: int, tensor: int, pipeline: int, context: int, expert: int,
                    expert_tensor: int | None) -> ParallelLayout | None:
    """The layout of a job, or None when tensor × pipeline × context does not divide the world."""
    world = world_size(workers, gpus_per_worker)
    if world % model_parallel_size(tensor, pipeline, context):
        return None
    return ParallelLayout(
        workers=workers, gpus_per_worker=gpus_per_worker, world=world, tensor=tensor, pipeline=pipeline,
        context=context, expert=expert, expert_tensor=expert_tensor_size(tensor, expert_tensor),
        data=data_parallel_size(world, tensor, pipeline, context),
    )
