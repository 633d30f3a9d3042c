"""compiler/render/templating.py: the templates' language, held to what Jinja renders from the same text
with the options the templates were written for (trim_blocks, lstrip_blocks, keep_trailing_newline,
StrictUndefined): every template of every spec, generated templates of the language, and refusals."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.one_pass import compile_spec
from compiler.render.quoting import QUOTING_FILTERS, TemplateSafetyError, finalize
from compiler.render.render import templates_dir
from compiler.render.templating import Template, TemplateError
from helpers import REPO


def _jinja() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), undefined=jinja2.StrictUndefined,
                             finalize=finalize, keep_trailing_newline=True, autoescape=False, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.clear()
    env.filters.update(QUOTING_FILTERS)
    return env


JINJA = _jinja()
# every spec of the repository that compiles (bad specs and other YAML give no plan and are passed over)
SPECS = sorted([*(REPO / "specs").glob("*.yaml"), *(p for p in (REPO / "tests").rglob("*.yaml") if "fixtures" not in p.parts)])


def _scopes(plan, files):
    """(template, the names render() gives it) of every templated artifact of a plan."""
    for step in plan.steps:
        for artifact in step.artifacts:
            if artifact.template is None:
                continue
            if artifact.embeds is None:
                yield artifact.template, {"plan": plan, "step": step}
            else:
                yield artifact.template, {"plan": plan, "step": step, "embedded": files[artifact.embeds]}
    for artifact in plan.summary:
        yield artifact.template, {"plan": plan}


def test_every_template_of_every_spec_renders_as_jinja_renders_it():
    seen = set()
    for spec in SPECS:
        result = compile_spec(str(spec), str(spec.relative_to(REPO)))
        if result.plan is None:
            continue
        for name, scope in _scopes(result.plan, result.files):
            seen.add(name)
            source = (templates_dir() / name).read_text(encoding="utf-8")
            ours = Template(source, name, QUOTING_FILTERS, finalize).render(**scope)
            assert ours == JINJA.get_template(name).render(**scope), f"{spec.name}: {name}"
    assert seen == {p.name for p in templates_dir().glob("*.j2")}, "a template no spec renders"


# Templates of the language with the whitespace that Jinja's rules are about: indentation before a
# tag, a tag after text or an expression on its line, blank lines, CR LF, no final newline.
_TEXT = st.sampled_from(["", " ", "  ", "\t", "\n", "  \n", "a", "a b", "x\n  ", "\r\n", "# c\n", "\n\n"])
class _Header:
    def lines(self) -> list[str]:
        return ["Generated", "by a test"]


_VALUES = {"flag": True, "off": False, "items": ["p", "q"], "empty": [], "pairs": [("k", "v"), ("l", "w")],
           "word": "it's", "plan": {"name": "n"}, "header": _Header()}


def _piece(depth: int):
    leaf = st.one_of(_TEXT, st.sampled_from(["{{ word | sh }}", "{{ plan.name | sh }}", "{{ header | comment(\"  \") }}"]))
    if depth == 0:
        return leaf
    body = st.lists(_piece(depth - 1), max_size=4).map("".join)
    signs = st.tuples(st.sampled_from(["", "-", "+"]), st.sampled_from(["", "-", "+"]))

    def tag(word: str, sign: tuple[str, str]) -> str:
        return "{%" + sign[0] + " " + word + " " + sign[1] + "%}"

    def block(head, first, second, s1, s2, s3, with_else):
        middle = tag("else", s2) + second if with_else else ""
        return tag(head[0], s1) + first + middle + tag(head[1], s3)

    heads = st.sampled_from([("if flag", "endif"), ("if not off", "endif"), ("if off", "endif"),
                             ("for x in items", "endfor"), ("for x in empty", "endfor"),
                             ("for a, b in pairs", "endfor")])
    blocks = st.builds(block, heads, body, body, signs, signs, signs, st.booleans())
    return st.one_of(leaf, blocks)


@settings(max_examples=200, deadline=None)
@given(st.lists(_piece(2), max_size=6).map("".join))
def test_generated_templates_render_as_jinja_renders_them(source):
    expected = JINJA.from_string(source).render(**_VALUES)
    assert Template(source, "t", QUOTING_FILTERS, finalize).render(**_VALUES) == expected


@pytest.mark.parametrize("source, says", [
    ("{{ value }}", "is not `value | quoting filter`"),
    ("{{ value | upper }}", "is not `value | quoting filter`"),
    ("{{ a + 1 | sh }}", "is not `value | quoting filter`"),
    ("{% set x = 1 %}", "is not in the templates' language"),
    ("{% if a == 1 %}x{% endif %}", "is not in the templates' language"),
    ("{% include 'x.j2' %}", "is not in the templates' language"),
    ("{% if a %}x", "if block is not closed"),
    ("{% for a in b %}x{% endif %}", "is not in the templates' language"),
    ("{% if a %}x{% else %}y{% else %}z{% endif %}", "is not in the templates' language"),
    ("{% else %}", "is not in the templates' language"),
    ("a\n{# note #}", "t:2: use shell comments"),
])
def test_anything_outside_the_language_is_refused_when_parsed(source, says):
    with pytest.raises(TemplateError, match=says.replace("(", r"\(").replace("|", r"\|").replace("+", r"\+")):
        Template(source, "t", QUOTING_FILTERS, finalize)


def test_a_value_the_plan_does_not_have_is_an_error_not_empty_text():
    with pytest.raises(TemplateError, match="missing is not defined"):
        Template("{{ missing | sh }}", "t", QUOTING_FILTERS, finalize).render()
    with pytest.raises(TemplateError, match="plan.nope: dict has no nope"):
        Template("{% if plan.nope %}x{% endif %}", "t", QUOTING_FILTERS, finalize).render(plan={})


def test_a_filter_that_returns_unquoted_text_is_refused():
    with pytest.raises(TemplateSafetyError):
        Template("echo {{ value | raw }}", "t", {"raw": str}, finalize).render(value="$(reboot)")


def test_the_compile_path_does_not_import_jinja(tmp_path: Path):
    import subprocess
    import sys

    code = ("import sys; from compiler.cli import main; main(['specs/tp2.yaml', '-o', sys.argv[1], '-q']); "
            "print('jinja2' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
