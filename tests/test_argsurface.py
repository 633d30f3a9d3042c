"""compiler.megatron.argsurface: raw training.args checked against Megatron-LM's parser at the pin.

The differential tests read tests/fixtures/argsurface/corpus.json, which tools/megatron_argsurface.py
wrote by running Megatron's real parser on every list; they need neither Megatron nor torch. The
regeneration test runs only where ARGSURFACE_MEGATRON_DIR names a checkout (and torch imports).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from compiler.megatron import argsurface
from compiler.megatron.argsurface import (
    ARITY, HELP, REMOVED, UNKNOWN, VALUE, ArgIssue, check_args, flag_info, known_flag, removed_flag,
)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "argsurface" / "corpus.json"
DATA = ROOT / "compiler" / "megatron" / "data" / "megatron_args.json"
PIN = "571370c829ca768fe37244f4e2e7f28d8accc4ab"


def codes(args: list[str]) -> list[tuple[int, str]]:
    """(index, code) of every issue for an argument list."""
    return [(issue.index, issue.code) for issue in check_args(args)]


def only(args: list[str]) -> ArgIssue:
    """The single issue an argument list has."""
    issues = check_args(args)
    assert len(issues) == 1, issues
    return issues[0]


# --- the examples of issue 14 ---------------------------------------------------------------------


@pytest.mark.parametrize("args, code", [
    (["--data-impl", "mmap"], REMOVED),
    (["--no-query-key-layer-scaling"], REMOVED),
    (["--no-async-tensor-model-parallel-allreduce"], REMOVED),
    (["--resume-with-new-dataset"], UNKNOWN),
    (["--load-iteration", "40"], UNKNOWN),
    (["--override-dataloader-consumed-samples", "0"], UNKNOWN),
])
def test_issue_examples(args: list[str], code: str) -> None:
    issue = only(args)
    assert (issue.index, issue.code) == (0, code)
    assert issue.message.startswith(f"training.args: {args[0]} ")
    assert issue.hint


def test_removed_flag_names_last_release_and_says_what_to_do() -> None:
    issue = only(["--data-impl", "mmap"])
    assert issue.message == ("training.args: --data-impl was removed from Megatron-LM after 23.06; "
                             "the pinned commit rejects it")
    assert issue.hint is not None and issue.hint.startswith("delete it: Megatron now detects the dataset format")
    assert "--apply-query-key-layer-scaling" in (only(["--no-query-key-layer-scaling"]).hint or "")
    assert "core_v0.15.3" in only(["--no-async-tensor-model-parallel-allreduce"]).message


def test_removed_flag_with_a_dash_spelling_today() -> None:
    issue = only(["--local_rank", "0"])
    assert issue.code == REMOVED and issue.hint == "use --local-rank: Megatron's flags use dashes now"


def test_removed_equals_form_and_record() -> None:
    assert codes(["--data-impl=mmap"]) == [(0, REMOVED)]
    record = removed_flag("--data-impl")
    assert record is not None and record.last == "23.06" and record.src.startswith("megatron/arguments.py:")
    assert removed_flag("--lr") is None


# --- unknown flags and did-you-mean -------------------------------------------------------------


def test_typo_gets_did_you_mean() -> None:
    issue = only(["--tensor-model-paralel-size", "2"])
    assert issue.code == UNKNOWN and "--tensor-model-parallel-size" in (issue.hint or "")


def test_underscore_spelling_gets_the_dash_spelling() -> None:
    issue = only(["--tensor_model_parallel_size", "2"])
    assert issue.code == UNKNOWN
    assert issue.hint == "did you mean --tensor-model-parallel-size? Megatron's flags use dashes, not underscores"
    assert only(["--micro_batch_size=4"]).hint.startswith("did you mean --micro-batch-size?")  # type: ignore[union-attr]


def test_underscore_spellings_megatron_itself_uses_are_known() -> None:
    # megatron/training/arguments.py keeps a few underscore aliases; they must not be flagged
    assert check_args(["--override-opt_param-scheduler"]) == []
    assert known_flag("--use-checkpoint-opt_param-scheduler")


def test_flag_shaped_token_with_a_space() -> None:
    # argparse reads any token holding a space as a value; the checker still names the flag
    assert codes(["--data-impl=a b"]) == [(0, REMOVED)]
    assert codes(["--lr 1"]) == [(0, UNKNOWN)]
    assert only(["--lr 1"]).hint == "split it into two items: '--lr', '1'"
    assert check_args(["--data-path", "--weird name"]) == []  # a value of nargs '*' --data-path


def test_unknown_flag_takes_its_values_with_it() -> None:
    assert codes(["--load-iteration", "40", "--lr", "1e-4"]) == [(0, UNKNOWN)]


def test_modelopt_flags_only_with_modelopt() -> None:
    args = ["--export-model-type", "HybridModel"]
    issue = only(args)
    assert issue.code == UNKNOWN and "nvidia-modelopt" in issue.message
    assert check_args(args, modelopt=True) == []
    assert codes(["--export-model-type", "Bogus"]) == [(0, UNKNOWN)]
    assert check_args(["--export-model-type", "Bogus"], modelopt=True)[0].code == VALUE
    assert known_flag("--export-model-type", modelopt=True) and not known_flag("--export-model-type")
    info = flag_info("--export-model-type", modelopt=True)
    assert info is not None and info.src.startswith("megatron/post_training/arguments.py:")


def test_kitchen_flags_are_conditional_not_known() -> None:
    # added only when the kitchen package imports (megatron/training/arguments.py:3353)
    assert not known_flag("--kitchen-recipe-number")
    assert codes(["--kitchen-recipe-number", "1"]) == [(0, UNKNOWN)]


# --- values: type and choices -------------------------------------------------------------------


@pytest.mark.parametrize("args, index", [
    (["--seed", "x"], 1), (["--seed", "1.5"], 1), (["--lr", "abc"], 1), (["--lr", ""], 1),
    (["--lr=abc"], 0), (["--seed=1e3"], 0), (["--window-size", "a,b"], 1),
    (["--moe-layer-freq", "[1]+2"], 1), (["--moe-layer-freq", "[1,"], 1), (["--moe-layer-freq", "[a]"], 1),
])
def test_type_errors(args: list[str], index: int) -> None:
    assert codes(args) == [(index, VALUE)]


@pytest.mark.parametrize("args", [
    ["--seed", "-3"], ["--seed", "+2"], ["--seed", "1_000"], ["--seed", " 7 "], ["--lr", "-0.5"],
    ["--lr", "-.5"], ["--lr", "1e-4"], ["--lr", "inf"], ["--lr=-1e5"], ["--window-size", "(4,4)"],
    ["--moe-layer-freq", "([1]*3+[0]*1)*3"], ["--moe-layer-freq", "2"], ["--onnx-safe", "False"],
])
def test_values_argparse_accepts(args: list[str]) -> None:
    assert check_args(args) == []


def test_choices() -> None:
    issue = only(["--optimizer", "adamw"])
    assert (issue.index, issue.code) == (1, VALUE) and issue.hint == "did you mean 'adam'?"
    assert "must be one of adam, sgd" in issue.message
    assert check_args(["--optimizer=sgd"]) == []
    assert codes(["--empty-unused-memory-level", "3"]) == [(1, VALUE)]
    assert check_args(["--empty-unused-memory-level", "01"]) == []  # int('01') == 1 is a choice


def test_enum_choices_accept_member_names_only() -> None:
    assert check_args(["--attention-backend", "flash"]) == []
    assert codes(["--attention-backend", "Flash"]) == [(1, VALUE)]
    assert check_args(["--exit-signal", "SIGIOT"]) == []  # an alias of SIGABRT: Signals['SIGIOT'] works
    assert codes(["--exit-signal", "15"]) == [(1, VALUE)]
    assert check_args(["--cuda-graph-modules", "full", "attn"]) == []
    assert codes(["--cuda-graph-modules", "attn", "bogus"]) == [(2, VALUE)]


# --- arity -----------------------------------------------------------------------------------------


def test_flag_missing_its_value() -> None:
    assert codes(["--lr"]) == [(0, ARITY)]
    assert codes(["--lr", "--seed", "1"]) == [(0, ARITY)]
    assert codes(["--cuda-graph-modules"]) == [(0, ARITY)]  # nargs '+'


def test_negative_number_argparse_reads_as_a_flag() -> None:
    issue = only(["--lr", "-1e5"])
    assert issue.code == ARITY and issue.hint == "argparse reads -1e5 as a flag, not a value; write --lr=-1e5"


def test_switch_given_a_value() -> None:
    assert codes(["--fp16", "true"]) == [(1, ARITY)]
    assert codes(["--fp16=true"]) == [(0, ARITY)]
    assert codes(["--fp16="]) == [(0, ARITY)]
    assert codes(["--no-rl-skip-bos-token=1"]) == [(0, ARITY)]
    assert "turns the setting off" in (check_args(["--no-mmap-bin-files", "1"])[0].hint or "")


def test_nargs_star_plus_and_fixed() -> None:
    assert check_args(["--data-path"]) == []  # nargs '*': none is fine
    assert check_args(["--data-path", "a", "b", "c", "--lr", "1"]) == []
    assert codes(["--split", "99,1,0", "extra"]) == [(2, ARITY)]
    three = [name for name in _flags() if _flags()[name]["nargs"] == 3]
    assert three, "the pinned parser has one nargs=3 flag"
    assert check_args([three[0], "1", "2", "3"]) == []
    assert codes([three[0], "1", "2"]) == [(0, ARITY)]
    assert codes([f"{three[0]}=1"]) == [(0, ARITY)]


def test_positional_tokens_and_double_dash() -> None:
    assert codes(["x"]) == [(0, ARITY)]
    assert codes(["-5"]) == [(0, ARITY)]
    assert codes(["--fp16", "--", "x"]) == [(1, ARITY)]
    assert check_args(["--lr=--"]) == []  # argparse drops the '--' and stores []; Megatron's parser accepts


def test_help_flag() -> None:
    assert codes(["--help"]) == [(0, HELP)]
    assert codes(["--lr", "1", "-h"]) == [(2, HELP)]
    assert codes(["-hh"]) == [(0, HELP)]
    assert codes(["-hx"]) == [(0, UNKNOWN)]


def test_all_issues_reported_in_order() -> None:
    args = ["--data-impl", "mmap", "--seed", "x", "--fp16", "1", "--optimizer", "adamw"]
    assert codes(args) == [(0, REMOVED), (3, VALUE), (5, ARITY), (7, VALUE)]


# --- API -----------------------------------------------------------------------------------------


def test_flag_info_and_known_flag() -> None:
    info = flag_info("--lr")
    assert info is not None and (info.dest, info.action, info.nargs, info.type) == ("lr", "store", None, "float")
    assert info.src.startswith("megatron/training/arguments.py:")
    fp16 = flag_info("--fp16")
    assert fp16 is not None and fp16.action == "store_true" and fp16.nargs == 0 and fp16.type is None
    save = flag_info("--save-interval")
    assert save is not None and save.aliases == ("--persistent-save-interval",)
    assert flag_info("--data-impl") is None and not known_flag("--data-impl") and known_flag("--lr")
    hidden = [name for name in _flags() if flag_info(name).hidden]  # type: ignore[union-attr]
    assert "--cuda-graph-scope" in hidden  # help=argparse.SUPPRESS, megatron/training/arguments.py:1836


def test_every_issue_code_is_registered_kebab_case() -> None:
    for code in argsurface.CODES:
        assert re.fullmatch(r"megatron(-[a-z]+)+", code)


# --- the data file ---------------------------------------------------------------------------------


def _flags() -> dict[str, dict]:
    return json.loads(DATA.read_text())["flags"]


def test_data_file_records_its_origin_and_is_one_flag_a_line() -> None:
    doc = json.loads(DATA.read_text())
    assert doc["megatron_commit"] == PIN and doc["parser"]["allow_abbrev"] is False
    assert len(doc["flags"]) > 700 and len(doc["removed"]) > 50
    assert "core_v0.18.2" in doc["removed_scanned_tags"] and "core_v0.19.0" not in doc["removed_scanned_tags"]
    lines = DATA.read_text().splitlines()
    flag_lines = [line for line in lines if line.startswith('  "-')]
    assert len(flag_lines) == (len(doc["flags"]) + len(doc["removed"]) + len(doc["conditional"])
                               + len(doc["modelopt"]))
    names = [json.loads("{" + line.rstrip(",") + "}") for line in flag_lines]
    assert all(len(n) == 1 for n in names)
    assert not set(doc["flags"]) & set(doc["removed"])


# --- differential: the checker against Megatron's real parser --------------------------------------


def _corpus() -> dict:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def test_corpus_is_large_and_mixed() -> None:
    corpus = _corpus()
    outcomes = [e["outcome"] for e in corpus["entries"]]
    assert corpus["megatron_commit"] == PIN
    assert len(outcomes) > 1000 and outcomes.count("accept") > 500 and outcomes.count("reject") > 500


@pytest.mark.parametrize("modelopt", [False, True], ids=["plain", "modelopt"])
def test_checker_agrees_with_megatron_on_every_corpus_entry(modelopt: bool) -> None:
    """Plain: parse_args(extra_args_provider=None); modelopt: with add_modelopt_args, as pretrain_gpt.py."""
    disagree = []
    for entry in _corpus()["entries"]:
        outcome = entry.get("modelopt_outcome", entry["outcome"]) if modelopt else entry["outcome"]
        accepted = not check_args(entry["args"], modelopt=modelopt)
        if accepted != (outcome == "accept"):
            disagree.append((entry["args"], outcome, entry["message"]))
    assert not disagree, f"{len(disagree)} disagreements, first: {disagree[:5]}"


def test_corpus_has_entries_only_modelopt_accepts() -> None:
    differing = [e for e in _corpus()["entries"] if "modelopt_outcome" in e]
    assert sum(e["modelopt_outcome"] == "accept" for e in differing) > 20


def _issue_flags(args: list[str], issue: ArgIssue) -> set[str]:
    """The token an issue points at and the option whose value it is, as argparse would name them."""
    names = {args[issue.index].split("=", 1)[0]}
    j = issue.index
    flags = argsurface._surface().flags
    while j > 0 and argsurface._classify(args[j], flags) is None:
        j -= 1
    names.add(args[j].split("=", 1)[0])
    return names


def test_checker_blames_the_flag_megatron_names() -> None:
    """Where Megatron's error names an argument, one of our issues is about that argument."""
    checked = 0
    for entry in _corpus()["entries"]:
        named = re.search(r"error: argument ([^:]+): ", entry["message"])
        if entry["outcome"] != "reject" or not named:
            continue
        want = named.group(1).split("/")
        issues = check_args(entry["args"])
        blamed = set().union(*(_issue_flags(entry["args"], i) for i in issues))
        assert any(b.startswith(w) for b in blamed for w in want), (entry, issues)
        checked += 1
    assert checked > 500


