"""The command line: argv -> exit code (0 ok, 1 diagnostics or stale artifacts, 2 usage).

It only translates options, finds the specs, calls the pipeline and prints. The heavy imports
(pydantic, jinja2, yaml) happen after argument parsing, so --help and --version stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__

TYPE_CHECKING = False  # `typing` itself is not imported: --help and --version stay light
if TYPE_CHECKING:
    from typing import TextIO

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SPEC_SUFFIXES = (".yaml", ".yml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megatron-compile",
        description="Compile Megatron training job specs into a Dockerfile, build scripts, an AIStudio job "
        "and its launch command.",
        epilog="Subcommands: `megatron-compile init NAME …` writes a new spec; `megatron-compile import SCRIPT "
        "-o SPEC` turns a launch script into one; `megatron-compile schema [--check]` writes or checks "
        "schemas/*.json. Each takes --help.",
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
    parser.add_argument("--format", choices=("text", "json", "github"), default="text",
                        help="how diagnostics are printed (json also applies to --explain)")
    parser.add_argument("--werror", action="store_true", help="treat warnings as errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics and differences")
    parser.add_argument("--version", action="version", version=f"megatron-compile {__version__}")
    return parser


def display_path(path: str) -> str:
    """How a spec path is printed and recorded: relative to the working directory when below it,
    else its last two components, never a machine's absolute path."""
    absolute = os.path.realpath(path)
    cwd = _real_cwd()
    prefix = cwd if cwd.endswith("/") else cwd + "/"
    if absolute.startswith(prefix):
        return absolute[len(prefix):]
    if absolute == cwd:
        return "."
    from pathlib import PurePosixPath

    return "/".join(PurePosixPath(absolute).parts[-2:])


_REAL_CWD: dict[str, str] = {}


def _real_cwd() -> str:
    cwd = os.getcwd()
    if cwd not in _REAL_CWD:
        _REAL_CWD[cwd] = os.path.realpath(cwd)
    return _REAL_CWD[cwd]


def _specs_in(directory: str) -> list[str]:
    from pathlib import Path

    return sorted(str(p) for p in Path(directory).iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())


def find_specs(arguments: list[str]) -> tuple[list[str], list[str], set[str]]:
    """Expand files, directories (their *.yaml/*.yml, sorted) and globs.

    Returns (specs, arguments that matched nothing, specs named explicitly). A spec found through a
    directory or glob that another spec extends is a base, not a job; one named explicitly is a job."""
    import glob
    from pathlib import Path

    found: list[str] = []
    missing: list[str] = []
    explicit: set[str] = set()
    for arg in arguments:
        if any(ch in arg for ch in "*?[") and not os.path.exists(arg):
            matches = sorted(glob.glob(arg))
            if not matches:
                missing.append(arg)
            for match in matches:
                if os.path.isdir(match):
                    found.extend(_specs_in(match))
                elif match.endswith(SPEC_SUFFIXES):
                    found.append(match)
        elif os.path.isdir(arg):
            found.extend(_specs_in(arg))
        elif os.path.exists(arg):
            found.append(arg)
            explicit.add(arg)
        else:
            missing.append(arg)
    return list(dict.fromkeys(found)), missing, explicit


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
    from pathlib import Path

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


def _check_written(path: Path, fmt: str, out: TextIO, err: TextIO) -> int:
    """Compile a spec just written (in memory) and print its diagnostics; the exit code."""
    from pathlib import Path

    from .diagnostics import sort_diagnostics, summary_line
    from .pipeline import compile_spec

    result = compile_spec(str(path), display_path(str(path)), render_files=False)
    diags = sort_diagnostics(result.diagnostics)
    _print_diagnostics(diags, fmt, out)
    line = summary_line(diags, result.spec_file)
    if line:
        err.write(line + "\n")
    return EXIT_OK if result.ok else EXIT_FAIL


def _relative_to_spec(base: str, spec: "Path") -> str:
    """An `extends` path as written in the spec: relative to the spec's directory."""
    return os.path.relpath(os.path.abspath(base), os.path.abspath(spec.parent or "."))


def _refuses_overwrite(target: "Path", force: bool, err: TextIO) -> bool:
    """True (after saying so) when a new spec would replace an existing file without --force."""
    if target.exists() and not force:
        err.write(f"{target} exists: not overwriting it (--force replaces it)\n")
        return True
    return False


