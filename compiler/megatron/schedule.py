"""Megatron's pipeline schedule: the order in which each stage runs forward and backward passes.

A port of `get_pp_rank_microbatches` and `get_schedule_table`
(megatron/core/pipeline_parallel/schedules.py:822-909 at 571370c8), for training (forward_only
False) without the MoE communication overlap: a stage runs its warm-up forwards, then one forward and
one backward at a time (1F1B, steady), then the cool-down backwards; with a virtual pipeline
(interleaved 1F1B) each forward and backward is of one model chunk, in the schedule table's order
(`get_model_chunk_id`, schedules.py:1153: a backward runs the chunks in reverse).
tests/test_schedule.py holds the port to Megatron's own functions, run on their source
(tests/fixtures/megatron_schedule.json).
"""

from __future__ import annotations

from ..tuples import NamedTuple


def pp_rank_microbatches(num_microbatches: int, num_model_chunks: int, group_size: int, pipeline: int,
                         rank: int, virtual: int | None) -> tuple[int, bool, int, int]:
    """(total, all in warm-up, warm-up, remaining) microbatches of one pipeline rank
    (get_pp_rank_microbatches)."""
    total = num_microbatches * num_model_chunks
    if pipeline > 1:
        if virtual is None:
            warmup = pipeline - rank - 1
        else:
            warmup = (pipeline - rank - 1) * 2 + (num_model_chunks - 1) * group_size
    else:
        warmup = 0
    all_warmup = False
    if warmup >= total:
        warmup, all_warmup = total, True
    return total, all_warmup, warmup, total - warmup


def schedule_table(num_microbatches: int, num_model_chunks: int, group_size: int) -> list[tuple[int, int]]:
    """(microbatch, model chunk) of each virtual microbatch id (get_schedule_table)."""
    table: list[tuple[int, int]] = []
    for first in range(0, num_microbatches, group_size):
        last = num_microbatches if first + group_size >= num_microbatches else first + group_size
        table.extend((mb, chunk) for chunk in range(num_model_chunks) for mb in range(first, last))
    return table


class Op(NamedTuple):
    kind: str  # F (forward) or B (backward)
    microbatch: int
    chunk: int  # the model chunk (0 without a virtual pipeline)
    phase: str  # warm-up, steady or cool-down


def stage_order(pipeline: int, rank: int, num_microbatches: int, virtual: int | None,
                group_size: int | None = None) -> list[Op]:
    """The passes one pipeline rank runs in one iteration, in order. group_size is
    microbatch_group_size_per_vp_stage (Megatron's default: the pipeline size)."""
    chunks = virtual or 1
    group = group_size or pipeline
    total, _, warmup, remaining = pp_rank_microbatches(num_microbatches, chunks, group, pipeline, rank, virtual)
    table = schedule_table(num_microbatches, chunks, group)

    def forward(k: int, phase: str) -> Op:
        mb, chunk = table[k % total]
        return Op("F", mb, chunk, phase)

    def backward(k: int, phase: str) -> Op:
        mb, chunk = table[k % total]
        return Op("B", mb, chunks - chunk - 1, phase)

    ops = [forward(k, "warm-up") for k in range(warmup)]
    for i in range(remaining):
        ops += [forward(warmup + i, "steady"), backward(i, "steady")]
    ops += [backward(remaining + j, "cool-down") for j in range(warmup)]
    return ops


def bubble_fraction(pipeline: int, virtual: int | None, num_microbatches: int) -> float:
    """The 1F1B bubble as a fraction of the work: (pp - 1) / (v × m), 0 without a pipeline."""
    if pipeline <= 1:
        return 0.0
    return (pipeline - 1) / ((virtual or 1) * num_microbatches)


class Slot(NamedTuple):
    op: Op
    start: int
    end: int


def timeline(pipeline: int, num_microbatches: int, virtual: int | None, forward_units: int = 1,
             backward_units: int = 2) -> list[list[Slot]]:
    """Each stage's passes placed in time: a pass starts when its stage is free and its input is
    ready (the previous stage's forward, the next stage's backward, across chunks for a virtual
    pipeline); a backward takes twice a forward, as Megatron's FLOP count has it."""
    chunks = virtual or 1
    orders = [stage_order(pipeline, rank, num_microbatches, virtual) for rank in range(pipeline)]
    done: dict[tuple[str, int, int, int], int] = {}  # (kind, stage, microbatch, chunk) -> end
    placed: list[list[Slot]] = [[] for _ in range(pipeline)]
    free = [0] * pipeline
    position = [0] * pipeline
    while any(position[s] < len(orders[s]) for s in range(pipeline)):
        progressed = False
        for stage in range(pipeline):
            while position[stage] < len(orders[stage]):
                op = orders[stage][position[stage]]
                needs = _dependency(op, stage, pipeline, chunks)
                if needs is not None and needs not in done:
                    break
                start = max(free[stage], done[needs] if needs is not None else 0)
                end = start + (forward_units if op.kind == "F" else backward_units)
                done[(op.kind, stage, op.microbatch, op.chunk)] = end
                placed[stage].append(Slot(op, start, end))
                free[stage] = end
                position[stage] += 1
                progressed = True
        if not progressed:  # a schedule whose passes wait on each other: Megatron would hang too
            raise ValueError("the schedule deadlocks")
    return placed


def _dependency(op: Op, stage: int, pipeline: int, chunks: int) -> tuple[str, int, int, int] | None:
    if op.kind == "F":
        if stage > 0:
            return ("F", stage - 1, op.microbatch, op.chunk)
        return ("F", pipeline - 1, op.microbatch, op.chunk - 1) if op.chunk > 0 else None
    if stage < pipeline - 1:
        return ("B", stage + 1, op.microbatch, op.chunk)
    if op.chunk < chunks - 1:
        return ("B", 0, op.microbatch, op.chunk + 1)
    return ("F", stage, op.microbatch, op.chunk)  # the loss: the last stage's own forward
