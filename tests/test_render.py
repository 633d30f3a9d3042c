"""Rendering: quoting that fails closed, argv that round-trips through shlex, logic-free templates."""

import re
import shlex

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.plan.shell import Var, Word, argv_of
from compiler.render.quoting import (
    QUOTING_FILTERS, Safe, TemplateSafetyError, docker_str, sh, sh_command, sh_word,
)
from compiler.render.quoting import finalize as _finalize
from compiler.text import CONTROL
from compiler.render.render import environment, templates_dir
from helpers import REPO, compile_text, resolved_text

# what a spec may hold: no control or invisible character (formats.CONTROL also names the invisible
# ones of other categories: the soft hyphen, fillers, variation selectors)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Cf"), blacklist_characters="\u2028\u2029"),
               max_size=40).filter(lambda s: not CONTROL.search(s))


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_literal_argv_round_trips_through_shlex(argv):
    rendered = sh_command([[Word.lit(a)] for a in argv])
    assert shlex.split(rendered.replace("\\\n", " ")) == argv


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TEXT, st.sampled_from(["RUN_ROOT", "NODE_RANK", "X_1"]).map(Var)), min_size=1, max_size=5))
def test_words_with_variables_round_trip_through_shlex(parts):
    word = Word(tuple(parts))
    assert shlex.split(sh_word(word)) == [word.as_text()] or word.as_text() == ""


def test_generated_torchrun_argv_is_the_plans(in_repo):
    for stem in ("tp2", "tp2-dp2", "pretrain-mock", "gpt-7b"):
        text = (REPO / "generated" / stem / "launch.sh").read_text()
        start = text.index("\ntorchrun \\\n") + 1
        ends = (text.find(' \\\n  ${resume_args', start), text.find(' >"$FIFO_DIR/output"', start))
        command = text[start:min(i for i in ends if i >= 0)]
        from compiler.one_pass import compile_spec

        plan = compile_spec(str(REPO / "specs" / f"{stem}.yaml"), f"specs/{stem}.yaml").plan
        assert shlex.split(command.replace("\\\n", " ")) == argv_of(plan.launch.torchrun)


def test_unquoted_interpolation_fails_closed():
    env = environment()
    with pytest.raises(TemplateSafetyError):
        env.from_string("echo {{ value }}").render(value="$(reboot)")
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("echo {{ missing | sh }}").render()
    assert env.from_string("echo {{ value | sh }}").render(value="$(reboot)") == "echo '$(reboot)'"


def test_finalize_accepts_only_safe_text():
    assert _finalize(Safe("x")) == "x"
    for value in ("x", 1, None, ["a"]):
        with pytest.raises(TemplateSafetyError):
            _finalize(value)


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "\x1b[2J", "a\u2028b"])
def test_quoting_filters_refuse_control_characters(bad):
    with pytest.raises(TemplateSafetyError):
        sh(bad)
    with pytest.raises(TemplateSafetyError):
        docker_str(bad)


def test_booleans_and_none_have_no_shell_spelling():
    for value in (True, None):
        with pytest.raises(TemplateSafetyError):
            sh(value)


def test_docker_str_escapes_quotes_and_dollars():
    assert docker_str('/opt/a "b" $c') == '"/opt/a \\"b\\" \\$c"'
    with pytest.raises(TemplateSafetyError):
        docker_str("a\\b")


def test_templates_are_logic_free():
    """Only {{ value | quoting_filter }}, {% if plan.bool %}, {% for x in plan.list %} (or a loop variable's
    list), their ends, and {% include "part.j2" %} (a part only some specs render, compiled only for
    them): no arithmetic, no `set`, no string methods."""
    expression = re.compile(r"\{\{(.*?)\}\}", re.S)
    statement = re.compile(r"\{%-?(.*?)-?%\}", re.S)
    allowed_statement = re.compile(
        r"^\s*(if (not )?(plan|step)(\.\w+)+|else|endif|endfor|for \w+(, \w+)? in \w+(\.\w+)+"
        r'|include "[\w.-]+\.j2")\s*$')
    allowed_expression = re.compile(r"^\s*(\w+(\.\w+)*)\s*\|\s*(\w+)(\(\"[^\"]*\"\))?\s*$")
    for template in sorted(templates_dir().glob("*.j2")):
        text = template.read_text()
        for match in expression.finditer(text):
            m = allowed_expression.match(match.group(1))
            assert m, f"{template.name}: {{{{{match.group(1)}}}}} is not `value | quoting filter`"
            assert m.group(3) in QUOTING_FILTERS, f"{template.name}: filter {m.group(3)} is not a quoting filter"
        for match in statement.finditer(text):
            assert allowed_statement.match(match.group(1)), f"{template.name}: {{%{match.group(1)}%}} holds logic"
        assert not re.search(r"\{#", text), f"{template.name}: use shell comments, not template comments"


