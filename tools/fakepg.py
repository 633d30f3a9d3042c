#!/usr/bin/env python3
"""Multi-GPU layouts measured on one GPU with Megatron's --fake-process-group (issue 26).

Megatron at the pinned commit (megatron/training/arguments.py:2842, initialize.py:322) can start one
rank of a TP/PP/VPP/DP layout with every collective skipped: WORLD_SIZE and RANK say which rank,
the process group is torch's fake one. One process then holds exactly that rank's weights, gradients,
optimizer shard and activations, so its `max allocated` is that rank's peak memory.

    python tools/fakepg.py plan GEN PLAN.json [NAME...]  # from compiled specs (tests/fixtures/fakepg/specs)
    python tools/fakepg.py run PLAN.json LOGDIR   # on the GPU machine: every rank, concurrently
    python tools/fakepg.py table [LOGDIR]         # the measured figures (default: the fixtures)

`plan` reads each compiled launch.sh (GEN/<name>/launch.sh, from
`python -m compiler tests/fixtures/fakepg/specs/*.yaml -o GEN`) and keeps pretrain_gpt.py's
arguments as launch.sh passes them, less --save/--load (no checkpoint is written) and
--exit-signal-handler (its check gathers on a device the fake backend cannot name:
dist_signal_handler.py get_device raises), plus --fake-process-group (NAME...: only those specs). It runs two ranks per layout, one when the
pipeline has one stage: the first pipeline stage's and the last's, each tensor- and data-parallel rank 0 (ranks are laid out tp-cp-ep-dp-pp, parallel_state.py
RankGenerator), because only data-parallel rank 0 prints Megatron's memory report
(training/utils/common_utils.py report_memory) and tensor-parallel rank 0 loads the data (the other
ranks would read an unfilled broadcast buffer as token ids); the last rank prints the iteration lines.

`run` starts every rank at once (one GPU, separate processes: torch's peak-memory counter is per
process, so concurrent runs do not disturb it) and stops each after `[after training is done]`.
Their iteration times are therefore contended and NOT a timing measurement; only memory is judged.
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

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "fixtures" / "fakepg" / "specs"
LOGS = ROOT / "tests" / "fixtures" / "fakepg" / "logs"
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


def _value(args: list[str], flag: str, default: int) -> int:
    return int(args[args.index(flag) + 1]) if flag in args else default


def plan(gen: Path, names: list[str] | None = None) -> list[dict]:
    runs = []
    for spec in sorted(SPECS.glob("*.yaml")):
        name = spec.stem
        if names and name not in names:
            continue
        text = spec.read_text()
        workers = int(re.search(r"^  workers: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        gpus = int(re.search(r"^  gpus_per_worker: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        args = launch_args((gen / name / "launch.sh").read_text()) + ["--fake-process-group"]
        world = workers * gpus
        tp = _value(args, "--tensor-model-parallel-size", 1)
        pp = _value(args, "--pipeline-model-parallel-size", 1)
        cp = _value(args, "--context-parallel-size", 1)
        dp = world // (tp * pp * cp)
        stages = (("first", 0), ("last", (pp - 1) * tp * cp * dp)) if pp > 1 else (("first", 0),)
        for stage, rank in stages:
            runs.append({"name": name, "stage": stage, "rank": rank, "world": world, "args": args})
    return runs


def run(plan_path: Path, logdir: Path, megatron: str, budget_s: float) -> None:
    runs = json.loads(plan_path.read_text())
    logdir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i, r in enumerate(runs):
        d = logdir / r["name"]
        d.mkdir(exist_ok=True)
        log = open(d / f"{r['stage']}-rank{r['rank']}.log", "w")
        env = dict(os.environ, WORLD_SIZE=str(r["world"]), RANK=str(r["rank"]), LOCAL_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(31000 + i), CUDA_DEVICE_MAX_CONNECTIONS="1")
        env["RUN_ROOT"] = f"/tmp/fakepg/{r['name']}-{r['stage']}"
        args = [a.replace("$RUN_ROOT", env["RUN_ROOT"]) for a in r["args"]]
        log.write(f"# WORLD_SIZE={r['world']} RANK={r['rank']} python pretrain_gpt.py {shlex.join(args)}\n")
        log.flush()
        p = subprocess.Popen([sys.executable, f"{megatron}/pretrain_gpt.py", *args], stdout=log,
                             stderr=subprocess.STDOUT, env=env, cwd="/tmp", start_new_session=True)
        procs.append((p, d / f"{r['stage']}-rank{r['rank']}.log", log))
    start = time.time()
    live = list(procs)
    while live and time.time() - start < budget_s:
        time.sleep(1)
        for item in list(live):
            p, path, log = item
            done = "after training is done" in path.read_text(errors="replace")
            if done or p.poll() is not None:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
                live.remove(item)
                print(f"{time.time() - start:5.0f}s {path.parent.name}/{path.name}: "
                      f"{'done' if done else f'exit {p.returncode}'}", flush=True)
    for p, path, log in live:
        print(f"{path.parent.name}/{path.name}: stopped at the budget", flush=True)
        os.killpg(p.pid, signal.SIGKILL)
    deadline = time.time() + 20  # one grace period for all, not one each
    for p, _, log in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        log.close()


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
    if argv[:1] == ["plan"]:
        Path(argv[2]).write_text(json.dumps(plan(Path(argv[1]), argv[3:]), indent=1) + "\n")
    elif argv[:1] == ["run"]:
        run(Path(argv[1]), Path(argv[2]), os.environ.get("MEGATRON", "/opt/Megatron-LM"),
            float(os.environ.get("BUDGET_S", "240")))
    elif argv[:1] == ["table"]:
        print(json.dumps(table(Path(argv[1]) if len(argv) > 1 else LOGS), indent=1))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
