"""What a run root holds: the contract between the launch command, verify.sh and the doctor.

The launch command writes these files and verify.sh and the doctor read them; all three take the
names from here (launch.sh.j2 and verify.sh.j2 print them from the plan), so a file cannot be
renamed on one side only.
"""

from __future__ import annotations

from ..paths import normalize_path

DATASETS_DIR = "megatron/core/datasets"  # under megatron.root: the C++ dataset helper the launch builds
RUNS_DIR = "runs"  # the default run root is {mount}/runs/{name}
RUN_CHECKPOINT_DIR = "ckpt"  # Megatron's --save/--load directory under the run root
SHARED_CHECKPOINTS_DIR = "checkpoints"  # converted and exported weights outlive a run: {mount}/checkpoints/{name}/
TENSORBOARD_DIR = "tensorboard"
TRAIN_LOG = "train.log"  # torchrun's complete output
LAUNCH_LOG = "launch.log"  # what the launch command printed before and around torchrun
EXIT_RECORD = "exit_status"  # torchrun's exit status, or 128+signal when the launch was stopped
RUNTIME_RECORD = "runtime.txt"  # torch, CUDA, GPU count and the image's Megatron commit
NODES_DIR = "nodes"  # multi-worker: each worker logs under nodes/node-<rank>/
LATEST_CHECKPOINT = "latest_checkpointed_iteration.txt"

# The seed's runtime record, verbatim: the versions the job really ran with.
RUNTIME_PROBE = (
    "import torch, megatron.core; print('torch:', torch.__version__); "
    "print('cuda:', torch.version.cuda); print('gpu_count:', torch.cuda.device_count())"
)


def default_run_root(mount_path: str, name: str) -> str:
    """{mount}/runs/{name}: one directory per run on the shared storage."""
    return normalize_path(f"{mount_path}/{RUNS_DIR}/{name}")


def worker_log_dir(worker: int, workers: int) -> str:
    """The log directory of a worker relative to the run root, with a trailing '/' ('' for one worker)."""
    return "" if workers == 1 else f"{NODES_DIR}/node-{worker}/"


def checkpoint_iteration_dir(iteration: int) -> str:
    """Megatron's directory of one save: iter_0000020 (checkpointing.py get_checkpoint_name)."""
    return f"iter_{iteration:07d}"
