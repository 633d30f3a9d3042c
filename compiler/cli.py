"""The command line: argv -> exit code (0 ok, 1 diagnostics or stale artifacts, 2 usage).

It only translates options, finds the specs, calls the pipeline and prints. The heavy imports
(pydantic, jinja2, yaml) happen after argument parsing, so --help and --version stay fast.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path
from typing import TextIO

from . import __version__

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SPEC_SUFFIXES = (".yaml", ".yml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megatron-compile",
        description="Compile Megatron training job specs into a Dockerfile, build scripts, an AIStudio job "
        "and its launch command.",
        epilog="Subcommands: `megatron-compile schema [--check]` writes or checks schemas/*.json.",
    )
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="spec files, directories of specs, or globs")
    parser.add_argument("-o", "--out-dir", default="generated", metavar="DIR",
                        help="output root; each spec writes DIR/<spec stem>/ (default: generated)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when the artifacts on disk are not what the specs give")
    parser.add_argument("--explain", action="store_true",
                        help="validate and print what each spec resolves to (world size, parallel groups, paths); write nothing")
    parser.add_argument("--force", action="store_true", help="overwrite output files that megatron-compile did not generate")
    parser.add_argument("--format", choices=("text", "json", "github"), default="text",
                        help="how diagnostics are printed (json also applies to --explain)")
    parser.add_argument("--werror", action="store_true", help="treat warnings as errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics and differences")
    parser.add_argument("--version", action="version", version=f"megatron-compile {__version__}")
    return parser


def display_path(path: str) -> str:
    """How a spec path is printed and recorded: relative to the working directory when below it,
    else its last two components, never a machine's absolute path."""
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return "/".join(absolute.parts[-2:])


def find_specs(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Expand files, directories (their *.yaml/*.yml, sorted) and globs; returns (specs, not found)."""
    found: list[str] = []
    missing: list[str] = []
    for arg in arguments:
        if any(ch in arg for ch in "*?[") and not os.path.exists(arg):
            matches = sorted(glob.glob(arg))
            if not matches:
                missing.append(arg)
            found.extend(m for m in matches if m.endswith(SPEC_SUFFIXES) or os.path.isdir(m))
        elif os.path.isdir(arg):
            found.extend(sorted(str(p) for p in Path(arg).iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file()))
        elif os.path.exists(arg):
            found.append(arg)
        else:
            missing.append(arg)
    expanded: list[str] = []
    for item in found:
        if os.path.isdir(item):
            expanded.extend(sorted(str(p) for p in Path(item).iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file()))
        else:
            expanded.append(item)
    unique = list(dict.fromkeys(expanded))
    return unique, missing


def _print_diagnostics(diags: list, fmt: str, out: TextIO) -> None:
    from .diagnostics import format_github, format_json, format_text

    if fmt == "json":
        out.write(format_json(diags))
    elif fmt == "github":
        out.write(format_github(diags))
    else:
        out.write(format_text(diags))


def run_schema(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile schema [--check] [--out-dir schemas]`."""
    parser = argparse.ArgumentParser(prog="megatron-compile schema",
                                     description="Write (or --check) the JSON Schemas generated from the models.")
    parser.add_argument("--out-dir", default="schemas")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    from .emit import check_outputs
    from .jsonschemas import schema_files

    files = schema_files()
    directory = Path(args.out_dir)
    if args.check:
        result = check_outputs(directory, files)
        for diff in result.diffs:
            out.write(diff)
        for path in result.missing:
            out.write(f"missing: {path}\n")
        if result.changed or result.missing:
            err.write("schemas are stale: run `megatron-compile schema`\n")
            return EXIT_FAIL
        return EXIT_OK
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
        out.write(f"wrote {directory / name}\n")
    return EXIT_OK


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv and argv[0] == "schema":
        return run_schema(argv[1:], out, err)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 0 for --help/--version and 2 for usage errors
        return int(exc.code or 0)
    try:
        return _compile(args, out, err)
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130


def _compile(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .diagnostics import Severity, make_error, sort_diagnostics, summary_line
    from .emit import check_outputs, write_outputs
    from .pipeline import compile_spec

    specs, missing = find_specs(args.specs)
    diagnostics = [make_error("file-unreadable", "no such spec file, directory or glob match", file=m) for m in missing]
    if not specs and not missing:
        diagnostics.append(make_error("no-specs", "no *.yaml or *.yml spec found", file=" ".join(args.specs)))
    results = [compile_spec(path, display_path(path)) for path in specs]
    out_root = Path(args.out_dir)
    owners: dict[str, str] = {}
    for result, path in zip(results, specs):
        stem = Path(path).stem
        if result.ok and stem in owners:
            diagnostics.append(make_error(
                "output-conflict", f"{result.spec_file} and {owners[stem]} would both write {out_root / stem}",
                file=result.spec_file, hint="rename one of the specs",
            ))
        owners.setdefault(stem, result.spec_file)

    failed = False
    for result in results:
        diags = result.diagnostics
        if args.werror:
            diags = [d if d.severity is not Severity.WARNING else
                     type(d)(**{**d.__dict__, "severity": Severity.ERROR}) for d in diags]
        diagnostics.extend(diags)
        if any(d.is_error for d in diags):
            failed = True

    check_failed = False
    explained = []
    if not any(d.is_error for d in diagnostics):
        for result, path in zip(results, specs):
            if not result.ok:
                continue
            directory = out_root / Path(path).stem
            if args.explain:
                explained.append(result.plan)
            elif args.check:
                check = check_outputs(directory, result.files)
                if not check.clean:
                    check_failed = True
                    for diff in check.diffs:
                        out.write(diff)
                    for p in check.missing:
                        out.write(f"missing: {p} (run `megatron-compile {result.spec_file}`)\n")
                    for p in check.extra:
                        out.write(f"extra: {p} (not produced by {result.spec_file})\n")
                elif not args.quiet:
                    err.write(f"{result.spec_file}: {directory}/ is up to date\n")
            else:
                emitted = write_outputs(directory, result.files, force=args.force, spec_file=result.spec_file)
                diagnostics.extend(emitted.diagnostics)
                if emitted.diagnostics:
                    failed = True
                elif not args.quiet:
                    err.write(
                        f"{result.spec_file}: {directory}/ ({len(emitted.written)} written, "
                        f"{len(emitted.unchanged)} unchanged, {len(emitted.removed)} removed)\n"
                    )

    diagnostics = sort_diagnostics(diagnostics)
    if diagnostics or not explained:  # --explain --format json keeps stdout one JSON document
        _print_diagnostics(diagnostics, args.format, err if explained else out)
    if args.format == "text":
        for result in results:
            line = summary_line([d for d in diagnostics if d.file == result.spec_file], result.spec_file)
            if line:
                err.write(line + "\n")
    if explained:
        from .explain import explain_json, explain_text

        if args.format == "json":
            out.write(explain_json(explained))
        else:
            out.write("".join(explain_text(p) for p in explained))
    if failed or any(d.is_error for d in diagnostics):
        return EXIT_FAIL
    if check_failed:
        err.write("artifacts are stale: run megatron-compile on the specs above and commit the result\n")
        return EXIT_FAIL
    return EXIT_OK
