"""The generated 2-worker launch.sh, started twice as two workers, with the real torchrun.

A CPU build of torch and a tiny gloo script stand in for the GPUs and Megatron; nvidia-smi is a
stub that reports the spec's GPU count. torch is not a dependency of the tool: .ci/run installs it,
and without it this test skips (under CI=true a skip is a failure).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.one_pass import compile_spec
from helpers import GLOO_ALL_REDUCE, write_exe

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)")

TRAIN = GLOO_ALL_REDUCE + '''dist.barrier()
dist.destroy_process_group()
if os.environ.get("FAIL_RANK") == str(rank):
    print(f"rank {rank} fails on purpose", flush=True)
    sys.exit(3)
print(f"rank {rank} done", flush=True)
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _setup(tmp_path):
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        found = shutil.which("torchrun")
        assert found, "torch is installed but torchrun is not on PATH"
        torchrun = Path(found)
    # A stand-in Megatron tree: the launch command builds its dataset helper and imports megatron.core.
    megatron = tmp_path / "Megatron-LM"
    (megatron / "megatron" / "core" / "datasets").mkdir(parents=True)
    (megatron / "megatron" / "__init__.py").write_text("")
    (megatron / "megatron" / "core" / "__init__.py").write_text("")
    (megatron / "megatron" / "core" / "datasets" / "Makefile").write_text("default:\n\t@echo helper built\n")
    (tmp_path / "train_tiny.py").write_text(TRAIN)
    spec = tmp_path / "ddp.yaml"
    spec.write_text(f"""version: 1
name: cpu-ddp
image: {{base: nvcr.io/nvidia/pytorch:25.03-py3, registry: cr.infini-ai.com, namespace: te-0123456789abcdef,
        repository: megatron-core, tag: 0.18.2-cu128}}
megatron: {{commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab, root: "{megatron}"}}
resources: {{workers: 2, gpus_per_worker: 2}}
storage: {{mount_path: "{tmp_path / 'mnt'}"}}
parallelism: {{tensor: 1}}
training: {{script: "{tmp_path / 'train_tiny.py'}"}}
""")
    result = compile_spec(str(spec), "ddp.yaml")
    assert result.ok, result.diagnostics
    launch = tmp_path / "launch.sh"
    launch.write_text(result.files["launch.sh"])
    stubs = tmp_path / "bin"
    stubs.mkdir()
    write_exe(stubs / "nvidia-smi", 'printf "0\\n1\\n"\n')
    path = os.pathsep.join([str(stubs), str(torchrun.parent), str(Path(sys.executable).parent), os.environ["PATH"]])
    return launch, path, megatron, tmp_path / "mnt" / "runs" / "cpu-ddp"


def _start_workers(launch, path, megatron, port, extra=None):
    procs = []
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORLD_SIZE", "RANK", "MASTER_", "LOCAL_"))}
        env.update({"PATH": path, "WORLD_SIZE": "2", "RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "MEGATRON_COMMIT": "571370c829ca768fe37244f4e2e7f28d8accc4ab",
                    "PYTHONPATH": str(megatron), "OMP_NUM_THREADS": "1", **(extra or {})})
        procs.append(subprocess.Popen(["bash", str(launch)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=150)
        outputs.append((proc.returncode, out))
    return outputs


def test_two_workers_rendezvous_with_the_real_torchrun(tmp_path):
    launch, path, megatron, run_root = _setup(tmp_path)
    outputs = _start_workers(launch, path, megatron, _free_port())
    for code, out in outputs:
        assert code == 0, out
    seen = set()
    for node in (0, 1):
        log = (run_root / "nodes" / f"node-{node}" / "train.log").read_text()
        # two local ranks print at once, so their lines may interleave: match, do not split
        for rank, world, total in re.findall(r"rank (\d+) of world (\d+): all_reduce sum (\d+)", log):
            assert (world, total) == ("4", "6"), log  # 0+1+2+3 summed across both workers
            seen.add(int(rank))
        for local in (0, 1):
            assert f"rank {node * 2 + local} done" in log, f"node {node}'s train.log is incomplete:\n{log}"
        assert (run_root / "nodes" / f"node-{node}" / "exit_status").read_text() == "0\n"
        runtime = (run_root / "nodes" / f"node-{node}" / "runtime.txt").read_text()
        assert f"node_rank: {node}\n" in runtime and "gpu_count: " in runtime
    assert seen == {0, 1, 2, 3}, "every rank of workers × gpus_per_worker = 4 joined"


def test_a_failing_rank_fails_its_worker_with_torchruns_status(tmp_path):
    # Rank 1 lives on worker 0, whose torchrun hosts the rendezvous store; when it fails, the other
    # worker's torchrun leaves its exit barrier at once (a failure on worker 1 instead would keep
    # worker 0 in torchrun's 300 s exit barrier).
    launch, path, megatron, run_root = _setup(tmp_path)
    outputs = _start_workers(launch, path, megatron, _free_port(), extra={"FAIL_RANK": "1"})
    (code0, out0), (code1, out1) = outputs
    assert code0 != 0, out0
    node0 = run_root / "nodes" / "node-0"
    assert (node0 / "exit_status").read_text() == f"{code0}\n"
    log = (node0 / "train.log").read_text()
    assert "rank 1 fails on purpose" in log
    assert "ChildFailedError" in log or "FAILED" in log, "torchrun's own failure report reaches train.log"
    assert (run_root / "nodes" / "node-1" / "exit_status").read_text() == f"{code1}\n"
