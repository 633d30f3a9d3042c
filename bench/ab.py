#!/usr/bin/env python3
"""Interleaved A/B of one compile as a process, for changes too small for bench/run.py's 7 rounds.

    python bench/ab.py [--rounds N] [--spec SPEC] NAME=DIR [NAME=DIR ...] [floor] [torchx]

Each DIR holds an installed megatron-compile (`pip install --no-deps --target DIR <checkout>`: the
package byte-compiled, outside any source tree); `floor` is `python -c "import yaml, jinja2,
pydantic_core"` and `torchx` TorchX's 2x2 dry run, as in bench/run.py, whose virtual environments
(bench/.cache/, made by one run of it) supply the libraries and TorchX. Every round runs each side
once, the order rotating; it prints each side's median, minimum and first quartile of wall time, the
median and minimum of its CPU time (user + system, from wait4: the host's load moves it less), and
each compile's ratios to the floor and to TorchX by medians and by minimums (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
PYTHON = CACHE / "venv" / "bin" / "python"
TORCHX = CACHE / "venv-torchx" / "bin" / "torchx"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sides", nargs="+", metavar="NAME=DIR|floor|torchx")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--spec", default=str(REPO / "specs" / "tp2.yaml"))
    args = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit("run `python bench/run.py` once first: it makes bench/.cache/venv and venv-torchx")
    work = Path(tempfile.mkdtemp(prefix="mc-ab-"))
    (work / "train.py").write_text("print('hello')\n")
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
    base_env["XDG_CACHE_HOME"] = str(work / "xdg")
    sides: dict[str, tuple[list[str], dict[str, str]]] = {}
    for side in args.sides:
        if side == "floor":
            sides[side] = ([str(PYTHON), "-c", "import yaml, jinja2, pydantic_core"], base_env)
        elif side == "torchx":
            sides[side] = ([str(TORCHX), "run", "--dryrun", "--scheduler", "local_cwd", "dist.ddp", "-j", "2x2",
                            "--script", "train.py"], base_env)
        else:
            name, _, directory = side.partition("=")
            cli = Path(directory) / "compiler" / "cli.py"
            if not cli.is_file():
                raise SystemExit(f"{directory}: no installed compiler/ (pip install --no-deps --target {directory} .)")
            # the console script's entry where the package has one (console(), which freezes at exit)
            entry = "console" if "def console" in cli.read_text() else "main"
            code = f"import sys; from compiler.cli import {entry}; sys.exit({entry}())"
            sides[name] = ([str(PYTHON), "-c", code, args.spec, "-o", str(work / f"out-{name}"), "-q"],
                           {**base_env, "PYTHONPATH": directory})
    wall: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}

    def once(name: str) -> None:
        command, env = sides[name]
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if status:
            raise SystemExit(f"{name} failed: {' '.join(command)}")
        wall[name].append(elapsed)
        cpu[name].append(usage.ru_utime + usage.ru_stime)

    names = list(sides)
    for name in names:  # warm-up: the file cache, and each install's first byte-compiled import
        once(name)
        wall[name].clear()
        cpu[name].clear()
    for index in range(args.rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            once(name)
    for name in names:
        q1 = statistics.quantiles(wall[name], n=4)[0]
        print(f"{name:10} wall median {statistics.median(wall[name]) * 1000:7.1f} ms  min {min(wall[name]) * 1000:7.1f}"
              f"  q1 {q1 * 1000:7.1f}   CPU median {statistics.median(cpu[name]) * 1000:7.1f}  min {min(cpu[name]) * 1000:7.1f}")
    for name in names:
        for reference in ("floor", "torchx"):
            if reference in sides and name not in ("floor", "torchx"):
                print(f"{name}/{reference}: medians {statistics.median(wall[name]) / statistics.median(wall[reference]):.3f}"
                      f"  minimums {min(wall[name]) / min(wall[reference]):.3f}"
                      f"  CPU medians {statistics.median(cpu[name]) / statistics.median(cpu[reference]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
