"""Messages on ordinary mistakes say what is wrong and where (issue 29, items 11 and 12): a --set into
a list, --print --format json, --check's command, -o naming a file, a YAML tab, an invisible
character, extends naming a URL, `init -o` under a missing directory."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from compiler.cli import main
from helpers import REPO


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    return tmp_path / "tp2.yaml"


@pytest.mark.parametrize("key", ["training.args.0", "training.args.0.x", "slurm.container.mounts.1", "image.base.x",
                                 "training.script.0", "training.args[0]", "slurm.container.mounts[1].x"])
def test_a_set_into_a_list_is_blamed_on_the_set(spec, key):
    if key.startswith("slurm"):
        spec.write_text(spec.read_text() + "platform: slurm\nslurm: {partition: p, container: {mounts: [/a:/mnt/megatron]}}\n")
    code, out, err = _run(str(spec), "-o", str(spec.parent / "o"), "--set", f"{key}=--foo")
    assert code == 1
    line = next(l for l in (out + err).splitlines() if "error:" in l)
    assert line.startswith(f"--set {key}=--foo:1:7: error:"), line
    assert "--set replaces" in line or "it has no keys" in line, line


def test_print_as_json_is_one_json_document(spec):
    code, out, err = _run(str(spec), "--print", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"specs", "diagnostics"} and doc["specs"][0]["resolved"]["name"] == "mcore-tp2-01"
    code, out, _ = _run(str(spec.parent / "missing.yaml"), "--print", "--format", "json")
    assert code == 1 and json.loads(out)["diagnostics"][0]["code"] == "file-unreadable"


def test_check_names_the_output_directory_it_was_given(spec):
    code, out, err = _run(str(spec), "-o", str(spec.parent / "elsewhere"), "--check")
    assert code == 1
    assert f"run `megatron-compile {spec} -o {spec.parent / 'elsewhere'}` and commit the result" in out + err


def test_o_naming_a_file_says_so(spec):
    target = spec.parent / "afile"
    target.write_text("x")
    code, out, err = _run(str(spec), "-o", str(target))
    assert code == 1 and f"{target} is a file, not a directory" in out + err and "free disk space" not in out + err


@pytest.mark.parametrize("text", ["version: 1\nname: x\nimage:\n\tbase: y\n", "version: 1\nimage:\n  base: y\n\t  tag: 1\n",
                                  "version: 1\nname:\tx\nimage: {base:\ty}\n\tz: 1\n"])
def test_a_tab_is_named(tmp_path, text):
    path = tmp_path / "tab.yaml"
    path.write_text(text)
    code, out, err = _run(str(path), "-o", str(tmp_path / "o"))
    assert code == 1 and "tab character" in out + err and "indent with spaces" in out + err


@pytest.mark.parametrize("char", ["\u00ad", "\u2063", "\U0001d173", "\u180e", "\ufe0f", "\U000e0041"])
def test_invisible_characters_are_refused(spec, char):
    spec.write_text(spec.read_text().replace("training:", f"training:\n  env: {{NOTE: \"a{char}b\"}}", 1))
    code, out, err = _run(str(spec), "-o", str(spec.parent / "o"))
    assert code == 1 and "[unsafe-character]" in out + err


@pytest.mark.parametrize("url", ["https://example.com/base.yaml", "s3://bucket/base.yaml", "git+ssh://h/r/base.yml"])
def test_extends_naming_a_url_says_so(tmp_path, url):
    path = tmp_path / "job.yaml"
    path.write_text(f"extends: {url}\nname: x\n")
    code, out, err = _run(str(path), "-o", str(tmp_path / "o"))
    assert code == 1 and f"extends: {url} is a URL" in out + err


def test_init_under_a_missing_directory_and_onto_a_directory(tmp_path):
    code, out, err = _run("init", "x", "-o", str(tmp_path / "new" / "dir" / "x.yaml"))
    assert "Traceback" not in out + err and code in (0, 1, 2)
    (tmp_path / "adir.yaml").mkdir()
    code, out, err = _run("init", "x", "-o", str(tmp_path / "adir.yaml"))
    assert code != 0 and "Traceback" not in out + err and "adir.yaml" in out + err