def run_import(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile import SCRIPT -o specs/NAME.yaml [--extends BASE] [-- SCRIPT-ARGS…]`."""
    from pathlib import Path

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
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.epilog = "Positional parameters for the script follow `--`: import run.sh -o specs/x.yaml -- /ckpt /data"
    script_args: list[str] = []
    if "--" in argv:
        argv, script_args = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    import re

    from .importer import ImportFailed, import_script, render_spec

    target = Path(args.output)
    if _refuses_overwrite(target, args.force, err):
        return EXIT_FAIL
    name = args.name or re.sub(r"[^a-z0-9-]+", "-", target.stem.lower()).strip("-")[:63] or "imported"
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    try:
        result = import_script(Path(args.script), name, script_args, env)
    except (ImportFailed, OSError) as exc:
        err.write(f"{args.script}: cannot import: {exc}\n")
        return EXIT_FAIL
    extends = args.extends
    if extends is None and (target.parent / "base.yaml").is_file() and target.name != "base.yaml":
        extends = "base.yaml"
    elif extends is not None:
        extends = _relative_to_spec(extends, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_spec(result, display_path(args.script), extends), encoding="utf-8")
    err.write(f"wrote {target}\n")
    for line in result.report:
        err.write(f"  not mapped one to one: {line}\n")
    return _check_written(target, "text", out, err)


def run_init(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile init NAME [--workers N --gpus-per-worker G --tp T --pp P --cp C] [-o FILE]`."""
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="megatron-compile init",
                                     description="Write a commented spec that compiles as written.")
    parser.add_argument("name", help="the run name: lowercase letters, digits and '-'")
    parser.add_argument("-o", "--output", help="the spec file (default: specs/NAME.yaml)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--gpus-per-worker", type=int, default=8)
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallel")
    parser.add_argument("--cp", type=int, default=1, help="context parallel")
    parser.add_argument("--extends", metavar="BASE", help="extend a base spec instead of writing image/megatron/storage")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from .scaffold import scaffold

    target = Path(args.output or f"specs/{args.name}.yaml")
    if _refuses_overwrite(target, args.force, err):
        return EXIT_FAIL
    extends = _relative_to_spec(args.extends, target) if args.extends else None
    text = scaffold(args.name, workers=args.workers, gpus_per_worker=args.gpus_per_worker, tensor=args.tp,
                    pipeline=args.pp, context=args.cp, extends=extends)
    # Refuse an impossible layout with the compiler's own diagnostics, before anything is written.
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / target.name
        probe.write_text(text, encoding="utf-8")
        if extends is not None:
            probe = target.parent / f".{target.name}.init-probe"
            probe.write_text(text, encoding="utf-8")
        try:
            from .diagnostics import sort_diagnostics
            from .pipeline import compile_spec

            result = compile_spec(str(probe), display_path(str(target)), render_files=False)
        finally:
            if extends is not None:
                probe.unlink()
    if not result.ok or result.diagnostics:
        _print_diagnostics(sort_diagnostics(result.diagnostics), "text", out)
        err.write(f"{target}: not written; the layout above cannot run\n")
        return EXIT_FAIL
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    err.write(f"wrote {target}: world size {result.plan.world_size}, data parallel {result.plan.parallel.data}\n")
    return EXIT_OK


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv and argv[0] == "schema":
        return run_schema(argv[1:], out, err)
    if argv and argv[0] == "import":
        return run_import(argv[1:], out, err)
    if argv and argv[0] == "init":
        return run_init(argv[1:], out, err)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 0 for --help/--version and 2 for usage errors
        return int(exc.code or 0)
    try:
        return _compile(args, out, err)
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130


def _bases_of(specs: list[str]) -> set[str]:
    """Real paths of the files that the given specs name in `extends`, read cheaply (only files with
    an `extends:` line are parsed; a one-line plain `extends: base.yaml` is not even parsed), so
    that bases are known before anything is compiled."""
    import re

    block = re.compile(r"^extends\s*:.*(?:\n[ \t-].*)*", re.M)
    plain = re.compile(r"extends\s*:[ \t]+([A-Za-z0-9_./][A-Za-z0-9_./-]*\.ya?ml)[ \t]*(?:#.*)?")
    bases: set[str] = set()
    seen: set[tuple[str, str]] = set()
    for path in specs:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        match = block.search(text)
        if match is None:
            continue
        simple = plain.fullmatch(match.group(0))
        entries = [simple.group(1)] if simple else _extends_entries(match.group(0))
        directory = os.path.dirname(path)
        for entry in entries:
            if (directory, entry) not in seen:
                seen.add((directory, entry))
                bases.add(os.path.realpath(os.path.join(directory, entry)))
    return bases


def _extends_entries(text: str) -> list[str]:
    """The paths of an `extends:` entry (and its continuation lines), parsed as YAML."""
    import yaml

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    raw = data.get("extends") if isinstance(data, dict) else None
    entries = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return [entry for entry in entries if isinstance(entry, str)]


class _Outcome:
    """What handling one spec produced, for the parent to print in spec order."""

    __slots__ = ("diagnostics", "summary", "out", "err", "failed", "check_failed", "plan")

    def __init__(self) -> None:
        self.diagnostics: list = []
        self.summary: str | None = None
        self.out = ""
        self.err = ""
        self.failed = False
        self.check_failed = False
        self.plan = None


_JOB: dict = {}  # the options of the current run, set before worker processes fork


def _process(item: tuple[str, str | None]) -> _Outcome:
    """Compile one spec and act on it (write, check, explain, print); its artifacts are dropped after."""
    from pathlib import Path

    from .diagnostics import Severity, make_error, summary_line
    from .emit import check_outputs, write_outputs
    from .pipeline import compile_spec

    path, conflict_with = item
    args = _JOB["args"]
    out_root = Path(args.out_dir)
    outcome = _Outcome()
    result = compile_spec(path, display_path(path), overrides=_JOB["overrides"],
                          render_files=not (args.explain or args.print_spec))
    diags = result.diagnostics
    if args.werror:
        diags = [d._replace(severity=Severity.ERROR) if d.severity is Severity.WARNING else d for d in diags]
    stem = Path(path).stem
    if result.ok and conflict_with is not None:
        diags = diags + [make_error(
            "output-conflict", f"{result.spec_file} and {conflict_with} would both write {out_root / stem}",
            file=result.spec_file, hint="rename one of the specs",
        )]
    outcome.diagnostics = diags
    outcome.summary = summary_line(diags, result.spec_file)
    if any(d.is_error for d in diags):
        outcome.failed = True  # a spec with errors writes nothing
        return outcome
    directory = out_root / stem
    if args.print_spec:
        from .resolved import resolved_yaml

        outcome.out = resolved_yaml(result.spec, result.spec_file)
    elif args.explain:
        outcome.plan = result.plan
    elif args.check:
        check = check_outputs(directory, result.files)
        if not check.clean:
            outcome.check_failed = True
            outcome.out = "".join(check.diffs)
            outcome.out += "".join(f"missing: {p} (run `megatron-compile {result.spec_file}`)\n" for p in check.missing)
            outcome.out += "".join(f"extra: {p} (not produced by {result.spec_file})\n" for p in check.extra)
        elif not args.quiet:
            outcome.err = f"{result.spec_file}: {directory}/ is up to date\n"
    else:
        emitted = write_outputs(directory, result.files, force=args.force, spec_file=result.spec_file)
        outcome.diagnostics = outcome.diagnostics + emitted.diagnostics
        if emitted.diagnostics:
            outcome.failed = True
        elif not args.quiet:
            outcome.err = (f"{result.spec_file}: {directory}/ ({len(emitted.written)} written, "
                           f"{len(emitted.unchanged)} unchanged, {len(emitted.removed)} removed)\n")
    return outcome


PARALLEL_MIN_SPECS = 32  # below this, starting worker processes costs more than it saves


def _outcomes(items: list[tuple[str, str | None]], parallel: bool):
    """_process over the specs in order: in this process, or with one forked worker per CPU (the
    modules and validators already loaded are shared); results come back in spec order."""
    workers = min(os.cpu_count() or 1, 8)
    if not parallel or workers < 2 or len(items) < PARALLEL_MIN_SPECS or sys.platform != "linux":
        yield from map(_process, items)
        return
    import multiprocessing  # not for a single spec: importing it costs more than compiling one

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        yield from pool.imap(_process, items, chunksize=max(1, len(items) // (workers * 8)))


def _compile(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Compile each spec and act on it at once: one spec's artifacts are in memory at a time, and a
    large batch is spread over the CPUs; output comes in spec order either way."""
    from pathlib import Path

    from .compose import Override
    from .diagnostics import make_error, sort_diagnostics

    specs, missing, explicit = find_specs(args.specs)
    diagnostics = [make_error("file-unreadable", "no such spec file, directory or glob match", file=m) for m in missing]
    if not specs and not missing:
        diagnostics.append(make_error("no-specs", "no *.yaml or *.yml spec found", file=" ".join(args.specs)))
    bases = _bases_of(specs)
    specs = [p for p in specs if p in explicit or os.path.realpath(p) not in bases]
    owners: dict[str, str] = {}
    items: list[tuple[str, str | None]] = []
    for path in specs:
        stem = Path(path).stem
        items.append((path, owners.get(stem)))
        owners.setdefault(stem, display_path(path))
    _JOB.update(args=args, overrides=tuple(Override(raw) for raw in args.overrides))
    summaries: list[str] = []
    explained = []
    failed, check_failed = bool(diagnostics), False
    for outcome in _outcomes(items, parallel=not (args.explain or args.print_spec)):
        diagnostics.extend(outcome.diagnostics)
        if outcome.summary:
            summaries.append(outcome.summary)
        out.write(outcome.out)
        err.write(outcome.err)
        failed |= outcome.failed
        check_failed |= outcome.check_failed
        if outcome.plan is not None:
            explained.append(outcome.plan)

    diagnostics = sort_diagnostics(diagnostics)
    if diagnostics or not explained:  # --explain --format json keeps stdout one JSON document
        _print_diagnostics(diagnostics, args.format, err if explained else out)
    if args.format == "text":
        for line in summaries:
            err.write(line + "\n")
    if explained:
        from .explain import explain_json, explain_text

        if args.format == "json":
            out.write(explain_json(explained))
        else:
            out.write("".join(explain_text(p) for p in explained))
    if failed:
        return EXIT_FAIL
    if check_failed:
        err.write("artifacts are stale: run megatron-compile on the specs above and commit the result\n")
        return EXIT_FAIL
    return EXIT_OK
