"""The test Slurm cluster itself: it schedules, runs a real torchrun job, and reports a failing rank.

torch (the CPU build) and gloo stand in for the GPUs and NCCL; the job runs the venv's python
through the PATH that sbatch exports to the job.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from helpers import GLOO_ALL_REDUCE
from node_networks import unavailable
from slurm_cluster import SlurmCluster

ALL_REDUCE = GLOO_ALL_REDUCE + '''dist.barrier()
dist.destroy_process_group()
if os.environ.get("FAIL_RANK") == str(rank):
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
'''

JOB = '''#!/bin/bash
#SBATCH --job-name=gloo-all-reduce
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:05:00
#SBATCH --output={out}
set -uo pipefail
torchrun --standalone --nnodes=1 --nproc_per_node=2 {train}
status=$?
echo "torchrun exited with $status"
exit "$status"
'''


def _job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """PATH with this interpreter's bin first (torchrun, python), as CI's activated venv has it."""
    return {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]), **(extra or {})}


def _submit_wait(cluster: SlurmCluster, script: Path, env: dict[str, str]) -> tuple[int, str, str, float]:
    """sbatch --wait the script: its exit code, job id, output file's text and the seconds it took."""
    start = time.monotonic()
    result = cluster.run(["sbatch", "--wait", "--parsable", str(script)], extra_env=env, timeout=180)
    elapsed = time.monotonic() - start
    out = script.with_suffix(".out")
    text = out.read_text() if out.exists() else "(no output file)"
    return result.returncode, result.stdout.strip(), f"{text}\nsbatch: {result.stdout}{result.stderr}", elapsed




def _write_job(tmp_path: Path) -> Path:
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)")
    train = tmp_path / "all_reduce.py"
    train.write_text(ALL_REDUCE)
    script = tmp_path / "job.sh"
    script.write_text(JOB.format(out=tmp_path / "job.out", train=train))
    return script


def test_the_cluster_has_its_nodes_idle_in_the_batch_partition(slurm_cluster: SlurmCluster):
    result = slurm_cluster.run(["sinfo", "-h", "-N", "-o", "%N %P %t %G"])
    assert result.returncode == 0, result.stderr
    rows = sorted(line.split() for line in result.stdout.splitlines())
    assert rows == sorted([name, "batch*", "idle", "gpu:2"] for name in slurm_cluster.nodes), result.stdout


@pytest.mark.allow_ci_skip  # a CI container may not let root make network namespaces
def test_each_node_has_a_network_of_its_own_where_namespaces_can_be_made(slurm_cluster: SlurmCluster):
    if slurm_cluster.networks is None:
        pytest.skip(f"the nodes share this host's network: {unavailable()}")
    # A task per node prints its network namespace and the address it reaches its own node name at.
    result = slurm_cluster.run(["srun", "--nodes=2", "--ntasks-per-node=1", "--label", "bash", "-c",
                                'echo "$(readlink /proc/self/ns/net) $(getent hosts "$SLURMD_NODENAME")"'],
                               timeout=60)
    assert result.returncode == 0, result.stderr
    seen = {}
    for line in result.stdout.splitlines():
        task, namespace, addr, name = line.replace(":", " ", 1).split()[:4]
        seen[name] = (namespace, addr)
    assert sorted(seen) == sorted(slurm_cluster.nodes), result.stdout
    namespaces = {namespace for namespace, _ in seen.values()}
    assert len(namespaces) == 2 and os.readlink("/proc/self/ns/net") not in namespaces, result.stdout
    assert {name: addr for name, (_, addr) in seen.items()} == slurm_cluster.networks.addr


def test_sbatch_test_only_accepts_a_script_that_fits_and_refuses_one_that_does_not(
        slurm_cluster: SlurmCluster, tmp_path: Path):
    script = tmp_path / "fits.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=2\n#SBATCH --time=10\nhostname\n")
    fits = slurm_cluster.run(["sbatch", "--test-only", str(script)])
    assert fits.returncode == 0, fits.stderr
    assert re.search(r"to start at .* on nodes \S+ in partition batch", fits.stderr), fits.stderr
    too_big = slurm_cluster.run(["sbatch", "--test-only", f"--nodes={len(slurm_cluster.nodes) + 1}", str(script)])
    assert too_big.returncode != 0
    assert "Requested node configuration is not available" in too_big.stderr, too_big.stderr


def test_sbatch_wait_runs_torchrun_with_two_gloo_ranks(slurm_cluster: SlurmCluster, tmp_path: Path):
    code, job_id, out, elapsed = _submit_wait(slurm_cluster, _write_job(tmp_path), _job_env())
    assert code == 0, out
    record = slurm_cluster.job_record(job_id)
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
    for rank in (0, 1):
        # 0 + 1: each rank saw the other's value.
        assert f"rank {rank} of world 2: all_reduce sum 1" in out, out
    assert "torchrun exited with 0" in out
    print(f"sbatch --wait of a 2-rank torchrun job: {elapsed:.1f} s")


def test_a_failing_rank_fails_the_job_and_sbatch_wait_says_so(slurm_cluster: SlurmCluster, tmp_path: Path):
    code, job_id, out, _ = _submit_wait(slurm_cluster, _write_job(tmp_path), _job_env({"FAIL_RANK": "1"}))
    assert code != 0, out
    assert "rank 1 fails on purpose" in out
    status = re.search(r"torchrun exited with (\d+)", out)
    assert status and status.group(1) != "0", out
    record = slurm_cluster.job_record(job_id)
    # The batch script's exit status is torchrun's, and Slurm records it as the job's.
    assert record["JobState"] == "FAILED" and record["ExitCode"] == f"{status.group(1)}:0", record


USES_CLUSTER = '''
from slurm_cluster import slurm_cluster  # noqa: F401


def test_needs_slurm(slurm_cluster):
    pass
'''


@pytest.mark.parametrize("ci, outcome", [("true", "1 error"), ("", "1 skipped")])
def test_without_slurm_the_fixture_skips_but_fails_under_ci(tmp_path: Path, ci: str, outcome: str):
    import subprocess

    (tmp_path / "test_uses_cluster.py").write_text(USES_CLUSTER)
    # A PATH without /usr/bin hides sbatch and friends (the fixture also looks in /usr/sbin, /sbin,
    # where the daemons are, but the clients are not).
    env = {**os.environ, "CI": ci, "PATH": str(Path(sys.executable).parent),
           "PYTHONPATH": str(Path(__file__).resolve().parent)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                             str(tmp_path / "test_uses_cluster.py")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert outcome in result.stdout, result.stdout + result.stderr
    assert re.search(r"Slurm is not installed \(missing [^)]*\bsbatch\b", result.stdout), result.stdout
    if ci:
        assert "CI must install it" in result.stdout, result.stdout
