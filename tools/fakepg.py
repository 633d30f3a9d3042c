#!/usr/bin/env python3
"""Multi-GPU layouts measured on one GPU with Megatron's --fake-process-group (issue 26).

Megatron at the pinned commit (megatron/training/arguments.py:2842, initialize.py:322) can start one
rank of a TP/PP/VPP/DP layout with every collective skipped: WORLD_SIZE and RANK say which rank,
the process group is torch's fake one. One process then holds exactly that rank's weights, gradients,
optimizer shard and activations, so its `max allocated` is that rank's peak memory.

    python tools/fakepg.py plan GEN PLAN.json [--specs DIR] [NAME[/STAGE]...]  # compiled specs (default dir:
                                                  # tests/fixtures/fakepg/specs); FAKEPG_FILL=1 run: see fill_received
    python tools/fakepg.py run PLAN.json LOGDIR   # on the GPU machine: every rank, concurrently
    SEQUENTIAL=1 python tools/fakepg.py run PLAN.json LOGDIR  # every rank alone on the GPU: its time too
    python tools/fakepg.py table [LOGDIR]         # the measured figures (default: the fixtures)
    python tools/fakepg.py predict SPEC...        # each planned rank's time by the step model

`plan` reads each compiled launch.sh (GEN/<name>/launch.sh, from
`python -m compiler tests/fixtures/fakepg/specs/*.yaml -o GEN`) and keeps pretrain_gpt.py's
arguments as launch.sh passes them, less --save/--load (no checkpoint is written) and
--exit-signal-handler (its check gathers on a device the fake backend cannot name:
dist_signal_handler.py get_device raises), plus --fake-process-group (NAME...: only those specs), and the variables
launch.sh exports ("launch_env": the spec's training.env and the compiler's, such as the local experts' cuBLASLt
cache; an entry's own "env", set by hand, wins over them). It runs two ranks per layout, one when the
pipeline has one stage: the first pipeline stage's and the last's, each tensor- and data-parallel rank 0 (ranks are laid out tp-cp-ep-dp-pp, parallel_state.py
RankGenerator), because only data-parallel rank 0 prints Megatron's memory report
(training/utils/common_utils.py report_memory) and tensor-parallel rank 0 loads the data (the other
ranks would read an unfilled broadcast buffer as token ids); the last rank prints the iteration lines.

`run` starts every rank at once (one GPU, separate processes: torch's peak-memory counter is per
process, so concurrent runs do not disturb it) and stops each after `[after training is done]`.
Their iteration times are therefore contended and NOT a timing measurement; only memory is judged.
With SEQUENTIAL=1 (device call 26) every rank still starts at once, since Megatron's imports are most
of its start-up and are CPU work, but through `fakepg.py rank`, which imports what pretrain_gpt.py
imports, prints `# fakepg: imports done` and waits for its go file before it runs the unmodified
pretrain_gpt.py (runpy) and touches the GPU; the ranks are then let go one after another, each alone on
the GPU until `[after training is done]`: each rank's iteration lines (with a fake process group every
rank prints them, common_utils.py print_rank_last) are its own compute-only time, every collective
skipped. `predict` gives the step model's figure for such a rank
(timing.fake_rank_seconds: its stage's micro batches, its optimizer and the iteration's host work; no
bubble and no communication), from the spec as the compiler sizes it.
Not judged this way: MoE (the fake all-to-all routes garbage tokens). Sequence parallel needs
Transformer Engine or Apex (torch LayerNorm asserts): the `te-*` layouts (issue 27) run through TE,
installed on the GPU machine by tools/te_measure_device.sh, which also runs this harness.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "fixtures" / "fakepg" / "specs"
LOGS = ROOT / "tests" / "fixtures" / "fakepg" / "logs"
# an image the compiler does not know to hold Transformer Engine or Apex: torch's optimizer, as on the lent H200
NO_TE_IMAGE = "docker.io/library/python:3.11"
_MAX_ALLOC = re.compile(r"^\[Rank (\d+)\] .*memory \(MB\) \| allocated: [\d.]+ \| max allocated: ([\d.]+)")
_ITER = re.compile(r" iteration +(\d+)/ *(\d+) \|.*\| elapsed time per iteration \(ms\): ([\d.]+)")


def launch_args(launch: str) -> list[str]:
    """pretrain_gpt.py's arguments in a compiled launch.sh, with $RUN_ROOT left for the shell."""
    lines = launch.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith('"$MEGATRON_ROOT/pretrain_gpt.py"'))
    text = []
    for line in lines[start + 1:]:
        body = line.strip()
        end = " 2>&1" in body
        body = body.split(" 2>&1")[0].rstrip("\\").strip()
        text.append(body)
        if end:
            break
    args = shlex.split(" ".join(text), posix=True)
    out: list[str] = []
    skip = False
    for a in args:
        if a.startswith(">"):  # the redirection of the output: the arguments have ended
            break
        if a.startswith("${resume_args"):  # launch.sh's own --ckpt-step on a damaged save; none here
            continue
        if skip:
            skip = False
            continue
        if a in ("--save", "--load"):
            skip = True
            continue
        if a == "--exit-signal-handler":  # its check gathers on a CUDA device, which the fake backend has not
            continue  # (dist_signal_handler.py get_device raises); with no checkpoint it has nothing to do
        out.append(a)
    return out


