"""Kept results (compiler/reuse.py): used only while the compiler, the invocation and every file the
compile read are unchanged; never for errors; the same output as a compile, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from compiler import reuse
from compiler.cli import main
from compiler.load import inputs

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
from compiler.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "compiled": "compiler.stages" in sys.modules}))
"""


def _run(cwd: Path, cache: Path, *argv: str, env: dict | None = None) -> tuple[dict, str]:
    """megatron-compile in a new process: (exit code and whether it compiled, what it printed)."""
    full_env = {k: v for k, v in os.environ.items() if k != "MEGATRON_COMPILE_CACHE"}
    full_env.update({"XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO), **(env or {})})
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=full_env, cwd=cwd)
    lines = proc.stdout.splitlines(keepends=True)
    assert lines, proc.stderr
    return json.loads(lines[-1]), "".join(lines[:-1]) + proc.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the repository's specs (a base, a model config) in a directory of its own."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "specs", root / "specs")
    shutil.copy(REPO / "tests" / "e2e" / "mem-b1.yaml", root / "specs" / "warns.yaml")  # compiles with a warning
    return root


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_an_unchanged_spec_is_not_compiled_again_and_gives_the_same_bytes(project, tmp_path):
    cache = tmp_path / "cache"
    first, first_err = _run(project, cache, "specs/tp2.yaml", "-o", "out-1")
    again, again_err = _run(project, cache, "specs/tp2.yaml", "-o", "out-2")
    assert first == {"code": 0, "compiled": True}
    assert again == {"code": 0, "compiled": False}
    assert _tree(project / "out-1") == _tree(project / "out-2")
    assert first_err.replace("out-1", "out-2") == again_err


def test_warnings_are_printed_again_from_a_kept_result(project, tmp_path):
    cache = tmp_path / "cache"
    first, first_err = _run(project, cache, "specs/warns.yaml", "-o", "out")
    again, again_err = _run(project, cache, "specs/warns.yaml", "-o", "out")
    assert (first["compiled"], again["compiled"]) == (True, False)
    assert "warning:" in first_err and "[distributed-optimizer-resume]" in first_err
    assert again_err == first_err.replace("(7 written, 0 unchanged, 0 removed)", "is up to date (7 files)")
    werror, _ = _run(project, cache, "specs/warns.yaml", "-o", "out", "--werror")
    assert werror == {"code": 1, "compiled": False}  # --werror applies to the kept warnings too


@pytest.mark.parametrize("change", ["spec", "base", "config", "lock-appears", "set", "out-dir-in-header"])
def test_each_input_of_a_compile_makes_it_compile_again(project, tmp_path, change):
    cache = tmp_path / "cache"
    spec = "specs/qwen3-0.6b.yaml"  # extends base.yaml, reads models/qwen3-0.6b/config.json
    (project / ".git").mkdir()  # a repository: an output directory inside it is named in headers
    argv = [spec, "-o", "out"]
    assert _run(project, cache, *argv)[0] == {"code": 0, "compiled": True}
    assert _run(project, cache, *argv)[0] == {"code": 0, "compiled": False}
    before = _tree(project / "out")
    if change == "spec":
        path = project / spec
        path.write_text(path.read_text().replace("name: qwen3-0-6b-ft", "name: qwen3-renamed"))
    elif change == "base":
        path = project / "specs" / "base.yaml"
        path.write_text(path.read_text() + "\n# a comment changes the bytes, not the result\n")
    elif change == "config":
        path = project / "specs" / "models" / "qwen3-0.6b" / "config.json"
        config = json.loads(path.read_text())
        config["rope_theta"] = 500000
        path.write_text(json.dumps(config))
    elif change == "lock-appears":
        (project / "specs" / "qwen3-0.6b.lock").write_text("not a lock\n")
    elif change == "set":
        argv += ["--set", "training.train_iters=1777"]
    elif change == "out-dir-in-header":
        argv = [spec, "-o", "elsewhere"]
    outcome, err = _run(project, cache, *argv)
    assert outcome["compiled"], f"a change of the {change} must compile again"
    if change == "lock-appears":
        assert outcome["code"] == 1 and "lock-invalid" in err
    elif change == "base":
        assert outcome["code"] == 0 and _tree(project / "out") == before
    elif change == "out-dir-in-header":
        assert outcome["code"] == 0 and b"-o elsewhere" in (project / "elsewhere" / "qwen3-0.6b" / "launch.sh").read_bytes()
    else:
        assert outcome["code"] == 0 and _tree(project / "out") != before
    assert _run(project, cache, *argv)[0]["compiled"] == (change == "lock-appears")  # kept again, errors never


def test_errors_are_never_kept(project, tmp_path):
    cache = tmp_path / "cache"
    path = project / "specs" / "tp2.yaml"
    path.write_text(path.read_text().replace("tensor: 2", "tensor: 3"))
    for _ in range(2):
        outcome, err = _run(project, cache, "specs/tp2.yaml", "-o", "out")
        assert outcome == {"code": 1, "compiled": True} and "error:" in err
    assert not list((cache / "megatron-compile" / "results").glob("*/*.json.z"))


def test_the_same_relative_path_from_another_directory_is_another_spec(project, tmp_path):
    cache = tmp_path / "cache"
    other = tmp_path / "other"
    shutil.copytree(project / "specs", other / "specs")
    path = other / "specs" / "tp2.yaml"
    path.write_text(path.read_text().replace("name: mcore-tp2-01", "name: tp2-other"))
    assert _run(project, cache, "specs/tp2.yaml", "-o", "out")[0]["code"] == 0
    assert _run(other, cache, "specs/tp2.yaml", "-o", "out")[0] == {"code": 0, "compiled": True}
    assert b"tp2-other" in (other / "out" / "tp2" / "job.json").read_bytes()


def test_check_compares_a_kept_result_with_the_disk(project, tmp_path):
    cache = tmp_path / "cache"
    assert _run(project, cache, "specs/tp2.yaml", "-o", "out")[0]["code"] == 0
    launch = project / "out" / "tp2" / "launch.sh"
    launch.write_text(launch.read_text() + "# edited by hand\n")
    outcome, err = _run(project, cache, "--check", "specs/tp2.yaml", "-o", "out")
    assert outcome == {"code": 1, "compiled": False}
    assert "edited by hand" in (err + launch.read_text())


@pytest.mark.parametrize("how", ["--no-cache", "MEGATRON_COMPILE_CACHE=off"])
def test_the_cache_can_be_turned_off(project, tmp_path, how):
    cache = tmp_path / "cache"
    argv = ["specs/tp2.yaml", "-o", "out"] + ([how] if how.startswith("--") else [])
    env = {"MEGATRON_COMPILE_CACHE": "off"} if not how.startswith("--") else None
    for _ in range(2):
        assert _run(project, cache, *argv, env=env)[0] == {"code": 0, "compiled": True}
    assert not list((cache / "megatron-compile" / "results").glob("*/*.json.z"))


def test_a_damaged_or_foreign_entry_is_compiled_again_and_replaced(project, tmp_path):
    cache = tmp_path / "cache"
    assert _run(project, cache, "specs/tp2.yaml", "-o", "out")[0]["compiled"]
    (entry,) = (cache / "megatron-compile" / "results").glob("*/*.json.z")
    good = json.loads(zlib.decompress(entry.read_bytes()))
    forged = dict(good, files={name: "forged\n" for name in good["files"]}, inputs={})
    packed = [zlib.compress(text.encode()) for text in (
        "", "{not json", json.dumps([1, 2]), json.dumps(dict(good, format=0)), json.dumps(dict(good, key="another")),
        json.dumps(forged))]
    for damage in [b"", b"not compressed", json.dumps(good).encode(), zlib.compress(json.dumps(good).encode())[:-4],
                   *packed]:
        entry.write_bytes(damage)
        assert _run(project, cache, "specs/tp2.yaml", "-o", "out")[0] == {"code": 0, "compiled": True}
        assert json.loads(zlib.decompress(entry.read_bytes())) == good
    assert b"forged" not in (project / "out" / "tp2" / "launch.sh").read_bytes()


def test_the_fingerprint_follows_the_compilers_files(tmp_path, monkeypatch):
    package = tmp_path / "compiler"
    shutil.copytree(REPO / "compiler", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "templates", package / "templates")
    monkeypatch.setattr(reuse.installation, "PACKAGE_DIR", str(package))
    before = reuse.fingerprint.__wrapped__()
    assert reuse.fingerprint.__wrapped__() == before
    template = package / "templates" / "launch.sh.j2"
    template.write_text(template.read_text() + "\n")
    after_template = reuse.fingerprint.__wrapped__()
    data = package / "megatron" / "data" / "megatron_args.json"
    data.write_text(data.read_text() + " ")
    assert len({before, after_template, reuse.fingerprint.__wrapped__()}) == 3


def test_every_file_a_compile_opens_is_a_recorded_input(in_repo, tmp_path):
    """Under an audit hook, each spec of the repository compiled: every file it opened outside the
    compiler's installation, Python's and the libraries' is among the inputs the entry keeps."""
    from compiler.stages import compile_spec

    opened: list[str] = []
    watching = [False]

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], str):
            opened.append(os.path.abspath(args[0]))

    sys.addaudithook(hook)
    own = [str(REPO / "compiler"), str(REPO / "templates"), os.environ.get("XDG_CACHE_HOME", "~/.cache"),
           *{os.path.dirname(os.path.dirname(p)) for p in sys.path if p.endswith("site-packages")},
           os.path.dirname(os.__file__)]
    specs = sorted(str(p.relative_to(REPO)) for d in ("specs", "tests/e2e", "tests/e2e/failed")
                   for p in (REPO / d).glob("*.yaml"))
    assert len(specs) > 40
    for spec in specs:
        opened.clear()
        with inputs.Recording() as seen:
            watching[0] = True
            try:
                result = compile_spec(spec, spec)
            finally:
                watching[0] = False
        assert set(result.bases) <= set(seen), f"{spec}: a base read once per process is an input of each spec"
        unrecorded = {p for p in opened if p not in seen and not any(p.startswith(o) for o in own)}
        assert not unrecorded, f"{spec} read {sorted(unrecorded)} without recording it"
        assert os.path.abspath(spec) in seen


def test_a_batch_with_kept_results_equals_one_without(in_repo, tmp_path, monkeypatch, capsys):
    """Every spec of specs/ and tests/e2e/: compiled, then from kept results, into two trees."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    reuse._directory.cache_clear()
    try:
        outputs = []
        for round_ in ("compiled", "kept"):
            code = main(["specs/", "tests/e2e/", "-o", str(tmp_path / round_), "-q"])
            captured = capsys.readouterr()
            outputs.append((code, captured.out, captured.err, _tree(tmp_path / round_)))
        assert outputs[0] == outputs[1]
        assert len(list((tmp_path / "cache" / "megatron-compile" / "results").glob("*/*.json.z"))) > 40
    finally:
        reuse._directory.cache_clear()
