"""Slurm with pyxis/enroot: what sbatch accepts, and the batch job a training step becomes.

sbatch(1) --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
"days-hours:minutes" and "days-hours:minutes:seconds"; 0 or UNLIMITED for none. One task per node
(srun --ntasks-per-node=1) runs launch.sh in the image; the first node of the allocation hosts
torchrun's rendezvous (docs/engines.md).
"""

from __future__ import annotations

import re
from typing import NamedTuple

PLATFORM = "slurm"
BATCH_FILE = "job.sbatch"
TIME_LIMIT = re.compile(r"(?:[0-9]+|[0-9]+:[0-9]{1,2}|[0-9]+:[0-9]{1,2}:[0-9]{1,2}|[0-9]+-[0-9]+"
                        r"|[0-9]+-[0-9]+:[0-9]{1,2}|[0-9]+-[0-9]+:[0-9]{1,2}:[0-9]{1,2}|UNLIMITED|unlimited|infinite)")
LAUNCH_DELIMITER = "LAUNCH_SH"  # the quoted here-document that carries launch.sh in job.sbatch


class SlurmJob(NamedTuple):
    """What job.sbatch says, as the plan derives it."""

    name: str
    partition: str
    account: str | None
    has_account: bool
    nodes: int
    gpus_per_node: int
    time_limit: str
    exclusive: bool
    output: str  # slurm-%j.out under the run root
    run_root: str
    container_image: str
    container_mounts: str  # pyxis's comma-separated list
    default_master_port: int


def mount_destinations(mounts: list[str]) -> list[str]:
    """The container paths of pyxis mounts `SRC:DST[:FLAGS]` (a bare path mounts at itself)."""
    out = []
    for mount in mounts:
        parts = mount.split(":")
        out.append(parts[1] if len(parts) > 1 else parts[0])
    return out
