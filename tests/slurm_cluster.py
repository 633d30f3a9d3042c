"""A real Slurm cluster on this host for tests: munged, slurmctld and one slurmd per node, no systemd.

Everything lives in one temporary directory: the munge key and socket, slurm.conf and gres.conf,
the controller's state, each slurmd's spool, the logs. The daemons run in the foreground as
children of the test process (`-D`, `-F`), so they are stopped by their own pid and waited for.

Two nodes run on this one host (`slurmd -N NAME`, each with its own port). Where root may make
network namespaces (tests/node_networks.py), each node's slurmd, and so every process of a job step
on that node, has a network and an address of its own (node0, node1): a rank reaches another node
only at that node's address, as on a real cluster. Otherwise both nodes share this host's network,
and their names, this host's short name and `localhost`, must resolve to it, because job scripts
take MASTER_ADDR from `scontrol show hostnames`, which gives node names. Each node has two fake GPUs
(character devices like /dev/null under the temporary directory), so `--gpus-per-node=2` schedules.

Use the session fixture `slurm_cluster` (register it in tests/conftest.py with
`from slurm_cluster import slurm_cluster  # noqa: F401`), or `running_cluster(root)` directly.
Binaries missing: the fixture skips with the reason, and fails under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from node_networks import NodeNetworks, node_networks, unavailable

PARTITION = "batch"
GPUS_PER_NODE = 2
BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol", "scancel", "squeue")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class SlurmUnavailable(RuntimeError):
    """The Slurm or munge binaries are not installed."""


@dataclass
class SlurmCluster:
    """A running test cluster: where its files are and the environment its clients need."""

    root: Path
    conf: Path
    nodes: tuple[str, ...]
    partition: str
    gpus_per_node: int
    env: dict[str, str]
    logs: dict[str, Path] = field(default_factory=dict)
    networks: NodeNetworks | None = None  # None: the nodes share this host's network

    def run(self, argv: Sequence[str], *, timeout: float = 120.0, cwd: Path | None = None,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sbatch, squeue, ...) against this cluster; never raises on status."""
        env = {**self.env, **(extra_env or {})}
        return subprocess.run(list(argv), env=env, cwd=cwd, text=True, capture_output=True,
                              timeout=timeout, check=False)

    def finished(self, job_id: str) -> dict[str, str] | None:
        """The job's fields (JobState, ExitCode, NodeList, ...) from the job completion log once it
        has ended; None while it has not."""
        log = self.root / "jobcomp.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        for line in text.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields.get("JobId") == job_id:
                return fields
        return None

    def job_record(self, job_id: str, timeout: float = 15.0) -> dict[str, str]:
        """The finished job's fields from the job completion log, waiting up to `timeout` for them."""
        deadline = time.monotonic() + timeout
        while (fields := self.finished(job_id)) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} is not in {self.root / 'jobcomp.log'}")
            time.sleep(0.2)
        return fields

    def log_tails(self, lines: int = 30) -> str:
        """The last lines of every daemon log, for failure messages."""
        parts = []
        for name, path in self.logs.items():
            text = path.read_text(errors="replace") if path.exists() else "(no log)"
            parts.append(f"--- {name} ({path})\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)


def missing_binaries() -> list[str]:
    """The Slurm and munge programs that are not on PATH (sbin included)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [name for name in BINARIES if shutil.which(name, path=path) is None]


def _which(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if found is None:
        raise SlurmUnavailable(f"{name} is not installed")
    return found


def _free_ports(count: int) -> list[int]:
    """Ports free on this host now; held open together so that they are distinct."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_names(count: int, isolated: bool = False) -> tuple[str, ...]:
    """node0, node1, ... for nodes in networks of their own; else names that resolve to this host:
    its short name, then localhost (at most two)."""
    if isolated:
        return tuple(f"node{index}" for index in range(count))
    short = socket.gethostname().split(".")[0]
    names = [short] + ([] if short == "localhost" else ["localhost"])
    if count > len(names):
        raise ValueError(f"at most {len(names)} nodes whose names resolve to this host, asked for {count}")
    return tuple(names[:count])


def _fake_gpus(dev: Path, count: int) -> list[Path]:
    """Character devices standing in for GPUs; slurmd's gres/gpu drops GPUs that have no device file."""
    dev.mkdir(parents=True, exist_ok=True)
    files = []
    for index in range(count):
        path = dev / f"nvidia{index}"
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))  # the device numbers of /dev/null
        except (PermissionError, OSError):
            # Without CAP_MKNOD a plain file still registers (slurmd only logs that it is no device).
            path.touch()
        files.append(path)
    return files


