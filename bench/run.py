#!/usr/bin/env python3
"""Speed budgets of megatron-compile, as ratios taken in the same run so that machine noise cancels.

    python bench/run.py [--repeat N] [--keep] [--shm]

Sets up (once, under bench/.cache/, git-ignored) a virtual environment with megatron-compile
installed as a user installs it (`pip install .`, byte-compiled) and one with TorchX, generates 1000
distinct specs (bounded and pretrain, varied layouts, half of them extending a base), then times each
row N times (default 7) and prints the median, min and max of both sides and the ratio of medians.
Every row times real compiles: the compiler keeps no result between runs, so nothing here is a
cache hit. Exits 1 when a budget is missed. See docs/performance.md for the figures.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
TOOL_VENV = CACHE / "venv"
TORCHX_VENV = CACHE / "venv-torchx"
SPECS = 1000


@dataclass
class Sample:
    seconds: float
    max_rss_kb: int


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, ok: tuple[int, ...] = ()) -> Sample:
    """Run a command to completion; its wall time and its own peak RSS (os.wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and code not in ok:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise SystemExit(f"benchmark command failed ({code}): {' '.join(cmd)}\n{err[-2000:]}")
    return Sample(elapsed, usage.ru_maxrss)


def setup_venvs() -> tuple[Path, Path]:
    """The tool installed non-editable (as users get it) and TorchX, each in its own venv."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp = TOOL_VENV / ".source-stamp"
    source = str(max(p.stat().st_mtime_ns for p in (REPO / "compiler").rglob("*.py")))
    source += str(max(p.stat().st_mtime_ns for p in (REPO / "templates").iterdir()))
    if not stamp.exists() or stamp.read_text() != source:
        shutil.rmtree(TOOL_VENV, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(TOOL_VENV)
        subprocess.run([str(TOOL_VENV / "bin" / "python"), "-m", "pip", "install", "-q", str(REPO)], check=True)
        stamp.write_text(source)
    if not (TORCHX_VENV / "bin" / "torchx").exists():
        venv.EnvBuilder(with_pip=True).create(TORCHX_VENV)
        subprocess.run([str(TORCHX_VENV / "bin" / "python"), "-m", "pip", "install", "-q", "torchx"], check=True)
    return TOOL_VENV / "bin", TORCHX_VENV / "bin"


BASE = """version: 1
image: {base: nvcr.io/nvidia/pytorch:25.03-py3, registry: cr.infini-ai.com, namespace: te-0123456789abcdef,
        repository: megatron-core, tag: 0.18.2-cu128}
megatron: {commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab}
storage: {mount_path: /mnt/megatron}
"""
SHARED = BASE.replace("version: 1\n", "")


def spec_text(i: int) -> str:
    """A distinct, valid spec: bounded or pretrain, with a layout that fits its world size."""
    head = "extends: base.yaml\n" if i % 2 == 0 else "version: 1\n" + SHARED
    if i % 5 == 0:  # the bounded example: TP=2, even world
        workers = 1 + i % 3
        return head + (f"name: bounded-{i:04d}\nresources: {{workers: {workers}, gpus_per_worker: 2}}\n"
                       f"parallelism: {{tensor: 2}}\ntraining: {{env: {{RUN_INDEX: '{i}'}}}}\n")
    gpus = (1, 2, 4, 8)[i % 4]
    workers = 1 + (i // 4) % 4
    world = gpus * workers
    tensor = max(t for t in (1, 2, 4, 8) if world % t == 0 and t <= gpus)
    pipeline = 2 if (world // tensor) % 2 == 0 and i % 3 == 0 else 1
    data = world // (tensor * pipeline)
    layers = 4 * pipeline * (1 + i % 3)
    return head + f"""name: pretrain-{i:04d}
resources: {{workers: {workers}, gpus_per_worker: {gpus}, worker_flavor: H200}}
parallelism: {{tensor: {tensor}, pipeline: {pipeline}}}
training:
  script: pretrain_gpt.py
  model: {{num_layers: {layers}, hidden_size: {1024 + 256 * (i % 4)}, num_attention_heads: 16,
          seq_length: 2048, max_position_embeddings: 2048, vocab_size: 32000}}
  batch: {{micro: 1, global: {data * 8}}}
  train_iters: {1000 + i}
  optimizer: {{lr: 0.0003, min_lr: 0.00003, decay_style: cosine}}
  data: {{mock: true, tokenizer: {{type: NullTokenizer}}}}
  checkpoint: {{save_interval: 500}}
  distributed_optimizer: {str(i % 2 == 1).lower()}
  args: [--seed, '{i}']
"""


def make_specs(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "base.yaml").write_text(BASE)
    for i in range(SPECS):
        (directory / f"job-{i:04d}.yaml").write_text(spec_text(i))


@dataclass
class Row:
    name: str
    measured: list[float]
    reference: list[float]
    budget: float | None  # None: printed for the record, not a budget
    unit: str = "s"

    @property
    def ratio(self) -> float:
        return statistics.median(self.measured) / statistics.median(self.reference)

    @property
    def ok(self) -> bool:
        return self.budget is None or self.ratio <= self.budget


def diff_row(tool: str, env: dict, work: Path, n: int) -> Row:
    """`diff` of a spec changed since the base revision (two compiles: the base's, read through git,
    and the work tree's) against one compile of it, both without kept results."""
    repo = work / "diff-repo"
    (repo / "specs").mkdir(parents=True)
    for name in ("base.yaml", "pretrain-mock.yaml"):
        shutil.copyfile(REPO / "specs" / name, repo / "specs" / name)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(git + args, cwd=repo, check=True, capture_output=True)
    spec = repo / "specs" / "pretrain-mock.yaml"
    spec.write_text(spec.read_text().replace("train_iters: 20", "train_iters: 40"))

    def diff() -> Sample:
        return run([tool, "diff", "--base", "main", "specs/pretrain-mock.yaml"], cwd=repo, env=env, ok=(2,))

    def compile_one() -> Sample:
        return run([tool, "specs/pretrain-mock.yaml", "-o", str(work / "diff-out")], cwd=repo, env=env)

    diff(), compile_one()  # warm-up
    diffs, compiles = [], []
    for _ in range(n):
        diffs.append(diff().seconds)
        compiles.append(compile_one().seconds)
    return Row("diff of a changed spec (compiles at the base revision and in the work tree) vs one compile of it",
               diffs, compiles, 2.0)


def describe(values: list[float], unit: str) -> str:
    if unit == "s":
        return f"{statistics.median(values) * 1000:8.1f} ms [{min(values) * 1000:.1f}-{max(values) * 1000:.1f}]"
    return f"{statistics.median(values) / 1024:8.1f} MB [{min(values) / 1024:.1f}-{max(values) / 1024:.1f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--shm", action="store_true",
                        help="work in /dev/shm instead of the temporary directory (no disk in the figures)")
    args = parser.parse_args()
    tool_bin, torchx_bin = setup_venvs()
    python, tool = str(tool_bin / "python"), str(tool_bin / "megatron-compile")
    # On the disk by default, as users run it. --shm takes the disk out of the figures: on this VM
    # creating 500 specs' 3500 files cost from 0.1 to 1.6 s of kernel CPU depending on how many
    # files were deleted in the minutes before (docs/performance.md).
    shm = "/dev/shm" if args.shm else None
    work = Path(tempfile.mkdtemp(prefix="mc-bench-", dir=shm))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(work / "xdg")  # nothing is written there (tests/test_cli.py): checked below
    try:
        specs = work / "specs"
        make_specs(specs)
        (work / "train.py").write_text("print('hello')\n")
        n = args.repeat
        single = [tool, str(REPO / "specs" / "tp2.yaml"), "-o", str(work / "single")]
        fresh = itertools.count()

        def first():
            """A compile with an empty cache directory (a fresh one each sample): what a new user, or
            CI on a fresh clone, pays for its first compile. The same as any compile now that nothing
            is cached; kept as its own row to show it."""
            cache = work / f"xdg-empty-{next(fresh)}"
            cache.mkdir()
            return run([tool, str(REPO / "specs" / "tp2.yaml"), "-o", str(work / "first")],
                       env={**env, "XDG_CACHE_HOME": str(cache)})

        # Every batch writes all 1000 specs' artifacts into a new directory, and nothing is deleted
        # until the end: ext4 allocates inodes slowly for minutes after many files were deleted
        # (its `recently_deleted` scan of the inode table; docs/performance.md), which would be
        # timed as the next batch's writes.
        rounds = itertools.count()
        out = work / "out"

        def batch():
            nonlocal out
            out = work / f"out-{next(rounds)}"
            return run([tool, str(specs), "-o", str(out), "-q"], env=env)

        commands = {
            "cold": lambda: run(single, env=env),
            "first": first,
            # what the compile path loads: PyYAML, Jinja and pydantic-core (never pydantic's models)
            "libs": lambda: run([python, "-c", "import yaml, jinja2, pydantic_core"], env=env),
            "torchx": lambda: run([str(torchx_bin / "torchx"), "run", "--dryrun", "--scheduler", "local_cwd",
                                   "dist.ddp", "-j", "2x2", "--script", "train.py"], cwd=work, env=env),
            "help": lambda: run([tool, "--help"], env=env),
            "version": lambda: run([tool, "--version"], env=env),
            "bare": lambda: run([python, "-c", "pass"], env=env),
            "batch": batch,
            "check": lambda: run([tool, "--check", str(specs), "-o", str(out), "-q"], env=env),
        }
        # Interleaved: round i runs every command once, so that a change in the machine's load
        # during the benchmark falls on both sides of each ratio. `check` follows `batch`, so the
        # batch's artifacts are up to date when it runs.
        samples: dict[str, list[Sample]] = {name: [] for name in commands}
        for name, command in commands.items():
            command()  # warm-up: the operating system's file cache
        for _ in range(n):
            for name, command in commands.items():
                samples[name].append(command())  # `check` checks the batch just written
        seconds = {name: [x.seconds for x in runs] for name, runs in samples.items()}
        rows = [
            Row("one compile of specs/tp2.yaml (a process, all 7 artifacts written) vs python -c "
                "'import yaml, jinja2, pydantic_core'", seconds["cold"], seconds["libs"], 1.5),
            Row("one compile of specs/tp2.yaml vs TorchX's dry run of a 2x2 DDP job (dist.ddp -j 2x2)",
                seconds["cold"], seconds["torchx"], 0.75),
            Row("first compile of specs/tp2.yaml with an empty XDG_CACHE_HOME vs TorchX's 2x2 dry run",
                seconds["first"], seconds["torchx"], 1.0),
            Row(f"{SPECS} specs compiled and written in one run: time per spec vs one compile of specs/tp2.yaml",
                [x / SPECS for x in seconds["batch"]], seconds["cold"], 0.03),
            Row(f"peak RSS of the {SPECS}-spec run vs the one-spec run",
                [float(x.max_rss_kb) for x in samples["batch"]], [float(x.max_rss_kb) for x in samples["cold"]],
                1.2, "kb"),
            Row(f"--check of the {SPECS} specs (all up to date, each compiled) vs compiling and writing them",
                seconds["check"], seconds["batch"], 1.0),
            Row("--help vs python -c pass", seconds["help"], seconds["bare"], 4.0),
            Row("(no budget) --version vs python -c pass", seconds["version"], seconds["bare"], None),
        ]
        rows.append(diff_row(tool, env, work, n))
        kept = sorted(str(p) for d in [work / "xdg", *work.glob("xdg-empty-*")] if d.exists() for p in d.rglob("*"))
        if kept:
            raise SystemExit(f"the compiler wrote under XDG_CACHE_HOME: {kept[:5]}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"megatron-compile benchmark: {n} runs per figure, median [min-max]; {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}; working in {'/dev/shm' if shm else 'the temporary directory (disk)'}")
    print(f"{'row':<82} {'measured':>28} {'reference':>28} {'ratio':>7} {'budget':>7}")
    failed = 0
    budgets = [row for row in rows if row.budget is not None]
    for row in rows:
        verdict = "" if row.budget is None else "ok" if row.ok else "MISSED"
        failed += not row.ok
        budget = "-" if row.budget is None else f"{row.budget:.3f}"
        print(f"{row.name:<82} {describe(row.measured, row.unit):>28} {describe(row.reference, row.unit):>28} "
              f"{row.ratio:7.3f} {budget:>7} {verdict}")
    print(f"{len(budgets) - failed} of {len(budgets)} budgets met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
