"""The templates' committed compiled modules: fresh, used, and rendering what the sources render."""

import jinja2

from compiler.stages import compile_spec
from compiler.render import render as render_module
from compiler.render.render import compiled_sources, environment, templates_dir
from helpers import REPO


def test_compiled_modules_are_fresh():
    """Regenerate with `python -m compiler.render.render` after changing a template or the environment."""
    here = REPO / "compiler" / "render"
    committed = {p.name: p.read_text(encoding="utf-8") for p in here.glob("_template_*.py")}
    assert committed == compiled_sources()


def test_every_template_loads_from_its_module():
    env = environment()
    for path in sorted(templates_dir().glob("*.j2")):
        template = env.get_template(path.name)
        assert template.filename.endswith(f"{render_module.compiled_module_name(path.name)}.py"), path.name


def test_a_stale_module_is_not_used(monkeypatch):
    """A template whose source no longer matches its module is compiled from the source instead."""
    monkeypatch.setattr(render_module, "template_key", lambda env, source: "changed")
    env = render_module._environment()
    template = env.get_template("launch.sh.j2")
    assert template.filename == str(templates_dir() / "launch.sh.j2")


def test_modules_and_sources_render_the_same_bytes(monkeypatch):
    specs = ["tp2", "tp2-dp2", "pretrain-mock", "gpt-7b", "tp2-dp2-slurm", "tp2-dp2-k8s", "tp2-dp2-skypilot", "pretrain-prepared", "qwen3-0.6b"]
    plans = [compile_spec(str(REPO / "specs" / f"{s}.yaml"), f"specs/{s}.yaml", render_files=False).plan for s in specs]
    from_modules = [render_module.render(plan) for plan in plans]
    source_env = render_module._environment()
    source_env.loader = jinja2.FileSystemLoader(str(templates_dir()))  # Jinja's own loader: no modules
    monkeypatch.setattr(render_module, "environment", lambda: source_env)
    from_sources = [render_module.render(plan) for plan in plans]
    assert all(plan is not None for plan in plans)
    assert from_modules == from_sources
    assert all(t.filename.endswith(".j2") for t in source_env.cache.values())
    used = {t.name for t in source_env.cache.values()}
    assert used == {p.name for p in templates_dir().glob("*.j2")}, "every template rendered both ways"