_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.M)


def launch_env(launch: str) -> dict[str, str]:
    """The variables a compiled launch.sh exports for Megatron (the spec's training.env and the compiler's own, such
    as CUBLASLT_HEURISTICS_CACHE_CAPACITY for local experts), so that a rank runs as the compiled job would."""
    return {name: shlex.split(value)[0] if value else "" for name, value in _EXPORT.findall(launch)}


def _value(args: list[str], flag: str, default: int) -> int:
    return int(args[args.index(flag) + 1]) if flag in args else default


def world_size(launch: str) -> int:
    """The GPUs a compiled launch.sh starts: the GPUs it expects a worker times the workers it expects."""
    per = re.search(r"^EXPECTED_GPUS=(\d+)$", launch, re.M)
    nodes = re.search(r"^EXPECTED_NNODES=(\d+)$", launch, re.M)
    assert per, "launch.sh: no EXPECTED_GPUS line"
    return int(per.group(1)) * (int(nodes.group(1)) if nodes else 1)


def ranks(world: int, tp: int, pp: int, cp: int) -> tuple[tuple[str, int], ...]:
    """The ranks run of a layout: the first pipeline stage's and the last's, each tensor-, context- and
    data-parallel rank 0 (ranks are laid out tp-cp-ep-dp-pp)."""
    dp = world // (tp * pp * cp)
    return (("first", 0), ("last", (pp - 1) * tp * cp * dp)) if pp > 1 else (("first", 0),)


def plan(gen: Path, names: list[str] | None = None, specs: Path = SPECS) -> list[dict]:
    runs = []
    for spec in sorted(specs.glob("*.yaml")):
        name = spec.stem
        # NAME or NAME/STAGE: a layout's ranks, or one of them
        stages = {n.partition("/")[2] for n in names or [] if n.partition("/")[0] == name}
        if stages - {"", "first", "last"}:
            raise SystemExit(f"{name}: a stage is first or last, not {sorted(stages - {'', 'first', 'last'})}")
        if names and not stages or not (gen / name / "launch.sh").exists():
            continue
        launch = (gen / name / "launch.sh").read_text()
        args = launch_args(launch) + ["--fake-process-group"]
        world = world_size(launch)
        tp = _value(args, "--tensor-model-parallel-size", 1)
        pp = _value(args, "--pipeline-model-parallel-size", 1)
        cp = _value(args, "--context-parallel-size", 1)
        for stage, rank in ranks(world, tp, pp, cp):
            if names and "" not in stages and stage not in stages:  # NAME/STAGE: only that stage
                continue
            runs.append({"name": name, "stage": stage, "rank": rank, "world": world, "args": args,
                         "launch_env": launch_env(launch)})
    return runs


IMPORTS_DONE = "# fakepg: imports done"


