"""Produce the CPU-reproducible failed runs of tests/fixtures/failed-runs/ with the real torchrun.

Each scenario compiles a small spec with this worktree's compiler, runs the generated launch.sh
unmodified (as the AIStudio job would) with ONE thing broken, and keeps what the run root holds
afterwards (logs and records; never checkpoints). torch (the CPU build) and gloo stand in for the
GPUs; a tiny gloo script stands in for the training script; nvidia-smi is a stub that lists the
GPUs the scenario says the worker has. The helper-build scenarios copy Megatron's real Makefile and
helpers.cpp from a checkout (MEGATRON_LM, default .megatron or /work/main/.megatron) into the
stand-in tree for the run only; nothing of Megatron is kept.

    PYTHONPATH=$PWD python tools/failed_runs_cpu.py [NAME...]   (default: every scenario)

Work happens under /tmp/failed-runs-cpu/<name> (a fixed path, so that the logs read the same on
every machine); what a scenario leaves is copied to tests/fixtures/failed-runs/<name>/: spec.yaml
(the spec, standalone), run/ (the run root), console-<worker>.txt (what each worker's console
showed) and scenario.json (what was broken). expected.json is written by hand, not here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.one_pass import compile_spec  # noqa: E402

WORK = Path("/tmp/failed-runs-cpu")
FIXTURES = REPO / "tests" / "fixtures" / "failed-runs"
COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
WRONG_COMMIT = "0123456789abcdef0123456789abcdef01234567"

# The stand-in training script: gloo all-reduce, then what the scenario asks for by environment.
TRAIN = '''
import os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
print(f"rank {rank} of world {world}: all_reduce sum {value.item():.0f}", flush=True)
if os.environ.get("FAIL_RANK") == str(rank):
    raise RuntimeError(f"rank {rank} fails on purpose")
for step in range(int(os.environ.get("STEPS", "1"))):
    dist.all_reduce(value)
    if rank == world - 1:
        print(f"step {step}", flush=True)
    time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
'''


@dataclass
class Scenario:
    name: str
    broken: str  # what was broken, in words (scenario.json)
    workers: int = 1
    gpus: int = 2  # resources.gpus_per_worker
    visible_gpus: int | None = None  # what the stub nvidia-smi lists (default: gpus)
    started: tuple[int, ...] | None = None  # the workers started (default: all)
    env: dict[str, str] = field(default_factory=dict)
    megatron_root: str | None = None  # megatron.root when it is not the stand-in tree
    pythonpath: bool = True  # PYTHONPATH=<megatron root>, as the image's ENV sets it
    real_makefile: bool = False  # Megatron's real Makefile and helpers.cpp
    hide: tuple[str, ...] = ()  # programs taken off PATH
    runs: int = 1  # the launch command started this many times on the same run root
    term_after: float | None = None  # SIGTERM to the launch command after this many seconds
    timeout: float = 120


SCENARIOS = [
    Scenario("cpu-torch-sees-no-gpu", "nothing in the launch: the worker's torch is a CPU build, so it sees none "
             "of the GPUs nvidia-smi lists (true of every CPU scenario; here it is the only fault)"),
    Scenario("cpu-rank-raises", "rank 1 raises an exception during training", env={"FAIL_RANK": "1"}),
    Scenario("cpu-rendezvous-timeout", "a 2-worker job whose second worker never starts (rendezvous "
             "timeout shortened to 20 s with PET_RDZV_CONF)", workers=2, gpus=1, started=(0,),
             env={"PET_RDZV_CONF": "join_timeout=20,timeout=20"}),
    Scenario("cpu-sigterm", "the launch command terminated with SIGTERM while training (a job stopped "
             "from outside)", env={"STEPS": "2000", "STEP_SECONDS": "0.05"}, term_after=12),
    Scenario("cpu-gpu-count", "the worker has fewer GPUs than the spec asks (stub nvidia-smi lists 1 of 2)",
             visible_gpus=1),
    Scenario("cpu-no-compiler", "no C++ compiler on PATH for Megatron's dataset helper (g++ hidden)",
             real_makefile=True, hide=("g++", "c++")),
    Scenario("cpu-no-pybind11", "Megatron's dataset helper built where pybind11 is not installed",
             real_makefile=True),
    Scenario("cpu-megatron-missing", "megatron.root is not in the image (the directory does not exist)",
             megatron_root="/opt/Megatron-LM-missing"),
    Scenario("cpu-megatron-not-importable", "Megatron is in the image but not on PYTHONPATH",
             pythonpath=False),
    Scenario("cpu-wrong-commit", "the image carries another Megatron commit (MEGATRON_COMMIT)",
             env={"MEGATRON_COMMIT": WRONG_COMMIT}),
    Scenario("cpu-run-root-reused", "the launch command started a second time on the same run root", runs=2),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _megatron_lm() -> Path:
    for candidate in (os.environ.get("MEGATRON_LM"), REPO / ".megatron", "/work/main/.megatron"):
        if candidate and (Path(candidate) / "megatron" / "core" / "datasets" / "helpers.cpp").exists():
            return Path(candidate)
    raise SystemExit("no Megatron-LM checkout: set MEGATRON_LM")


def _stand_in(root: Path, real_makefile: bool) -> None:
    datasets = root / "megatron" / "core" / "datasets"
    datasets.mkdir(parents=True)
    (root / "megatron" / "__init__.py").write_text("")
    (root / "megatron" / "core" / "__init__.py").write_text("")
    if real_makefile:
        for name in ("Makefile", "helpers.cpp"):
            shutil.copy(_megatron_lm() / "megatron" / "core" / "datasets" / name, datasets / name)
    else:
        (datasets / "Makefile").write_text("default:\n\t@echo helper built\n")


def _spec_text(s: Scenario, base: Path, megatron_root: str) -> str:
    return f"""version: 1
