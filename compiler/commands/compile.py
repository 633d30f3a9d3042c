"""The default command: compile specs, write or --check their artifacts, --explain or --print them."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, TextIO

from ..diagnostics import Diagnostic, format_github, format_json, format_text, sort_diagnostics, summary_line, to_json_obj
from ..load.override import Override
from ..batch import Options, run_batch
from ..one_pass import compile_spec
from ..text import shown

EXIT_OK, EXIT_FAIL = 0, 1


def print_diagnostics(diags: list[Diagnostic], fmt: str, out: TextIO) -> None:
    """Diagnostics in the chosen format."""
    out.write(format_json(diags) if fmt == "json" else format_github(diags) if fmt == "github" else format_text(diags))


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Compile each spec and act on it, printing in spec order; the exit code."""
    options = Options(out_dir=args.out_dir, overrides=tuple(Override(raw) for raw in args.overrides),
                      check=args.check, explain=args.explain, print_spec=args.print_spec, force=args.force,
                      require_lock=args.require_lock,
                      werror=args.werror, quiet=args.quiet)
    if args.no_cache:
        err.write("megatron-compile: --no-cache is deprecated and does nothing: no result is kept between runs\n")
    diagnostics, outcomes = run_batch(args.specs, options)
    summaries: list[str] = []
    plans = []
    printed: list[dict[str, Any]] = []  # --print --format json: one document of every spec
    failed, stale = bool(diagnostics), False
    for outcome in outcomes:
        diagnostics.extend(outcome.diagnostics)
        if outcome.summary:
            summaries.append(outcome.summary)
        if outcome.diffs and args.format == "text":
            out.write(outcome.diffs)
        if outcome.spec is not None and args.format == "json":
            from .resolved import resolved_json  # deferred: the spec's printer, only for --print

            printed.append(resolved_json(outcome.spec, outcome.spec_file))
        elif outcome.spec is not None:
            from .resolved import resolved_yaml  # deferred: YAML's dumper, only for --print

            out.write(resolved_yaml(outcome.spec, outcome.spec_file))
        if outcome.plan is not None:
            plans.append(outcome.plan)
        err.write(outcome.note)
        failed |= outcome.failed
        stale |= outcome.stale
    diagnostics = sort_diagnostics(diagnostics)
    if args.explain:
        from .explain import explain_json, explain_text  # deferred: the plan's readers, only for --explain
    if args.print_spec and args.format == "json" and not args.explain:
        # one JSON document on stdout, the resolved specs and the diagnostics, as --explain prints
        out.write(json.dumps({"specs": printed, "diagnostics": [to_json_obj(d) for d in diagnostics]},
                             indent=2, ensure_ascii=False) + "\n")
    elif args.explain and args.format == "json":
        # one document on stdout, of one shape, whether or not anything failed
        out.write(explain_json(plans, [to_json_obj(d) for d in diagnostics]))
    else:
        print_diagnostics(diagnostics, args.format, err if plans or args.print_spec else out)
        if plans:
            out.write("".join(explain_text(p) for p in plans))
    if args.format == "text":
        for line in summaries:
            err.write(line + "\n")
    if failed or any(d.is_error for d in diagnostics):
        if stale:
            err.write("artifacts are stale: run megatron-compile on the specs above and commit the result\n")
        return EXIT_FAIL
    return EXIT_OK


def check_written(path: Path, fmt: str, out: TextIO, err: TextIO) -> int:
    """Compile a spec just written (in memory) and print its diagnostics; the exit code."""
    result = compile_spec(str(path), str(path), render_files=False)
    diags = sort_diagnostics(result.diagnostics)
    print_diagnostics(diags, fmt, out)
    line = summary_line(diags, shown(result.spec_file))
    if line:
        err.write(line + "\n")
    return EXIT_OK if result.ok else EXIT_FAIL


def relative_to_spec(base: str, spec: "Path") -> str:
    """An `extends` path as written in the spec: relative to the spec's directory."""
    return os.path.relpath(os.path.abspath(base), os.path.abspath(spec.parent or "."))


def refuses_overwrite(target: "Path", force: bool, err: TextIO) -> bool:
    """True (after saying so) when a new spec would replace an existing file without --force."""
    if target.exists() and not force:
        err.write(f"{target} exists: not overwriting it (--force replaces it)\n")
        return True
    return False
