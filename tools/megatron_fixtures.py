#!/usr/bin/env python3
"""Write the fixtures that hold the compiler's pipeline schedule and rank groups to Megatron's own:

    python tools/megatron_fixtures.py /path/to/Megatron-LM   # the pinned commit, 571370c8

Megatron's functions are run from its own source, on CPU and without torch: get_pp_rank_microbatches
and get_schedule_table (megatron/core/pipeline_parallel/schedules.py), and RankGenerator with
generate_masked_orthogonal_rank_groups (megatron/core/parallel_state.py), each taken out of its file
with `ast` and executed alone (the pipeline rank and size reach get_pp_rank_microbatches through a
stand-in for its p2p_communicator argument, as Megatron's own tests pass one). Nothing of Megatron is
written to the fixtures but these functions' results.
"""

from __future__ import annotations

import ast
import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional

HERE = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def load(path: Path, names: set[str]) -> dict[str, Any]:
    """The named top-level functions and classes of a Python file, executed in a namespace of their own."""
    tree = ast.parse(path.read_text())
    body = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names]
    assert {n.name for n in body} == names, names - {n.name for n in body}
    namespace: dict[str, Any] = {"Optional": Optional, "List": List, "P2PCommunicator": object, "torch": None}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def communicator(pp: int, rank: int, vpp: int | None) -> SimpleNamespace:
    group = SimpleNamespace(size=lambda: pp, rank=lambda: rank)
    return SimpleNamespace(pp_group=group, virtual_pipeline_model_parallel_size=vpp)


def schedules(megatron: Path) -> list[dict[str, Any]]:
    ns = load(megatron / "megatron/core/pipeline_parallel/schedules.py",
              {"get_pp_rank_microbatches", "get_schedule_table"})
    cases = []
    for pp in (1, 2, 3, 4, 8):
        for vpp in (None, 2, 3):
            if vpp is not None and pp == 1:
                continue
            for m in sorted({1, 2, pp, 2 * pp, 3 * pp + (1 if vpp is None else 0), 16}):
                chunks = vpp or 1
                group = pp
                for rank in range(pp):
                    got = ns["get_pp_rank_microbatches"](m, chunks, group, p2p_communicator=communicator(pp, rank, vpp))
                    cases.append({"pipeline": pp, "virtual": vpp, "microbatches": m, "rank": rank, "group": group,
                                  "pp_rank_microbatches": list(got),
                                  "schedule_table": [list(x) for x in ns["get_schedule_table"](m, chunks, group)]})
    return cases


def rank_groups(megatron: Path, count: int = 60, seed: int = 31) -> list[dict[str, Any]]:
    ns = load(megatron / "megatron/core/parallel_state.py", {"generate_masked_orthogonal_rank_groups", "RankGenerator"})
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        tp, pp, cp, dp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 4]), rng.choice([1, 1, 2]), rng.choice([1, 2, 3, 4])
        world = tp * pp * cp * dp
        gpus = rng.choice([g for g in (1, 2, 4, 8, 16) if world % g == 0])
        etp = rng.choice([e for e in (1, 2, 4, 8) if (world // pp) % e == 0])
        ep = rng.choice([e for e in (1, 2, 4, 8) if (world // pp) % (e * etp) == 0])
        dense = ns["RankGenerator"](tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order="tp-cp-ep-dp-pp")
        expert = ns["RankGenerator"](tp=etp, ep=ep, dp=world // (pp * etp * ep), pp=pp, cp=1, order="tp-cp-ep-dp-pp")
        cases.append({"workers": world // gpus, "gpus_per_worker": gpus, "tensor": tp, "pipeline": pp, "context": cp,
                      "expert": ep, "expert_tensor": etp,
                      "groups": {t: dense.get_ranks(t) for t in ("tp", "cp", "dp", "pp")},
                      "expert_groups": {t: expert.get_ranks(t) for t in ("tp", "ep", "dp")}})
    return cases


def main(argv: list[str]) -> int:
    megatron = Path(argv[0])
    (HERE / "megatron_schedule.json").write_text(json.dumps(schedules(megatron), separators=(",", ":")) + "\n")
    (HERE / "megatron_rank_groups.json").write_text(json.dumps(rank_groups(megatron), separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
