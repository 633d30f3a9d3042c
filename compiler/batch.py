"""The batch: find the specs, run the one pass over each (one_pass.py), then act on it (write,
check, or keep the plan to explain).

One spec's artifacts are in memory at a time, a large batch is spread over the CPUs, and outcomes
come back in spec order. Every spec is compiled, every time: nothing is kept between runs.
"""

from __future__ import annotations

import gc
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Iterator

from .tuples import NamedTuple
from . import TOOL
from .diagnostics import Diagnostic, Severity, make_error, summary_line
from .emit import check_outputs, staging_by_name, write_outputs
from .load.discover import bases_of, display_path, find_specs, recorded_path, repository_root
from .load.override import Override
from .plan.types import Plan
from .schema.records import JobSpec
from .one_pass import CompileResult, compile_spec
from .text import shown


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
    # the output directory's staging entries by spec name, listed once by the batch before its
    # first spec (emit.staging_by_name); None: each spec's write lists the directory itself
    staging: dict[str, tuple[str, ...]] | None = None


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
    spec: JobSpec | None = None


def regenerate_command(path: str, options: Options) -> tuple[str, str]:
    """(the spec as headers record it, the command that reproduces its artifacts from the
    repository root: the output directory and every --set included)."""
    root = repository_root(path)
    recorded = recorded_path(path, root, searched=True)
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


def hint_command(display: str, options: Options) -> str:
    """The command that rewrites a spec's artifacts, as the user runs it here (the spec as given,
    -o when it is not the default, every --set): what a --check diagnostic tells them to run."""
    words = [TOOL, display] + (["-o", options.out_dir] if os.path.normpath(options.out_dir) != "generated" else [])
    for override in options.overrides:
        words += ["--set", override.raw]
    return " ".join(shlex.quote(w) for w in words)


def process(path: str, conflict_with: str | None, options: Options) -> Outcome:
    """Compile one spec and act on it; its artifacts are dropped after."""
    display = display_path(path)
    where = shown(display)  # the summary line's name, undecodable bytes escaped
    recorded, regenerate = regenerate_command(path, options)
    writes = not (options.check or options.explain or options.print_spec)
    result: CompileResult = compile_spec(path, display, overrides=options.overrides,
                                         render_files=options.check or writes, recorded=recorded,
                                         regenerate=regenerate, require_lock=options.require_lock)
    diags = _promoted(result.diagnostics, options)
    stem = os.path.splitext(os.path.basename(path))[0]
    directory = os.path.join(options.out_dir, stem)
    if result.ok and conflict_with is not None:
        diags = diags + [make_error(
            "output-conflict", f"{display} and {conflict_with} would both write {directory}",
            file=display, hint="rename one of the specs",
        )]
    if any(d.is_error for d in diags) or not result.ok:
        return Outcome(display, diags, summary_line(diags, where), "", failed=True)
    kept: dict[str, Any] = {"plan": result.plan if options.explain else None, "spec": result.spec if options.print_spec else None}
    if options.check:
        assert result.files is not None
        checked = check_outputs(Path(directory), result.files, spec_file=display,
                                regenerate=hint_command(display, options))
        diags = diags + checked.diagnostics
        note = "" if options.quiet or not checked.clean else f"{display}: {directory}/ is up to date\n"
        return Outcome(display, diags, summary_line(diags, where), note,
                       stale=not checked.clean, diffs="".join(checked.diffs), **kept)
    if not writes:
        return Outcome(display, diags, summary_line(diags, where), "", **kept)
    assert result.files is not None
    staging = None if options.staging is None else options.staging.get(stem, ())
    emitted = write_outputs(Path(directory), result.files, force=options.force, spec_file=display, staging=staging)
    diags = diags + emitted.diagnostics + _promoted(emitted.warnings(display), options)
    note = ""
    if not emitted.diagnostics and not options.quiet:
        if emitted.written or emitted.removed:
            note = (f"{display}: {directory}/ ({len(emitted.written)} written, "
                    f"{len(emitted.unchanged)} unchanged, {len(emitted.removed)} removed)\n")
        else:
            note = f"{display}: {directory}/ is up to date ({len(emitted.unchanged)} files)\n"
    return Outcome(display, diags, summary_line(diags, where), note, failed=bool(emitted.diagnostics))


