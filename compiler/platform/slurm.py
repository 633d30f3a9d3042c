"""Slurm with pyxis/enroot: what sbatch accepts, and the batch job a step becomes (the engine adapter).

sbatch(1) --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
"days-hours:minutes" and "days-hours:minutes:seconds"; 0 or UNLIMITED for none. One task per node
(srun --ntasks-per-node=1) runs launch.sh in the image; the first node of the allocation hosts
torchrun's rendezvous (docs/engines.md).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..tuples import NamedTuple
from .engine import (DEFAULT_MASTER_PORT, Document, DocumentFile, EngineFacts, EnvParam, Finding, NodeEnv, StepRequest,
                     nodes_and_gpus, step_document)
from ..schema.records import JobSpec
from .images import ImagePins

BATCH_FILE = "job.sbatch"
BATCH_TEMPLATE = "job.sbatch.j2"
# The patterns of this module are text, matched with re.fullmatch (compiled at the first use, then
# kept in re's cache): every compile imports every adapter, and a spec of another engine never
# uses them (compiling them all took 0.5 ms of each compile).
TIME_LIMIT = (r"(?:[0-9]+|[0-9]+:[0-9]{1,2}|[0-9]+:[0-9]{1,2}:[0-9]{1,2}|[0-9]+-[0-9]+"
              r"|[0-9]+-[0-9]+:[0-9]{1,2}|[0-9]+-[0-9]+:[0-9]{1,2}:[0-9]{1,2}|UNLIMITED|unlimited|infinite)")
LAUNCH_DELIMITER = "LAUNCH_SH"  # the quoted here-document that carries launch.sh in job.sbatch


NODE_ENV = NodeEnv(
    note=("The Slurm launch command: job.sbatch carries it and srun runs it once on every node, in the image.",),
    comment=(
        "Slurm starts one task of this script on every node (srun --ntasks-per-node=1): SLURM_NNODES is",
        "the step's node count, SLURM_NODEID this node's index in it, SLURM_NTASKS the step's task count.",
        "job.sbatch exports MASTER_ADDR (the allocation's first node, which is node 0) and MASTER_PORT:",
        "the image has no scontrol to ask.",
    ),
    shown_names=(("NODES_FROM", "SLURM_NNODES"), ("RANK_FROM", "SLURM_NODEID")),
    nnodes=EnvParam("SLURM_NNODES", "Slurm SLURM_NNODES is required: start this with srun from job.sbatch", True),
    node_rank=EnvParam("SLURM_NODEID", "Slurm SLURM_NODEID is required: start this with srun from job.sbatch", True),
    master_addr=EnvParam("MASTER_ADDR", "job.sbatch exports MASTER_ADDR", True),
    master_port=EnvParam("MASTER_PORT", str(DEFAULT_MASTER_PORT), False),
    nodes_named="$NODES_FROM", rank_named="$RANK_FROM", unit="node", unset=(),
    task_count=EnvParam("SLURM_NTASKS", "", False), task_count_shown=EnvParam("SLURM_NTASKS", "no", False),
    task_hint="srun --ntasks-per-node=1",
)


class SlurmJob(NamedTuple):
    """What job.sbatch (or a step's job-KIND.sbatch) says, as the plan derives it."""

    file: str  # job.sbatch, job-prepare.sbatch, …
    name: str
    partition: str
    account: str | None
    has_account: bool
    nodes: int
    gpus_per_node: int
    time_limit: str
    exclusive: bool
    output: str  # slurm-%j.out under the run root, as the host sees it (slurmd opens it)
    run_root: str  # inside the container
    host_run_root: str  # the same directory on the host: the storage mount's SRC, not its DST
    container_image: str
    container_mounts: str  # pyxis's comma-separated list
    default_master_port: int
    rendezvous: bool  # the training step: node 0's address is exported for torchrun's rendezvous
    script: str  # the script it carries: launch.sh, prepare.sh, …
    signal: str | None  # --signal=B:TERM@GRACE for the training step: a stop that saves, then --requeue

    @property
    def stops(self) -> bool:
        """The batch shell gets SIGTERM before the limit, forwards it and requeues the job."""
        return self.signal is not None

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_node > 0

    @property
    def script_stem(self) -> str:
        return self.script.removesuffix(".sh")

    @property
    def exit_format(self) -> str:
        """printf's format of the job's last line."""
        return self.file + ": srun exited with status %s\\n"

    def describe(self) -> str:
        """Nodes and GPUs, for plan.md's Steps section."""
        return nodes_and_gpus(self.nodes, self.gpus_per_node)


class Slurm:
    """The Slurm engine adapter (engine.Engine)."""

    name: str = "slurm"
    title: str = "Slurm"
    section: str | None = "slurm"
    node_env: NodeEnv = NODE_ENV
    read_only_data: tuple[str, ...] = ()
    reserved_mounts: tuple[str, ...] = ()
    watches_step_time: bool = False
    limit_field: str | None = "time_limit"
    sets_grace: bool = True
    stop_note: str = ("job.sbatch asks for SIGTERM to its batch shell GRACE seconds before the time limit "
                      "(--signal=B:TERM@GRACE; Slurm may send it up to 60 s earlier), forwards it to srun, which "
                      "forwards it to every node's launch.sh, and requeues itself after the stop (--requeue, "
                      "scontrol requeue; --open-mode=append keeps slurm-JOBID.out)")

    def time_limit_seconds(self, section: Any) -> int | None:
        return None if section is None else time_limit_seconds(section.time_limit)

    def document(self, kind: str) -> DocumentFile:
        return step_document(BATCH_FILE, kind, BATCH_TEMPLATE)

    def job(self, request: StepRequest, spec: JobSpec, pins: ImagePins) -> SlurmJob:
        s = spec.slurm
        assert s is not None  # the platform-section rule refuses a spec without it
        # sbatch, slurmd and the batch script run on the host, where the storage is at the mount's
        # SRC; only srun's task runs in the container, where it is at DST
        host_root = host_path(request.run_root, list(s.container.mounts))
        return SlurmJob(
            file=self.document(request.kind).file, name=request.name, partition=s.partition, account=s.account,
            has_account=s.account is not None, nodes=request.nodes, gpus_per_node=request.gpus_per_node,
            time_limit=s.time_limit, exclusive=s.exclusive, output=f"{host_root}/slurm-%j.out",
            run_root=request.run_root, host_run_root=host_root,
            # pyxis takes enroot's registry#image form without the docker:// scheme
            container_image=s.container.image or pins.enroot_uri.removeprefix("docker://"),
            container_mounts=",".join(s.container.mounts), default_master_port=DEFAULT_MASTER_PORT,
            rendezvous=request.kind == "train", script=request.script,
            signal=None if request.stop_grace_s is None else f"B:TERM@{request.stop_grace_s}",
        )

    def render(self, job: SlurmJob, header: tuple[str, ...], generated_by: dict[str, str],
               script: str) -> Document:
        raise AssertionError("job.sbatch is rendered from its template")

    def check(self, section: Any, facts: EngineFacts) -> Iterator[Finding]:
        if not re.fullmatch(TIME_LIMIT, section.time_limit):
            yield Finding("slurm-time-limit", f"slurm.time_limit ({section.time_limit}) is not a time sbatch reads",
                          ("slurm", "time_limit"),
                          "write minutes, hours:minutes:seconds or days-hours:minutes:seconds, e.g. 04:00:00")
        for field in ("partition", "account"):
            value = getattr(section, field)
            if value is not None and not re.fullmatch(SLURM_NAME[field], value):
                yield Finding("slurm-name", f"slurm.{field} ({value}) is not a Slurm {field} name: it has a space or "
                              "a character sbatch does not take", ("slurm", field),
                              "letters, digits, '_', '-' and '.'" + (" (several partitions: a,b)" if field == "partition" else ""))
        for index, mount in enumerate(section.container.mounts):
            parts = mount.split(":")
            if len(parts) > 3 or not all(p.startswith("/") for p in parts[:2]) or "," in mount:
                yield Finding("slurm-mount", f"slurm.container.mounts[{index}] ({mount}) is not SRC:DST[:FLAGS] with "
                              "absolute paths", ("slurm", "container", "mounts", index),
                              "e.g. /lustre/megatron:/mnt/megatron (SRC on the host, DST in the container)")
        mount = facts.mount_path
        if mount is not None and mount not in mount_destinations(list(section.container.mounts)):
            yield Finding("slurm-mount", f"slurm.container.mounts does not mount the shared storage at "
                          f"storage.mount_path ({mount}), so the run root would be lost with the container",
                          ("slurm", "container"), f"add a mount SRC:{mount}, SRC being the cluster's shared file system")


ENGINE = Slurm()


# sbatch --partition takes a comma-separated list of partitions; an account is one name
SLURM_NAME = {"partition": r"[A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*", "account": r"[A-Za-z0-9_.-]+"}


def host_path(path: str, mounts: list[str]) -> str:
    """A container path as the host sees it, through the pyxis mount `SRC:DST` whose DST holds it
    (the longest such DST); the path itself where no mount holds it."""
    best: tuple[str, str] | None = None
    for mount in mounts:
        parts = mount.split(":")
        src, dst = (parts[0], parts[1]) if len(parts) > 1 else (parts[0], parts[0])
        dst = dst.rstrip("/") or "/"
        if (path == dst or path.startswith(dst.rstrip("/") + "/")) and (best is None or len(dst) > len(best[1])):
            best = (src.rstrip("/") or "/", dst)
    if best is None:
        return path
    src, dst = best
    rest = path[len(dst):].lstrip("/") if dst != "/" else path.lstrip("/")
    return f"{src}/{rest}".replace("//", "/") if rest else src


def mount_destinations(mounts: list[str]) -> list[str]:
    """The container paths of pyxis mounts `SRC:DST[:FLAGS]` (a bare path mounts at itself)."""
    out = []
    for mount in mounts:
        parts = mount.split(":")
        out.append(parts[1] if len(parts) > 1 else parts[0])
    return out


def time_limit_seconds(text: str) -> int | None:
    """sbatch --time in seconds (sbatch(1): minutes, minutes:seconds, hours:minutes:seconds,
    days-hours, days-hours:minutes, days-hours:minutes:seconds); None for 0, UNLIMITED or a time
    sbatch does not read (the slurm-time-limit rule reports that)."""
    if not re.fullmatch(TIME_LIMIT, text) or text.lower() in ("unlimited", "infinite"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif len(parts) == 1:
        total = parts[0] * 60
    elif len(parts) == 2:
        total = parts[0] * 60 + parts[1]
    else:
        total = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return total or None
