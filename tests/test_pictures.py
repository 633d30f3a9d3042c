"""plan.md's Mermaid pictures: what they say equals Megatron's schedule and RankGenerator, they stay
bounded for huge jobs, and every one renders with the mermaid library in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compiler.load.override import Override
from compiler.megatron.parallel import parallel_layout
from compiler.megatron.schedule import stage_order
from compiler.plan.pictures import MAX_TASKS, rank_picture
from compiler.one_pass import compile_spec
from mermaid_render import chromium, mermaid_js, render

REPO = Path(__file__).resolve().parent.parent
LAYOUTS = json.loads((Path(__file__).resolve().parent / "fixtures" / "megatron_rank_groups.json").read_text())

# Variations of the 7B spec that exercise each picture: interleaving, a deep pipeline, a world too
# large to draw rank by rank, most of a GPU taken, TP across workers.
VARIANTS = {
    "gpt-7b": (),
    "interleaved": ("training.virtual_pipeline=4", "parallelism.pipeline=4", "parallelism.tensor=2"),
    "deep-pipeline": ("parallelism.pipeline=8", "parallelism.tensor=4", "resources.workers=8"),
    "huge": ("resources.workers=64",),
    "most-of-memory": ("parallelism.tensor=1", "parallelism.pipeline=1", "resources.gpus_per_worker=4",
                    "resources.workers=1", "training.recompute=null", "training.batch.global=512"),
    "tp-across-workers": ("resources.gpus_per_worker=2", "resources.workers=16"),
}


def plan_of(name: str):
    overrides = tuple(Override(raw) for raw in VARIANTS[name])
    result = compile_spec(str(REPO / "specs/gpt-7b.yaml"), "specs/gpt-7b.yaml", overrides=overrides)
    assert result.plan is not None, [d.message for d in result.diagnostics]
    return result.plan


def all_pictures():
    found = []
    for name in VARIANTS:
        found += [(f"{name}: {p.title}", p) for p in plan_of(name).pictures]
    for spec in sorted((REPO / "specs").glob("*.yaml")):
        result = compile_spec(str(spec), f"specs/{spec.name}")
        if result.plan is not None:
            found += [(f"{spec.stem}: {p.title}", p) for p in result.plan.pictures]
    return found


def test_the_schedule_picture_draws_each_stage_in_megatrons_order():
    plan = plan_of("interleaved")
    picture = next(p for p in plan.pictures if p.title == "Pipeline schedule")
    stages: dict[int, list[str]] = {}
    current = None
    for line in picture.lines:
        if line.startswith("  section stage "):
            current = int(line.split()[-1])
            stages[current] = []
        elif current is not None and ":" in line:
            stages[current].append(line.split()[0])
    drawn_m = max(int(name[1:].split(".")[0]) for name in stages[0]) + 1
    virtual = plan.pretrain.virtual_pipeline
    assert virtual == 2  # 32 layers, 4 stages, 4 layers per virtual stage
    for stage, names in stages.items():
        expected = [f"{op.kind}{op.microbatch}.{op.chunk}" for op in stage_order(4, stage, drawn_m, virtual)]
        assert names == expected
    assert len(stages) == 4
    title = next(line for line in picture.lines if line.startswith("  title "))
    assert "interleaved 1F1B, pipeline 4 × 2 virtual stages" in title
    assert f"{plan.pretrain.schedule.bubble_fraction:.1%}" in title


@pytest.mark.parametrize("name", ["deep-pipeline", "huge", "interleaved"])
def test_pictures_stay_bounded(name):
    for picture in plan_of(name).pictures:
        if picture.title == "Pipeline schedule":
            assert sum(1 for line in picture.lines if re.match(r"  [FB]\d", line)) <= MAX_TASKS
        assert len(picture.lines) <= 400, picture.title


@pytest.mark.parametrize("case", LAYOUTS[:30], ids=lambda c: "w{workers}x{gpus_per_worker}-tp{tensor}-pp{pipeline}-"
                         "cp{context}-ep{expert}".format(**c))
def test_the_rank_picture_is_rank_generators(case):
    layout = parallel_layout(case["workers"], case["gpus_per_worker"], case["tensor"], case["pipeline"],
                             case["context"], case["expert"], case["expert_tensor"])
    picture = rank_picture(layout, layout.rank_groups())
    if layout.world > 64:
        return
    groups = case["groups"]
    for line in picture.lines:
        m = re.match(r'    r(\d+)\["GPU (\d+) · rank (\d+)<br/>tp (\d+) · pp (\d+) · dp (\d+)', line)
        if not m:
            continue
        rank = int(m.group(3))
        assert int(m.group(2)) == rank % case["gpus_per_worker"]
        for token, index in (("tp", 4), ("pp", 5), ("dp", 6)):
            group = next(g for g in groups[token] if rank in g)
            assert group.index(rank) == int(m.group(index))
        crosses = any(rank in g and len({r // case["gpus_per_worker"] for r in g}) > 1
                      for token, found in (("tp", groups["tp"]), ("ep", case["expert_groups"]["ep"] if case["expert"] > 1
                                                               else [])) for g in found)
        assert line.endswith(":::crosses") == crosses, line


def test_a_tp_group_across_workers_is_marked_and_said():
    picture = next(p for p in plan_of("tp-across-workers").pictures if p.title == "Ranks on workers")
    assert "8 of 8 TP groups cross workers" in picture.caption
    assert sum(line.endswith(":::crosses") for line in picture.lines) == 32


@pytest.mark.skipif(chromium() is None or mermaid_js() is None,
                    reason="needs Debian's chromium and the mermaid library (.ci/run installs both)")
def test_every_picture_renders_in_headless_chromium(tmp_path):
    pictures = all_pictures()
    sources = ["\n".join(p.lines) + "\n" for _, p in pictures]
    results = render(sources, tmp_path)
    failures = [(name, result) for (name, _), result in zip(pictures, results) if result != "ok"]
    assert not failures, failures
    assert len(results) == len(pictures) >= 20
