"""The same spec gives the same bytes whatever the hash seed, time zone, locale and directory."""

import hashlib
import os
import subprocess
import sys

from helpers import REPO

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8"},
    {"PYTHONHASHSEED": "12345", "TZ": "Asia/Shanghai", "LC_ALL": "C"},
    {"PYTHONHASHSEED": "random", "TZ": "America/Los_Angeles", "LANG": "en_US.UTF-8"},
]


def _digest(directory):
    h = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def test_output_bytes_do_not_depend_on_the_environment(tmp_path):
    digests = set()
    for index, extra in enumerate(ENVIRONMENTS):
        cwd = REPO if index == 0 else tmp_path  # a different working directory, spec given absolutely
        spec_arg = "specs" if index == 0 else str(REPO / "specs")
        out = tmp_path / f"out{index}"
        env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "TZ", "PYTHONHASHSEED")}
        env.update(extra)
        env["PYTHONPATH"] = str(REPO)
        proc = subprocess.run([sys.executable, "-m", "compiler", spec_arg, "-o", str(out)], cwd=cwd, env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        digests.add(_digest(out))
        for path in out.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert b"\r" not in data and data.endswith(b"\n") and not data.endswith(b"\n\n"), path
                assert str(tmp_path).encode() not in data, f"{path} holds a path of the compiling machine"
                assert str(REPO).encode() not in data, f"{path} holds a path of the compiling machine"
    assert len(digests) == 1
