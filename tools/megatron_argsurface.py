#!/usr/bin/env python3
"""Write Megatron-LM's command-line argument surface (and the flags it removed) as a JSON data file.

Usage (the run recorded in docs/argsurface.md):

    /work/venvs/argsurface/bin/python tools/megatron_argsurface.py /work/main/.megatron \
        --git-dir /work/.mirror/NVIDIA+Megatron-LM/repo \
        -o compiler/megatron/data/megatron_args.json \
        --corpus tests/fixtures/argsurface/corpus.json

What it does:

1. Imports Megatron's own parser from MEGATRON_LM_DIR. It does not rebuild the parser by hand: it calls
   `megatron.training.arguments.parse_args(extra_args_provider=None, ignore_unknown_args=False)` with
   `argparse.ArgumentParser.parse_args` intercepted, so the parser captured is the very object
   Megatron builds (`ArgumentParser(description='Megatron-LM Arguments', allow_abbrev=False)` plus
   `add_megatron_arguments`, megatron/training/arguments.py:127-136), before anything is parsed.
2. Walks every action and writes one JSON line per option string (dest, nargs, value type, choices,
   action kind, hidden/deprecated marks, the add_argument line at the pinned commit).
3. With --git-dir: parses `add_argument` calls (with `ast`) in megatron/training/arguments.py or the
   older megatron/arguments.py at each release tag; a flag some tag had and the pinned parser lacks is
   recorded as removed, with the last tag (by commit date) that had it.
4. With --corpus: runs the captured parser on a few thousand generated argument lists (valid uses of
   every flag, and mutations: wrong types, choices, arity, `=` forms, typos, removed flags) and records
   whether Megatron's parser accepts each; tests/test_argsurface.py checks the pure checker against it.

Environment: Python 3.11, torch 2.13.0 (CPU) and triton from PyPI; nothing is stubbed except one alias:
Python 3.11's `typing` has no `override` (3.12 added it) and Megatron imports it from `typing`, so
`typing.override` is set to `typing_extensions.override` before the import. The kitchen quantization
flags (megatron/training/arguments.py:3342-3370) only exist when the NVIDIA-internal `kitchen` package
imports; it does not here, so they are not part of the surface (the pinned image does not ship it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import enum
import io
import json
import os
import platform
import random
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

PINNED_COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
ARGS_FILES = ("megatron/training/arguments.py", "megatron/arguments.py")
# Release tags only: release candidates, alphas and project branches (InstructRetro, NVLM...) are not
# releases a user would have pinned.
TAG_RE = re.compile(r"^(core_[rv]\d+\.\d+\.\d+|v\d+\.\d+(\.\d+)?|\d\d\.\d\d)$")
DATA_FORMAT = 1
# Flags arguments.py adds only when an optional package imports (megatron/training/arguments.py:3347-3353).
CONDITIONAL = {
    "--kitchen-config-file": "the NVIDIA-internal kitchen package imports (HAVE_KITCHEN)",
    "--kitchen-recipe-number": "the NVIDIA-internal kitchen package imports (HAVE_KITCHEN)",
}

ACTION_KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional",
    "_ExtendAction": "extend",
}


class _Captured(Exception):
    """Raised from the intercepted parse_args to carry Megatron's parser out, unparsed."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("captured")
        self.parser = parser


def import_megatron_arguments(megatron_dir: Path) -> Any:
    """Import megatron.training.arguments from a checkout (the one alias documented above)."""
    import typing_extensions

    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override  # type: ignore[attr-defined]
    sys.path.insert(0, str(megatron_dir))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Megatron warns about missing TE/Apex on import; noise here
        import megatron.training.arguments as arguments  # type: ignore[import-not-found]
    return arguments