def rank(go: str, root: str, args: list[str]) -> None:
    """One rank for a sequential run: Megatron's imports, then, once `go` exists, pretrain_gpt.py as is."""
    import runpy

    sys.path.insert(0, root)
    import gpt_builders  # noqa: F401  (pretrain_gpt.py's imports, the start-up's CPU work)
    import megatron.training  # noqa: F401
    from megatron.core.models.gpt import GPTModel  # noqa: F401

    if os.environ.get("FAKEPG_FILL") == "1":
        fill_received()
    own = set(json.loads(os.environ.get("FAKEPG_ENV", "{}")))
    for key in sorted(own):  # a plan entry's own environment (_start)
        print(f"{ENV_LINE} {key}={os.environ[key]}", flush=True)
    for key in sorted(set(json.loads(os.environ.get("FAKEPG_LAUNCH_ENV", "{}"))) - own):  # the compiled launch's
        print(f"{LAUNCH_ENV_LINE} {key}={os.environ[key]}", flush=True)
    if os.environ.get("FAKEPG_COUNTS"):
        record_counts(os.environ["FAKEPG_COUNTS"])
    print(IMPORTS_DONE, flush=True)
    while not os.path.exists(go):
        time.sleep(0.1)
    sys.argv = [f"{root}/pretrain_gpt.py", *args]
    runpy.run_path(sys.argv[0], run_name="__main__")


def fill_received() -> None:
    """FAKEPG_FILL=1 (device call 29): fill every buffer the fake pipeline receive returns with normal random numbers.
    A stage after the first receives nothing under a fake process group: P2PCommunicator._communicate hands back the
    torch.empty buffers it made, as they were, and where those went NaN or zero the rank's GEMMs ran on NaN or zeros,
    in 12-17 % less time than on data (tests/fixtures/h200-hosts/call28). A real receive fills them with data; this fills them
    with numbers like it (one kernel a receive). What the rank computes is otherwise Megatron's own."""
    import torch
    from megatron.core.pipeline_parallel import p2p_communication as p2p

    received = p2p.P2PCommunicator._communicate

    def filled(self: Any, **kwargs: Any) -> Any:
        prev, nxt, reqs = received(self, **kwargs)
        with torch.no_grad():
            for t in (prev, nxt):
                if t is not None:
                    t.normal_()
        return prev, nxt, reqs

    p2p.P2PCommunicator._communicate = filled  # type: ignore[method-assign]
    print("# fakepg: FAKEPG_FILL=1, received buffers filled with normal random numbers", flush=True)


# the line `fakepg.py rank` prints for each variable a plan entry's "env" sets (tools/validate_timing.py reads it)
ENV_LINE = "# fakepg: env"
# the line it prints for each variable the compiled launch.sh exports (plan's "launch_env"): the job as compiled, priced
LAUNCH_ENV_LINE = "# fakepg: launch env"


def record_counts(path: str) -> None:
    """A plan entry with "counts" (device call 41): each local experts' forward (Megatron's SequentialMLP) appends the
    token count of each expert its router gave it, one JSON list a line, to `path`. The dispatcher has moved the
    counts to the host already (token_dispatcher.py: .cpu()), and SequentialMLP calls .tolist() on them: no sync more."""
    from megatron.core.transformer.moe import experts

    forward = experts.SequentialMLP.forward
    out = open(path, "a", buffering=1)

    def counted(self: Any, hidden: Any, tokens_per_expert: Any, probs: Any) -> Any:
        out.write(json.dumps(tokens_per_expert.tolist()) + "\n")
        return forward(self, hidden, tokens_per_expert, probs)

    experts.SequentialMLP.forward = counted  # type: ignore[method-assign]
    print(f"# fakepg: token counts to {path}", flush=True)


def rank_env(r: dict, i: int, base: Any) -> dict[str, str]:
    """A plan entry's environment: the fake group's rank, the compiled launch's exports (older plans have none), then
    the entry's own "env", which wins (a variable set by hand is the point of the entry)."""
    env = dict(base, WORLD_SIZE=str(r["world"]), RANK=str(r["rank"]), LOCAL_RANK="0",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(31000 + i), CUDA_DEVICE_MAX_CONNECTIONS="1")
    env["RUN_ROOT"] = f"/tmp/fakepg/{r['name']}-{r['stage']}"
    env.update(r.get("launch_env", {}), FAKEPG_LAUNCH_ENV=json.dumps(sorted(r.get("launch_env", {}))))
    env.update(r.get("env", {}), FAKEPG_ENV=json.dumps(sorted(r.get("env", {}))))  # a plan entry's own variables
    return env


