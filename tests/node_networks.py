"""A network of its own for each node of the test Slurm cluster (tests/slurm_cluster.py), where root
may make network namespaces.

Each node's slurmd runs in a network namespace joined to a bridge on this host by a veth pair, with
an address of its own on a /24 that no route of this host uses. Everything a job step starts (the
batch script on node 0, launch.sh, torchrun, its ranks) inherits its node's namespace: a rank on
node 1 reaches node 0's rendezvous only at node 0's address, so a job that points MASTER_ADDR at
another node fails to start. Each node resolves the node names through a hosts file of its own,
mounted over /etc/hosts in a mount namespace of the daemon's (the rest of the filesystem, /sys and
its cgroups included, stays this host's: `ip netns exec` would mount a sysfs without them, and slurmd
needs them). In it this host's own name is the node's address (what srun and slurmd tell peers).

`unavailable()` says why this cannot be used here (not root, no `ip`, or the kernel or container
refuses namespaces, veth or bridges); the cluster then runs its nodes on this host's network.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# nsenter joins the node's network; unshare gives the daemon its own mounts, where the node's hosts
# file covers /etc/hosts; then sh becomes the daemon (exec), so its pid is the daemon's.
ENTER = 'mount --bind "$0" /etc/hosts && exec "$@"'


@dataclass(frozen=True)
class NodeNetworks:
    """The bridge's address on this host (slurmctld's), and each node's namespace, address and hosts file."""

    host_addr: str
    namespace: dict[str, str]
    addr: dict[str, str]
    hosts: dict[str, Path]

    def exec_prefix(self, node: str) -> list[str]:
        """The argv prefix that runs a program in the node's network, with the node's hosts file."""
        return [_which("nsenter"), f"--net=/run/netns/{self.namespace[node]}", _which("unshare"), "--mount",
                "--propagation", "private", "sh", "-c", ENTER, str(self.hosts[node])]


def _which(name: str) -> str:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])) or name


def _ip() -> str:
    return _which("ip")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_ip(), *argv], capture_output=True, text=True, timeout=30, check=False)


def _must(*argv: str) -> None:
    result = _run(*argv)
    if result.returncode != 0:
        raise OSError(f"ip {' '.join(argv)}: {result.stderr.strip() or result.returncode}")


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.250-254.x.0 that overlaps no address or route of this host."""
    used = []
    for argv in (("-4", "route", "show", "table", "all"), ("-4", "addr", "show")):
        for word in _run(*argv).stdout.split():
            with contextlib.suppress(ValueError):
                used.append(ipaddress.ip_network(word, strict=False))
    start = os.getpid() % 1000
    for offset in range(1000):
        index = (start + offset) % 1000
        subnet = ipaddress.ip_network(f"10.{250 + index // 200}.{index % 200}.0/24")
        if not any(subnet.overlaps(net) for net in used if net.prefixlen > 0):
            return subnet
    raise OSError("no free /24 in 10.250.0.0-10.254.199.0")


# The probe: node "a" accepts one connection on its own address, where node "b" connects by name
# (a host whose firewall drops bridged traffic, as Docker's FORWARD policy does, fails here).
LISTEN = """import socket, sys
s = socket.create_server(("0.0.0.0", 0)); print(s.getsockname()[1], flush=True); s.settimeout(20); s.accept()"""
CONNECT = "import socket, sys; socket.create_connection(('a', int(sys.argv[1])), timeout=20)"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no message)"


def unavailable() -> str | None:
    """Why node networks cannot be used here, or None when they can: two nodes are made, each entered,
    and one reaches the other by name."""
    if os.geteuid() != 0:
        return "not root"
    for name in ("ip", "nsenter", "unshare"):
        if _which(name) == name:
            return f"no {name} command (iproute2, util-linux)"
    import tempfile

    try:
        with tempfile.TemporaryDirectory() as directory, _networks(["a", "b"], f"mcp{os.getpid()}", Path(directory)) as net:
            with subprocess.Popen([*net.exec_prefix("a"), sys.executable, "-c", LISTEN], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) as server:
                port = server.stdout.readline().strip() if server.stdout else ""
                client = subprocess.run([*net.exec_prefix("b"), sys.executable, "-c", CONNECT, port or "0"],
                                        capture_output=True, text=True, timeout=30, check=False)
                server.kill()
                errors = server.stderr.read() if server.stderr else ""
            if not port:
                return f"cannot enter a node's network: {_last_line(errors)}"
            if client.returncode != 0:
                return f"one node cannot reach another: {_last_line(client.stderr)}"
            return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)


@contextlib.contextmanager
def node_networks(nodes: Sequence[str], directory: Path) -> Iterator[NodeNetworks]:
    """Make a namespace, veth pair and hosts file (under `directory`) per node and one bridge; remove
    the namespaces and links after."""
    with _networks(nodes, f"mc{os.getpid()}", directory) as networks:
        yield networks


@contextlib.contextmanager
def _networks(nodes: Sequence[str], tag: str, directory: Path) -> Iterator[NodeNetworks]:
    subnet = _free_subnet()
    hosts = list(subnet.hosts())
    bridge = f"{tag}b"[:15]
    made: list[tuple[str, str]] = []  # ("link" | "netns", name), removed in reverse
    try:
        _must("link", "add", bridge, "type", "bridge")
        made.append(("link", bridge))
        _must("addr", "add", f"{hosts[0]}/{subnet.prefixlen}", "dev", bridge)
        _must("link", "set", bridge, "up")
        namespace, addr = {}, {}
        for index, node in enumerate(nodes):
            ns, outside, inside = f"{tag}n{index}", f"{tag}h{index}"[:15], f"{tag}v{index}"[:15]
            _must("netns", "add", ns)
            made.append(("netns", ns))
            _must("link", "add", outside, "type", "veth", "peer", "name", inside)
            made.append(("link", outside))
            _must("link", "set", inside, "netns", ns)
            _must("link", "set", outside, "master", bridge)
            _must("link", "set", outside, "up")
            _must("-n", ns, "addr", "add", f"{hosts[index + 1]}/{subnet.prefixlen}", "dev", inside)
            _must("-n", ns, "link", "set", inside, "up")
            _must("-n", ns, "link", "set", "lo", "up")
            namespace[node], addr[node] = ns, str(hosts[index + 1])
        host = socket.gethostname().split(".")[0]
        files = {}
        for node in nodes:
            lines = ["127.0.0.1 localhost", f"{addr[node]} {host}", *(f"{addr[n]} {n}" for n in nodes if n != node)]
            files[node] = directory / f"hosts-{node}"
            files[node].write_text(f"{addr[node]} {node}\n" + "\n".join(lines) + "\n")
        yield NodeNetworks(host_addr=str(hosts[0]), namespace=namespace, addr=addr, hosts=files)
    finally:
        for kind, name in reversed(made):
            _run("netns" if kind == "netns" else "link", "delete", name)