def capture_parser(arguments: Any, extra_args_provider: Callable[..., Any] | None = None) -> argparse.ArgumentParser:
    """Run Megatron's parse_args until it calls parser.parse_args(), and return that parser."""
    original = argparse.ArgumentParser.parse_args

    def intercept(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = intercept  # type: ignore[method-assign]
    try:
        arguments.parse_args(extra_args_provider=extra_args_provider, ignore_unknown_args=False)
    except _Captured as captured:
        parser = captured.parser
    else:
        raise SystemExit("parse_args returned without calling parser.parse_args(); the tool needs updating")
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    _check_parser_model(parser)
    return parser


def _check_parser_model(parser: argparse.ArgumentParser) -> None:
    """Fail loudly where the parser leaves the model the pure checker implements."""
    problems = []
    if parser.allow_abbrev or parser.prefix_chars != "-" or parser.fromfile_prefix_chars is not None:
        problems.append("parser settings (allow_abbrev, prefix_chars, fromfile_prefix_chars) changed")
    if parser._has_negative_number_optionals:
        problems.append("an option string looks like a negative number")
    for action in parser._actions:
        if not action.option_strings:
            problems.append(f"positional argument {action.dest}")
        if action.required:
            problems.append(f"required argument {action.option_strings}")
        if type(action).__name__ not in ACTION_KINDS:
            problems.append(f"custom action class {type(action).__name__} for {action.option_strings}")
        if action.nargs in (argparse.REMAINDER, argparse.PARSER):
            problems.append(f"nargs {action.nargs!r} for {action.option_strings}")
    if parser._mutually_exclusive_groups:
        problems.append("mutually exclusive groups (the checker does not model them)")
    if problems:
        raise SystemExit("Megatron's parser left the checker's model:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------------------------------
# value types: what the pure checker can reproduce, each verified against the real function


def _enum_names(enum_cls: type[enum.Enum], choices: Iterable[Any]) -> list[str]:
    """The strings `enum_cls[s]` accepts whose member is among choices (aliases included)."""
    allowed = set(choices)
    return sorted(name for name, member in enum_cls.__members__.items() if member in allowed)


def _closure_enum(func: Callable[..., Any]) -> type[enum.Enum] | None:
    """The Enum class an ArgumentGroupFactory enum_type_handler closes over."""
    for cell in func.__closure__ or ():
        if isinstance(cell.cell_contents, type) and issubclass(cell.cell_contents, enum.Enum):
            return cell.cell_contents
    return None


# Probe strings each modelled custom type is run on, to prove the model right at generation time.
PROBES = ["0", "1", "4", " 4", "+4", "-1", "1.5", "abc", "", "[1]", "([1]*3+[0]*1)*3", "[1,", "[1]+2",
          "(1,2)", "1,2", "(4,4)", "4,", "a,b", "[1]*2*", "1_0", "[0]+[1]*23", "x[1]", "[1]*-1", "[-1]"]


def describe_type(action: argparse.Action, arguments: Any) -> dict[str, Any]:
    """type/choices fields for one action, in terms the pure checker implements."""
    if type(action).__name__ not in ("_StoreAction", "_AppendAction", "_ExtendAction"):
        return {}  # nargs-0 actions never convert a value (BooleanOptionalAction's type=bool is unused)
    fn: Any = action.type
    out: dict[str, Any]
    if fn is None or fn is str:
        out = {"type": "str"}
    elif fn in (int, float, bool):
        out = {"type": fn.__name__}
    elif getattr(fn, "__name__", "") == "enum_type_handler":
        enum_cls = _closure_enum(fn)
        assert enum_cls is not None and action.choices is not None
        names = _enum_names(enum_cls, action.choices)
        _verify_names(action, names)
        return {"type": "enum", "type_fn": f"enum_type_handler[{enum_cls.__name__}]", "choices": names}
    elif fn is getattr(arguments, "_parse_cuda_graph_modules_arg", None):
        names = sorted({"full", "full_iteration", "full_iteration_inference"}
                       | set(arguments.CudaGraphModule.__members__))
        out = {"type": "enum", "type_fn": "_parse_cuda_graph_modules_arg", "choices": names}
        _verify_names(action, names)
        return out
    elif fn in tuple(getattr(arguments, n) for n in ("moe_freq_type", "la_freq_type", "no_rope_freq_type")):
        out = {"type": "int_or_pattern", "type_fn": str(getattr(fn, "__name__", fn))}
    elif fn is getattr(arguments, "tuple_type", None):
        out = {"type": "int_tuple", "type_fn": "tuple_type"}
    else:
        raise SystemExit(f"unmodelled value type {fn!r} for {action.option_strings}; extend describe_type")
    if action.choices is not None:
        choices = list(action.choices)
        expected = {"str": str, "int": int, "float": float}[out["type"]]
        assert all(type(c) is expected for c in choices), (action.option_strings, choices)
        out["choices"] = choices
    _verify_model(action, out)
    return out


def _real_accepts(fn: Callable[[str], Any], text: str) -> bool:
    """Whether argparse's conversion of text with fn succeeds (any exception is a rejection)."""
    try:
        fn(text)
    except Exception:  # argparse turns ValueError/TypeError into an error; anything else crashes Megatron
        return False
    return True


def _verify_model(action: argparse.Action, model: dict[str, Any]) -> None:
    """Check the pure checker's converter agrees with the real type function on every probe."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from compiler.megatron.argsurface import _convert  # the checker's own converter, reused

    fn: Any = action.type or str
    for probe in PROBES:
        real = _real_accepts(fn, probe)
        ours = _convert(model["type"], probe)[0]
        if real != ours:
            raise SystemExit(f"{action.option_strings}: model {model['type']} says {ours} for {probe!r}, "
                             f"Megatron's {getattr(fn, '__name__', fn)} says {real}")


def _verify_names(action: argparse.Action, names: list[str]) -> None:
    fn: Any = action.type
    """Check a name-list model against the real function, on the names and on near misses."""
    for probe in names + [n.upper() + "x" for n in names] + PROBES:
        if _real_accepts(fn, probe) != (probe in names):
            raise SystemExit(f"{action.option_strings}: name model disagrees on {probe!r}")


# ---------------------------------------------------------------------------------------------------
# source lines at the pinned commit, and flags at older tags


def add_argument_calls(source: str) -> dict[str, dict[str, Any]]:
    """Option strings of every literal add_argument(...) call in a Python source -> line, dest, help."""
    flags: dict[str, dict[str, Any]] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        options = [a.value for a in node.args
                   if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
        kwargs = {k.arg: k.value.value for k in node.keywords
                  if k.arg in ("dest", "help") and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
        longs = [o for o in options if o.startswith("--")]
        # argparse's rule for dest: the explicit dest, else the first long option with dashes as underscores
        dest = kwargs.get("dest") or (longs[0][2:].replace("-", "_") if longs else None)
        help_text = " ".join(kwargs.get("help", "").split())
        for option in options:
            flags.setdefault(option, {"line": node.lineno, "dest": dest,
                                      "help": help_text[:160] if help_text else None})
    return flags


def _git(git_dir: Path, *args: str) -> str:
    """Run git against the mirror and return stdout."""
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                          capture_output=True, text=True).stdout


def _commit_time(git_dir: Path, rev: str) -> int:
    """Committer time (Unix seconds) of a revision."""
    return int(_git(git_dir, "log", "-1", "--format=%ct", rev).strip())


def release_tags(git_dir: Path) -> list[tuple[str, str]]:
    """(tag, commit date) for every release tag no newer than the pinned commit, oldest first.

    Release tags sit on release branches, so "older" is by commit time; core_v0.19.0 (after the pin) would
    otherwise make every flag it added look removed. Of two tags on one commit the core_ name sorts last,
    so it is the one reported as "last had it".
    """
    pinned = _commit_time(git_dir, PINNED_COMMIT)
    tags = []
    for tag in _git(git_dir, "tag").split():
        if TAG_RE.match(tag) and _commit_time(git_dir, f"refs/tags/{tag}") <= pinned:
            date = _git(git_dir, "log", "-1", "--format=%cI", f"refs/tags/{tag}").strip()
            tags.append((tag, date, _commit_time(git_dir, f"refs/tags/{tag}")))
    tags.sort(key=lambda t: (t[2], t[0].startswith("core_"), t[0]))
    return [(tag, date) for tag, date, _ in tags]


def flags_at(git_dir: Path, rev: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """(arguments file path, flags) at a revision, or None when neither file exists there."""
    for path in ARGS_FILES:
        try:
            source = _git(git_dir, "show", f"{rev}:{path}")
        except subprocess.CalledProcessError:
            continue
        return path, add_argument_calls(source)
    return None


def removed_flags(git_dir: Path, current: set[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Flags some release tag had and the pinned parser lacks -> last tag (and its file) that had them."""
    removed: dict[str, dict[str, str]] = {}
    scanned = []
    for tag, date in release_tags(git_dir):
        found = flags_at(git_dir, f"refs/tags/{tag}")
        if found is None:
            continue
        scanned.append(tag)
        path, flags = found
        for flag, call in flags.items():
            if flag not in current:
                removed.setdefault(flag, {"first": tag})
                removed[flag].update({"last": tag, "last_date": date[:10], "src": f"{path}:{call['line']}",
                                      "dest": call["dest"], "help": call["help"]})
    return removed, scanned


# ---------------------------------------------------------------------------------------------------
# the surface


def _deprecation_note(action: argparse.Action) -> str | None:
    """Megatron marks deprecation only in help text or in the dest name (no argparse flag in 3.11)."""
    help_text = action.help if isinstance(action.help, str) and action.help != argparse.SUPPRESS else ""
    match = re.search(r"[^.]*deprecated[^.]*\.?", help_text, re.IGNORECASE)
    if match:
        return " ".join(match.group(0).split())
    if "deprecated" in action.dest:
        return f"dest {action.dest}"
    return None


def flag_entries(parser: argparse.ArgumentParser, arguments: Any,
                 lines: dict[str, int]) -> dict[str, dict[str, Any]]:
    """One entry per option string of the parser."""
    entries: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        base: dict[str, Any] = {
            "dest": action.dest,
            "action": ACTION_KINDS[type(action).__name__],
            "nargs": action.nargs,
        }
        base.update(describe_type(action, arguments))
        if action.help == argparse.SUPPRESS:
            base["hidden"] = True
        note = _deprecation_note(action)
        if note:
            base["deprecated"] = note
        for option in action.option_strings:
            entry = dict(base)
            others = [o for o in action.option_strings if o != option]
            if others:
                entry["aliases"] = others
            line = next((lines[o] for o in action.option_strings if o in lines), None)
            # no literal add_argument line: the flag comes from an ArgumentGroupFactory dataclass
            entry["src"] = f"megatron/training/arguments.py:{line}" if line else "ArgumentGroupFactory"
            entries[option] = entry
    return entries


MODELOPT_WHEN = ("nvidia-modelopt is installed in the image (pretrain_gpt.py:65-71 then passes "
                 "add_modelopt_args as extra_args_provider, pretrain_gpt.py:396)")


def build_surface(megatron_dir: Path, git_dir: Path | None) -> tuple[dict[str, Any], dict[str, argparse.ArgumentParser]]:
    """The whole data document, and the two parsers it was read from (plain, and with modelopt's flags)."""
    arguments = import_megatron_arguments(megatron_dir)
    parser = capture_parser(arguments)
    # megatron/post_training/arguments.py imports nothing; only pretrain_gpt.py's guard needs modelopt
    from megatron.post_training.arguments import add_modelopt_args  # type: ignore[import-not-found]

    with_modelopt = capture_parser(arguments, add_modelopt_args)
    source = (megatron_dir / ARGS_FILES[0]).read_text()
    lines = {flag: call["line"] for flag, call in add_argument_calls(source).items()}
    flags = flag_entries(parser, arguments, lines)
    doc: dict[str, Any] = {
        "format": DATA_FORMAT,
        "megatron_commit": PINNED_COMMIT,
        "generated_by": "tools/megatron_argsurface.py (Megatron's own parser, captured from parse_args)",
        "python": platform.python_version(),
        "parser": {"description": parser.description, "allow_abbrev": parser.allow_abbrev,
                   "negative_number": parser._negative_number_matcher.pattern},
        "flags": flags,
        "modelopt_when": MODELOPT_WHEN,
    }
    post_lines = {flag: call["line"] for flag, call in add_argument_calls(
        (megatron_dir / "megatron/post_training/arguments.py").read_text()).items()}
    extra = {name: {**entry, "src": f"megatron/post_training/arguments.py:{post_lines[name]}"}
             for name, entry in flag_entries(with_modelopt, arguments, {}).items() if name not in flags}
    assert set(extra) == set(post_lines), "modelopt flags and add_modelopt_args's calls differ"
    doc["modelopt"] = extra
    # add_argument calls the parser did not run: behind an import guard (kitchen) at the pinned commit
    missing = sorted(set(lines) - set(flags))
    if set(missing) != set(CONDITIONAL):
        raise SystemExit(f"flags in arguments.py the parser lacks, not in CONDITIONAL: {missing}")
    doc["conditional"] = {flag: {"src": f"{ARGS_FILES[0]}:{lines[flag]}", "when": CONDITIONAL[flag]}
                          for flag in missing}
    if git_dir is not None:
        removed, scanned = removed_flags(git_dir, set(flags) | set(CONDITIONAL))
        doc["removed_scanned_tags"] = scanned
        doc["removed"] = removed
    return doc, {"plain": parser, "modelopt": with_modelopt}


def dump_lines(doc: dict[str, Any]) -> str:
    """Compact, stable JSON: header keys one a line, then one flag (and one removed flag) a line."""
    out = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, dict) and key in ("flags", "removed", "conditional", "modelopt"):
            out.append(f"{json.dumps(key)}: {{")
            names = sorted(value)
            for j, name in enumerate(names):
                sep = "," if j < len(names) - 1 else ""
                out.append(f"  {json.dumps(name)}: {json.dumps(value[name], sort_keys=True, separators=(',', ':'))}{sep}")
            out.append("}" + comma)
        else:
            out.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True, separators=(',', ':'))}{comma}")
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------
# the differential corpus