PARALLEL_MIN_SPECS = 32  # below this, starting worker processes costs more than it saves
_OPTIONS: list[Options] = []  # the batch's options, set before worker processes fork


def _process_item(item: tuple[str, str | None]) -> Outcome:
    return process(item[0], item[1], _OPTIONS[0])


def _outcomes(items: list[tuple[str, str | None]], options: Options) -> Iterator[Outcome]:
    """process over the specs in order: in this process, or with one forked worker per CPU (the
    modules and validators already loaded are shared); results come back in spec order."""
    if not (options.check or options.explain or options.print_spec):
        # one listing of the output directory for the batch: a listing per spec read every
        # spec's entry, for each spec
        options = options._replace(staging=staging_by_name(Path(options.out_dir)))
    workers = min(os.cpu_count() or 1, 8)
    parallel = not (options.explain or options.print_spec)
    if not parallel or workers < 2 or len(items) < PARALLEL_MIN_SPECS or sys.platform != "linux":
        for path, conflict in items:
            yield process(path, conflict, options)
        return
    # The first spec here: what compiling it loads (the validator, the templates) is loaded before
    # the fork and shared by every worker.
    path, conflict = items[0]
    yield process(path, conflict, options)
    items = items[1:]
    _OPTIONS[:] = [options]
    # what the first spec loaded is shared by the workers and lives until the end: out of the
    # collector's sight (gc.freeze, before the fork, as its documentation advises), and each worker
    # collects its own garbage again (_init_worker; cli.main turned the collector off)
    gc.freeze()
    try:
        with worker_pool(workers) as pool:
            yield from pool.imap(_process_item, items, chunksize=max(1, len(items) // (workers * 8)))
    finally:
        gc.unfreeze()


PR_SET_PDEATHSIG = 1  # prctl(2), <linux/prctl.h>


def _init_worker(parent: int) -> None:
    """A forked worker's first steps: ignore Ctrl-C, and die with the process that forked it."""
    import signal  # deferred: only a forked worker needs it

    # The parent alone handles Ctrl-C: it cleans up and reports, without a traceback from every worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.enable()  # the parent compiled its first spec without the collector (cli.main)
    # Ctrl-C can reach the parent between a worker's fork and the pool's record of it (Pool.__init__
    # catches Exception, not KeyboardInterrupt; Process.start records the child after the fork). No
    # one then terminates that worker: it would wait for tasks forever, holding the parent's stdout
    # and stderr open. So the kernel kills it when the parent goes, however the parent goes.
    import ctypes  # deferred: only a forked worker needs it

    # A kernel that refuses (a seccomp filter) leaves the worker as it was: exiting would only make
    # the pool fork another.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the parent went before the death signal was set: nothing will send it


def worker_pool(workers: int) -> Any:
    """A pool of `workers` forked processes (Linux) that ignore Ctrl-C and die with this process."""
    import multiprocessing  # deferred: not for a batch under PARALLEL_MIN_SPECS, importing it costs more than a compile

    return multiprocessing.get_context("fork").Pool(workers, initializer=_init_worker, initargs=(os.getpid(),))


def _promoted(diags: list[Diagnostic], options: Options) -> list[Diagnostic]:
    """The diagnostics, each warning an error under --werror."""
    if not options.werror:
        return diags
    return [d._replace(severity=Severity.ERROR) if d.severity is Severity.WARNING else d for d in diags]


def run_batch(arguments: list[str], options: Options) -> tuple[list[Diagnostic], Iterator[Outcome]]:
    """Find the specs named by the arguments; the diagnostics of the search, and each spec's outcome."""
    specs, missing, explicit = find_specs(arguments)
    diagnostics = [make_error("file-unreadable", "no such spec file, directory or glob match", file=m) if m else
                   make_error("file-unreadable", "an empty argument names no spec", file="''",
                              hint="name a spec file (.yaml), a directory of them or a glob")
                   for m in missing]
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
