"""generated/tp2-dp2-slurm/job.sbatch run on the 2-node test cluster (tests/slurm_cluster.py) with the
real torchrun (CPU, gloo); pyxis is replaced by a recording shim because the test cluster has no enroot.

Checked: the four ranks of both nodes join one group, and every node was given the allocation's first
node as the rendezvous host (where the nodes have networks of their own, tests/node_networks.py, a
wrong host also keeps the ranks from meeting); and srun's --kill-on-bad-exit ends the job as soon as one node's task
fails while the other node's ranks would still run for minutes, where the same job.sbatch with the
flag stripped does not end (so the test fails if the flag leaves the template).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import GLOO_ALL_REDUCE
from slurm_cluster import SlurmCluster
from test_engine_targets import JOB_SBATCH, MEGATRON_COMMIT, _spec

# HOLD_S: the ranks that do not fail sleep this long outside any collective after the all-reduce,
# so that nothing but the platform ends them early (a rank blocked in a collective would see its
# peer's socket close and fail by itself, flag or not).
TRAIN = GLOO_ALL_REDUCE + '''import time
if os.environ.get("FAIL_RANK") == str(rank):
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
time.sleep(float(os.environ.get("HOLD_S", "0")))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
'''

# pyxis is a SPANK plugin of srun that Debian does not package: this stand-in records the options
# the batch script gave srun and runs the real srun without the container ones (no enroot here).
PYXIS_SHIM = '''#!/bin/bash
printf '%s\\n' "$@" >"$PYXIS_RECORD"
args=()
for arg in "$@"; do
  case "$arg" in
    --container-* | --no-container-*) ;;
    *) args+=("$arg") ;;
  esac
done
exec {srun} "${{args[@]}}"
'''

KILL_FLAG = " --kill-on-bad-exit=1"
HOLD_S = 600  # far beyond every deadline below
START_S = 120.0  # a job's submission to its end, or to the failing node's exit record (8 s here)
# From the failing node's exit record to the job's end. With the flag this takes a few seconds
# (srun stops the other node's task, the batch script exits); without it, the other node holds for
# HOLD_S. The same window is the bound for the first and the wait for the second.
KILL_WINDOW_S = 30.0


def _write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stage(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """job.sbatch with its storage and Megatron paths under tmp_path, plus the job's environment."""
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)")
    spec = _spec()
    mount, root = spec["storage"]["mount_path"], spec["megatron"]["root"]
    tmp_path.mkdir(parents=True, exist_ok=True)
    megatron = tmp_path / "Megatron-LM"
    (megatron / "megatron" / "core" / "datasets").mkdir(parents=True)
    (megatron / "megatron" / "__init__.py").write_text("")
    (megatron / "megatron" / "core" / "__init__.py").write_text("")
    (megatron / "megatron" / "core" / "datasets" / "Makefile").write_text("default:\n\t@echo helper built\n")
    (megatron / "examples").mkdir()
    (megatron / spec["training"]["script"]).write_text(TRAIN)
    # no container here: the host's path of the storage (the mount's SRC) is the same directory
    source = spec["slurm"]["container"]["mounts"][0].split(":")[0]
    (tmp_path / "mnt").mkdir()
    (tmp_path / "host-storage").symlink_to(tmp_path / "mnt")
    script = (JOB_SBATCH.read_text().replace(mount, str(tmp_path / "mnt")).replace(source, str(tmp_path / "host-storage"))
              .replace(root, str(megatron)))
    job = tmp_path / "job.sbatch"
    job.write_text(script)
    run_root = Path(spec["storage"]["run_root"].replace(mount, str(tmp_path / "mnt")))
    run_root.mkdir(parents=True)  # sbatch opens --output there before the script runs
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = shutil.which("srun")
    assert srun, "srun is not installed"
    _write_exe(bin_dir / "srun", PYXIS_SHIM.format(srun=srun))
    _write_exe(bin_dir / "nvidia-smi", 'printf "0\\n1\\n"\n')
    env = {"PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYXIS_RECORD": str(tmp_path / "pyxis-args"), "MASTER_PORT": str(_free_port()),
           "MEGATRON_COMMIT": MEGATRON_COMMIT, "PYTHONPATH": str(megatron), "OMP_NUM_THREADS": "1"}
    return job, env, run_root