def run_megatron_parser(parser: argparse.ArgumentParser, args: list[str]) -> tuple[str, str]:
    """('accept'|'reject'|'help', message) for one argument list, from Megatron's real parser."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args)
    except SystemExit as exc:
        if exc.code == 0:
            return "help", ""
        lines = err.getvalue().strip().splitlines()
        return "reject", lines[-1] if lines else f"exit {exc.code}"
    except Exception as exc:  # a type function raising KeyError/SyntaxError: Megatron dies with a traceback
        return "reject", f"{type(exc).__name__}: {exc}"
    return "accept", ""


def _good_values(entry: dict[str, Any], rng: random.Random) -> list[str]:
    """Values one use of a value-taking flag could be given (as strings)."""
    kind = entry.get("type", "str")
    if "choices" in entry:
        return [str(rng.choice(entry["choices"]))]
    return {
        "int": [rng.choice(["1", "8", "-3", "0", "4096", "+2", "1_0"])],
        "float": [rng.choice(["0.1", "1e-4", "-0.5", "3", ".5", "inf", "-2"])],
        "bool": ["1"],
        "str": [rng.choice(["x", "/data/a", "a,b", "-x y", "a=b", ""])],
        "int_or_pattern": [rng.choice(["2", "([1]*3+[0]*1)*3", "[1]*4"])],
        "int_tuple": [rng.choice(["4,4", "(128,0)", "-1,0"])],
    }[kind]


def _arity_values(entry: dict[str, Any], rng: random.Random) -> list[str]:
    """A well-formed value list for the flag's nargs."""
    nargs = entry["nargs"]
    if nargs == 0:
        return []
    count = {None: 1, "?": rng.choice([0, 1]), "*": rng.choice([0, 1, 3]), "+": rng.choice([1, 2])}.get(nargs, nargs)
    return [v for _ in range(count) for v in _good_values(entry, rng)]


