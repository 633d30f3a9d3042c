"""The command line: exit codes, output formats, --explain, --werror, nothing written on errors."""

import io
import os
import json
import shutil

import pytest

from compiler.cli import main
from helpers import REPO, resolved_text

BAD = REPO / "tests" / "bad_specs"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_compiles_into_out_dir(tmp_path, in_repo):
    code, out, err = run("specs/tp2.yaml", "-o", str(tmp_path))
    assert code == 0, out + err
    assert sorted(p.name for p in (tmp_path / "tp2").iterdir()) == [
        "Dockerfile", "buildx.sh", "job.json", "launch.sh", "plan.md", "regctl.sh", "verify.sh"]
    assert f"specs/tp2.yaml: {tmp_path}/tp2/ (7 written, 0 unchanged, 0 removed)" in err


def test_errors_exit_1_with_summary_and_write_nothing(tmp_path, in_repo):
    spec = tmp_path / "tp3.yaml"
    spec.write_text(resolved_text("tp2").replace("  tensor: 2", "  tensor: 3").replace("  registry: cr", "  regsitry: cr"))
    code, out, err = run(str(spec), "-o", str(tmp_path / "out"))
    assert code == 1
    shown = str(spec)  # as given on the command line, as gcc and mypy print it
    assert out.splitlines() == [
        f"{shown}:8:3: error: unknown key 'regsitry' in image; did you mean 'registry'?  [unknown-key]",
        f"{shown}:31:11: error: parallelism.tensor (3) must divide the world size "
        "(workers 1 × gpus_per_worker 2 = 2)  [parallel-divisibility]",
        "  hint: with 2 GPUs, tensor × pipeline × context must be 1 or 2",
    ]
    assert err == f"2 errors in {shown}\n"
    assert not (tmp_path / "out").exists()


def test_format_json_lists_the_diagnostics(in_repo):
    code, out, _ = run("--format", "json", "tests/bad_specs/five-independent-mistakes.yaml")
    assert code == 1
    data = json.loads(out)
    assert [d["code"] for d in data] == ["unknown-key", "value", "value", "run-root-outside-mount", "bounded-example-args"]
    first = data[0]
    assert first == {
        "code": "unknown-key", "severity": "error",
        "message": "unknown key 'regsitry' in image; did you mean 'registry'?",
        "file": "tests/bad_specs/five-independent-mistakes.yaml", "line": 6, "column": 3,
        "end_line": 6, "end_column": 11, "key_path": ["image", "regsitry"], "hint": None,
    }


def test_format_github_prints_annotations(in_repo):
    code, out, _ = run("--format", "github", "tests/bad_specs/parallel-divisibility-tensor.yaml")
    assert code == 1
    assert out == (
        "::error file=tests/bad_specs/parallel-divisibility-tensor.yaml,line=25,col=11,endLine=25,"
        "title=parallel-divisibility::parallelism.tensor (3) must divide the world size "
        "(workers 1 × gpus_per_worker 2 = 2)%0Ahint: with 2 GPUs, tensor × pipeline × context must be 1 or 2\n"
    )


def test_warnings_pass_unless_werror(tmp_path, in_repo):
    spec = "tests/bad_specs/rdma-single-worker-warning.yaml"
    code, out, err = run(spec, "-o", str(tmp_path))
    assert code == 0
    assert "warning: resources.rdma is on for a single worker" in out
    assert "1 warning in" in err
    code, out, _ = run(spec, "-o", str(tmp_path / "w"), "--werror")
    assert code == 1
    assert "error: resources.rdma is on for a single worker" in out
    assert not (tmp_path / "w").exists()


