"""The batch's worker processes (compiler/batch.py worker_pool) never outlive the compiler.

Ctrl-C can reach the compiler between a worker's fork and the pool's record of it; no one then
terminates that worker, and it waits for tasks forever with the compiler's stdout and stderr open.
Here the parent leaves without terminating its pool (os._exit skips the atexit hook that terminates
a pool's daemon workers; SIGKILL skips everything), the state such a worker is in: each worker must
be gone within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GONE_WITHIN_S = 10.0

# The state of such a worker, made on purpose: each worker takes a task that blocks on a lock the
# parent holds (inherited through the fork, as the pool's own queue lock is), records its pid, and
# the parent leaves still holding the lock. Nothing but the parent's death can end these workers.
PARENT = '''
import multiprocessing, os, signal, time
from compiler.batch import worker_pool

LOCK = multiprocessing.get_context("fork").Lock()


def block(_):
    with open(os.path.join({dir!r}, "worker-%d" % os.getpid()), "w"):
        pass
    LOCK.acquire()


if __name__ == "__main__":
    LOCK.acquire()
    pool = worker_pool(2)
    pool.map_async(block, [0, 1], chunksize=1)
    deadline = time.monotonic() + 60
    while len([n for n in os.listdir({dir!r}) if n.startswith("worker-")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    {leave}
'''


def _alive(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="the batch forks workers on Linux only")
@pytest.mark.parametrize("leave", ["os._exit(130)", "os.kill(os.getpid(), signal.SIGKILL)"])
def test_pool_workers_die_with_a_parent_that_leaves_without_terminating_them(tmp_path: Path, leave: str):
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(dir=str(tmp_path), leave=leave))
    # No pipes: a worker that survived would hold them open.
    parent = subprocess.run([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=120, check=False)
    pids = sorted(int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*"))
    assert len(pids) == 2, f"{len(pids)} of 2 workers started (the parent's exit status: {parent.returncode})"
    deadline = time.monotonic() + GONE_WITHIN_S
    try:
        while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive, f"pool workers {alive} outlived their parent by {GONE_WITHIN_S:.0f} s"
    finally:
        for pid in pids:  # a survivor, checked by its command line (not a reused pid)
            if _alive(pid) and str(script) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.kill(pid, signal.SIGKILL)
