#!/usr/bin/env python3
"""Issue 27's measurement batch through Transformer Engine on one H200 (run by tools/te_measure_device.sh).

    python3 tools/te_measure.py GEN PLAN.json LOGS NAME...

Two kinds of run, so that one command measures many without the GPU ever timing two at once:

- the fake-process-group ranks of PLAN.json (tools/fakepg.py plan over tests/fixtures/fakepg/specs/te-*),
  all at once through `tools/fakepg.py run` (memory only: their iteration times are contended);
- NAME...: the compiled launch commands GEN/NAME/launch.sh (tests/e2e/te/NAME.yaml), each run
  unmodified, for memory and time.

Megatron's start-up (imports, TE's libraries, the launch's checks; about 30 s) is CPU work. Every
launch.sh is therefore started at once, while the fake-process-group ranks use the GPU, and each is
paused (SIGSTOP to every process working in its run root: launch.sh, torchrun, the Megatron worker)
as soon as its train.log shows Megatron's argument dump, before Megatron initialises the GPU. Once
the fake-process-group ranks are done, the launches are resumed (SIGCONT) one after another: each
one alone on the GPU from its initialisation to `[after training is done]`, then killed with every
process in its run root (the final checkpoint is not waited for). A launch that does not reach the
end within RUN_TIMEOUT_S (default 120) of its resumption is killed and its log kept.

Writes LOGS/summary.txt, LOGS/NAME/train.log (and launch.out) and LOGS/fakepg/<layout>/<stage>-rankN.log.
Environment: BUDGET_S (default 480): no launch is resumed after it, and none runs past BUDGET_S + 60 s;
FAKEPG_BUDGET_S (default 150); PACK: a command run after each step (the shell script packs LOGS into
$OUT). On any exit (SIGTERM included) every process it started is killed: the launches and the ranks
run in sessions of their own, which the GPU machine would otherwise leave running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARGS_DONE = "end of arguments"
DONE = "after training is done"


def run_root(launch: Path) -> str:
    m = re.search(r"^RUN_ROOT=(\S+)$", launch.read_text(), re.M)
    assert m, f"{launch}: no RUN_ROOT line"
    return m.group(1)


def pids_in(root: str) -> list[int]:
    """Every process whose working directory is `root` (launch.sh after its cd, torchrun, the worker)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if os.readlink(d / "cwd") == root:
                out.append(int(d.name))
        except OSError:
            continue
    return out


def fakepg_ranks() -> list[int]:
    """The ranks tools/fakepg.py started: each has a RUN_ROOT under /tmp/fakepg in its environment."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and b"\0RUN_ROOT=/tmp/fakepg/" in b"\0" + (d / "environ").read_bytes():
                out.append(int(d.name))
        except OSError:
            continue
    return out


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class Launch:
    def __init__(self, name: str, gen: Path, logs: Path, port: int) -> None:
        self.name = name
        self.launch = gen / name / "launch.sh"
        self.root = run_root(self.launch)
        self.dir = logs / name
        self.dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["rm", "-rf", self.root], check=False)
        self.out = open(self.dir / "launch.out", "w")
        # torchrun's store port (its --master-port, read from PET_MASTER_PORT): one each, or the
        # launches started together would all bind torchrun's default 29500
        self.proc = subprocess.Popen(["bash", str(self.launch)], stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=dict(os.environ, PET_MASTER_PORT=str(port)))
        self.started = time.time()
        self.paused_at: float | None = None
        self.outcome = ""

    @property
    def train_log(self) -> Path:
        return Path(self.root) / "train.log"

    def text(self) -> str:
        try:
            return self.train_log.read_text(errors="replace")
        except OSError:
            return ""

    def pause_if_ready(self) -> None:
        if self.paused_at is None and self.proc.poll() is None and ARGS_DONE in self.text():
            signal_all(pids_in(self.root), signal.SIGSTOP)
            self.paused_at = time.time() - self.started

    def kill(self) -> None:
        for _ in range(50):
            pids = pids_in(self.root)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            if not pids and self.proc.poll() is not None:
                break
            signal_all(pids, signal.SIGCONT)
            signal_all(pids, signal.SIGKILL)
            time.sleep(0.2)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.out.close()
        subprocess.run(["cp", str(self.train_log), str(self.dir / "train.log")], check=False)

    def run_alone(self, timeout_s: float) -> None:
        """Resume the launch, alone on the GPU, until Megatron's end of training, an exit or timeout_s."""
        t0 = time.time()
        signal_all(pids_in(self.root), signal.SIGCONT)
        while True:
            if DONE in self.text():
                self.outcome = "finished"
                break
            if self.proc.poll() is not None:
                self.outcome = f"exited {self.proc.returncode}"
                break
            if time.time() - t0 > timeout_s:
                self.outcome = f"timeout after {timeout_s:.0f} s"
                break
            time.sleep(0.25)
        self.outcome += f" {time.time() - t0:.0f} s after resuming"
        self.kill()


