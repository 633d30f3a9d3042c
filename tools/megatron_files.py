#!/usr/bin/env python3
"""Write the Python files of Megatron-LM at the pinned commit, one path a line, as a data file.

Usage (the run that wrote the committed file):

    python tools/megatron_files.py /work/ext/megatron-lm -o compiler/megatron/data/megatron_files.txt

MEGATRON_LM_DIR is a checkout (or an exported copy) of the commit that compiler/schema/defaults.py
pins; with --git-dir the list is `git ls-tree` of that commit instead of a walk of the directory.
A `training.script` that is not one of these files of Megatron-LM at `megatron.commit` is a located
error (compiler/megatron/scripts.py): a Pai-Megatron-Patch entry point, a removed script or a typo
would otherwise compile clean and fail on the GPUs. tests/test_scripts.py regenerates the list and
compares it with the committed one where a checkout exists (MEGATRON_LM_DIR, or /work/ext/megatron-lm).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.megatron import PINNED_COMMIT  # noqa: E402

SKIP_DIRS = {".git", "__pycache__"}


def listed(root: Path, git_dir: str | None) -> list[str]:
    """The .py files of the checkout (or of the pinned commit in git_dir), sorted."""
    if git_dir:
        out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", PINNED_COMMIT],
                             check=True, capture_output=True, text=True).stdout
        return sorted(line for line in out.splitlines() if line.endswith(".py"))
    files = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            if name.endswith(".py"):
                files.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(files)


def render(files: list[str]) -> str:
    """The data file's text: a header naming the commit, then one path a line."""
    header = (f"# The Python files of Megatron-LM at {PINNED_COMMIT}, written by tools/megatron_files.py;\n"
              "# a training.script under megatron.root must be one of them (compiler/megatron/scripts.py).\n")
    return header + "".join(f"{path}\n" for path in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("megatron_dir", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--git-dir")
    args = parser.parse_args(argv)
    args.output.write_text(render(listed(args.megatron_dir, args.git_dir)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