def _output(job: Path, job_id: str) -> str:
    """The job's slurm-<id>.out, or a note that there is none."""
    outputs = sorted(job.parent.glob(f"mnt/**/slurm-{job_id}.out"))
    return outputs[0].read_text() if outputs else "(no slurm output file)"


def _submit(cluster: SlurmCluster, job: Path, env: dict[str, str], jobs: list[str]) -> str:
    """sbatch the job (its id appended to `jobs`, which the cancelled_after fixture cancels); its id."""
    submitted = cluster.run(["sbatch", "--parsable", str(job)], cwd=job.parent, extra_env=env)
    assert submitted.returncode == 0, submitted.stderr
    jobs.append(submitted.stdout.strip().split(";")[0])
    return jobs[-1]


def _logs(run_root: Path) -> str:
    """Each node's train.log, for failure messages."""
    logs = sorted(run_root.glob("nodes/node-*/train.log"))
    return "\n".join(f"--- {log.parent.name}/train.log\n{log.read_text()[-3000:]}" for log in logs) or "(no train.log)"


def _poll(check: Callable[[], bool], deadline: float) -> bool:
    """Whether `check` became true before the monotonic `deadline` (checked every 0.3 s)."""
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.3)
    return True


def _exit_record(run_root: Path, node: int) -> str:
    path = run_root / "nodes" / f"node-{node}" / "exit_status"
    return path.read_text() if path.exists() else ""


@pytest.fixture
def cancelled_after(slurm_cluster: SlurmCluster) -> Iterator[list[str]]:
    """A list for the ids of the jobs a test submits: each is cancelled and waited for after the test,
    so that a job left holding the nodes (--exclusive) does not delay the next test."""
    jobs: list[str] = []
    yield jobs
    for job_id in jobs:
        slurm_cluster.run(["scancel", job_id])
    for job_id in jobs:
        assert _poll(lambda: slurm_cluster.finished(job_id) is not None, time.monotonic() + 60), \
            f"job {job_id} outlived scancel by 60 s\n{slurm_cluster.log_tails()}"


def test_job_sbatch_runs_two_nodes_of_torchrun_under_slurm(
        slurm_cluster: SlurmCluster, tmp_path: Path, cancelled_after: list[str]):
    assert len(set(slurm_cluster.nodes)) == 2  # two node names, so MASTER_ADDR names one of them
    job, env, run_root = _stage(tmp_path)
    start = time.monotonic()
    job_id = _submit(slurm_cluster, job, env, cancelled_after)
    ended = _poll(lambda: slurm_cluster.finished(job_id) is not None, start + START_S)
    elapsed, out = time.monotonic() - start, _output(job, job_id)
    # In node networks (tests/node_networks.py), ranks that were given another node than node 0 as
    # MASTER_ADDR never meet: the job runs until it is cancelled.
    assert ended, f"job.sbatch did not end within {START_S:.0f} s: did the ranks meet?\n{out}\n{_logs(run_root)}"
    record = slurm_cluster.finished(job_id)
    assert record is not None and (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), (record, out)
    assert "job.sbatch: srun exited with status 0" in out
    # Slurm's own order of the allocation (both nodes): what `scontrol show hostnames` lists first
    partition = slurm_cluster.run(["sinfo", "-h", "-o", "%N"]).stdout.strip()
    first_node = slurm_cluster.run(["scontrol", "show", "hostnames", partition]).stdout.split()[0]
    assert first_node in slurm_cluster.nodes
    seen = set()
    for node in (0, 1):
        log = (run_root / "nodes" / f"node-{node}" / "train.log").read_text()
        for local in (0, 1):
            rank = node * 2 + local
            # 0 + 1 + 2 + 3: every rank of both nodes joined one gloo group of nodes x GPUs = 4.
            assert f"rank {rank} of world 4: all_reduce sum 6" in log, log
            assert f"rank {rank} done" in log
            seen.add(rank)
        assert _exit_record(run_root, node) == "0\n"
        runtime = (run_root / "nodes" / f"node-{node}" / "runtime.txt").read_text()
        assert f"node_rank: {node}\n" in runtime and "nnodes: 2\n" in runtime
        # the rendezvous host every node was given must be the allocation's first node as Slurm
        # orders it (node 0); without node networks a wrong one would still reach the rendezvous
        # (one host), so pointing it at another node fails here in any case
        assert f"master_addr: {first_node}\n" in runtime, runtime
    assert seen == {0, 1, 2, 3}
    pyxis = (tmp_path / "pyxis-args").read_text().splitlines()
    assert any(a.startswith("--container-image=") for a in pyxis) and "--no-container-mount-home" in pyxis
    assert KILL_FLAG.strip() in pyxis and "--ntasks-per-node=1" in pyxis
    print(f"job.sbatch on 2 Slurm nodes x 2 gloo ranks: {elapsed:.1f} s")


