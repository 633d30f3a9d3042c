"""Property tests: no input makes the compiler crash, and no spec value escapes its quoting."""

import io
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.cli import main
from compiler.one_pass import compile_spec
from helpers import REPO, run_launch

def _resolved_specs():
    from compiler.one_pass import compile_spec
    from compiler.commands.resolved import resolved_yaml

    out = []
    for path in sorted((REPO / "specs").glob("*.yaml")):
        result = compile_spec(str(path), path.name)
        if result.ok:
            out.append(resolved_yaml(result.spec, path.name))
    return out


# Complete specs (bases merged), so that a mutant stands on its own in a temporary directory.
VALID = _resolved_specs()
# MC_HYPOTHESIS_EXAMPLES=2000 for a deeper search than CI's (it found the estimator's division by zero).
SETTINGS = settings(max_examples=int(os.environ.get("MC_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, prefix + (i,))


def _get(data, path):
    for part in path:
        data = data[part]
    return data


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False), st.text(max_size=30),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)


@st.composite
def mutated_specs(draw):
    text = draw(st.sampled_from(VALID))
    kind = draw(st.sampled_from(["delete", "swap", "insert", "truncate", "unicode", "bytes"]))
    if kind in ("delete", "swap", "insert"):
        data = yaml.safe_load(text)
        paths = [p for p in _paths(data) if p]
        path = draw(st.sampled_from(paths))
        parent = _get(data, path[:-1])
        if kind == "delete":
            del parent[path[-1]]
        elif kind == "swap":
            parent[path[-1]] = draw(JUNK)
        else:
            target = _get(data, path[:-1]) if isinstance(parent, dict) else data
            target[draw(st.text(min_size=1, max_size=12))] = draw(JUNK)
        return yaml.safe_dump(data, allow_unicode=True).encode("utf-8")
    raw = text.encode("utf-8")
    if kind == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    position = draw(st.integers(0, len(raw)))
    if kind == "unicode":
        insert = draw(st.text(min_size=1, max_size=20)).encode("utf-8", errors="surrogatepass")
    else:
        insert = draw(st.binary(min_size=1, max_size=20))
    return raw[:position] + insert + raw[position:]


@SETTINGS
@given(mutated_specs())
def test_mutated_specs_never_crash_and_every_diagnostic_is_inside_the_file(tmp_path_factory, raw):
    directory = tmp_path_factory.mktemp("mut")
    spec = directory / "mutant.yaml"
    spec.write_bytes(raw)
    out, err = io.StringIO(), io.StringIO()
    code = main([str(spec), "-o", str(directory / "out"), "--format", "json"], out, err)
    assert code in (0, 1), err.getvalue()
    assert "Traceback" not in err.getvalue()
    import json

    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    for d in json.loads(out.getvalue()):
        assert d["line"] is not None and d["column"] is not None, d
        assert 1 <= d["line"] <= max(1, len(lines)), d
        assert 1 <= d["column"] <= len(lines[d["line"] - 1]) + 1 if lines else d["column"] == 1, d
    if code == 1:
        assert not (directory / "out").exists() or not any((directory / "out").rglob("*.sh"))


# Strings that would do something if a generated script interpolated them unquoted.
NASTY = [
    "$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "a;touch PWNED", "a && touch PWNED",
    "*", "?", "[a-z]*", "~", "$HOME", "${RUN_ROOT}", "$((1+1))", "a b  c", "-n", "--", "\\", "!", "#x", "é中文🙂",
    "'", '"', "a'b\"c", "$'\\x41'", "{a,b}", ">out", "<in", "|cat", "&", "%s", "=",
]
FREE_TEXT = st.lists(st.sampled_from(NASTY), min_size=1, max_size=3).map("".join)


def _spec(tmp: Path, args, env_value, dirname):
    mount = tmp / "mnt"
    root = tmp / f"megatron {dirname}"
    root.mkdir(parents=True, exist_ok=True)
    return f"""version: 1
name: inject
image:
  base: nvcr.io/nvidia/pytorch:25.03-py3
  registry: cr.infini-ai.com
  namespace: te-0123456789abcdef
  repository: megatron-core
  tag: 0.18.2-cu128
megatron:
  # not the pinned commit: the script is a stand-in under a stand-in root, which the pinned file
  # list of Megatron-LM (script-not-in-megatron) would refuse
  commit: 0123456789abcdef0123456789abcdef01234567
  root: {yaml.safe_dump(str(root), default_style='"').strip()}
resources:
  workers: 1
  gpus_per_worker: 1
storage:
  mount_path: {yaml.safe_dump(str(mount), default_style='"').strip()}
  run_root: {yaml.safe_dump(str(mount / dirname), default_style='"').strip()}
training:
  script: {yaml.safe_dump('train ' + dirname + '.py', default_style='"').strip()}
  args: {yaml.safe_dump(args, default_style='"', default_flow_style=True).strip()}
  env:
    SPEC_VALUE: {yaml.safe_dump(env_value, default_style='"').strip()}
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(FREE_TEXT, max_size=4), env_value=FREE_TEXT,
       dirname=FREE_TEXT.filter(lambda s: "/" not in s and s not in (".", "..") and ":" not in s and "\\" not in s))
def test_spec_values_reach_torchrun_literally(tmp_path_factory, args, env_value, dirname):
    tmp = tmp_path_factory.mktemp("inj")
    spec = tmp / "inject.yaml"
    spec.write_text(_spec(tmp, args, env_value, dirname), encoding="utf-8")
    result = compile_spec(str(spec), "inject.yaml")
    assert result.ok, result.diagnostics
    run = run_launch(result.files["launch.sh"], tmp, gpus=1, localize=False)
    assert run.returncode == 0, run.stderr
    run_root = tmp / "mnt" / dirname
    argv = run.torchrun_argv()
    assert argv == ["--nproc_per_node=1", f"{tmp}/megatron {dirname}/train {dirname}.py", *args]
    env = (run.calls / "torchrun.env").read_text()
    assert f"SPEC_VALUE={env_value}\n" in env
    assert (run_root / "train.log").is_file()
    created = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    allowed = {"inject.yaml", "launch.sh", "calls/torchrun.argv", "calls/torchrun.env", "calls/torchrun.cwd",
               "calls/make.argv", f"mnt/{dirname}/train.log", f"mnt/{dirname}/runtime.txt",
               f"mnt/{dirname}/exit_status", f"mnt/{dirname}/launch.log"} | {f"bin/{n}" for n in ("nvidia-smi", "make", "python", "torchrun")}
    assert set(created) <= allowed, set(created) - allowed
    assert not any(p.name == "PWNED" for p in tmp.rglob("*")), "a spec value was executed"


# Hostile values (issue 14): each must be refused with a diagnostic, never a traceback, and no artifact.
HOSTILE = [
    "a\u202eb", "x\u200by", "\u2066rm\u2069", "in\ufefftext", "@unset:MODEL_PATH@", "@runtime:date@",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "nvapi-AbCdEfGh0123456789xyz", "sk-AbCdEfGhIjKlMnOpQrStUv",
    "xoxb-1234567890-abcdef", "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567", "DB_PASSWORD=hunter2",
]


@st.composite
def hostile_specs(draw):
    data = yaml.safe_load(draw(st.sampled_from(VALID)))
    value = draw(st.sampled_from(HOSTILE))
    where = draw(st.sampled_from(["arg", "env", "env-name", "script", "extends", "password-flag"]))
    training = data["training"]
    if where == "arg":
        training["args"] = [*training.get("args", []), value]
    elif where == "env":
        training.setdefault("env", {})["NCCL_DEBUG"] = value
    elif where == "env-name":
        training.setdefault("env", {})[draw(st.sampled_from(["WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY",
                                                             "MY_PASSWORD"]))] = "0123456789abcdef" * 2
    elif where == "script":
        training["script"] = "examples/" + value + ".py"
    elif where == "extends":
        data = {"extends": draw(st.sampled_from(["../../../../../../etc/shadow", "/etc/passwd", "/proc/self/environ",
                                                 "base.yaml\u202e"])), **data}
    else:
        training["args"] = [*training.get("args", []), "--password", value]
    return yaml.safe_dump(data, allow_unicode=True)


@SETTINGS
@given(hostile_specs())
def test_hostile_values_are_refused_without_a_traceback(tmp_path_factory, text):
    directory = tmp_path_factory.mktemp("hostile")
    spec = directory / "hostile.yaml"
    spec.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main([str(spec), "-o", str(directory / "out")], out, err)
    assert code == 1, out.getvalue() + err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert "root:" not in out.getvalue() + err.getvalue(), "a non-spec file's content was echoed"
    assert not (directory / "out").exists()