def test_spec_values_with_quotes_render_safely(tmp_path):
    text = resolved_text("tp2")
    text = text.replace("  script: examples/run_simple_mcore_train_loop.py", "  script: /mnt/megatron/code/my train.py")
    text = text.replace("  args: []", "  args: [\"--name=it's\", '$(id)']")
    text = text.replace("  env: {}", "  env:\n    NOTE: 'say \"hi\"; `id`'")
    result = compile_text(text, tmp=tmp_path)
    assert result.ok, result.diagnostics
    launch = result.files["launch.sh"]
    assert "export NOTE='say \"hi\"; `id`'\n" in launch
    assert "  '/mnt/megatron/code/my train.py' \\\n  \"--name=it's\" \\\n  '$(id)' >\"$FIFO_DIR/output\" 2>&1" in launch


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_job_json_text_is_json_dumps_with_an_indent(value):
    import json

    from compiler.render.render import to_json

    assert to_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def test_the_bridge_provider_is_fitted_to_the_image_in_one_place():
    """convert.sh and export.sh both fit Bridge's provider to the image (no TE: local layers; TE
    without Apex: no gradient accumulation fusion): one template part, included by both."""
    holding = [p.name for p in sorted(templates_dir().glob("*.j2"))
               if "fused_weight_gradient_mlp_cuda" in p.read_text() or "def without_te" in p.read_text()]
    assert holding == ["bridge-image.py.j2"]
    for name in ("convert.sh", "export.sh"):
        text = (REPO / "generated" / "qwen3-30b-a3b" / name).read_text()
        assert text.count("def fit_to_image(provider)") == 1 and text.count("    fit_to_image(provider)\n") == 1
        assert 'find_spec("fused_weight_gradient_mlp_cuda") is None' in text


def test_precompiled_templates_are_in_sync_with_templates():
    """compiler/render/precompiled.json holds each template's code as Jinja generates it now, and nothing else: after
    editing templates/, `python -m compiler.render`."""
    import json

    from compiler.render.precompile import PRECOMPILED, generate
    from compiler.render.render import _environment

    assert json.loads(PRECOMPILED.read_text()) == generate(_environment()), "run `python -m compiler.render`"


def test_a_template_is_taken_from_the_file_and_an_edited_one_from_its_source(tmp_path, monkeypatch):
    """The loader takes a template's code from the file only where the file has its source (by its hash); a template
    without an entry (edited, not yet precompiled) is generated from its source, and renders the same either way."""
    from compiler.render import render as render_module
    from compiler.render.render import _Loader, _environment

    looked_up = []
    real = render_module.code_for
    monkeypatch.setattr(render_module, "code_for", lambda source: looked_up.append(real(source)) or looked_up[-1])
    env = _environment()
    from_file = env.get_template("verify.sh.j2")
    assert looked_up and looked_up[-1] is not None
    plain = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), **{
        k: getattr(env, k) for k in ("undefined", "finalize", "keep_trailing_newline", "trim_blocks", "lstrip_blocks",
                                     "optimized")})
    plain.filters = env.filters
    assert plain.compile(plain.loader.get_source(plain, "verify.sh.j2")[0], "verify.sh.j2", raw=True) == looked_up[-1]
    assert from_file.root_render_func.__code__.co_filename.endswith("verify.sh.j2")
    (tmp_path / "edited.sh.j2").write_text("echo {{ plan | sh }}\n")
    env.loader = _Loader(str(tmp_path))
    assert env.get_template("edited.sh.j2").render(plan="a b") == "echo 'a b'\n"
    assert looked_up[-1] is None