def _fail_node_1(cluster: SlurmCluster, job: Path, env: dict[str, str], run_root: Path,
                 jobs: list[str]) -> tuple[str, float | None]:
    """Submit `job` with rank 3 (node 1) failing after the all-reduce and the other ranks holding for
    HOLD_S (its id appended to `jobs`); wait for node 1's exit record, then up to KILL_WINDOW_S for
    the job's end. Returns the job id and the seconds from that record to the job's end (None: it
    was still running)."""
    job_id = _submit(cluster, job, {**env, "FAIL_RANK": "3", "HOLD_S": str(HOLD_S)}, jobs)
    failed = _poll(lambda: _exit_record(run_root, 1).strip() not in ("", "running"), time.monotonic() + START_S)
    assert failed, (f"node 1 recorded no exit within {START_S:.0f} s of submission\n{_output(job, job_id)}\n"
                    f"{cluster.log_tails()}")
    exited = time.monotonic()
    ended = _poll(lambda: cluster.finished(job_id) is not None, exited + KILL_WINDOW_S)
    return job_id, time.monotonic() - exited if ended else None


def test_kill_on_bad_exit_ends_the_job_when_one_node_fails_and_without_it_the_job_runs_on(
        slurm_cluster: SlurmCluster, tmp_path: Path, cancelled_after: list[str]):
    job, env, run_root = _stage(tmp_path / "generated")
    job_id, took = _fail_node_1(slurm_cluster, job, env, run_root, cancelled_after)
    out = _output(job, job_id)
    assert took is not None, f"job.sbatch ran on {KILL_WINDOW_S:.0f} s after node 1 failed: node 0 was not stopped\n{out}"
    record = slurm_cluster.finished(job_id)
    assert record is not None and record["JobState"] == "FAILED", (record, out)
    status = re.search(r"job\.sbatch: srun exited with status (\d+)", out)
    assert status and status.group(1) != "0", out
    assert "rank 3 fails on purpose" in (run_root / "nodes" / "node-1" / "train.log").read_text()
    assert _exit_record(run_root, 1).strip() != "0"
    # node 0's ranks were stopped in their hold, never finished
    assert "done" not in (run_root / "nodes" / "node-0" / "train.log").read_text()

    # The same job.sbatch without the flag: node 0 holds on, so the first half proves the flag's effect.
    bare, bare_env, bare_root = _stage(tmp_path / "without-flag")
    text = bare.read_text()
    assert text.count(KILL_FLAG) == 1, "job.sbatch's srun line has no --kill-on-bad-exit=1 to strip"
    bare.write_text(text.replace(KILL_FLAG, ""))
    bare_id, bare_took = _fail_node_1(slurm_cluster, bare, bare_env, bare_root, cancelled_after)
    assert bare_took is None, (f"without --kill-on-bad-exit the job still ended {bare_took:.0f} s after node 1 "
                               f"failed: this scenario cannot show what the flag does\n{_output(bare, bare_id)}")
    assert _exit_record(bare_root, 0) == "running\n"
    print(f"one node failing: the job ended {took:.1f} s after its exit record; without the flag it ran on "
          f"for {KILL_WINDOW_S:.0f} s")