def _start(r: dict, i: int, logdir: Path, megatron: str, go: Path | None = None
           ) -> tuple[subprocess.Popen, Path, Any]:
    """Start one rank of the plan in a session of its own; its log LOGDIR/<layout>/<stage>-rankN.log.
    With `go`, through `fakepg.py rank`: it waits for that file before pretrain_gpt.py starts."""
    d = logdir / r["name"]
    d.mkdir(exist_ok=True)
    path = d / f"{r['stage']}-rank{r['rank']}.log"
    log = open(path, "w")
    env = rank_env(r, i, os.environ)
    if r.get("counts"):
        env["FAKEPG_COUNTS"] = str(d / f"{r['stage']}-counts.jsonl")
    args = [a.replace("$RUN_ROOT", env["RUN_ROOT"]) for a in r["args"]]
    how = "python pretrain_gpt.py" if go is None else "python tools/fakepg.py rank GO MEGATRON"  # the latter runs the former
    log.write(f"# WORLD_SIZE={r['world']} RANK={r['rank']} {how} {shlex.join(args)}\n")
    log.flush()
    cmd = [sys.executable, f"{megatron}/pretrain_gpt.py", *args] if go is None else \
        [sys.executable, str(Path(__file__).resolve()), "rank", str(go), megatron, *args]
    env["PYTHONUNBUFFERED"] = "1"
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd="/tmp", start_new_session=True)
    return p, path, log


