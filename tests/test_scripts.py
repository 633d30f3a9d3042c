"""training.script against Megatron-LM's files at the pinned commit (issue 29, item 4): the shipped
list (compiler/megatron/data/megatron_files.txt) is what tools/megatron_files.py writes from a
checkout, and a script that is not one of those files is a located error naming what to write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.megatron import PINNED_COMMIT
from compiler.megatron.scripts import FILES, entry_points, pinned_files, script_problem
from helpers import REPO, compile_text

ROOT = "/opt/Megatron-LM"
CHECKOUT = os.environ.get("MEGATRON_LM_DIR") or ("/work/ext/megatron-lm" if Path("/work/ext/megatron-lm/pretrain_gpt.py").is_file() else None)


@pytest.mark.allow_ci_skip  # a checkout of Megatron-LM is never committed here
@pytest.mark.skipif(CHECKOUT is None, reason="needs MEGATRON_LM_DIR (a checkout of the pinned commit)")
def test_the_shipped_file_list_is_what_the_tool_writes_from_the_checkout(tmp_path):
    out = tmp_path / "files.txt"
    subprocess.run([sys.executable, str(REPO / "tools" / "megatron_files.py"), CHECKOUT, "-o", str(out)],
                   check=True, cwd=REPO)
    assert out.read_text() == FILES.read_text(), "stale: run tools/megatron_files.py MEGATRON_LM_DIR -o " + str(FILES)


def test_the_list_holds_the_entry_points_the_compiler_names():
    files = pinned_files()
    assert {"pretrain_gpt.py", "pretrain_mamba.py", "pretrain_hybrid.py", "examples/run_simple_mcore_train_loop.py",
            "tools/preprocess_data.py", "examples/bert/pretrain_bert.py"} <= files
    assert "pretrain_gpt2.py" not in files and "pretrain_bert.py" not in files
    assert FILES.read_text().startswith(f"# The Python files of Megatron-LM at {PINNED_COMMIT}")
    assert "examples/t5/pretrain_t5.py" in entry_points()


@pytest.mark.parametrize(("script", "expected"), [
    ("pretrain_gpt2.py", "Megatron-LM removed pretrain_gpt2.py"),
    ("pretrain_bert.py", "is at examples/bert/pretrain_bert.py"),
    (f"{ROOT}/pretrain_t5.py", "is at examples/t5/pretrain_t5.py"),
    ("pretrain_gtp.py", "did you mean pretrain_gpt.py?"),
    ("examples/deepseek_v3/pretrain_deepseek.py", "Pai-Megatron-Patch"),
    ("./examples/../pretrain_mambaa.py", "did you mean pretrain_mamba.py?"),
    ("my_train.py", "is not a file of Megatron-LM"),
])
def test_a_script_that_is_not_megatrons_says_what_to_write(script, expected):
    problem = script_problem(script, ROOT, PINNED_COMMIT)
    assert problem is not None and expected in problem.message


@pytest.mark.parametrize("script", ["pretrain_gpt.py", f"{ROOT}/pretrain_mamba.py", "./pretrain_hybrid.py",
                                    "/mnt/megatron/code/train.py", "examples/multimodal/train.py"])
def test_megatrons_own_files_and_scripts_outside_its_root_pass(script):
    assert script_problem(script, ROOT, PINNED_COMMIT) is None


def test_another_commit_is_not_checked_against_the_pinned_list():
    assert script_problem("pretrain_gpt2.py", ROOT, "0" * 40) is None


def test_a_spec_naming_a_missing_script_is_a_located_error(tmp_path):
    text = (REPO / "tests" / "bad_specs" / "script-outside-root.yaml").read_text()
    result = compile_text(text.replace("../../pretrain_hybrid.py", "pretrain_gpt2.py"), "specs/x.yaml", tmp=tmp_path)
    found = [d for d in result.diagnostics if d.code == "script-not-in-megatron"]
    assert found and (found[0].line, found[0].column) == (30, 11) and "pretrain_gpt.py" in (found[0].hint or "")
