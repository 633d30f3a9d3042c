"""Write the STAND-IN failed runs of tests/fixtures/failed-runs/standin-*: kinds one H200 cannot make.

    PYTHONPATH=$PWD python tools/make_standin_failed_runs.py

A vanished worker and a collective timeout need two machines (NCCL refuses two ranks on one GPU); an
empty run root needs no machine at all. Each stand-in starts from the logs of a real two-worker H200
run (tests/fixtures/h200-pretrain-2workers-run, spec tests/e2e/pretrain-mock-2workers.yaml), cut at
its 10th iteration, and appends what torch 2.11 prints for that failure (the ProcessGroupNCCL
watchdog's timeout, DistBackendError, torchrun's failure report): the texts are torch's, the run is
not. scenario.json says so; expected.json is written by hand.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compiler.commands.resolved import resolved_yaml  # noqa: E402
from compiler.one_pass import compile_spec  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "failed-runs"
REAL = REPO / "tests" / "fixtures" / "h200-pretrain-2workers-run"
SPEC = "tests/e2e/pretrain-mock-2workers.yaml"
ROOT = "/mnt/megatron/runs/pretrain-mock-2w-01"
RUNTIME = ("torch: 2.11.0+cu130\ncuda: 13.0\ngpu_count: 1\nmegatron_commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab\n"
           "nnodes: 2\nnode_rank: {k}\n")
WATCHDOG = ("[rank{r}]:[E1129 16:53:41.020000000 ProcessGroupNCCL.cpp:685] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=231, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            "for 600012 milliseconds before timing out.")
BACKEND = ("[rank{r}]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.27.7")
REPORT = """[rank{r}]:[F1129 16:53:41.100000000 ProcessGroupNCCL.cpp:2071] [PG ID 0 PG GUID 0(default_pg) Rank {r}] {why}
E1129 16:53:42.000000 101 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -6) local_rank: 0 (pid: 202) of binary: /opt/torch/.venv/bin/python
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
/opt/Megatron-LM/pretrain_gpt.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_16:53:42
  host      : worker-{k}
  rank      : {r} (local_rank: 0)
  exitcode  : -6 (pid: 202)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 202
============================================================
"""


def _cut(log: str, iteration: int) -> str:
    """A real log up to and including its iteration line (or, for worker 0, its last line before it)."""
    out = []
    for line in log.splitlines():
        out.append(line)
        if f" iteration {iteration:>8}/" in line:
            break
        if "before the start of training step" in line and iteration == 0:
            break
    return "\n".join(out) + "\n"


def _launch(k: int) -> str:
    return (f"launch.sh: started 2026-11-29T16:43:02Z on worker-{k} as worker {k} of 2\n"
            f"make: Entering directory '/opt/Megatron-LM/megatron/core/datasets'\nmake: Nothing to be done for "
            f"'default'.\nmake: Leaving directory '/opt/Megatron-LM/megatron/core/datasets'\n"
            f"launch.sh: torchrun starts; its output is in {ROOT}/nodes/node-{k}/train.log\n")


def _write(name: str, broken: str, workers: dict[int, tuple[str | None, str | None]] | None) -> None:
    dest = FIXTURES / name
    shutil.rmtree(dest, ignore_errors=True)
    run = dest / "run"
    run.mkdir(parents=True)
    (run / ".gitkeep").write_text("")  # an empty run root: git keeps no empty directory
    statuses = {}
    for k, (train, status) in (workers or {}).items():
        d = run / "nodes" / f"node-{k}"
        d.mkdir(parents=True)
        (d / "launch.log").write_text(_launch(k) + (f"launch.sh: torchrun exited with status {status}\n"
                                                    if status is not None else ""))
        (d / "runtime.txt").write_text(RUNTIME.format(k=k))
        if train is not None:
            (d / "train.log").write_text(train)
        if status is not None:
            (d / "exit_status").write_text(f"{status}\n")
        statuses[str(k)] = int(status) if status is not None else None
    result = compile_spec(str(REPO / SPEC), SPEC)
    assert result.ok and result.spec is not None, result.diagnostics
    (dest / "spec.yaml").write_text(resolved_yaml(result.spec, SPEC))
    (dest / "scenario.json").write_text(json.dumps({
        "name": name, "broken": broken, "machine": "STAND-IN (tools/make_standin_failed_runs.py): the logs of a "
        "real two-worker H200 run cut at iteration 10, with torch's own texts for the failure appended; no run "
        "produced this root", "exit_statuses": statuses}, indent=2) + "\n")


def main() -> int:
    node0, node1 = (REAL / "node-0.log").read_text(), (REAL / "node-1.log").read_text()
    head0 = node0.split("[after training is done]")[0]
    head0 = "\n".join(x for x in head0.splitlines() if "iteration" not in x or "|" not in x)[:200_000]
    head0 = _cut(node0, 0) if "before the start of training step" in node0 else head0
    _write("standin-never-started", "An empty run root: the job never started (or never with this run root).", None)
    _write("standin-worker-vanished",
           "Worker 1's machine is lost at iteration 10: no exit record, its log stops; worker 0's rank then fails on "
           "NCCL (remote process exited) and torchrun reports it.",
           {0: (head0 + BACKEND.format(r=0) + "\n" + REPORT.format(r=0, k=0, why="NCCL remote process exited"), "1"),
            1: (_cut(node1, 10), None)})
    _write("standin-collective-timeout",
           "Rank 1 never reaches the all-reduce after iteration 10 (stuck in its own work): rank 0's NCCL watchdog "
           "times the collective out after 10 minutes and aborts; worker 1 is stopped with the job.",
           {0: (head0 + WATCHDOG.format(r=0) + "\n" + BACKEND.format(r=0) + "\n"
                + REPORT.format(r=0, k=0, why="Watchdog caught collective operation timeout"), "1"),
            1: (_cut(node1, 10), "143")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
