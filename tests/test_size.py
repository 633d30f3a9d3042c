"""compiler/commands/size.py: every layout it prints compiles cleanly with its --set lines applied."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.megatron.pretrain import PipelineSplit, pipeline_split_refusal

from compiler.commands.size import (
    Candidate, ModelFacts, candidate_layouts, compile_candidate, main, world_shapes,
)

REPO = Path(__file__).resolve().parent.parent
SPECS = [("specs/gpt-7b.yaml", []), ("tests/size_specs/gpt-1b.yaml", []),
         ("tests/size_specs/llama-70b.yaml", []), ("specs/gpt-7b.yaml", ["--rank", "gpu-hours"]),
         ("specs/gpt-7b.yaml", ["--gpu", "h100", "--max-gpus", "64"]),
         ("tests/size_specs/gpt-1b.yaml", ["--gpu", "a100", "--max-gpus", "16", "--rank", "gpu-hours"])]


def run_size(spec: str, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(REPO / spec), *extra], out, err)
    return code, out.getvalue(), err.getvalue()


def size_json(spec: str, *extra: str) -> dict:
    code, out, err = run_size(spec, "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("spec,extra", SPECS, ids=[f"{s}{' '.join(e)}" for s, e in SPECS])
def test_every_printed_layout_compiles_cleanly(spec: str, extra: list[str]) -> None:
    result = size_json(spec, "--top", "10", *extra)
    assert len(result["layouts"]) == 10
    for row in result["layouts"]:
        diags = compile_candidate(str(REPO / spec), spec, tuple(row["set"]))
        assert diags == [], (row["set"], diags)
        assert row["gpus"] <= result["max_gpus"] and row["peak_fraction"] <= 0.9
        assert row["tensor"] <= row["gpus_per_worker"]


def test_layouts_are_ranked_and_distinct() -> None:
    for by, key in (("time", "step_ms"), ("gpu-hours", "gpu_hours")):
        rows = size_json("specs/gpt-7b.yaml", "--rank", by, "--top", "10")["layouts"]
        values = [r[key] for r in rows]
        assert values == sorted(values)
        shapes = {(r["workers"], r["gpus_per_worker"], r["tensor"], r["pipeline"], r["context"], r["virtual_pipeline"])
                  for r in rows}
        assert len(shapes) == len(rows)


def test_overrides_reproduce_the_layout_through_the_cli(tmp_path: Path) -> None:
    # the --set lines given to the real command line give the layout the row describes
    row = size_json("tests/size_specs/llama-70b.yaml", "--top", "1")["layouts"][0]
    sets = [a for o in row["set"] for a in ("--set", o)]
    proc = subprocess.run([sys.executable, "-m", "compiler", str(REPO / "tests/size_specs/llama-70b.yaml"),
                           "--explain", "--format", "json", "--werror", *sets],
                          capture_output=True, text=True, cwd=tmp_path, check=False,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    explained = json.loads(proc.stdout)
    explained = explained["specs"][0] if "specs" in explained else explained  # one spec's, in either layout
    assert (explained["tensor_parallel"], explained["pipeline_parallel"], explained["context_parallel"],
            explained["data_parallel"], explained["world_size"]) == (
        row["tensor"], row["pipeline"], row["context"], row["data"], row["gpus"])


def test_explain_rank_shows_the_terms() -> None:
    code, out, _ = run_size("specs/gpt-7b.yaml", "--top", "3", "--explain-rank")
    assert code == 0
    for name in ("compute", "bubble", "tp", "dp-grads", "pp", "optimizer"):
        assert f" {name} " in out
    assert "[not measured]" in out
    rows = size_json("specs/gpt-7b.yaml", "--top", "3", "--explain-rank")["layouts"]
    for row in rows:
        assert sum(t["ms"] for t in row["terms"] if t["exposed"]) == pytest.approx(row["step_ms"], abs=0.1)


def test_candidates_obey_megatrons_divisibility() -> None:
    facts = ModelFacts(num_layers=32, num_attention_heads=32, num_query_groups=8, seq_length=4096)
    cands = candidate_layouts(facts, 512, 32, 8)
    assert cands
    for c in cands:
        assert c.world % (c.tensor * c.pipeline * c.context) == 0 and c.world <= 32
        assert 32 % c.tensor == 0 and (8 % c.tensor == 0 or c.tensor % 8 == 0) and c.tensor <= c.gpus_per_worker
        assert 32 % c.pipeline == 0 and 512 % (c.micro * c.data) == 0
        assert c.context == 1 or 4096 % (2 * c.context) == 0
        if c.virtual_pipeline is not None:
            # the pipeline rule's own check (pretrain.pipeline_split_refusal): with p2p overlap on, PP > 1
            assert c.pipeline > 1 and (32 // c.pipeline) % c.virtual_pipeline == 0
            assert pipeline_split_refusal(PipelineSplit(32, c.pipeline, c.virtual_pipeline)) is None
    assert Candidate(4, 8, 4, 2, 1, 1, None, "selective", True) in cands  # the spec's own layout
    assert not any(c.tensor == 16 for c in candidate_layouts(facts, 512, 32, 8))


def test_world_shapes() -> None:
    assert world_shapes(32, 8) == [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (3, 8), (4, 8)]
    assert world_shapes(4, 8) == [(1, 1), (1, 2), (1, 4)]


def test_full_recompute_sets_method_and_layers() -> None:
    c = Candidate(1, 8, 2, 1, 1, 1, None, "full", True)
    sets = c.overrides(rdma=True)
    assert sets[-5:-1] == ("training.recompute=null", "training.recompute.granularity=full",
                         "training.recompute.method=uniform", "training.recompute.num_layers=1")
    assert compile_candidate(str(REPO / "specs/gpt-7b.yaml"), "specs/gpt-7b.yaml", sets) == []


def test_a_layout_that_does_not_fit_is_not_printed() -> None:
    # 70B on one worker of 8 H200: 140 GB of bf16 weights alone; nothing fits
    code, out, err = run_size("tests/size_specs/llama-70b.yaml", "--max-gpus", "8")
    assert code == 1 and "no layout fits" in err
    # no empty table: what was enumerated and what fit, without the tie legend or the column header
    assert out.endswith("\n") and out.count("\n") == 1 and "llama-70b.yaml: 0 shown, the fastest of each parallel shape, of " in out and "tie" not in out


def test_usage_errors() -> None:
    assert run_size("specs/gpt-7b.yaml", "--gpu", "tpu")[0] == 2
    assert run_size("specs/gpt-7b.yaml", "--top", "0")[0] == 2
    code, _, err = run_size("specs/pretrain-mock.yaml", "--top", "2", "--rank", "gpu-hours")
    assert code == 0, err


def test_init_from_specs_are_sized() -> None:
    # issue 26: the derived model of init_from is what size enumerates over (it crashed on None before)
    code, out, err = run_size("specs/qwen3-0.6b.yaml", "--top", "2", "--max-gpus", "8")
    assert code == 0, err
    assert "GPUs" in out


def test_json_has_tie_groups_terms_and_the_virtual_pipeline_size() -> None:
    doc = size_json("specs/gpt-7b.yaml", "--top", "6")
    assert doc["model_error"] > 0 and doc["tie_groups"]
    ranks = [r for group in doc["tie_groups"] for r in group]
    assert ranks == list(range(1, len(doc["layouts"]) + 1))
    for row in doc["layouts"]:
        assert {"compute", "optimizer"} <= {t["name"] for t in row["terms"]}
        members = next(g for g in doc["tie_groups"] if row["rank"] in g)
        assert row["tie_group"] == doc["tie_groups"].index(members) + 1
        if row["layers_per_virtual_stage"] is not None:
            per_stage = 32 // row["pipeline"]
            assert row["virtual_pipeline"] in (None, per_stage // row["layers_per_virtual_stage"])
    first = doc["layouts"][0]["step_ms"]
    for row in doc["layouts"]:
        if row["tie_group"] == 1:
            assert row["step_ms"] <= first * (1 + doc["model_error"]) + 0.1


def test_ties_group_within_the_model_error() -> None:
    from compiler.commands.size import tie_groups

    class S:
        def __init__(self, seconds: float) -> None:
            self.step = type("T", (), {"seconds": seconds})()

    assert tie_groups([S(1.0), S(1.05), S(1.2), S(1.25), S(2.0)], 0.1) == [[1, 2], [3, 4], [5]]  # type: ignore[list-item]


def test_context_parallelism_is_not_free_in_size() -> None:
    from compiler.commands.size import Candidate, size_candidate
    from compiler.megatron.gpus import GPUS
    from compiler.one_pass import compile_spec

    spec = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "specs/gpt-7b.yaml", render_files=False).spec
    times = []
    for cp in (1, 2, 4):
        c = Candidate(1, 8, 1, 1, cp, 1, None, "full", True)
        sized = size_candidate(spec, c, GPUS["h200"])
        assert sized is not None
        times.append(sized.step.term("cp").seconds)
    assert times[0] == 0 and times[1] > 0 and times[2] > times[1]


def test_one_layout_has_no_tie_legend_and_zero_terms_are_not_flagged() -> None:
    """A single layout is not a ranking (no tie legend), and a term that is zero (no tensor parallelism) is not an
    estimate that lacks a measurement: `[not measured]` marks only the non-zero ones (a newcomer's pass read both as
    noise)."""
    code, out, _ = run_size("specs/gpt-7b.yaml", "--top", "1", "--explain-rank")
    assert code == 0 and "tie:" not in out and ": 1 shown, the fastest of each parallel shape, of " in out
    terms = [line for line in out.splitlines() if line.startswith("      ") and not line.strip().startswith("--set")]
    assert terms and all("[not measured]" not in line for line in terms if float(line.split()[1]) == 0.0)
    code, out, _ = run_size("specs/gpt-7b.yaml", "--top", "3")
    assert code == 0 and out.startswith("tie: ")