def _bad_value(entry: dict[str, Any], rng: random.Random) -> str | None:
    """A value the flag's type or choices rejects (None for plain strings, which take anything)."""
    kind = entry.get("type", "str")
    if "choices" in entry:
        first = str(entry["choices"][0])
        pool = {"int": ["7", "x", "-1"], "float": ["x"], "str": ["nope", first.upper() + "_", first + " "],
                "enum": ["nope", "15", first.lower() + "x", first.upper()]}[kind]
        return rng.choice(pool)
    return {"int": rng.choice(["x", "1.5", "1e3", "", "0x10"]), "float": rng.choice(["x", "1,5", "", "1e"]),
            "int_or_pattern": rng.choice(["x", "[1,", "[1]+2", "1.5", "[a]"]),
            "int_tuple": rng.choice(["a,b", "4.5,1", ""]), "str": None, "bool": None}[kind]


def _typos(flag: str, rng: random.Random) -> Iterator[str]:
    """Misspellings of a flag: underscore spelling, a dropped letter, a doubled letter."""
    if "-" in flag[2:]:
        yield "--" + flag[2:].replace("-", "_")
    i = rng.randrange(3, len(flag))
    yield flag[:i] + flag[i + 1:]
    yield flag[:i] + flag[i] + flag[i:]