# --- the layer-pattern interpreter against eval() ---------------------------------------------------


def _megatron_pattern(text: str) -> tuple[bool, object]:
    """megatron/training/arguments.py:254-263 and :337-360 as written (eval included)."""
    try:
        if "[" not in text:
            return True, int(text)
        if re.compile(r"[^,\d\[\]\(\)\+\*]").search(text):
            raise ValueError(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # "[1](2)": 'list' object is not callable
            return True, eval(text)  # noqa: S307 - the alphabet is digits, brackets, commas, + and * only
    except Exception:
        return False, None


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="[](),+*0123", min_size=1, max_size=14).filter(lambda s: "**" not in s))
def test_layer_pattern_matches_eval(text: str) -> None:
    assert argsurface._convert("int_or_pattern", text) == _megatron_pattern(text)


@pytest.mark.parametrize("text", ["[2**3]", "[1]*2**2", "[1][0]", "[*[1],2]", "[1](2)", "[]", "[1]*0"])
def test_layer_pattern_corners(text: str) -> None:
    assert argsurface._convert("int_or_pattern", text) == _megatron_pattern(text)


# --- regeneration, where a Megatron checkout exists ------------------------------------------------


@pytest.mark.allow_ci_skip  # a checkout of Megatron-LM is never committed here
@pytest.mark.skipif(not os.environ.get("ARGSURFACE_MEGATRON_DIR"), reason="needs ARGSURFACE_MEGATRON_DIR "
                    "(a checkout of the pinned commit) and a Python with torch and triton")
def test_regenerating_reproduces_the_committed_files(tmp_path: Path) -> None:
    python = os.environ.get("ARGSURFACE_PYTHON", sys.executable)
    git_dir = os.environ.get("ARGSURFACE_GIT_DIR")
    cmd = [python, str(ROOT / "tools" / "megatron_argsurface.py"), os.environ["ARGSURFACE_MEGATRON_DIR"],
           "-o", str(tmp_path / "args.json"), "--corpus", str(tmp_path / "corpus.json")]
    if git_dir:
        cmd += ["--git-dir", git_dir]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    fresh = json.loads((tmp_path / "args.json").read_text())
    committed = json.loads(DATA.read_text())
    assert fresh["flags"] == committed["flags"] and fresh["modelopt"] == committed["modelopt"]
    if git_dir:
        assert fresh["removed"] == committed["removed"]
    assert json.loads((tmp_path / "corpus.json").read_text())["entries"] == _corpus()["entries"]