def test_explain_prints_the_rank_layout_megatron_builds(in_repo, tmp_path):
    code, out, _ = run("--explain", "specs/tp2-dp2.yaml", "-o", str(tmp_path))
    assert code == 0
    # Megatron Core's RankGenerator (order tp-cp-ep-dp-pp) for world 4, TP=2: tensor groups are
    # consecutive ranks, data-parallel groups take one rank from each tensor group.
    assert "    world size       4 = workers 2 × gpus_per_worker 2\n" in out
    assert "    data (derived)   2 = 4 / (tensor 2 × pipeline 1 × context 1)\n" in out
    assert "    tensor groups    [0,1] [2,3]\n" in out
    assert "    data groups      [0,2] [1,3]\n" in out
    assert "    pipeline groups  [0] [1] [2] [3]\n" in out
    assert "    worker 0 ranks   0,1\n" in out
    assert "    worker 1 ranks   2,3\n" in out
    assert "    train log           /mnt/megatron/runs/mcore-tp2-dp2-01/nodes/node-$NODE_RANK/train.log\n" in out
    assert "    checkpoint          /mnt/megatron/runs/mcore-tp2-dp2-01/ckpt\n" in out
    assert not tmp_path.joinpath("tp2-dp2").exists(), "--explain writes nothing"


def test_explain_json(in_repo):
    code, out, _ = run("--explain", "--format", "json", "specs/tp2-dp2.yaml")
    assert code == 0
    document = json.loads(out)
    assert document["diagnostics"] == [] and len(document["specs"]) == 1
    data = document["specs"][0]
    assert (data["world_size"], data["data_parallel"], data["tensor_parallel"]) == (4, 2, 2)
    assert data["groups"]["tensor"] == [[0, 1], [2, 3]]
    assert data["groups"]["data"] == [[0, 2], [1, 3]]
    assert data["workers_ranks"] == [[0, 1], [2, 3]]


def test_directory_and_glob_arguments(tmp_path, in_repo):
    code, _, err = run("specs/", "-o", str(tmp_path))
    assert code == 0, err
    assert {p.name for p in tmp_path.iterdir()} >= {"tp2", "tp2-dp2"}
    code, _, err = run("specs/tp2*.yaml", "--check", "-o", str(tmp_path))
    assert code == 0, err


def test_missing_spec_is_a_diagnostic_not_a_traceback(in_repo):
    code, out, _ = run("specs/nope.yaml")
    assert code == 1
    assert out == "specs/nope.yaml: error: no such spec file, directory or glob match  [file-unreadable]\n"


def test_usage_errors_exit_2():
    assert run()[0] == 2
    assert run("--format", "xml", "x.yaml")[0] == 2


def test_help_and_version_exit_0():
    code, _, _ = run("--version")
    assert code == 0
    assert run("--help")[0] == 0


def test_schema_check_passes_in_the_repo(in_repo):
    assert run("schema", "--check")[0] == 0


def test_schema_check_fails_on_drift(tmp_path):
    shutil.copytree(REPO / "schemas", tmp_path / "schemas")
    path = tmp_path / "schemas" / "megatron-job.schema.json"
    path.write_text(path.read_text().replace('"version"', '"versoin"', 1))
    code, out, err = run("schema", "--check", "--out-dir", str(tmp_path / "schemas"))
    assert code == 1
    assert "versoin" in out and "schemas are stale" in err


def test_a_large_batch_runs_on_workers_and_reports_in_spec_order(tmp_path, in_repo):
    """From 32 specs on, specs are compiled by forked workers; output and artifacts stay the same."""
    from compiler.batch import PARALLEL_MIN_SPECS

    text = (REPO / "specs" / "tp2.yaml").read_text().replace("extends: base.yaml", f"extends: {REPO}/specs/base.yaml")
    specs = tmp_path / "specs"
    specs.mkdir()
    count = PARALLEL_MIN_SPECS + 8
    for i in range(count):
        spec = text.replace("name: mcore-tp2-01", f"name: job-{i:03d}").replace(
            "run_root: /mnt/megatron/runs/mcore-tp2-01", f"run_root: /mnt/megatron/runs/job-{i:03d}")
        (specs / f"job-{i:03d}.yaml").write_text(spec)
    (specs / "job-bad.yaml").write_text(text.replace("  tensor: 2", "  tensor: 3"))
    code, out, err = run(str(specs), "-o", str(tmp_path / "out"))
    assert code == 1
    written = [line.split(":")[0] for line in err.splitlines() if "written" in line]
    assert written == sorted(written) and len(written) == count
    assert out.count("[parallel-divisibility]") == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"job-{i:03d}" for i in range(count)]
    launch = (tmp_path / "out" / "job-007" / "launch.sh").read_text()
    assert "RUN_ROOT=/mnt/megatron/runs/job-007\n" in launch
    code, _, err = run("--check", str(specs), "-o", str(tmp_path / "out"))
    assert code == 1 and err.count("is up to date") == count  # the bad spec still fails


