"""`megatron-compile diff [--base REF] [SPEC...]`: what a change does to each job, semantically.

Each spec is compiled twice, offline, by the same compiler: as committed at the base revision (read
through git by load/gitrev.py, never checked out) and as it is in the work tree. The two compiles'
own data are compared (diff_model.py), so a reorder, a comment or an extends refactor that resolves
to the same job is no change, and a change nobody typed (data parallel, micro-batches, memory, time,
GPU-hours, cost, the image digest, Megatron's flags) is shown. Exit codes as `terraform plan
-detailed-exitcode`: 0 no change, 2 changes, 1 an error (git, a spec that does not compile in the
work tree, a guardrail that fails).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import posixpath
from typing import TextIO

from ..diagnostics import Diagnostic, format_text, make_error, sort_diagnostics
from ..load.discover import SPEC_SUFFIXES, bases_of, extends_in, find_specs
from ..load.gitrev import GitError, GitTree, base_revision, toplevel
from .diff_model import DiffReport, Side, SpecDiff, changes, gpu_hours, same_job, semantic, side_of
from ..load.inputs import serving
from ..batch import Options, regenerate_command
from ..one_pass import compile_spec
from ..plan.guardrails import increase
from .diff_format import render_json, render_markdown, render_text

DEFAULT_SPECS = ("specs",)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megatron-compile diff",
        description="Compile each spec at a base revision (read through git) and in the work tree, and print what "
        "the change does to each job. Exit 0 no change, 2 changes, 1 error.")
    parser.add_argument("specs", nargs="*", metavar="SPEC",
                        help="spec files, directories or globs (default: specs/)")
    parser.add_argument("--base", metavar="REF", help="the revision to compare with (default: the merge base of HEAD "
                        "with the default branch: origin/HEAD, else main or master)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument("--max-chars", type=int, default=65_535, metavar="N",
                        help="markdown: summarise to stay within N characters (default: GitHub's comment limit)")
    return parser


def _rel(path: str, root: str) -> str:
    return os.path.relpath(os.path.realpath(path), root).replace(os.sep, "/")


def head_specs(arguments: list[str], root: str) -> tuple[list[str], list[str]]:
    """The work tree's specs (repository-relative) and the arguments that matched nothing there."""
    found, missing, explicit = find_specs(arguments)
    bases = bases_of([p for p in found if p not in explicit])
    return [_rel(p, root) for p in found if p in explicit or os.path.realpath(p) not in bases], missing


def base_specs(arguments: list[str], root: str, tree: GitTree) -> list[str]:
    """The same arguments read in the base revision's tree: its specs, bases left out as a directory
    compile leaves them out."""
    found: list[str] = []
    explicit: set[str] = set()
    for arg in arguments:
        rel = _rel(arg, root) if not any(ch in arg for ch in "*?[") else posixpath.normpath(
            posixpath.join(_rel(".", root), arg))
        if any(ch in arg for ch in "*?["):
            for match in sorted(p for p in tree.entries if fnmatch.fnmatchcase(p, rel)):
                if match.endswith(SPEC_SUFFIXES):
                    found.append(match)
            for directory in sorted(d for d in tree.dirs if fnmatch.fnmatchcase(d, rel)):
                found.extend(p for p in tree.files_under(directory) if p.endswith(SPEC_SUFFIXES))
        elif tree.is_dir(rel):
            found.extend(p for p in tree.files_under(rel) if p.endswith(SPEC_SUFFIXES))
        elif tree.is_file(rel):
            found.append(rel)
            explicit.add(rel)
    found = list(dict.fromkeys(found))
    bases: set[str] = set()
    for rel in found:
        if rel in explicit:
            continue
        text = (tree.read(rel) or b"").decode("utf-8", "replace")
        bases.update(posixpath.normpath(posixpath.join(posixpath.dirname(rel), e)) for e in extends_in(text))
    return [p for p in found if p in explicit or p not in bases]


