"""extends, --set and --print: composition before validation, with locations kept."""

import io

import yaml

from compiler.cli import main
from compiler.load.compose import Override, compose, deep_merge
from compiler.one_pass import compile_spec
from helpers import REPO


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_deep_merge_later_wins_and_lists_are_replaced():
    base = {"a": {"x": 1, "y": [1, 2, 3]}, "b": 1}
    top = {"a": {"y": [9], "z": 2}, "c": 3}
    assert deep_merge(base, top) == {"a": {"x": 1, "y": [9], "z": 2}, "b": 1, "c": 3}
    assert base == {"a": {"x": 1, "y": [1, 2, 3]}, "b": 1}, "inputs are not modified"


def test_a_list_of_bases_merges_in_order_and_the_spec_wins(tmp_path):
    (tmp_path / "one.yaml").write_text("version: 1\ntraining:\n  args: [--a, --b]\n  env: {A: '1', B: '1'}\n")
    (tmp_path / "two.yaml").write_text("training:\n  args: [--c]\n  env: {B: '2'}\n")
    (tmp_path / "job.yaml").write_text("extends: [one.yaml, two.yaml]\ntraining:\n  env: {C: '3'}\n")
    doc = compose(str(tmp_path / "job.yaml"), "job.yaml").doc
    assert doc.data["training"] == {"args": ["--c"], "env": {"A": "1", "B": "2", "C": "3"}}
    assert "extends" not in doc.data
    assert doc.values[("training", "args")].file == "two.yaml"
    assert doc.values[("training", "env", "A")].file == "one.yaml"
    assert doc.values[("training", "env", "C")].file == "job.yaml"


def test_the_repo_specs_extend_base_and_compile_to_the_committed_artifacts(in_repo):
    result = compile_spec("specs/tp2.yaml", "specs/tp2.yaml")
    assert result.ok and [b.endswith("specs/base.yaml") for b in result.bases] == [True]
    assert result.spec.image.registry == "cr.infini-ai.com" and result.spec.storage.mount_path == "/mnt/megatron"


def test_a_directory_compile_skips_the_base_but_a_named_base_is_compiled(in_repo, tmp_path):
    code, _, err = run("specs/", "--check")
    assert code == 0, err
    assert "base.yaml" not in err
    code, out, _ = run("specs/base.yaml", "-o", str(tmp_path))
    assert code == 1 and "missing required key 'name' in the spec" in out


def test_errors_point_into_the_base_through_two_levels(in_repo):
    code, out, _ = run("tests/bad_specs/extends-two-levels.yaml")
    assert code == 1
    assert out.startswith("tests/bad_specs/_bases/root.yaml:12:15: error: storage.mount_path (/infini-data/team)")


def test_set_types_through_the_models(in_repo, tmp_path):
    code, out, _ = run("specs/tp2.yaml", "--print",
                       "--set", "megatron.commit=0123456789012345678901234567890123456789",
                       "--set", "image.tag=3.10", "--set", "resources.workers=2",
                       "--set", "training.env.NCCL_DEBUG=INFO", "--set", "resources.rdma=true")
    assert code == 0, out
    resolved = yaml.safe_load(out)
    assert resolved["megatron"]["commit"] == "0123456789012345678901234567890123456789"  # stays a string
    assert resolved["image"]["tag"] == "3.10"  # not the float 3.1
    assert resolved["resources"]["workers"] == 2 and resolved["resources"]["rdma"] is True
    assert resolved["training"]["env"] == {"NCCL_DEBUG": "INFO"}


def test_set_a_list(in_repo, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text((REPO / "specs" / "pretrain-mock.yaml").read_text().replace("extends: base.yaml",
                                                                               f"extends: {REPO}/specs/base.yaml"))
    code, out, _ = run(str(spec), "--print", "--set", 'training.args=["--seed", "7", "--init-method-std=0.02"]')
    assert code == 0, out
    assert yaml.safe_load(out)["training"]["args"] == ["--seed", "7", "--init-method-std=0.02"]


def test_set_errors_name_the_set(in_repo):
    code, out, err = run("specs/tp2.yaml", "--set", "parallelism.tensor=3", "--set", "resources.workers=zero")
    assert "--set resources.workers=zero:1:25: error: resources.workers: expected an integer, got the string 'zero'  [type]" in out
    code, out, _ = run("specs/tp2.yaml", "--set", "parallelism.tensor=3")
    assert out.startswith("--set parallelism.tensor=3:1:26: error: parallelism.tensor (3) must divide the world size")
    code, out, _ = run("specs/tp2.yaml", "--set", "nonsense")
    assert code == 1 and "--set nonsense:1:7: error: --set takes KEY=VALUE with a dotted key" in out
    code, out, _ = run("specs/tp2.yaml", "--set", "resources.bogus=1")
    assert "unknown key 'bogus' in resources" in out


def test_print_shows_effective_values_and_hash(in_repo):
    code, out, _ = run("specs/tp2.yaml", "--print")
    assert code == 0
    header = out.splitlines()[0]
    from compiler.plan.build import spec_digest

    result = compile_spec("specs/tp2.yaml", "specs/tp2.yaml")
    assert header == f"# specs/tp2.yaml, resolved (spec sha256 {spec_digest(result.spec)[:16]})"
    data = yaml.safe_load(out)
    assert data["storage"]["mount_path"] == "/mnt/megatron"  # from base.yaml
    assert data["parallelism"]["tensor"] == 2
    generated = (REPO / "generated" / "tp2" / "launch.sh").read_text()
    assert f"(spec sha256 {spec_digest(result.spec)[:16]})" in generated, "headers carry the resolved spec's hash"


def test_override_is_applied_after_extends(tmp_path):
    (tmp_path / "b.yaml").write_text("parallelism: {tensor: 2}\n")
    (tmp_path / "j.yaml").write_text("extends: b.yaml\nname: j\n")
    doc = compose(str(tmp_path / "j.yaml"), "j.yaml", (Override("parallelism.tensor=4"),)).doc
    assert doc.data["parallelism"]["tensor"] == 4
    assert doc.values[("parallelism", "tensor")].file == "--set parallelism.tensor=4"