def corpus_cases(doc: dict[str, Any], seed: int = 14) -> list[list[str]]:
    """Argument lists exercising every flag, well formed and mutated, deterministic for one seed."""
    rng = random.Random(seed)
    flags = {**doc["flags"], **doc.get("modelopt", {})}
    names = sorted(flags)
    value_flags = [n for n in names if flags[n]["nargs"] != 0 and n not in ("-h", "--help")]
    switches = [n for n in names if flags[n]["nargs"] == 0 and flags[n]["action"] != "help"]
    cases: list[list[str]] = []
    for name in names:
        entry = flags[name]
        if entry["action"] == "help":
            continue
        values = _arity_values(entry, rng)
        cases.append([name, *values])                                   # the flag alone, well formed
        if entry["nargs"] == 0:
            cases.append([name, rng.choice(["true", "1", "x"])])        # a switch given a value
            cases.append([f"{name}={rng.choice(['true', '', '1'])}"])   # a switch given =value
            continue
        if entry["nargs"] in (None, 1) or isinstance(entry["nargs"], int):
            cases.append([name])                                        # missing value
        if entry["nargs"] is None:
            cases.append([f"{name}={values[0]}"])                       # = form
            cases.append([name, rng.choice(value_flags), *_arity_values(flags[name], rng)])
        bad = _bad_value(entry, rng)
        if bad is not None:
            cases.append([name, bad] if entry["nargs"] is None else [name, *values[:-1], bad] if values else [name, bad])
    for name in rng.sample(value_flags, 60):
        for typo in _typos(name, rng):
            cases.append([typo, *_arity_values(flags[name], rng)])
    for name in rng.sample(switches, 40):
        for typo in _typos(name, rng):
            cases.append([typo])
    for name in sorted(doc.get("removed", {})):
        cases.append([name])
        cases.append([name, "1"])
    cases += _edge_cases(flags)
    for _ in range(400):                                                # mixed lists, some broken
        picks = rng.sample(names, rng.randint(2, 6))
        args: list[str] = []
        for name in picks:
            if flags[name]["action"] != "help":
                args += [name, *_arity_values(flags[name], rng)]
        mutation = rng.randrange(6)
        if mutation == 1 and args:
            args.insert(rng.randrange(len(args) + 1), rng.choice(["stray", "5", "-5", "--", "-1e5"]))
        elif mutation == 2 and args:
            del args[rng.randrange(len(args))]
        elif mutation == 3:
            args.append(next(_typos(rng.choice(value_flags), rng)))
        cases.append(args)
    unique: dict[str, list[str]] = {}
    for case in cases:
        unique.setdefault(json.dumps(case), case)
    return list(unique.values())


