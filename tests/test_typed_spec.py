"""schema/record.py's replace/extend/new: a derived spec is a record of the spec's own classes (so
mypy sees its fields), never a proxy; and every compiler package is installed (the HF records too)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from compiler.megatron.hf.model import HFModel
from compiler.one_pass import compile_spec
from compiler.schema.record import extend, fields, new, replace, to_json
from compiler.schema.records import Batch, JobSpec, Model, Recompute

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spec() -> JobSpec:
    result = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "gpt-7b.yaml", render_files=False)
    assert result.spec is not None
    return result.spec


def test_replace_builds_a_new_record_of_the_same_class(spec):
    batch = spec.training.batch
    changed = replace(spec, training=replace(spec.training, batch=replace(batch, micro=batch.micro + 1)))
    assert type(changed) is JobSpec and type(changed.training.batch) is Batch
    assert changed.training.batch.micro == batch.micro + 1 and spec.training.batch.micro == batch.micro
    assert changed.training.batch.model_fields_set == batch.model_fields_set  # what the spec wrote
    assert to_json(changed)["training"]["batch"]["micro"] == batch.micro + 1
    assert changed.image == spec.image


def test_replace_refuses_a_field_the_record_does_not_have(spec):
    with pytest.raises(TypeError, match="unknown fields \\['kv_channels'\\]"):
        replace(spec.training.model, kv_channels=128)


def test_extend_types_what_is_derived_beyond_the_spec(spec):
    extra = {"kv_channels": 128, "mla": None, "moe_layer_freq": None, "moe_shared_expert_intermediate_size": None,
             "mtp_num_layers": None, "qk_layernorm": False}
    model = extend(spec.training.model, HFModel, **extra)
    assert isinstance(model, Model) and model.kv_channels == 128
    assert model.num_layers == spec.training.model.num_layers
    with pytest.raises(TypeError, match="missing fields \\['mtp_num_layers'\\]"):
        extend(spec.training.model, HFModel, **{k: v for k, v in extra.items() if k != "mtp_num_layers"})
    with pytest.raises(TypeError, match="does not extend"):
        extend(spec.training.batch, HFModel, **extra)


def test_new_needs_every_field():
    rec = new(Recompute, granularity="full", method="uniform", num_layers=1)
    assert (rec.granularity, rec.method, rec.num_layers) == ("full", "uniform", 1)
    assert fields(Recompute) == {"granularity", "method", "num_layers"}
    with pytest.raises(TypeError):
        new(Recompute, granularity="selective")


def test_every_compiler_package_is_installed():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "compiler").rglob("__init__.py")}
    assert packages <= listed, f"add to pyproject.toml's packages: {sorted(packages - listed)}"
