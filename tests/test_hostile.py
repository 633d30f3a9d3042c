"""Hostile inputs (issue 29, items 7, 8 and 11): a config.json, a spec, a base or a lock that is not
what it claims is a located diagnostic, never a traceback, a hang or unbounded memory.

The property tests run in a child process under a memory limit (resource.setrlimit RLIMIT_AS) with
a per-example time limit (setitimer): a hang or a blow-up fails the test instead of stalling it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.load import jsonfile
from compiler.load.files import Refused, read_regular
from helpers import REPO

QWEN = REPO / "specs" / "models" / "qwen3-0.6b" / "config.json"


def _compile(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), out.getvalue() + err.getvalue()  # diagnostics, then anything else


def _hf_spec(tmp: Path, config_text: str | None = None) -> Path:
    """specs/qwen3-0.6b.yaml with its base, beside a config.json holding `config_text`."""
    for name in ("qwen3-0.6b.yaml", "base.yaml"):
        (tmp / name).write_text((REPO / "specs" / name).read_text())
    (tmp / "models" / "qwen3-0.6b").mkdir(parents=True)
    if config_text is not None:
        (tmp / "models" / "qwen3-0.6b" / "config.json").write_text(config_text)
    return tmp / "qwen3-0.6b.yaml"


def _config(**changes: object) -> str:
    data = json.loads(QWEN.read_text())
    data.update(changes)
    return json.dumps(data, indent=2)


@pytest.mark.parametrize(("text", "message", "line"), [
    (_config(num_hidden_layers=10**9), "num_hidden_layers = 1000000000 is outside the range", 18),
    (_config(num_hidden_layers=1e30), "num_hidden_layers = 1e+30 is outside", 18),
    (_config(hidden_size=float("nan")).replace("NaN", "NaN"), "holds NaN", 11),
    (_config(rms_norm_eps=float("inf")), "holds Infinity", 20),
    (_config(rope_theta=-float("inf")), "holds -Infinity", 22),
    (_config(rope_theta=10**400), "more than 18 digits", 22),
    (_config(rope_theta="1e6"), "rope_theta must be a number", 22),
    (_config(vocab_size=1e400).replace("Infinity", "1e400"), "out of a float's range", 1),
    (_config(text_config={"num_hidden_layers": 10**7}), "text_config.num_hidden_layers = 10000000", 31),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests deeper than", 1),
    ('{"a": 1,,}', "is not valid JSON", 1),
])
def test_a_hostile_config_json_is_a_located_error(tmp_path, text, message, line):
    spec = _hf_spec(tmp_path, text)
    code, _, err = _compile(str(spec), "-o", str(tmp_path / "out"))
    assert code == 1 and "Traceback" not in err
    first = next(l for l in err.splitlines() if "[init-from-config]" in l)
    assert message in first, err
    assert first.startswith(f"{tmp_path}/models/qwen3-0.6b/config.json:{line}:"), first


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_config_json_that_is_not_a_regular_file_is_refused_without_reading(tmp_path, kind):
    spec = _hf_spec(tmp_path)
    target = tmp_path / "models" / "qwen3-0.6b" / "config.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.mkdir()
    code, _, err = _compile(str(spec), "-o", str(tmp_path / "out"))
    # a link to /dev/zero also leaves the directory a spec's inputs must stay in: refused either way
    assert code == 1 and ("not a regular file" in err and "[init-from-config]" in err
                          or "[link-outside-repository]" in err), err
    assert f"{spec}:15:" in err  # located at init_from.huggingface.config


def test_a_fifo_spec_a_fifo_lock_and_a_directory_lock_are_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    code, _, err = _compile(str(tmp_path / "pipe.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "FIFO" in err and "[file-unreadable]" in err
    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    (tmp_path / "tp2.lock").mkdir()
    code, _, err = _compile(str(tmp_path / "tp2.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "it is a directory" in err and f"{tmp_path}/tp2.lock:1:1:" in err
    (tmp_path / "tp2.lock").rmdir()
    os.mkfifo(tmp_path / "tp2.lock")
    code, _, err = _compile(str(tmp_path / "tp2.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "FIFO" in err and "[lock-invalid]" in err


def test_read_regular_bounds_the_size(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(Refused, match="more than the 1024"):
        read_regular(str(big), 1024)
    assert read_regular(str(big), 4096) == b"#" * 2048


def test_a_lock_linked_outside_the_repository_is_not_read(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\nuser: hunter2\n")
    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / "repo" / name).write_text((REPO / "specs" / name).read_text())
    (tmp_path / "repo" / "tp2.lock").symlink_to(outside)
    code, _, err = _compile(str(tmp_path / "repo" / "tp2.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "[link-outside-repository]" in err
    assert "root:x" not in err and "hunter2" not in err


def test_a_base_linked_outside_the_repository_is_not_read_nor_echoed(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    outside = tmp_path / "passwd.yaml"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon: x:1:1:daemon:/usr/sbin\n")
    (tmp_path / "repo" / "base.yaml").symlink_to(outside)
    (tmp_path / "repo" / "job.yaml").write_text("extends: base.yaml\nname: job\n")
    code, _, err = _compile(str(tmp_path / "repo" / "job.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "[link-outside-repository]" in err and "daemon" not in err


def test_an_unknown_key_that_is_not_a_word_is_not_echoed(tmp_path):
    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    with open(tmp_path / "tp2.yaml", "a") as handle:
        handle.write('"root:x:0:0:root:/root:/bin/bash": 1\n')
    code, _, err = _compile(str(tmp_path / "tp2.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "root:x" not in err and "not a field name" in err


def test_size_mb_infinity_and_nan_are_located_errors(tmp_path):
    text = (REPO / "specs" / "pretrain-prepared-hf.yaml").read_text().replace("size_mb: 4", "size_mb: .inf")
    text = text.replace("weight: 0.3", "weight: .nan")
    for name in ("base.yaml",):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    (tmp_path / "job.yaml").write_text(text)
    code, _, err = _compile(str(tmp_path / "job.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and "Traceback" not in err
    assert "size_mb" in err and "weight" in err and "finite" in err, err


def test_spec_sizes_are_bounded(tmp_path):
    for name in ("tp2.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    code, _, err = _compile(str(tmp_path / "tp2.yaml"), "-o", str(tmp_path / "out"),
                            "--set", "training.model.num_layers=1000000000")
    assert code == 1 and "at most 4096" in err and "Traceback" not in err


# -- property tests under a time and memory limit --------------------------------------------------

_CHILD = textwrap.dedent('''
    import io, json, os, resource, signal, sys, tempfile
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from hypothesis import given, settings, HealthCheck, strategies as st
    sys.path.insert(0, {tests!r})
    from compiler.cli import main
    from compiler.load import jsonfile

    class Slow(Exception):
        pass

    def alarm(*_):
        raise Slow("one input took more than 10 s")

    signal.signal(signal.SIGALRM, alarm)
    QWEN = json.load(open({qwen!r}))
    SPEC = open({spec!r}).read()
    BASE = open({base!r}).read()
    numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(), st.just(10**9), st.just(1e30),
                        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "9" * 500]))
    keys = st.sampled_from(sorted(QWEN) + ["text_config", "rope_scaling", "n_layer"])

    def dump(value):
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity", "1e400") or (
                isinstance(value, str) and value.isdigit()):
            return value
        if isinstance(value, float) and value != value:
            return "NaN"
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return json.dumps(value)

    import re as _re
    SPEC_NUMBERS = [m.span() for m in _re.finditer(r"(?<=: )[0-9.e-]+(?=\\n)", SPEC)]
    hostile_scalars = st.sampled_from([".inf", "-.inf", ".nan", "1e30", "1000000000", "9" * 30, "-1", "0",
                                       "[]", "{{}}", "[[[[[[]]]]]]", "'x'", "null", "&a [*a]"])

    @st.composite
    def specs(draw):
        start, end = draw(st.sampled_from(SPEC_NUMBERS))
        return SPEC[:start] + draw(hostile_scalars) + SPEC[end:]

    @settings(max_examples={examples}, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(specs())
    def run_specs(text):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "models", "qwen3-0.6b"))
            open(os.path.join(tmp, "models", "qwen3-0.6b", "config.json"), "w").write(json.dumps(QWEN))
            open(os.path.join(tmp, "qwen3-0.6b.yaml"), "w").write(text)
            open(os.path.join(tmp, "base.yaml"), "w").write(BASE)
            out, err = io.StringIO(), io.StringIO()
            signal.alarm(10)
            try:
                code = main([os.path.join(tmp, "qwen3-0.6b.yaml"), "-o", os.path.join(tmp, "out")], out, err)
            finally:
                signal.alarm(0)
            assert code in (0, 1), err.getvalue()
            assert "Traceback" not in out.getvalue() + err.getvalue()

    @st.composite
    def configs(draw):
        kind = draw(st.sampled_from(["number", "nest", "junk"]))
        if kind == "number":
            changes = draw(st.dictionaries(keys, numbers, min_size=1, max_size=4))
            body = {{k: v for k, v in QWEN.items() if k not in changes}}
            text = json.dumps(body)[:-1] + "".join(f", {{json.dumps(k)}}: {{dump(v)}}" for k, v in changes.items()) + "}}"
            return text
        if kind == "nest":
            depth = draw(st.integers(1, 200_000))
            return json.dumps(QWEN)[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}}"
        return draw(st.text(max_size=200))

    results = []

    @settings(max_examples={examples}, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(configs())
    def run(text):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "models", "qwen3-0.6b"))
            open(os.path.join(tmp, "models", "qwen3-0.6b", "config.json"), "w").write(text)
            open(os.path.join(tmp, "qwen3-0.6b.yaml"), "w").write(SPEC)
            open(os.path.join(tmp, "base.yaml"), "w").write(BASE)
            out, err = io.StringIO(), io.StringIO()
            signal.alarm(10)
            try:
                code = main([os.path.join(tmp, "qwen3-0.6b.yaml"), "-o", os.path.join(tmp, "out")], out, err)
            finally:
                signal.alarm(0)
            assert code in (0, 1), err.getvalue()
            for line in (out.getvalue() + err.getvalue()).splitlines():
                if ": error: " in line:
                    where = line.split(": error: ")[0]
                    assert where.count(":") >= 2, line  # file:line:col

    run()
    if SPEC_NUMBERS:
        run_specs()
    print("ok", len(SPEC_NUMBERS))
''')


def test_hostile_config_json_property_under_time_and_memory_limits():
    examples = int(os.environ.get("MC_HYPOTHESIS_EXAMPLES", "60"))
    code = _CHILD.format(tests=str(REPO / "tests"), qwen=str(QWEN), spec=str(REPO / "specs" / "qwen3-0.6b.yaml"),
                         base=str(REPO / "specs" / "base.yaml"), examples=examples)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip().startswith("ok"), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) >= 5  # the spec's numbers the second property replaces


def test_jsonfile_parse_never_raises():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.text(alphabet='{}[]",:0123456789.eE+-NaInfity tfrulsn\\\n', max_size=300))
    def run(text):
        value, problems = jsonfile.parse(text)
        assert (value is None) == bool(problems) or value is None
        for problem in problems:
            assert problem.line >= 1 and problem.column >= 1

    run()


def test_a_config_json_linked_outside_the_repository_is_not_read(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    spec = _hf_spec(repo)
    outside = tmp_path / "secret.json"
    outside.write_text('{"password": "hunter2"}')
    (repo / "models" / "qwen3-0.6b" / "config.json").symlink_to(outside)
    code, _, err = _compile(str(spec), "-o", str(tmp_path / "out"))
    assert code == 1 and "[link-outside-repository]" in err and "hunter2" not in err


def test_a_glob_in_data_paths_is_a_located_error(tmp_path):
    for name in ("pretrain-mock.yaml", "base.yaml"):
        (tmp_path / name).write_text((REPO / "specs" / name).read_text())
    code, out, err = _compile(str(tmp_path / "pretrain-mock.yaml"), "-o", str(tmp_path / "out"),
                              "--set", "training.data.mock=false",
                              "--set", 'training.data.paths=["/mnt/megatron/data/shard-*_text_document"]')
    assert code == 1 and "[path-glob]" in err and "training.data.paths[0]" in err
