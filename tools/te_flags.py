#!/usr/bin/env python3
"""The flags a compiled pretrain spec passes to pretrain_gpt.py, one line, run-root paths filled in:
what tools/te_device.sh runs rank by rank under --fake-process-group.

    python tools/te_flags.py SPEC OUT_FILE
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from compiler.one_pass import compile_spec  # noqa: E402


def main(spec: str, out: str) -> int:
    result = compile_spec(spec, spec, render_files=False)
    if not result.ok or result.facts.flags is None:
        print(f"{spec}: does not compile to pretrain flags", file=sys.stderr)
        return 1
    words: list[str] = []
    for flag in result.facts.flags:
        values = [f"{result.facts.run_root}/{v}" for v in flag.values] if flag.run_root_relative else list(flag.values)
        words += [flag.name, *values]
    Path(out).write_text(shlex.join(words) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
