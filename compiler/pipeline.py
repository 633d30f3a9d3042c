"""The one pass: load -> check -> plan -> render, with plain data between the stages; and the batch.

`compile_spec` runs the stages for one spec. `run_batch` does so for many specs and acts on each
(write, check, or keep the plan to explain): one spec's artifacts are in memory at a time, a large
batch is spread over the CPUs, and outcomes come back in spec order.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator, NamedTuple

from .check.facts import Facts
from .check.pins import check_pins
from .check.validate import check
from .diagnostics import Diagnostic, Severity, make_error, summary_line
from .emit import check_outputs, write_outputs
from .load.attachments import hf_config
from .load.compose import Override, compose
from .load.discover import bases_of, display_path, find_specs, recorded_path, repository_root
from .plan.build import TOOL, build_plan
from .plan.types import Plan
from .render.render import render


class CompileResult(NamedTuple):
    spec_file: str  # as diagnostics and headers print it
    diagnostics: list[Diagnostic]
    spec: Any = None  # the validated spec (schema.records.JobSpec)
    plan: Plan | None = None
    files: dict[str, str] | None = None  # artifact name -> text; None on errors or when not rendered
    bases: tuple[str, ...] = ()  # real paths of the base specs it extends
    facts: Facts | None = None

    @property
    def ok(self) -> bool:
        return self.plan is not None


def _expects_string(path: tuple[str | int, ...]) -> bool:
    """Whether the spec field at `path` takes a string (typed --set values). The pydantic models
    are imported only for a compile with --set."""
    from .schema.models import annotation_at

    return annotation_at(path) is str


def compile_spec(path: str, display: str, *, overrides: tuple[Override, ...] = (), render_files: bool = True,
                 recorded: str | None = None, regenerate: str | None = None, require_lock: bool = False) -> CompileResult:
    """Compile one spec file (with its bases and --set overrides); plan and render run only when
    checking found no errors."""
    composed = compose(path, display, overrides, _expects_string)
    bases = tuple(composed.bases)
    diags = composed.diagnostics
    if composed.doc is None:
        return CompileResult(display, diags, bases=bases)
    config, config_diags = hf_config(composed.doc, path)
    diags = diags + config_diags
    checked = check(composed.doc, config)
    diags = diags + checked.diagnostics
    if checked.spec is None or any(d.is_error for d in diags):
        return CompileResult(display, diags, bases=bases, facts=checked.facts)
    lock, pin_diags = check_pins(composed.doc, checked.spec, path, display, require=require_lock)
    if pin_diags:
        return CompileResult(display, diags + pin_diags, bases=bases, facts=checked.facts)
    plan = build_plan(checked.spec, checked.facts, recorded or display, regenerate, lock)
    files = render(plan) if render_files else None
    return CompileResult(display, diags, checked.spec, plan, files, bases, checked.facts)


class Options(NamedTuple):
    """What a batch does with each spec."""

    out_dir: str = "generated"
    overrides: tuple[Override, ...] = ()
    check: bool = False  # compare with the files on disk instead of writing
    explain: bool = False  # keep the plan for --explain
    print_spec: bool = False  # keep the resolved spec for --print
    force: bool = False
    require_lock: bool = False  # a spec without a lock is an error (CI)
    werror: bool = False
    quiet: bool = False


class Outcome(NamedTuple):
    """What handling one spec produced, for the caller to print in spec order."""

    spec_file: str
    diagnostics: list[Diagnostic]
    summary: str | None
    note: str  # a line for stderr: written, up to date
    failed: bool = False
    stale: bool = False  # --check found differences (reported as diagnostics)
    diffs: str = ""  # unified diffs of stale files, for text output
    plan: Plan | None = None
    spec: Any = None


def regenerate_command(path: str, options: Options) -> tuple[str, str]:
    """(the spec as headers record it, the command that reproduces its artifacts from the
    repository root: the output directory and every --set included)."""
    import shlex

    root = repository_root(path)
    recorded = recorded_path(path, root)
    words = [TOOL, recorded]
    # An output directory inside the repository is named relative to its root; one outside it
    # cannot be named without a machine's path, which no artifact holds: the header leaves it out.
    absolute = os.path.realpath(options.out_dir)
    if root is not None and (absolute == root or absolute.startswith(root + "/")):
        out_dir = os.path.relpath(absolute, root)
        if out_dir != "generated":
            words += ["-o", out_dir]
    for override in options.overrides:
        words += ["--set", override.raw]
    return recorded, " ".join(shlex.quote(w) for w in words)


def process(path: str, conflict_with: str | None, options: Options) -> Outcome:
    """Compile one spec and act on it; its artifacts are dropped after."""
    display = display_path(path)
    recorded, regenerate = regenerate_command(path, options)
    writes = not (options.check or options.explain or options.print_spec)
    result = compile_spec(path, display, overrides=options.overrides, render_files=options.check or writes,
                          recorded=recorded, regenerate=regenerate, require_lock=options.require_lock)
    diags = result.diagnostics
    if options.werror:
        diags = [d._replace(severity=Severity.ERROR) if d.severity is Severity.WARNING else d for d in diags]
    stem = os.path.splitext(os.path.basename(path))[0]
    directory = os.path.join(options.out_dir, stem)
    if result.ok and conflict_with is not None:
        diags = diags + [make_error(
            "output-conflict", f"{result.spec_file} and {conflict_with} would both write {directory}",
            file=result.spec_file, hint="rename one of the specs",
        )]
    if any(d.is_error for d in diags) or not result.ok:
        return Outcome(result.spec_file, diags, summary_line(diags, result.spec_file), "", failed=True)
    kept: dict[str, Any] = {"plan": result.plan if options.explain else None, "spec": result.spec if options.print_spec else None}
    from pathlib import Path

    if options.check:
        assert result.files is not None
        checked = check_outputs(Path(directory), result.files, spec_file=result.spec_file, regenerate=regenerate)
        diags = diags + checked.diagnostics
        note = "" if options.quiet or not checked.clean else f"{result.spec_file}: {directory}/ is up to date\n"
        return Outcome(result.spec_file, diags, summary_line(diags, result.spec_file), note,
                       stale=not checked.clean, diffs="".join(checked.diffs), **kept)
    if not writes:
        return Outcome(result.spec_file, diags, summary_line(diags, result.spec_file), "", **kept)
    assert result.files is not None
    emitted = write_outputs(Path(directory), result.files, force=options.force, spec_file=result.spec_file)
    diags = diags + emitted.diagnostics
    note = ""
    if not emitted.diagnostics and not options.quiet:
        if emitted.written or emitted.removed:
            note = (f"{result.spec_file}: {directory}/ ({len(emitted.written)} written, "
                    f"{len(emitted.unchanged)} unchanged, {len(emitted.removed)} removed)\n")
        else:
            note = f"{result.spec_file}: {directory}/ is up to date ({len(emitted.unchanged)} files)\n"
    return Outcome(result.spec_file, diags, summary_line(diags, result.spec_file), note,
                   failed=bool(emitted.diagnostics))


PARALLEL_MIN_SPECS = 32  # below this, starting worker processes costs more than it saves
_OPTIONS: list[Options] = []  # the batch's options, set before worker processes fork


def _process_item(item: tuple[str, str | None]) -> Outcome:
    return process(item[0], item[1], _OPTIONS[0])


def _outcomes(items: list[tuple[str, str | None]], options: Options) -> Iterator[Outcome]:
    """process over the specs in order: in this process, or with one forked worker per CPU (the
    modules and validators already loaded are shared); results come back in spec order."""
    workers = min(os.cpu_count() or 1, 8)
    parallel = not (options.explain or options.print_spec)
    if not parallel or workers < 2 or len(items) < PARALLEL_MIN_SPECS or sys.platform != "linux":
        for path, conflict in items:
            yield process(path, conflict, options)
        return
    import multiprocessing  # not for a single spec: importing it costs more than compiling one

    import signal

    _OPTIONS[:] = [options]
    # workers ignore Ctrl-C: the parent alone handles it, cleans up and reports, without a
    # traceback from every worker
    with multiprocessing.get_context("fork").Pool(workers, initializer=signal.signal,
                                                  initargs=(signal.SIGINT, signal.SIG_IGN)) as pool:
        yield from pool.imap(_process_item, items, chunksize=max(1, len(items) // (workers * 8)))


def run_batch(arguments: list[str], options: Options) -> tuple[list[Diagnostic], Iterator[Outcome]]:
    """Find the specs named by the arguments; the diagnostics of the search, and each spec's outcome."""
    specs, missing, explicit = find_specs(arguments)
    diagnostics = [make_error("file-unreadable", "no such spec file, directory or glob match", file=m) for m in missing]
    if not specs and not missing:
        diagnostics.append(make_error("no-specs", "no *.yaml or *.yml spec found", file=" ".join(arguments)))
    bases = bases_of(specs)
    specs = [p for p in specs if p in explicit or os.path.realpath(p) not in bases]
    owners: dict[str, str] = {}
    items: list[tuple[str, str | None]] = []
    for path in specs:
        stem = os.path.splitext(os.path.basename(path))[0]
        items.append((path, owners.get(stem)))
        owners.setdefault(stem, display_path(path))
    return diagnostics, _outcomes(items, options)