TORCHRUN_FLAGS = {"--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--node-rank",
                  "--master_addr", "--master-addr", "--master_port", "--master-port", "--rdzv_id",
                  "--rdzv_backend", "--rdzv_endpoint", "--rdzv-id", "--rdzv-backend", "--rdzv-endpoint"}
_SHELL_STOP = {"|", "||", "&&", ";", "&", "2>&1", ">", ">>", "<", "\\"}


def script_arg_runs(text: str) -> list[list[str]]:
    """Runs of `--flag [value...]` tokens in a shell script, $VARS replaced by 8 (a value of any type)."""
    import shlex

    try:
        tokens = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError:
        return []
    runs: list[list[str]] = []
    run: list[str] = []
    skip = False
    for token in tokens:
        if token in _SHELL_STOP or token.endswith(")") and "(" not in token or "=(" in token or token == "(":
            runs.append(run)
            run, skip = [], False
            continue
        if token.startswith("--"):
            skip = token.split("=", 1)[0] in TORCHRUN_FLAGS  # the launcher's, not Megatron's
            if not skip:
                run.append(token)
        elif run and not skip:
            run.append("8" if "$" in token or "`" in token else token)
    runs.append(run)
    return [r[:80] for r in runs if r]


def example_cases(megatron_dir: Path, git_dir: Path | None) -> list[list[str]]:
    """Flag runs from Megatron's example scripts, at the pin and at a few older releases."""
    cases: list[list[str]] = []
    for script in sorted((megatron_dir / "examples").rglob("*.sh")):
        cases += script_arg_runs(script.read_text(errors="replace"))
    if git_dir is not None:
        for tag in ("v2.6", "23.06", "core_v0.8.0", "core_v0.13.1"):
            names = _git(git_dir, "ls-tree", "-r", "--name-only", f"refs/tags/{tag}", "--", "examples").split()
            for name in sorted(n for n in names if n.endswith(".sh")):
                cases += script_arg_runs(_git(git_dir, "show", f"refs/tags/{tag}:{name}"))
    return cases