def test_bases_found_before_compiling_match_what_yaml_reads(tmp_path):
    from compiler.load.discover import bases_of as _bases_of, extends_entries as _extends_entries

    forms = ["extends: base.yaml\n", "extends: base.yaml  # the shared part\n", "extends: 'base.yaml'\n",
             "extends: [a.yaml, b.yaml]\n", "extends:\n  - a.yaml\n  - sub/c.yml\n", "extends: true.yaml\n",
             "name: x\nextends: base.yaml\nversion: 1\n", "extends: 1.0\n", "version: 1\n"]
    for i, text in enumerate(forms):
        spec = tmp_path / f"s{i}.yaml"
        spec.write_text(text)
        entries = _extends_entries(text[text.index("extends"):].split("\nversion")[0]) if "extends" in text else []
        expected = {os.path.realpath(tmp_path / e) for e in entries}
        assert _bases_of([str(spec)]) == expected, text


def test_a_compile_keeps_nothing_in_the_users_cache(in_repo, tmp_path, monkeypatch):
    """No result is kept between runs: compiling, checking and explaining every spec writes nothing
    under $XDG_CACHE_HOME (the kept-results cache, megatron-compile/results, is gone)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert run("specs/", "-o", str(tmp_path / "out"))[0] == 0
    assert run("--check", "specs/", "-o", str(tmp_path / "out"))[0] == 0
    assert run("--explain", "specs/tp2.yaml")[0] == 0
    assert not (cache / "megatron-compile" / "results").exists()
    assert not cache.exists(), sorted(str(p) for p in cache.rglob("*"))


def test_no_cache_is_a_deprecated_no_op(in_repo, tmp_path):
    code, _, err = run("--no-cache", "specs/tp2.yaml", "-o", str(tmp_path))
    assert code == 0 and "--no-cache is deprecated and does nothing" in err


def test_a_run_leaves_the_collector_as_it_found_it(tmp_path, in_repo):
    """main() keeps the cyclic collector off while it runs (docs/performance.md) and gives it back
    as it was: a test process, or any caller of main(), keeps collecting."""
    import gc

    assert gc.isenabled()
    code, out, err = run("specs/tp2.yaml", "-o", str(tmp_path))
    assert code == 0, out + err
    assert gc.isenabled()
    gc.disable()
    try:
        assert run("--version")[0] == 0 and not gc.isenabled()
    finally:
        gc.enable()


def test_the_console_entry_freezes_what_the_run_made_for_the_exit(monkeypatch, capsys):
    """console() (the console script, python -m compiler) runs main() and then moves every object
    out of the collector's sight, so that the interpreter's last collection at exit walks nothing."""
    import gc
    import sys

    from compiler.cli import console

    monkeypatch.setattr(sys, "argv", ["megatron-compile", "--version"])
    before = gc.get_freeze_count()
    try:
        assert console() == 0
        assert gc.get_freeze_count() > before and gc.isenabled()
    finally:
        gc.unfreeze()
    assert "megatron-compile" in capsys.readouterr().out


@pytest.mark.parametrize("typo, line", [("    num_layers: 4", "    num_layrs: 4"), ("  precision: bf16", "  precison: bf16")])
def test_an_unknown_key_does_not_hide_the_rest_of_its_section(tmp_path, in_repo, typo, line):
    """A misspelt key is read as the key it misspells for the rules' sake: the other mistakes of its section (here
    mock data without its tokenizer) are reported in the same run."""
    text = resolved_text("pretrain-mock").replace(typo, line).replace("type: NullTokenizer", "type: GPT2BPETokenizer")
    spec = tmp_path / "typo.yaml"
    spec.write_text(text)
    code, out, _ = run("--format", "json", str(spec), "-o", str(tmp_path / "out"))
    assert code == 1
    codes = sorted(d["code"] for d in json.loads(out))
    assert "unknown-key" in codes and "megatron-mock-tokenizer" in codes, codes
    assert not (tmp_path / "out").exists()