def _done(p: subprocess.Popen, path: Path) -> bool:
    return "after training is done" in path.read_text(errors="replace") or p.poll() is not None


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def run(plan_path: Path, logdir: Path, megatron: str, budget_s: float, sequential: bool = False,
        run_timeout_s: float = 120.0) -> None:
    runs = json.loads(plan_path.read_text())
    logdir.mkdir(parents=True, exist_ok=True)
    if os.environ.get("FAKEPG_FILL") == "1" and not sequential:
        raise SystemExit("FAKEPG_FILL=1 fills the receive buffers in `fakepg.py rank`, which only SEQUENTIAL=1 runs")
    gos = [logdir / f".go-{i}" for i in range(len(runs))] if sequential else [None] * len(runs)
    for go in gos:  # a go file left in a reused LOGDIR would start its rank beside the others
        if go is not None:
            go.unlink(missing_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still kills every rank (finally)
    procs = [_start(r, i, logdir, megatron, go) for i, (r, go) in enumerate(zip(runs, gos))]
    start = time.time()
    try:
        if sequential:
            _run_one_by_one(procs, gos, start, budget_s, run_timeout_s)
        else:
            _run_together(procs, start, budget_s)
    finally:
        for p, _, log in procs:
            _stop(p)
            log.close()


def _run_together(procs: list, start: float, budget_s: float) -> None:
    live = list(procs)
    while live and time.time() - start < budget_s:
        time.sleep(1)
        for item in list(live):
            p, path, _ = item
            if _done(p, path):
                done = "after training is done" in path.read_text(errors="replace")
                _stop(p)
                live.remove(item)
                print(f"{time.time() - start:5.0f}s {path.parent.name}/{path.name}: "
                      f"{'done' if done else f'exit {p.returncode}'}", flush=True)
    for _, path, _ in live:
        print(f"{path.parent.name}/{path.name}: stopped at the budget", flush=True)


def _run_one_by_one(procs: list, gos: list, start: float, budget_s: float, run_timeout_s: float) -> None:
    """Wait for every rank's imports, then let each go alone: until its training ends or run_timeout_s."""
    waiting = list(procs)
    while waiting and time.time() - start < budget_s:
        waiting = [(p, path, log) for p, path, log in waiting
                   if IMPORTS_DONE not in path.read_text(errors="replace") and p.poll() is None]
        time.sleep(0.2)
    print(f"{time.time() - start:5.0f}s imports done", flush=True)
    for (p, path, _), go in zip(procs, gos):
        if time.time() - start > budget_s:
            print(f"{path.parent.name}/{path.name}: not started, past the budget", flush=True)
            continue
        if p.poll() is not None:
            print(f"{path.parent.name}/{path.name}: exit {p.returncode} before its turn", flush=True)
            continue
        resumed = time.time()
        go.touch()
        while not _done(p, path) and time.time() - resumed < run_timeout_s:
            time.sleep(0.5)
        done = "after training is done" in path.read_text(errors="replace")
        code = p.poll()
        _stop(p)  # its final checkpoint is not waited for; nothing shares the GPU while the next one runs
        print(f"{time.time() - start:5.0f}s {path.parent.name}/{path.name}: "
              f"{'done' if done else 'timed out' if code is None else f'exit {code}'} after "
              f"{time.time() - resumed:.0f} s alone", flush=True)


def predict(specs: list[Path]) -> list[str]:
    """`NAME STAGE MS` for each rank `plan` runs of each spec: the step model's figure for that rank alone
    (timing.fake_rank_seconds), the spec compiled for an image without TE or Apex, as the lent H200 runs it
    (torch's optimizer; --set image.base), and without the loss's NaN check, which Megatron turns off under a fake
    process group (arguments.py:1591-1593 at the pinned commit): the rank has no host sync at its loss. Before call
    49's results the figures written down priced that sync (tests/fixtures/h200-hosts/README.md, call 49)."""
    sys.path.insert(0, str(ROOT))
    from compiler.load.override import Override
    from compiler.megatron.timing import fake_rank_seconds, parallel_of
    from compiler.one_pass import compile_spec

    out = []
    for spec in specs:
        image = Override(f"image.base={NO_TE_IMAGE}")
        res = compile_spec(str(spec), str(spec), overrides=(image,), render_files=False)
        if res.ok and res.spec is not None:
            args = [*res.spec.training.args, "--no-check-for-nan-in-loss-and-grad"]
            res = compile_spec(str(spec), str(spec), overrides=(image, Override("training.args=" + json.dumps(args))),
                               render_files=False)
        facts = res.facts
        if not res.ok or facts is None or facts.step_time is None or facts.layout is None or res.spec is None:
            out.append(f"{spec.stem} - does not compile or cannot be timed")
            continue
        par = parallel_of(res.spec, facts.layout)
        world = par.gpus_per_worker * par.workers
        for stage, _ in ranks(world, par.tensor, par.pipeline, par.context):
            ms = fake_rank_seconds(facts.step_time, stage, par.microbatches) * 1e3
            out.append(f"{spec.stem}/{stage} {ms:.0f} {facts.step_time.bound}")
    return out


def table(logdir: Path) -> list[dict]:
    """Per layout and stage: the rank, its peak `max allocated` (MB) and iteration times (ms)."""
    rows = []
    for path in sorted(logdir.glob("*/*.log")):
        text = path.read_text(errors="replace")
        peaks = [float(m.group(2)) for line in text.splitlines() if (m := _MAX_ALLOC.match(line))]
        times = [float(m.group(3)) for m in _ITER.finditer(text)]
        stage, rank = path.stem.split("-rank")
        rows.append({"name": path.parent.name, "stage": stage, "rank": int(rank),
                     "max_allocated_mb": max(peaks) if peaks else None, "iteration_ms": times})
    return rows


def main(argv: list[str]) -> int:
    least = {"plan": 3, "run": 3, "rank": 3, "predict": 2, "table": 1}
    if not argv or len(argv) < least.get(argv[0], 99) or "--help" in argv or "-h" in argv:
        print(__doc__)
        return 2
    if argv[:1] == ["plan"]:
        rest = argv[3:]
        specs = Path(rest[1]) if rest[:1] == ["--specs"] else SPECS
        names = rest[2:] if rest[:1] == ["--specs"] else rest
        Path(argv[2]).write_text(json.dumps(plan(Path(argv[1]), names, specs), indent=1) + "\n")
    elif argv[:1] == ["run"]:
        run(Path(argv[1]), Path(argv[2]), os.environ.get("MEGATRON", "/opt/Megatron-LM"),
            float(os.environ.get("BUDGET_S", "240")), os.environ.get("SEQUENTIAL") == "1",
            float(os.environ.get("RUN_TIMEOUT_S", "120")))
    elif argv[:1] == ["rank"]:
        rank(argv[1], argv[2], argv[3:])
    elif argv[:1] == ["predict"]:
        for line in predict([Path(a) for a in argv[1:]]):
            print(line)
    elif argv[:1] == ["table"]:
        print(json.dumps(table(Path(argv[1]) if len(argv) > 1 else LOGS), indent=1))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