def slurm_conf(root: Path, nodes: Sequence[str], ctld_port: int, node_ports: Sequence[int],
               munge_socket: Path, cpus: int, networks: NodeNetworks | None = None) -> str:
    """A minimal slurm.conf for daemons and clients on this host, every path under `root`; with
    `networks`, slurmctld is reached at the bridge's address and each node at its own."""
    host = socket.gethostname().split(".")[0]
    lines = [
        "ClusterName=pytest",
        f"SlurmctldHost={host}" + (f"({networks.host_addr})" if networks else ""),
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={node_ports[0]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # Clients and daemons find our munged here instead of /run/munge.
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}/%n",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log'}/slurmd-%n.log",
        # No cgroups in a container without systemd: track processes through /proc, bind nothing.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        # Several nodes share this host's CPUs: trust the node lines below over the hardware.
        "SlurmdParameters=config_overrides",
        "AccountingStorageType=accounting_storage/none",
        # Finished jobs are written here, so tests can read a job's state and exit code after
        # slurmctld forgets it (MinJobAge).
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={root / 'jobcomp.log'}",
        "JobAcctGatherType=jobacct_gather/none",
        "GresTypes=gpu",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        # sbatch --wait polls every 2 s while 2 s < MinJobAge / 2, and every 8 then 32 s after that:
        # a small MinJobAge keeps it at 2 s (and slurmctld keeps a job at least that long).
        "MinJobAge=4",
    ]
    for name, port in zip(nodes, node_ports):
        where = f"NodeHostname={name} NodeAddr={networks.addr[name]}" if networks else \
            f"NodeHostname={host} NodeAddr=127.0.0.1"
        lines.append(f"NodeName={name} {where} Port={port} "
                     f"CPUs={cpus} RealMemory=1000 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _client_env(conf: Path) -> dict[str, str]:
    """This process's environment for Slurm clients: our slurm.conf, no SLURM_* of an outer job."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(conf)
    return env


def _start(argv: Sequence[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start a daemon in the foreground as our child, its output appended to `log`."""
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env), start_new_session=True)


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each daemon by its pid, wait for it, SIGKILL the ones that outlive the timeout."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for proc in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _wait_for(check: Callable[[], bool], what: str, cluster: SlurmCluster,
              procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Poll `check` until it is true; fail with the daemon logs when a daemon died or time ran out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [next((Path(a).name for a in p.args if Path(a).name in BINARIES), str(p.args))  # type: ignore[union-attr]
                for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}\n{cluster.log_tails()}")
        if check():
            return
        time.sleep(0.3)
    raise RuntimeError(f"timed out after {START_TIMEOUT_S:.0f} s waiting for {what}\n{cluster.log_tails()}")


def _munge_works(munge_socket: Path) -> bool:
    result = subprocess.run([_which("munge"), "-n", "-S", str(munge_socket)], capture_output=True, timeout=10,
                            check=False)
    return result.returncode == 0


def _nodes_idle(cluster: SlurmCluster) -> bool:
    result = cluster.run(["sinfo", "-h", "-N", "-p", cluster.partition, "-o", "%N %t"], timeout=10)
    states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
    return result.returncode == 0 and all(states.get(n) == "idle" for n in cluster.nodes)


def _cancel_jobs(cluster: SlurmCluster) -> None:
    """Cancel what tests left queued or running, so that no job step outlives its slurmd."""
    cluster.run(["scancel", "--partition", cluster.partition], timeout=10)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        left = cluster.run(["squeue", "-h", "-p", cluster.partition, "-o", "%i"], timeout=10)
        if left.returncode != 0 or not left.stdout.strip():
            return
        time.sleep(0.5)


