"""`megatron-compile import SCRIPT`: an existing Megatron-LM launch script -> a spec.

import_record.py runs the script under bash against recording stubs; import_map.py maps the recorded
flags to typed fields and reports what was not mapped one to one; this module writes the spec (the
report as comments at its top) and is the command line.
"""

from __future__ import annotations

import argparse
import os
import math
import re
from pathlib import Path
from typing import TextIO

import yaml

from ..load.discover import recorded_path
from .compile import check_written, refuses_overwrite, relative_to_spec
from .import_map import ImportResult, _ordered, to_spec
from .seed import SEED_BASE
from .import_record import ImportFailed, Recorded, flag_groups, record_script

__all__ = ["ImportFailed", "ImportResult", "Recorded", "flag_groups", "import_script", "main", "record_script",
           "render_spec", "to_spec"]


def render_spec(result: ImportResult, source: str, extends: str | None) -> str:
    """The spec file: schema line, provenance, the report as comments, then the YAML."""
    data = dict(result.data)
    if extends is not None:
        data.pop("version", None)
        data = {"extends": extends, **data}
    else:
        data = {**{k: v for k, v in data.items() if k in ("version", "name")}, **SEED_BASE,
                **{k: v for k, v in data.items() if k not in ("version", "name")}}
    lines = ["# yaml-language-server: $schema=../schemas/megatron-job.schema.json",
             f"# Imported by `megatron-compile import` from {source}."]
    if extends is None:
        lines.append("# image, megatron and storage are the seed's defaults: review them, or extend a base spec.")
    if result.report:
        lines.append("# Not mapped one to one (review each):")
        lines += [f"#   - {line}" for line in result.report]
    body = yaml.safe_dump(_ordered(data), sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body


def import_script(script: Path, name: str, positional: list[str] | None = None,
                  env: dict[str, str] | None = None, cwd: str | None = None, timeout: float = 30) -> ImportResult:
    """Record and map a launch script."""
    return to_spec(record_script(script, positional or [], env, timeout=timeout, cwd=cwd), name)


# --timeout's most: an hour is more than any launch script takes to reach its launcher under the stubs
MAX_TIMEOUT_S = 3600.0


def _timeout(text: str) -> float:
    """--timeout: seconds, finite, above 0 and at most MAX_TIMEOUT_S (nan, inf, 1e400, 0 or -1 is a usage error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text[:40]} is not a number of seconds above 0 and at most "
                                         f"{MAX_TIMEOUT_S:g}")
    return value


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile import SCRIPT -o specs/NAME.yaml [--extends BASE] [-- SCRIPT-ARGS…]`."""
    parser = argparse.ArgumentParser(
        prog="megatron-compile import",
        description="Turn an existing Megatron-LM launch script into a spec: bash runs the script against "
        "recording stubs, recognised flags become typed fields, the rest goes to training.args, and what is "
        "not mapped one to one is reported and written as comments.")
    parser.add_argument("script")
    parser.add_argument("-o", "--output", required=True, metavar="SPEC", help="the spec file to write")
    parser.add_argument("--name", help="the run name (default: the output file's stem)")
    parser.add_argument("--extends", metavar="BASE",
                        help="extend this base spec (default: base.yaml beside the output, when it exists)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable the script reads (repeatable)")
    parser.add_argument("--cwd", metavar="DIR",
                        help="where the script runs: relative, a directory inside a placeholder Megatron-LM root "
                        "(default: that root, holding its entry points); absolute, a real directory")
    parser.add_argument("--timeout", type=_timeout, default=30, metavar="SECONDS",
                        help=f"stop a script still running after this long (default 30, at most {MAX_TIMEOUT_S:g})")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.epilog = "Positional parameters for the script follow `--`: import run.sh -o specs/x.yaml -- /ckpt /data"
    script_args: list[str] = []
    if "--" in argv:
        argv, script_args = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    target = Path(args.output)
    if not Path(args.script).is_file():  # bash would say so in its stderr, under a message about torchrun
        what = "not a regular file" if os.path.lexists(args.script) else "no such file"
        err.write(f"{args.script}: cannot import: {what}\n")
        return 1
    if refuses_overwrite(target, args.force, err):
        return 1
    name = args.name or re.sub(r"[^a-z0-9-]+", "-", target.stem.lower()).strip("-")[:63] or "imported"
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    try:
        result = import_script(Path(args.script), name, script_args, env, args.cwd, args.timeout)
    except (ImportFailed, OSError) as exc:
        err.write(f"{args.script}: cannot import: {exc}\n")
        return 1
    extends = args.extends
    if extends is None and (target.parent / "base.yaml").is_file() and target.name != "base.yaml":
        extends = "base.yaml"
    elif extends is not None:
        extends = relative_to_spec(extends, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_spec(result, recorded_path(args.script), extends), encoding="utf-8")
    err.write(f"wrote {target}\n")
    for line in result.report:
        err.write(f"  not mapped one to one: {line}\n")
    return check_written(target, "text", out, err)