def _edge_cases(flags: dict[str, Any]) -> list[list[str]]:
    """Hand-picked corners of argparse's grammar, each a place a naive checker goes wrong."""
    return [
        [], ["--"], ["--lr", "--"], ["--lr=--"], ["--data-path=--"], ["--fp16", "--"], ["--fp16", "--", "x"],
        ["--lr", "-1e5"], ["--lr=-1e5"], ["--lr", "-0.5"], ["--lr", "-.5"], ["--lr", "-5"], ["--lr", "-inf"],
        ["--lr", "-x y"], ["--lr", " 1"], ["--lr="], ["--seed", "-3"], ["--seed", "٣"], ["--seed", "1_000"],
        ["-h"], ["--help"], ["-hh"], ["-hx"], ["-h=h"], ["-h="], ["-x"], ["-"], ["-5"], ["-1e5"], ["x"],
        ["--fp16", "--bf16", "--fp16"], ["--fp16=", "--bf16"], ["--data-path"], ["--data-path", "--lr", "1"],
        ["--data-path", "a", "b", "c"], ["--split", "99,1,0", "extra"], ["--window-size", "4,4"],
        ["--window-size=(4,4)"], ["--window-size", "4"], ["--moe-layer-freq", "[1]*2*"],
        ["--exit-signal", "SIGTERM"], ["--exit-signal", "SIGIOT"], ["--exit-signal", "15"],
        ["--attention-backend", "flash"], ["--attention-backend", "Flash"], ["--cuda-graph-modules"],
        ["--cuda-graph-modules", "full", "attn"], ["--cuda-graph-modules", "bogus"],
        ["--empty-unused-memory-level", "01"], ["--empty-unused-memory-level", "3"],
        ["--tensor_model_parallel_size", "2"], ["--tensor-model-parallel-size=2"],
        ["--data-impl", "mmap"], ["--no-query-key-layer-scaling"], ["--resume-with-new-dataset"],
        ["--load-iteration", "40"], ["--override-dataloader-consumed-samples", "0"],
        ["--no-async-tensor-model-parallel-allreduce"], ["--lr 1"], ["--lr", "1", "--lr", "2"],
        ["--onnx-safe", "False"], ["--rl-skip-bos-token", "--no-rl-skip-bos-token"], ["--no-rl-skip-bos-token=1"],
    ]


def build_corpus(doc: dict[str, Any], parsers: dict[str, argparse.ArgumentParser],
                 examples: list[list[str]]) -> dict[str, Any]:
    """Every corpus case (generated, then from example scripts) with Megatron's verdict."""
    entries = []
    seen = set()
    for args in corpus_cases(doc) + examples:
        if json.dumps(args) in seen:
            continue
        seen.add(json.dumps(args))
        outcome, message = run_megatron_parser(parsers["plain"], args)
        entry = {"args": args, "outcome": outcome, "message": message}
        modelopt_outcome, modelopt_message = run_megatron_parser(parsers["modelopt"], args)
        if (modelopt_outcome, modelopt_message) != (outcome, message):
            entry.update({"modelopt_outcome": modelopt_outcome, "modelopt_message": modelopt_message})
        entries.append(entry)
    return {"megatron_commit": PINNED_COMMIT, "python": platform.python_version(),
            "generated_by": "tools/megatron_argsurface.py --corpus (Megatron's real parser on each list)",
            "entries": entries}


def dump_corpus(corpus: dict[str, Any]) -> str:
    """Corpus JSON, one entry a line."""
    head = {k: v for k, v in corpus.items() if k != "entries"}
    lines = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in corpus["entries"]]
    body = ",\n".join("  " + line for line in lines)
    header = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
    return "{\n" + header + ',\n"entries": [\n' + body + "\n]}\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("megatron_lm_dir", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path("compiler/megatron/data/megatron_args.json"))
    ap.add_argument("--git-dir", type=Path, help="Megatron-LM git dir with release tags (for removed flags)")
    ap.add_argument("--corpus", type=Path, help="also write the differential corpus here")
    opts = ap.parse_args(argv)
    doc, parsers = build_surface(opts.megatron_lm_dir, opts.git_dir)
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text(dump_lines(doc))
    print(f"{opts.output}: {len(doc['flags'])} option strings (+{len(doc['modelopt'])} with modelopt), "
          f"{len(doc.get('removed', {}))} removed flags")
    if opts.corpus:
        corpus = build_corpus(doc, parsers, example_cases(opts.megatron_lm_dir, opts.git_dir))
        opts.corpus.parent.mkdir(parents=True, exist_ok=True)
        opts.corpus.write_text(dump_corpus(corpus))
        counts: dict[str, int] = {}
        for e in corpus["entries"]:
            counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
        print(f"{opts.corpus}: {len(corpus['entries'])} argument lists {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