@contextlib.contextmanager
def running_cluster(root: Path, nodes: int = 2, cpus: int | None = None,
                    isolate: bool | None = None) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and `nodes` slurmd under `root`; yield when every node is idle; stop all.
    isolate: each node in a network namespace of its own (None: where tests/node_networks.py can)."""
    missing = missing_binaries()
    if missing:
        raise SlurmUnavailable(f"not installed: {', '.join(missing)} (run .ci/install-slurm.sh)")
    if isolate is None:
        isolate = unavailable() is None
    names = node_names(nodes, isolate)
    with contextlib.ExitStack() as stack:
        root.mkdir(parents=True, exist_ok=True)
        networks = stack.enter_context(node_networks(names, root)) if isolate else None
        yield from _run_cluster(root, names, cpus, networks)


def _run_cluster(root: Path, names: tuple[str, ...], cpus: int | None,
                 networks: NodeNetworks | None) -> Iterator[SlurmCluster]:
    root.mkdir(parents=True, exist_ok=True)
    # munged refuses a key or socket directory that others can read or write into.
    root.chmod(0o755)
    for sub in ("state", "log", "munge", *(f"spool/{n}" for n in names)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = root / "munge" / "munge.socket"
    ctld_port, *node_ports = _free_ports(1 + len(names))
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, names, ctld_port, node_ports, munge_socket, cpus or os.cpu_count() or 1,
                               networks))
    gpus = _fake_gpus(root / "dev", GPUS_PER_NODE)
    # Named GPUs numbered like /dev/nvidiaN so that Slurm derives CUDA_VISIBLE_DEVICES indices.
    (root / "gres.conf").write_text(f"Name=gpu File={gpus[0].parent}/nvidia[0-{GPUS_PER_NODE - 1}]\n")

    env = _client_env(conf)
    logs = {"munged": root / "log" / "munged.log", "slurmctld": root / "log" / "slurmctld.log",
            **{f"slurmd {n}": root / "log" / f"slurmd-{n}.log" for n in names}}
    cluster = SlurmCluster(root=root, conf=conf, nodes=names, partition=PARTITION,
                           gpus_per_node=GPUS_PER_NODE, env=env, logs=logs, networks=networks)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start([_which("munged"), "-F", "-f", f"--key-file={key}", f"--socket={munge_socket}",
                             f"--pid-file={root / 'munge' / 'munged.pid'}",
                             f"--seed-file={root / 'munge' / 'munged.seed'}",
                             f"--log-file={logs['munged']}"], root / "log" / "munged.out", env))
        _wait_for(lambda: _munge_works(munge_socket), "munged", cluster, procs)
        procs.append(_start([_which("slurmctld"), "-D", "-i"], root / "log" / "slurmctld.out", env))
        _wait_for(lambda: cluster.run(["scontrol", "ping"], timeout=10).stdout.count("UP") > 0,
                  "slurmctld", cluster, procs)
        for name in names:
            where = networks.exec_prefix(name) if networks else []
            procs.append(_start([*where, _which("slurmd"), "-D", "-N", name], root / "log" / f"slurmd-{name}.out",
                                env))
        _wait_for(lambda: _nodes_idle(cluster), f"nodes {', '.join(names)} idle in partition {PARTITION}",
                  cluster, procs)
        yield cluster
    finally:
        try:
            if procs and procs[0].poll() is None and len(procs) > 1:
                _cancel_jobs(cluster)
        finally:
            _stop(procs)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A 2-node Slurm cluster on this host for the whole session; skips (fails under CI=true) without Slurm."""
    missing = missing_binaries()
    if missing:
        reason = f"Slurm is not installed (missing {', '.join(missing)}; run .ci/install-slurm.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must install it", pytrace=False)
        pytest.skip(reason)
    # A short root: the munge socket path must fit a Unix socket address (108 bytes).
    root = Path(tmp_path_factory.mktemp("slurm", numbered=True))
    with running_cluster(root) as cluster:
        yield cluster