def compile_side(rel: str, root: str, tree: GitTree | None = None) -> Side:
    """One spec compiled as a compile from the repository root would (the same display and header),
    from the work tree or, with `tree`, from the base revision."""
    path = os.path.join(root, rel)
    recorded, regenerate = regenerate_command(path, Options())
    if tree is None:
        return side_of(rel, compile_spec(path, rel, recorded=recorded, regenerate=regenerate))
    with serving(tree):
        return side_of(rel, compile_spec(path, rel, recorded=recorded, regenerate=regenerate))


def _guardrails(base: Side | None, head: Side) -> tuple[Diagnostic, ...]:
    result = head.result
    own = [d for d in head.diagnostics if d.code.startswith("guardrail-")]
    if base is not None and base.ok and head.ok:
        own += increase(result.guardrails, gpu_hours(base), gpu_hours(head), result.doc, head.path)
    return tuple(sort_diagnostics(own))


def compare(base_paths: list[str], head_paths: list[str], root: str, tree: GitTree) -> list[SpecDiff]:
    """Each spec of either side compiled and compared; an added and a removed spec that compile to
    the same job are a rename."""
    diffs: dict[str, SpecDiff] = {}
    for rel in sorted(set(base_paths) | set(head_paths)):
        base = compile_side(rel, root, tree) if rel in base_paths else None
        head = compile_side(rel, root) if rel in head_paths else None
        if head is not None and not head.ok:
            errors = tuple(sort_diagnostics([d for d in head.diagnostics if d.is_error]))
            diffs[rel] = SpecDiff(rel, "error", base=base, head=head, errors=errors)
        elif head is None:
            diffs[rel] = SpecDiff(rel, "removed", base=base)
        elif base is None:
            diffs[rel] = SpecDiff(rel, "added", tuple(changes(_empty(rel), head)), head=head, guardrails=_guardrails(None, head))
        else:
            found = tuple(changes(base, head)) if base.ok else tuple(changes(_empty(rel), head))
            status = "changed" if semantic(found) or not base.ok else "unchanged"
            diffs[rel] = SpecDiff(rel, status, found, base=base, head=head, guardrails=_guardrails(base, head))
    removed = [d for d in diffs.values() if d.status == "removed"]
    for added in [d for d in diffs.values() if d.status == "added"]:
        twin = next((r for r in removed if r.base is not None and added.head is not None
                     and same_job(r.base, added.head)), None)
        if twin is not None:
            removed.remove(twin)
            del diffs[twin.path]
            diffs[added.path] = added._replace(status="renamed", renamed_from=twin.path, changes=(), base=twin.base)
    return [diffs[k] for k in sorted(diffs)]


def _empty(rel: str) -> Side:
    return Side(rel, True, (), {})


def diff(arguments: list[str], base_ref: str | None, cwd: str) -> DiffReport:
    """The report of `diff` (GitError when the base cannot be read)."""
    root = toplevel(cwd)
    revision = base_revision(base_ref, root)
    arguments = arguments or [posixpath.relpath(os.path.join(root, d), cwd) for d in DEFAULT_SPECS]
    head_paths, missing = head_specs(arguments, root)
    with GitTree(root, revision.commit) as tree:
        base_paths = base_specs(arguments, root, tree)
        missing = [m for m in missing if not base_specs([m], root, tree)]
        specs = compare(base_paths, head_paths, root, tree)
    diags = tuple(make_error("no-specs", f"{m}: no spec in the work tree or at the base revision", file=m)
                  for m in missing)
    return DiffReport(revision, tuple(specs), diags)


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """The command's entry point: argv -> printed report, exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and 1
    try:
        report = diff(args.specs, args.base, os.getcwd())
    except GitError as exc:
        err.write(format_text([make_error("diff-git", str(exc), file="megatron-compile diff",
                                          hint="run inside the repository, with the base revision fetched "
                                          "(actions/checkout: fetch-depth: 0)")]))
        return 1

    if args.format == "json":
        out.write(render_json(report))
    elif args.format == "markdown":
        out.write(render_markdown(report, args.max_chars))
    else:
        out.write(render_text(report))
    return report.exit_code()
