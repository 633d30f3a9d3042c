"""The command line: argv -> exit code (0 ok, 1 diagnostics or stale artifacts, 2 usage).

It only parses options and hands over to a command (commands/); the heavy imports (pydantic,
jinja2, yaml) happen after argument parsing, so --help and --version stay fast.
"""

from __future__ import annotations

import argparse
import gc
import sys

from . import __version__
from importlib import import_module
import os

TYPE_CHECKING = False  # `typing` itself is not imported: --help and --version stay light
if TYPE_CHECKING:
    from typing import TextIO

# subcommand -> its module in commands/
SUBCOMMANDS = {"schema": "schema", "import": "importer", "init": "scaffold", "lock": "lock", "size": "size",
               "doctor": "doctor", "diff": "diff", "calibrate": "calibrate"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megatron-compile",
        description="Compile Megatron training job specs into a Dockerfile, build scripts, an AIStudio job "
        "and its launch command.",
        epilog="Subcommands: `megatron-compile init NAME …` writes a new spec; `megatron-compile import SCRIPT "
        "-o SPEC` turns a launch script into one; `megatron-compile lock SPEC…` pins the base image's digest; "
        "`megatron-compile size SPEC` ranks the layouts that fit; `megatron-compile doctor SPEC [RUN_ROOT]` says why "
        "a run failed; `megatron-compile calibrate SPEC LOG...` gives a cluster's host time factor from runs' logs; "
        "`megatron-compile diff [--base REF] [SPEC…]` says what a change does to each job; "
        "`megatron-compile schema [--check]` writes or checks schemas/*.json. Each takes --help.",
    )
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="spec files, directories of specs, or globs")
    parser.add_argument("-o", "--out-dir", default="generated", metavar="DIR",
                        help="output root; each spec writes DIR/<spec stem>/ (default: generated)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when the artifacts on disk are not what the specs give")
    parser.add_argument("--explain", action="store_true",
                        help="validate and print what each spec resolves to (world size, parallel groups, paths); write nothing")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a spec value, e.g. --set parallelism.tensor=4 (typed like the spec)")
    parser.add_argument("--print", action="store_true", dest="print_spec",
                        help="print each fully resolved spec (extends and --set applied, defaults filled) as YAML")
    parser.add_argument("--force", action="store_true", help="overwrite output files that megatron-compile did not generate")
    parser.add_argument("--require-lock", action="store_true",
                        help="fail for a spec without a lock (specs/NAME.lock from `megatron-compile lock`)")
    parser.add_argument("--format", choices=("text", "json", "github"), default="text",
                        help="how diagnostics are printed (json also applies to --explain)")
    parser.add_argument("--werror", action="store_true", help="treat warnings as errors")
    # Deprecated no-op: results were kept between runs until 0.1.0's cache was removed; CI lines and
    # hooks that pass it keep working, with a note on stderr, until it is dropped.
    parser.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics and differences")
    parser.add_argument("--version", action="version", version=f"megatron-compile {__version__}")
    return parser


def _dispatch(argv: list[str], out: TextIO, err: TextIO) -> int:
    if argv and argv[0] in SUBCOMMANDS:  # each subcommand's module is imported only for it

        command = import_module(f"{__package__}.commands.{SUBCOMMANDS[argv[0]]}")
        code: int = command.main(argv[1:], out, err)
        return code
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 0 for --help/--version and 2 for usage errors
        return int(exc.code or 0)
    from .commands import compile as compile_command  # deferred: --help, --version and the subcommands do not load the compile path

    return compile_command.run(args, out, err)


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """One run of the command line (argv, or sys.argv's); returns the exit code. console() is the
    process's entry."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    # The cyclic garbage collector stays off during a run: what it would walk, some 60 times in a
    # compile, is the imports, the validator and the compiled templates, which live until the process
    # ends, and a compile leaves no cycles behind (docs/performance.md: about 5 ms of a compile). A
    # batch turns it back on in its forked workers (batch.py); reference counting frees the rest.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _dispatch(argv, out, err)
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # the reader went away (`megatron-compile --print specs/ | head -1`): stop quietly, as cat does

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    finally:
        if collecting:  # main() called in a longer-lived process (the tests): leave it as it was
            gc.enable()


def console() -> int:
    """The process's entry (the console script, `python -m compiler`): main(), then every object out
    of the collector's sight (gc.freeze) as the process ends. The interpreter's last full collection
    at exit would walk all of them (the imports, the validator, the compiled templates) to free
    nothing: 20 to 60 ms of a compile on this machine (docs/performance.md)."""
    code = main()
    gc.freeze()
    return code
