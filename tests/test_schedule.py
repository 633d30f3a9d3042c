"""The pipeline schedule and the rank groups against Megatron's own functions.

tests/fixtures/megatron_schedule.json and megatron_rank_groups.json hold what Megatron's
get_pp_rank_microbatches, get_schedule_table and RankGenerator return at the pinned commit, run from
their source by tools/megatron_fixtures.py; with MEGATRON_LM pointing at a checkout, they are run
again here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from compiler.megatron.parallel import parallel_layout
from compiler.megatron.schedule import bubble_fraction, pp_rank_microbatches, schedule_table, stage_order, timeline

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCHEDULES = json.loads((FIXTURES / "megatron_schedule.json").read_text())
LAYOUTS = json.loads((FIXTURES / "megatron_rank_groups.json").read_text())


def _id(case: dict) -> str:
    return f"pp{case['pipeline']}-v{case['virtual']}-m{case['microbatches']}-r{case['rank']}"


@pytest.mark.parametrize("case", SCHEDULES, ids=_id)
def test_the_schedule_is_megatrons(case):
    chunks = case["virtual"] or 1
    got = pp_rank_microbatches(case["microbatches"], chunks, case["group"], case["pipeline"], case["rank"],
                               case["virtual"])
    assert list(got) == case["pp_rank_microbatches"]
    assert [list(x) for x in schedule_table(case["microbatches"], chunks, case["group"])] == case["schedule_table"]
    # the order each stage runs: Megatron's warm-up forwards, its 1F1B pairs, its cool-down backwards
    total, _, warmup, remaining = case["pp_rank_microbatches"]
    table = case["schedule_table"]
    ops = stage_order(case["pipeline"], case["rank"], case["microbatches"], case["virtual"])
    forwards = [(op.microbatch, op.chunk) for op in ops if op.kind == "F"]
    backwards = [(op.microbatch, chunks - 1 - op.chunk) for op in ops if op.kind == "B"]
    assert forwards == [tuple(t) for t in table] == backwards
    assert [op.kind for op in ops] == ["F"] * warmup + ["F", "B"] * remaining + ["B"] * warmup


@pytest.mark.parametrize("pipeline,virtual,m", [(2, None, 4), (4, None, 8), (4, 2, 8), (3, 3, 6), (8, None, 16)])
def test_the_timeline_keeps_each_stage_in_order_and_waits_for_its_inputs(pipeline, virtual, m):
    stages = timeline(pipeline, m, virtual)
    for rank, slots in enumerate(stages):
        assert [s.op for s in slots] == stage_order(pipeline, rank, m, virtual)
        assert all(a.end <= b.start for a, b in zip(slots, slots[1:]))
    ends = {(s.op.kind, r, s.op.microbatch, s.op.chunk): s.end for r, slots in enumerate(stages) for s in slots}
    for rank, slots in enumerate(stages[1:], 1):
        for slot in slots:
            if slot.op.kind == "F":
                assert slot.start >= ends[("F", rank - 1, slot.op.microbatch, slot.op.chunk)]
    if virtual is None:  # 1F1B's idle time per stage is (pp - 1) × (F + B): the bubble of the model
        busy = 3 * m
        span = max(s.end for slots in stages for s in slots)
        assert span - busy == (pipeline - 1) * 3
        assert (span - busy) / busy == bubble_fraction(pipeline, virtual, m)


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: "w{workers}x{gpus_per_worker}-tp{tensor}-pp{pipeline}-cp{context}-"
                         "ep{expert}-etp{expert_tensor}".format(**c))
def test_the_rank_groups_are_rank_generators(case):
    layout = parallel_layout(case["workers"], case["gpus_per_worker"], case["tensor"], case["pipeline"],
                             case["context"], case["expert"], case["expert_tensor"])
    assert layout is not None
    dense = layout.rank_groups()
    assert (sorted(dense.tensor), sorted(dense.context), sorted(dense.data), sorted(dense.pipeline)) == tuple(
        sorted(case["groups"][t]) for t in ("tp", "cp", "dp", "pp"))
    expert = layout.expert_groups()
    assert expert is not None
    assert (sorted(expert.tensor), sorted(expert.expert), sorted(expert.data)) == tuple(
        sorted(case["expert_groups"][t]) for t in ("tp", "ep", "dp"))


@pytest.mark.allow_ci_skip
@pytest.mark.skipif(not os.environ.get("MEGATRON_LM"), reason="MEGATRON_LM does not point at a Megatron-LM checkout")
def test_the_fixtures_are_what_megatron_gives_now():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from megatron_fixtures import rank_groups, schedules

    assert schedules(Path(os.environ["MEGATRON_LM"])) == SCHEDULES
    assert rank_groups(Path(os.environ["MEGATRON_LM"])) == LAYOUTS