name: {s.name}
image: {{base: nvcr.io/nvidia/pytorch:25.03-py3, registry: cr.infini-ai.com, namespace: te-0123456789abcdef,
        repository: megatron-core, tag: 0.18.2-cu128}}
megatron: {{commit: {COMMIT}, root: "{megatron_root}"}}
resources: {{workers: {s.workers}, gpus_per_worker: {s.gpus}}}
storage: {{mount_path: "{base / 'mnt'}", run_root: "{base / 'mnt' / 'runs' / s.name}"}}
parallelism: {{tensor: 1}}
training: {{script: "{base / 'train_tiny.py'}"}}
"""


def _path(base: Path, s: Scenario) -> str:
    """PATH: the stub nvidia-smi first, torch's bin, then the system's, minus the hidden programs."""
    stubs = base / "bin"
    stubs.mkdir()
    listed = s.gpus if s.visible_gpus is None else s.visible_gpus
    (stubs / "nvidia-smi").write_text("#!/usr/bin/env bash\n" + "".join(f"echo {i}\n" for i in range(listed)))
    (stubs / "nvidia-smi").chmod(0o755)
    dirs = [str(stubs), str(Path(sys.executable).parent)]
    if not s.hide:
        return os.pathsep.join(dirs + os.environ["PATH"].split(os.pathsep))
    # Hidden programs: a directory of links to everything else on PATH stands in for the system's.
    view = base / "path-view"
    view.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            target = view / entry.name
            if entry.name not in s.hide and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return os.pathsep.join(dirs + [str(view)])


def _start(launch: Path, s: Scenario, base: Path, path: str, megatron: Path, port: int, worker: int):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WORLD_SIZE", "RANK", "MASTER_", "LOCAL_", "PYTHONPATH", "PET_"))}
    env.update({"PATH": path, "MEGATRON_COMMIT": COMMIT, "OMP_NUM_THREADS": "1", "HOSTNAME": f"worker-{worker}",
                "PET_MASTER_PORT": str(port)})
    if s.pythonpath:
        env["PYTHONPATH"] = str(megatron)
    if s.workers > 1:
        env.update({"WORLD_SIZE": str(s.workers), "RANK": str(worker), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port)})
    env.update(s.env)
    console = open(base / f"console-{worker}.txt", "a")
    proc = subprocess.Popen(["bash", str(launch)], env=env, stdout=console, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, console


def run(s: Scenario, work: Path = WORK) -> dict:
    """Run one scenario under WORK/<name>; returns what happened (exit statuses, seconds)."""
    base = work / s.name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    megatron = base / "Megatron-LM"
    _stand_in(megatron, s.real_makefile)
    (base / "train_tiny.py").write_text(TRAIN)
    spec_text = _spec_text(s, base, s.megatron_root or str(megatron))
    (base / "spec.yaml").write_text(spec_text)
    result = compile_spec(str(base / "spec.yaml"), "spec.yaml")
    assert result.ok, result.diagnostics
    launch = base / "launch.sh"
    launch.write_text(result.files["launch.sh"])
    path = _path(base, s)
    port = _free_port()
    statuses: list[list[int]] = []
    start = time.time()
    for _ in range(s.runs):
        procs = [_start(launch, s, base, path, megatron, port, w) for w in (s.started or range(s.workers))]
        if s.term_after is not None:
            time.sleep(s.term_after)
            for proc, _ in procs:
                # the launch command's whole process group, as `timeout -s TERM` or a job's stop does
                os.killpg(proc.pid, signal.SIGTERM)
        codes = []
        for proc, console in procs:
            try:
                codes.append(proc.wait(timeout=s.timeout))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                codes.append(proc.wait())
            console.close()
        statuses.append(codes)
    return {"name": s.name, "broken": s.broken, "exit_statuses": statuses, "seconds": round(time.time() - start)}


def keep(s: Scenario, outcome: dict) -> None:
    """Copy the scenario's spec, run root (no checkpoints) and consoles into the fixtures."""
    base, dest = WORK / s.name, FIXTURES / s.name
    if dest.exists():
        for old in ("run", "spec.yaml", "scenario.json"):
            target = dest / old
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        for old in dest.glob("console-*.txt"):
            old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    run_root = base / "mnt" / "runs" / s.name
    if run_root.exists():
        shutil.copytree(run_root, dest / "run", ignore=shutil.ignore_patterns("ckpt"))
    else:
        (dest / "run").mkdir()
    shutil.copy(base / "spec.yaml", dest / "spec.yaml")
    for console in base.glob("console-*.txt"):
        shutil.copy(console, dest / console.name)
    (dest / "scenario.json").write_text(json.dumps(outcome, indent=2) + "\n")


def main(argv: list[str]) -> int:
    chosen = [s for s in SCENARIOS if not argv or s.name in argv]
    for s in chosen:
        outcome = run(s)
        keep(s, outcome)
        print(f"{s.name}: exit statuses {outcome['exit_statuses']} after {outcome['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