def summary_lines(log: Path) -> list[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    out = [line[:220] for line in text.splitlines() if "max allocated" in line][-1:]
    out += [line[:220] for line in text.splitlines() if "elapsed time per iteration" in line][-1:]
    if not out:
        out = [line[:300] for line in text.splitlines() if re.search(r"Error|Traceback|error:", line)][:4]
    return ["    " + line.strip() for line in out]


def main(argv: list[str]) -> int:
    gen, plan, logs, names = Path(argv[0]), Path(argv[1]), Path(argv[2]), argv[3:]
    budget = float(os.environ.get("BUDGET_S", "480"))
    run_timeout = float(os.environ.get("RUN_TIMEOUT_S", "120"))
    pack = os.environ.get("PACK", "true")
    start = time.time()
    logs.mkdir(parents=True, exist_ok=True)
    summary = open(logs / "summary.txt", "a")

    def say(line: str) -> None:
        line = f"[+{time.time() - start:4.0f}s] {line}"
        print(line, flush=True)
        summary.write(line + "\n")
        summary.flush()

    launches: list[Launch] = []

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        run_all(gen, plan, logs, names, launches, say, budget, run_timeout, pack, start)
    finally:
        for la in launches:
            if la.proc.poll() is None or pids_in(la.root):
                la.kill()
        signal_all(fakepg_ranks(), signal.SIGKILL)
    say("batch done")
    return 0


def run_all(gen: Path, plan: Path, logs: Path, names: list[str], launches: list, say, budget: float,
            run_timeout: float, pack: str, start: float) -> None:
    fake = None
    if plan.exists():
        fake = subprocess.Popen([sys.executable, str(HERE / "fakepg.py"), "run", str(plan), str(logs / "fakepg")],
                                stdout=open(logs / "fakepg.out", "w"), stderr=subprocess.STDOUT,
                                env=dict(os.environ, BUDGET_S=os.environ.get("FAKEPG_BUDGET_S", "150")))
        say(f"fake process group: {plan} started")
    for i, name in enumerate(names):
        launches.append(Launch(name, gen, logs, 29500 + i))
    say(f"{len(launches)} launches started, each paused at Megatron's argument dump")
    while fake is not None and fake.poll() is None:
        for la in launches:
            la.pause_if_ready()
        time.sleep(0.1)
    if fake is not None:
        say(f"fake process group: exit {fake.returncode}")
        say("    " + (logs / "fakepg.out").read_text(errors="replace").replace("\n", "\n    ").rstrip())
        subprocess.run(pack, shell=True, check=False)
    # every launch must be paused (or have failed) before one runs alone
    t0 = time.time()
    while any(la.paused_at is None and la.proc.poll() is None for la in launches) and time.time() - t0 < 120:
        for la in launches:
            la.pause_if_ready()
        time.sleep(0.1)
    for la in launches:
        if la.paused_at is None:
            say(f"{la.name}: not paused ({'exit ' + str(la.proc.returncode) if la.proc.poll() is not None else 'still starting'})")
    for la in launches:
        if time.time() - start > budget:
            la.outcome = "skipped at the budget"
            la.kill()
        elif la.paused_at is None and la.proc.poll() is not None:
            la.outcome = f"exited {la.proc.returncode} before its argument dump"
            la.kill()
        else:
            la.run_alone(min(run_timeout, start + budget + 60 - time.time()))
        paused = "" if la.paused_at is None else f" (paused {la.paused_at:.0f} s after its start)"
        say(f"{la.name}: {la.outcome}{paused}")
        for line in summary_lines(la.dir / "train.log"):
            say(line)
        subprocess.run(pack, shell=True, check=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
